"""Configuration dumps: the hand-written reader (no lark on a diagnosis's path) reads exactly what
the grammar in `src/kvdoctor/reader/dumps.lark` reads, whole and cut short."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lark import Lark, Transformer, UnexpectedInput

from kvdoctor.reader import dumps
from kvdoctor.reader.events import extract
from kvdoctor.reader.lines import iter_raw_lines, normalise, open_source

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted([*FIXTURES.glob("corpus/*.log"), *FIXTURES.glob("validation/*/*.log")])
GRAMMAR = Lark.open_from_package("kvdoctor.reader", "dumps.lark", parser="lalr", maybe_placeholders=False)


class _Reference(Transformer[Any, Any]):
    """The grammar's meaning, as the reader must reproduce it."""

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

    def pair(self, items: Sequence[Any]) -> tuple[str, Any]:
        return (str(items[0]), items[1])

    def string(self, items: Sequence[Any]) -> str:
        try:
            value = ast.literal_eval(str(items[0]))
        except (ValueError, SyntaxError):
            return str(items[0])[1:-1]
        return value if isinstance(value, str) else str(value)

    def number(self, items: Sequence[Any]) -> int | float:
        try:
            return int(str(items[0]))
        except ValueError:
            return float(str(items[0]))

    def word(self, items: Sequence[Any]) -> Any:
        return dumps._KEYWORDS.get(str(items[0]), str(items[0]))

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

    def list(self, items: Sequence[Any]) -> list[Any]:
        return [*items]

    def tuple(self, items: Sequence[Any]) -> list[Any]:
        return [*items]


def _by_grammar(text: str) -> dict[str, Any]:
    text = text.strip().rstrip(",").strip()
    for _ in range(6):
        if not text:
            return {}
        try:
            tree = GRAMMAR.parse(text)
        except UnexpectedInput as exc:
            text = dumps._cut_before(text, exc.pos_in_stream or 0)
            continue
        result = _Reference().transform(tree)
        result.pop("__call__", None)
        return result if isinstance(result, dict) else {}
    return {}


def _dumps() -> list[str]:
    found = []
    for path in LOGS:
        for line in normalise(iter_raw_lines(open_source(str(path)))):
            for event in extract(line):
                if "dump" in event.fields:
                    found.append(event.fields["dump"])
    return found


DUMPS = _dumps()
SAMPLES = [
    *DUMPS,
    "Namespace(model='Qwen/Qwen3-8B', port=8000, gpu_memory_utilization=0.9, enforce_eager=False, x=<f at 0x1>)",
    "{'model': 'm', 'max_model_len': 32768, 'limit_mm_per_prompt': {'image': 3}, 'sizes': [1, 2, 4]}",
    "model='m', dtype=torch.bfloat16, served_model_name=/data/model/, seed=0 chunked=True v=0.5.4 n=-3 e=1e-5",
]
# cut short as pastes are: at a quarter, a half, three quarters, and mid-token near the end
CUT = [s[: int(len(s) * f)] for s in SAMPLES for f in (0.25, 0.5, 0.75, 0.97)]


def test_the_corpora_hold_dumps() -> None:
    assert len(DUMPS) > 10


@pytest.mark.parametrize("text", SAMPLES + CUT, ids=[f"dump{i}" for i in range(len(SAMPLES) + len(CUT))])
def test_reader_equals_the_grammar(text: str) -> None:
    assert dumps.parse_dump(text) == _by_grammar(text)
