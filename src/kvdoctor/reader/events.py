"""Stage 2: logical lines -> typed events, by the extractor table in `kvdoctor.reader.extractors`.

One regex over every extractor's needles rejects most lines in a single scan; a line that passes
runs only the extractors whose needles it holds.
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


def _needle_index() -> tuple[re.Pattern[str], dict[str, tuple[int, ...]]]:
    """One regex over every needle (a line with none is rejected in one C-level scan), and for
    each needle the extractors that need it, so a line runs only the extractors it can feed."""
    by_needle: dict[str, list[int]] = {}
    for i, ex in enumerate(EXTRACTORS):
        for needle in ex.needles:
            by_needle.setdefault(needle, []).append(i)
    ordered = sorted(by_needle, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(n) for n in ordered))
    return pattern, {n: tuple(v) for n, v in by_needle.items()}


_NEEDLES, _BY_NEEDLE = _needle_index()


def _candidates(text: str) -> list[int]:
    found = set(_NEEDLES.findall(text))
    if not found:
        return []
    # needles may overlap ("failed to start" inside "EngineCore failed to start"): check them all
    present = {n for n in _BY_NEEDLE if n in text} if len(found) < len(_BY_NEEDLE) else found
    return sorted({i for n in present for i in _BY_NEEDLE[n]})


def extract(line: Line) -> list[Event]:
    """Every event a logical line carries (usually none)."""
    text = line.text
    if not _NEEDLES.search(text):
        return []
    events: list[Event] = []
    seen: set[str] = set()
    for index in _candidates(text):
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
