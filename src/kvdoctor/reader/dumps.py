"""Parse vLLM's configuration dumps (Namespace, dict, engine banner): the grammar of `dumps.lark`.

Dumps in pastes are often cut short ("…", a truncated line); the parser then keeps every entry
before the damage instead of giving up.
"""

from __future__ import annotations

import builtins
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_KEYWORDS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "null": None,
    "true": True,
    "false": False,
}


def parse_dump(text: str) -> dict[str, Any]:
    """Entries of a dump as a flat dict; a Namespace(...) or {...} wrapper is unwrapped."""
    text = text.strip().rstrip(",").strip()
    for _ in range(6):
        if not text:
            return {}
        try:
            result = _Reader(text).start()
        except _Unexpected as exc:
            text = _cut_before(text, exc.pos)
            continue
        result.pop("__call__", None)
        return result
    return {}


# the banner's own settings, never nested in another config's repr
_PLAIN_KEYS = frozenset(
    {
        "max_seq_len",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "gpu_memory_utilization",
        "dtype",
        "quantization",
        "enforce_eager",
        "kv_cache_dtype",
        "max_num_seqs",
        "max_num_batched_tokens",
    }
)
# "key=value" with a plain scalar value, as a V0 banner prints its config
_SCALAR_ENTRY = re.compile(r"(?:^|, )([a-z_][a-z0-9_]*)=([-\w.]+)(?=, |\)?$)")


def with_plain_entries(text: str, result: dict[str, Any]) -> dict[str, Any]:
    """A dump cut at a parse error (a quote a reporter's redaction left open: "model='MODELS, …")
    keeps what came before it (`parse_dump`); the plain `key=number/word` entries of the whole
    text, after it too, are still read."""
    for key, raw in _SCALAR_ENTRY.findall(text):
        if key in result or key not in _PLAIN_KEYS:
            continue
        result[key] = _number(raw) if _PLAIN_NUMBER.fullmatch(raw) else _KEYWORDS.get(raw, raw)
    return result


_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d*(?:[eE][-+]?\d+)?)?")


def _number(text: str) -> int | float:
    """A number token as Python reads it: an int where it is one, else a float."""
    try:
        return int(text)
    except ValueError:
        return float(text)


# the grammar of dumps.lark, read by hand: a dump is read on most start-ups, and this keeps lark's
# import (~30 ms) off that path (issue 11). tests/test_dumps.py holds it equal to the grammar.
_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w./~+\-]))"
    r"|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<angle><[^<>]*>)"
    r"|(?P<word>[A-Za-z0-9_./~+\-@…][\w./~+\-@:…]*)"
    r"|(?P<punct>[=,(){}\[\]:])"
    r")"
)


class _Unexpected(Exception):
    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


class _Reader:
    def __init__(self, text: str) -> None:
        self.tokens: builtins.list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos or m.lastgroup is None:
                if text[pos:].strip() == "":
                    break
                raise _Unexpected(len(text) - len(text[pos:].lstrip()))
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0
        self.end = len(text)

    def _peek(self, offset: int = 0) -> tuple[str, str, int] | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def _is(self, value: str, offset: int = 0) -> bool:
        token = self._peek(offset)
        return token is not None and token[0] == "punct" and token[1] == value

    def _fail(self) -> _Unexpected:
        token = self._peek()
        return _Unexpected(token[2] if token else -1)

    def _expect(self, value: str) -> None:
        if not self._is(value):
            raise self._fail()
        self.i += 1

    def start(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self._peek() is not None:
            item = self._entry()
            if isinstance(item, tuple):
                out[item[0]] = item[1]
            elif isinstance(item, dict) and item.get("__call__") is not None:
                out.update({k: v for k, v in item.items() if k != "__call__"})
                out.setdefault("__call__", item["__call__"])
            elif isinstance(item, dict):
                out.update({str(k): v for k, v in item.items()})
        return out

    def _entry(self) -> Any:
        token = self._peek()
        if token is not None and token[0] == "word" and self._is("=", 1):
            self.i += 2
            item: Any = (token[1], self._value())
        else:
            item = self._value()
        if self._is(","):
            self.i += 1
        return item

    def _value(self) -> Any:
        token = self._peek()
        if token is None:
            raise self._fail()
        kind, text, _ = token
        if kind == "punct":
            if text == "{":
                return self._dict()
            if text == "[":
                return self._sequence("[", "]")
            if text == "(":
                return self._sequence("(", ")")
            raise self._fail()
        self.i += 1
        if kind == "string":
            if text[:1] in ("'", '"') and "\\" not in text:
                return text[1:-1]  # a plain quoted string is its inside (no `ast` on the cold path)
            import ast

            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                return text[1:-1]
            return value if isinstance(value, str) else str(value)
        if kind == "number":
            return _number(text)
        if kind == "word" and self._is("("):
            return self._call(text)
        return _KEYWORDS.get(text, text)

    def _call(self, name: str) -> dict[str, Any]:
        self._expect("(")
        out: dict[str, Any] = {"__call__": name}
        while not self._is(")"):
            item = self._entry()
            if isinstance(item, tuple):
                out[item[0]] = item[1]
        self.i += 1
        return out

    def _dict(self) -> dict[Any, Any]:
        self._expect("{")
        out: dict[Any, Any] = {}
        while not self._is("}"):
            key = self._value()
            self._expect(":")
            value = self._value()
            out[key if isinstance(key, (str, int, float)) else str(key)] = value
            if self._is(","):
                self.i += 1
        self.i += 1
        return out

    def _sequence(self, opener: str, closer: str) -> builtins.list[Any]:
        self._expect(opener)
        out: builtins.list[Any] = []
        while not self._is(closer):
            out.append(self._value())
            if self._is(","):
                self.i += 1
        self.i += 1
        return out


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
