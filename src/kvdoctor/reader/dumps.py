"""Parse vLLM's configuration dumps (Namespace, dict, engine banner) with a lark grammar.

Dumps in pastes are often cut short ("…", a truncated line); the parser then keeps every entry
before the damage instead of giving up.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lark import Lark

_KEYWORDS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "null": None,
    "true": True,
    "false": False,
}


def _transformer() -> Any:
    from lark import Transformer

    class _ToPython(Transformer):  # type: ignore[type-arg]
        pass

    for name, fn in list(_Methods.__dict__.items()):
        if not name.startswith("__"):
            setattr(_ToPython, name, fn)
    return _ToPython()


class _Methods:
    def start(self, items: Sequence[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in items:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                out[item[0]] = item[1]
            elif isinstance(item, dict) and item.get("__call__") is not None:
                out.update({k: v for k, v in item.items() if k != "__call__"})
                out.setdefault("__call__", item["__call__"])
            elif isinstance(item, dict):
                out.update({str(k): v for k, v in item.items()})
        return out

    def pair(self, items: Sequence[Any]) -> tuple[str, Any]:  # noqa: D102
        return (str(items[0]), items[1])

    def string(self, items: Sequence[Any]) -> str:
        try:
            value = ast.literal_eval(str(items[0]))
        except (ValueError, SyntaxError):
            return str(items[0])[1:-1]
        return value if isinstance(value, str) else str(value)

    def number(self, items: Sequence[Any]) -> int | float:
        text = str(items[0])
        try:
            return int(text)
        except ValueError:
            return float(text)

    def word(self, items: Sequence[Any]) -> Any:
        text = str(items[0])
        return _KEYWORDS.get(text, text)

    def call(self, items: Sequence[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"__call__": str(items[0])}
        for item in items[1:]:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                out[item[0]] = item[1]
        return out

    def dict(self, items: Sequence[Any]) -> dict[Any, Any]:
        return {(k if isinstance(k, (str, int, float)) else str(k)): v for k, v in items}

    def dictitem(self, items: Sequence[Any]) -> tuple[Any, Any]:
        return (items[0], items[1])

    def list(self, items: Sequence[Any]) -> builtins.list[Any]:  # noqa: A003 - grammar rule name
        return builtins.list(items)

    def tuple(self, items: Sequence[Any]) -> builtins.list[Any]:  # noqa: A003 - grammar rule name
        return builtins.list(items)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    from lark import (
        Lark,
    )  # imported on the first dump: `kvdoctor facts` on a plain log never pays for it

    return Lark.open_from_package("kvdoctor.reader", "dumps.lark", parser="lalr", maybe_placeholders=False)


def parse_dump(text: str) -> dict[str, Any]:
    """Entries of a dump as a flat dict; a Namespace(...) or {...} wrapper is unwrapped."""
    text = text.strip().rstrip(",").strip()
    for _ in range(6):
        if not text:
            return {}
        from lark import UnexpectedInput

        try:
            tree = _parser().parse(text)
        except UnexpectedInput as exc:
            text = _cut_before(text, exc.pos_in_stream or 0)
            continue
        result = _transformer().transform(tree)
        result.pop("__call__", None)
        return result if isinstance(result, dict) else {}
    return {}


def _cut_before(text: str, pos: int) -> str:
    """Keep the complete entries before a parse error, closing an open Namespace( or {."""
    head = text[:pos]
    cut = head.rfind(", ")
    if cut <= 0:
        return ""
    head = head[:cut]
    if head.startswith("Namespace(") or head.startswith("{"):
        opener = head[0] if head[0] == "{" else "("
        closer = "}" if opener == "{" else ")"
        # close the outer wrapper only if nesting is balanced so far
        depth = sum(head.count(o) - head.count(c) for o, c in (("(", ")"), ("{", "}"), ("[", "]")))
        if depth == 1:
            head += closer
        elif depth != 0:
            return ""
    return head
