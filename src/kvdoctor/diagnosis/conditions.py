"""The rule condition language: parse (lark, LALR) into frozen nodes, evaluate in three values.

A missing fact makes a comparison *unknown* (None), not false; `and`/`or`/`not` follow Kleene
logic, so `not exists(x) or x > 3` behaves as a reader expects. There is no eval: the tree is
walked. Regexes from rules run under a timeout (the `regex` package).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from functools import cache

from kvdoctor._record import record
from kvdoctor.reader.versions import parse_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REGEX_TIMEOUT_S = 0.05


class ConditionError(Exception):
    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@record
class Lit:
    value: Any


@record
class Name:
    name: str
    line: int
    column: int


@record
class Op:
    op: str  # and or not compare arith neg in not_in matches call
    args: tuple[Node, ...]
    extra: Any = None  # operator symbol, function name, Pattern


Node = Lit | Name | Op  # a runtime alias: the rule compiler subscripts lark's Transformer with it


@record
class Pattern:
    """A rule's regex by its source, compiled on first use: compiled rules cached on disk carry no
    compiled pattern, and a run that evaluates no `matches` never imports `regex`."""

    source: str

    def search(self, text: str, timeout: float) -> Any:
        return _compiled(self.source).search(text, timeout=timeout)


@cache
def _compiled(source: str) -> Any:
    import regex

    return regex.compile(source)


def build(text: str) -> Node:
    """Parse a condition (lark, LALR; imported only when a rule is compiled, not when cached)."""
    from kvdoctor.diagnosis.condition_parser import parse

    return parse(text)


def names(node: Node) -> Iterator[Name]:
    if isinstance(node, Name):
        yield node
    elif isinstance(node, Op):
        for arg in node.args:
            yield from names(arg)


# --- evaluation -------------------------------------------------------------------------------

if TYPE_CHECKING:
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
    if op == "and":  # false wins over unknown, so the first false ends it (a later regex never runs)
        values = []
        for arg in node.args:
            v = evaluate(arg, lookup, defines)
            if v is False:
                return False
            values.append(v)
        return None if any(v is None for v in values) else all(bool(v) for v in values)
    if op == "or":  # true wins over unknown: the first true ends it
        values = []
        for arg in node.args:
            v = evaluate(arg, lookup, defines)
            if v is True or (v not in (None, False) and bool(v)):
                return True
            values.append(v)
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
