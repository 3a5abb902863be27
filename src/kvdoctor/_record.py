"""Frozen records for the parts on every call's path (reader, diagnosis, memory).

`dataclasses` costs a cold `kvdoctor diagnose` about a third of its time: importing it pulls in
`inspect` (and with it `ast`, `dis`, `tokenize`), and each class compiles five or six generated
methods with `exec` (issue 11; `python -X importtime` and `benchmarks/cold_start.py` show it).
`record` gives the same frozen value classes from closures, with nothing to compile: `__init__`
(positional or keyword, defaults, `field(default_factory=...)`; no `__post_init__`), `__repr__`,
`__eq__`, `__hash__`, `__match_args__`, and `AttributeError` on assignment (unless
`frozen=False`). Type checkers read it as a dataclass (PEP 681). A class that writes its own
`__init__` keeps it (the per-line records do, for speed). The faces (server, fleet, tickets,
probe) keep `dataclasses`; they are not on the cold path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform, overload

    T = TypeVar("T")

_MISSING = object()


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A default made afresh for each instance (`field(default_factory=list)`)."""
    return _Factory(default_factory)


def replace(obj: T, **changes: Any) -> T:
    """A copy of `obj` with some fields changed, as `dataclasses.replace` makes."""
    names: tuple[str, ...] = obj.__record_fields__  # type: ignore[attr-defined]
    values = {name: getattr(obj, name) for name in names}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(obj)(**values)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: object, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _make_init(cls_name: str, names: tuple[str, ...], defaults: dict[str, Any], slots: bool) -> Callable[..., None]:
    count = len(names)
    known = frozenset(names)
    setter = object.__setattr__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > count:
            raise TypeError(f"{cls_name}() takes {count} positional arguments but {len(args)} were given")
        values = dict(zip(names, args, strict=False))  # fewer args than fields: the rest by name
        for key in kwargs:
            if key not in known:
                raise TypeError(f"{cls_name}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls_name}() got multiple values for argument {key!r}")
        values.update(kwargs)
        if len(values) < count:
            for name in names:
                if name not in values:
                    default = defaults.get(name, _MISSING)
                    if default is _MISSING:
                        raise TypeError(f"{cls_name}() missing required argument: {name!r}")
                    values[name] = default.make() if type(default) is _Factory else default
        if slots:
            for name in names:
                setter(self, name, values[name])
        else:
            self.__dict__.update({name: values[name] for name in names})

    return __init__


def _build(cls: type[Any], slots: bool, frozen: bool) -> type[Any]:
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})
    inherited: tuple[str, ...] = getattr(cls, "__record_fields__", ())
    own = tuple(n for n, a in annotations.items() if not str(a).startswith(("ClassVar", "typing.ClassVar")))
    names = inherited + tuple(n for n in own if n not in inherited)
    defaults: dict[str, Any] = dict(getattr(cls, "__record_defaults__", {}))
    for name in own:
        if name in cls.__dict__:
            defaults[name] = cls.__dict__[name]
    body = dict(cls.__dict__)
    body.pop("__dict__", None)  # the new class makes its own
    body.pop("__weakref__", None)
    if slots:
        for name in own:
            body.pop(name, None)
        body["__slots__"] = tuple(n for n in own if n not in inherited)
    else:
        for name, value in defaults.items():
            if type(value) is _Factory:
                body.pop(name, None)  # the factory is not a class attribute
    body["__record_fields__"] = names
    body["__record_defaults__"] = defaults
    body["__match_args__"] = names
    if "__init__" not in cls.__dict__:
        body["__init__"] = _make_init(cls.__name__, names, defaults, slots)

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    body.setdefault("__repr__", __repr__)
    body.setdefault("__eq__", __eq__)
    if frozen:
        body.setdefault("__hash__", __hash__)
        body["__setattr__"] = _frozen_setattr
        body["__delattr__"] = _frozen_delattr
    else:
        body.setdefault("__hash__", None)  # mutable and compared by value: unhashable, as dataclasses
    if slots:

        def __getstate__(self: Any) -> tuple[Any, ...]:
            return tuple(getattr(self, n) for n in names)

        def __setstate__(self: Any, state: tuple[Any, ...]) -> None:
            for name, value in zip(names, state, strict=True):
                object.__setattr__(self, name, value)

        body["__getstate__"] = __getstate__
        body["__setstate__"] = __setstate__
    built: type[Any] = type(cls.__name__, cls.__bases__, body)
    built.__qualname__ = cls.__qualname__
    return built


if TYPE_CHECKING:

    @overload
    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def record(cls: type[T], /) -> type[T]: ...

    @overload
    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def record(*, slots: bool = False, frozen: bool = True) -> Callable[[type[T]], type[T]]: ...

    def record(cls: Any = None, /, *, slots: bool = False, frozen: bool = True) -> Any: ...

else:

    def record(cls=None, /, *, slots=False, frozen=True):
        """Make `cls` a record: `@record`, `@record(slots=True)`, `@record(frozen=False)`."""
        if cls is None:
            return lambda c: _build(c, slots, frozen)
        return _build(cls, slots, frozen)
