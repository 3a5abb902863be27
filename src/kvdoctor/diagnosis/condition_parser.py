"""The condition language's parser: lark (LALR) from `conditions.lark` into the frozen nodes of
`kvdoctor.diagnosis.conditions`. Used when a rule file is compiled; a run from the compiled-rules
cache never imports it (nor lark)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import lru_cache

import regex
from lark import Lark, Token, Transformer, UnexpectedInput

from kvdoctor.diagnosis.conditions import ConditionError, Lit, Name, Node, Op, Pattern
from kvdoctor.reader.units import size_gib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
            regex.compile(pattern)  # reported here, at the rule's line and column
        except regex.error as exc:
            raise ConditionError(f"bad regex {pattern!r}: {exc}", items[1].line, items[1].column) from None
        return Op("matches", (items[0],), Pattern(pattern))

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


def parse(text: str) -> Node:
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
