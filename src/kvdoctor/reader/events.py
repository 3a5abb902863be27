"""Stage 2: logical lines -> typed events, by the extractor table in `kvdoctor.reader.extractors`.

One regex over every extractor's needles (a trie) rejects most lines in a single scan; a line that
passes runs only the extractors whose needles it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from kvdoctor._record import record
from kvdoctor.reader.extractors import EXTRACTORS, MULTI
from kvdoctor.reader.lines import NO_ORIGIN, Line, Origin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kvdoctor.reader.extractors import Fields

_set = object.__setattr__


@record(slots=True)
class Event:
    kind: str
    line: int
    text: str
    fields: Fields
    origin: Origin = NO_ORIGIN

    def __init__(
        self, kind: str, line: int, text: str, fields: Fields | None = None, origin: Origin = NO_ORIGIN
    ) -> None:
        _set(self, "kind", kind)  # written out: one is made per matching line
        _set(self, "line", line)
        _set(self, "text", text)
        _set(self, "fields", {} if fields is None else fields)
        _set(self, "origin", origin)

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"kind": self.kind, "line": self.line, "text": self.text}
        record.update(self.fields)
        origin = {
            k: v
            for k, v in (
                ("proc", self.origin.proc),
                ("pid", self.origin.pid),
                ("rank", self.origin.rank),
                ("container", self.origin.container),
                ("level", self.origin.level),
                ("stamp", self.origin.stamp),
            )
            if v is not None
        }
        if origin:
            record["origin"] = origin
        return record


def _needle_index() -> dict[str, tuple[int, ...]]:
    """For each needle, the extractors that need it, so a line runs only the extractors it can feed."""
    by_needle: dict[str, list[int]] = {}
    for i, ex in enumerate(EXTRACTORS):
        for needle in ex.needles:
            by_needle.setdefault(needle, []).append(i)
    return {n: tuple(v) for n, v in by_needle.items()}


_BY_NEEDLE = _needle_index()
_NEEDLES = tuple(_BY_NEEDLE)


def gate_pattern(needles: Iterable[str]) -> str:
    """A regex that matches where any of `needles` occurs, written as a trie (one branch per
    distinct next character), so the engine tries a few branches per position, not one per needle:
    ~3x faster than the flat alternation. A needle that another extends ends the match early."""
    trie: dict[str, Any] = {}
    for needle in needles:
        node = trie
        for ch in needle:
            node = node.setdefault(ch, {})
        node[""] = {}

    def branch(node: dict[str, Any]) -> str:
        if "" in node:
            return ""  # a needle ends here: the gate has its answer
        alternatives = [re.escape(ch) + branch(child) for ch, child in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"

    return branch(trie)


# The gate costs a cold start ~8 ms to compile, and a log of a few hundred lines is read faster
# without it; so the first lines are checked needle by needle, and the gate is compiled only for
# what comes after them. Either way a line's needles are the same.
_UNGATED_LINES = 512
_gate: re.Pattern[str] | None = None
_ungated_left = _UNGATED_LINES


def _present(text: str) -> list[str]:
    """The needles `text` holds (overlapping ones included: "failed to start" inside "EngineCore
    failed to start"), usually none."""
    global _gate, _ungated_left
    if _gate is None and _ungated_left > 0:
        _ungated_left -= 1
    else:
        if _gate is None:
            _gate = re.compile(gate_pattern(_NEEDLES))
        if _gate.search(text) is None:
            return []
    return [n for n in _NEEDLES if n in text]


def _candidates(text: str) -> list[int]:
    present = _present(text)
    if not present:
        return []
    return sorted({i for n in present for i in _BY_NEEDLE[n]})


def extract(line: Line) -> list[Event]:
    """Every event a logical line carries (usually none)."""
    text = line.text
    candidates = _candidates(text)
    if not candidates:
        return []
    events: list[Event] = []
    seen: set[str] = set()
    for index in candidates:
        ex = EXTRACTORS[index]
        if ex.kind in seen and ex.kind not in MULTI:
            continue
        m = ex.pattern.search(text)
        if m is None:
            continue
        try:
            fields = ex.convert(m)
        except (ValueError, IndexError, TypeError, OverflowError):
            fields = None  # a mangled figure: skip the line rather than guess
        if fields is None:
            continue
        seen.add(ex.kind)
        events.append(Event(ex.kind, line.number, text, fields, line.origin))
        if ex.kind == "frame":
            break
    return events


def extract_all(lines: Iterable[Line]) -> Iterator[Event]:
    for line in lines:
        yield from extract(line)
