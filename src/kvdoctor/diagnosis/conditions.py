"""The rule condition language: parse (lark, LALR) into frozen nodes, evaluate in three values.

A missing fact makes a comparison *unknown* (None), not false; `and`/`or`/`not` follow Kleene
logic, so `not exists(x) or x > 3` behaves as a reader expects. There is no eval: the tree is
walked. Regexes from rules run under a timeout (the `regex` package).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union

import regex
from lark import Lark, Token, Transformer, UnexpectedInput

from kvdoctor.reader.units import size_gib
from kvdoctor.reader.versions import parse_version

REGEX_TIMEOUT_S = 0.05


class ConditionError(Exception):
    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Name:
    name: str
    line: int
    column: int


@dataclass(frozen=True)
class Op:
    op: str  # and or not compare arith neg in not_in matches call
    args: tuple[Node, ...]
    extra: Any = None  # operator symbol, function name, compiled regex


Node = Union[Lit, Name, Op]  # noqa: UP007 - a runtime alias used before 3.10 unions read well


class _Build(Transformer[Token, Node]):
    def or_(self, items: Sequence[Node]) -> Node:
        return items[0] if len(items) == 1 else Op("or", tuple(items))

    def and_(self, items: Sequence[Node]) -> Node:
        return items[0] if len(items) == 1 else Op("and", tuple(items))

    def not_(self, items: Sequence[Node]) -> Node:
        return Op("not", (items[0],))

    def compare(self, items: Sequence[Any]) -> Node:
        return Op("compare", (items[0], items[2]), str(items[1]))

    def arith(self, items: Sequence[Any]) -> Node:
        return Op("arith", (items[0], items[2]), str(items[1]))

    def signed(self, items: Sequence[Any]) -> Node:
        return Op("neg", (items[1],)) if str(items[0]) == "-" else items[1]

    def in_(self, items: Sequence[Any]) -> Node:
        return Op("in", (items[0],), items[1])

    def not_in(self, items: Sequence[Any]) -> Node:
        return Op("not", (Op("in", (items[0],), items[1]),))

    def matches(self, items: Sequence[Any]) -> Node:
        pattern = ast.literal_eval(str(items[1]))
        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            raise ConditionError(f"bad regex {pattern!r}: {exc}", items[1].line, items[1].column) from None
        return Op("matches", (items[0],), compiled)

    def list(self, items: Sequence[Node | None]) -> tuple[Any, ...]:  # noqa: A003 - grammar rule name
        return tuple(i.value for i in items if isinstance(i, Lit))

    def size(self, items: Sequence[Token]) -> Node:
        text = str(items[0])
        number = text.rstrip("KMGTiB ").strip()
        unit = text[len(number) :].strip()
        return Lit(size_gib(number, unit))

    def number(self, items: Sequence[Token]) -> Node:
        return Lit(float(items[0]))

    def string(self, items: Sequence[Token]) -> Node:
        return Lit(ast.literal_eval(str(items[0])))

    def true(self, items: Sequence[Any]) -> Node:
        return Lit(True)

    def false(self, items: Sequence[Any]) -> Node:
        return Lit(False)

    def call(self, items: Sequence[Any]) -> Node:
        func = str(items[0])
        args = tuple(i for i in items[1:] if i is not None)
        if func == "exists" and (len(args) != 1 or not isinstance(args[0], Name)):
            raise ConditionError("exists() takes one fact name", items[0].line, items[0].column)
        return Op("call", args, func)

    def name(self, items: Sequence[Token]) -> Node:
        token = items[0]
        return Name(str(token), token.line or 1, token.column or 1)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # the basic lexer keeps keywords keywords, so `a <= and b` is reported at `and`
    return Lark.open_from_package(
        "kvdoctor.diagnosis", "conditions.lark", parser="lalr", lexer="basic", maybe_placeholders=True
    )


def build(text: str) -> Node:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or [])
        hint = f"; expected one of {', '.join(expected[:6])}" if expected else ""
        token = getattr(exc, "token", None)
        found = f" at {str(token)!r}" if token else ""
        raise ConditionError(f"syntax error{found}{hint}", exc.line or 1, exc.column or 1) from None
    try:
        return _Build().transform(tree)
    except Exception as exc:  # lark wraps errors raised in the transformer
        cause = getattr(exc, "orig_exc", None) or exc.__context__
        if isinstance(cause, ConditionError):
            raise cause from None
        raise ConditionError(str(exc)) from None


def names(node: Node) -> Iterator[Name]:
    if isinstance(node, Name):
        yield node
    elif isinstance(node, Op):
        for arg in node.args:
            yield from names(arg)


# --- evaluation -------------------------------------------------------------------------------

Lookup = Callable[[str], Any]  # returns the fact value, or raises KeyError when absent


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _version_compare(op: str, fact: Any, literal: str, lookup: Lookup) -> bool | None:
    """Exact when the version is known; else the range the log's wording implies."""
    target = parse_version(literal)
    if target is None:
        return None
    if fact is not None and parse_version(str(fact)) is not None:
        return _cmp(op, parse_version(str(fact)), target)
    low = _try(lookup, "vllm_version_min")
    high = _try(lookup, "vllm_version_max")
    lo = parse_version(str(low)) if low else None
    hi = parse_version(str(high)) if high else None
    if lo is None and hi is None:
        return None
    results = {_cmp(op, v, target) for v in (lo, hi) if v is not None}
    if lo is None or hi is None:  # half-open range: only monotone ops can be decided
        if op in (">=", ">") and lo is not None and _cmp(op, lo, target):
            return True
        if op in ("<", "<=") and hi is not None and _cmp(op, hi, target):
            return True
        if op in (">=", ">") and hi is not None and not _cmp(op, hi, target):
            return False
        if op in ("<", "<=") and lo is not None and not _cmp(op, lo, target):
            return False
        return None
    return results.pop() if len(results) == 1 else None


def _cmp(op: str, a: Any, b: Any) -> bool:
    results: dict[str, bool] = {
        ">": a > b,
        ">=": a >= b,
        "<": a < b,
        "<=": a <= b,
        "==": a == b,
        "!=": a != b,
    }
    return results[op]


def _try(lookup: Lookup, name: str) -> Any:
    try:
        return lookup(name)
    except KeyError:
        return None


def evaluate(node: Node, lookup: Lookup, defines: Mapping[str, Node] | None = None) -> Any:
    defines = defines or {}
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, Name):
        if node.name in defines:
            return evaluate(defines[node.name], lookup, defines)
        return _try(lookup, node.name)
    op = node.op
    if op == "and":
        values = [evaluate(a, lookup, defines) for a in node.args]
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else all(bool(v) for v in values)
    if op == "or":
        values = [evaluate(a, lookup, defines) for a in node.args]
        if any(v is True or (v not in (None, False) and bool(v)) for v in values):
            return True
        return None if any(v is None for v in values) else False
    if op == "not":
        value = evaluate(node.args[0], lookup, defines)
        return None if value is None else not value
    if op == "compare":
        return _compare(node, lookup, defines)
    if op == "arith":
        a, b = (_num(evaluate(x, lookup, defines)) for x in node.args)
        if a is None or b is None:
            return None
        if node.extra == "/":
            return None if b == 0 else a / b
        return {"+": a + b, "-": a - b, "*": a * b}[node.extra]
    if op == "neg":
        value = _num(evaluate(node.args[0], lookup, defines))
        return None if value is None else -value
    if op == "in":
        value = evaluate(node.args[0], lookup, defines)
        if value is None:
            return None
        return value in node.extra or (isinstance(value, (int, float)) and float(value) in node.extra)
    if op == "matches":
        value = evaluate(node.args[0], lookup, defines)
        if value is None:
            return None
        try:
            return node.extra.search(str(value)[:20000], timeout=REGEX_TIMEOUT_S) is not None
        except TimeoutError:
            return None
    if op == "call":
        return _call(node, lookup, defines)
    raise ValueError(f"unknown node {op}")


def _compare(node: Op, lookup: Lookup, defines: Mapping[str, Node]) -> bool | None:
    left_node, right_node = node.args
    left = evaluate(left_node, lookup, defines)
    right = evaluate(right_node, lookup, defines)
    if isinstance(left_node, Name) and left_node.name == "vllm_version" and isinstance(right, str):
        return _version_compare(node.extra, left, right, lookup)
    if left is None or right is None:
        return None
    if isinstance(left, str) or isinstance(right, str) or isinstance(left, bool) or isinstance(right, bool):
        if node.extra in ("==", "!="):
            return _cmp(node.extra, left, right)
        return None
    a, b = _num(left), _num(right)
    if a is None or b is None:
        return None
    return _cmp(node.extra, a, b)


def _call(node: Op, lookup: Lookup, defines: Mapping[str, Node]) -> Any:
    func = node.extra
    if func == "exists":
        arg = node.args[0]
        assert isinstance(arg, Name)
        if arg.name in defines:
            return evaluate(defines[arg.name], lookup, defines) is not None
        return _try(lookup, arg.name) is not None
    if func == "coalesce":  # the first argument that is known
        for arg in node.args:
            value = evaluate(arg, lookup, defines)
            if value is not None:
                return value
        return None
    values = [evaluate(a, lookup, defines) for a in node.args]
    if func == "len":
        return None if values[0] is None else len(values[0])
    nums = [_num(v) for v in values]
    if any(n is None for n in nums) or not nums:
        return None
    if func == "min":
        return min(n for n in nums if n is not None)
    if func == "max":
        return max(n for n in nums if n is not None)
    first = nums[0]
    assert first is not None
    if func == "abs":
        return abs(first)
    if func == "floor":
        return float(math.floor(first))
    if func == "ceil":
        return float(math.ceil(first))
    if func == "round":
        digits = int(nums[1]) if len(nums) > 1 and nums[1] is not None else 0
        return round(first, digits)
    return None
