"""bytes -> lines -> events -> attempts with facts: the reading half of the data flow."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kvdoctor.attempts import Attempt, attempt_facts, newest_first, split_attempts
from kvdoctor.derive import derive
from kvdoctor.events import Event, extract
from kvdoctor.facts import Facts
from kvdoctor.joiner import join_lines
from kvdoctor.lines import Line, normalise


@dataclass(frozen=True)
class AttemptResult:
    index: int
    start_line: int
    end_line: int
    facts: Facts
    events: tuple[Event, ...]
    ranks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Analysis:
    source: str
    attempts: tuple[AttemptResult, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    smi_lines: tuple[int, ...] = ()
    smi_snapshot: Any = None  # kvdoctor.probe.snapshot.Snapshot from nvidia-smi text in the log

    @property
    def last(self) -> AttemptResult:
        return self.attempts[-1]


def _smi_reader() -> Any:
    try:
        from kvdoctor.probe.smi import SmiReader
    except ImportError:
        return None
    return SmiReader()


def iter_events(lines: Iterable[Line], smi: Any = None) -> Iterator[Event]:
    for line in join_lines(lines):
        if smi is not None:
            smi.feed(line.number, line.text)
        yield from extract(line)


def finish_attempt(attempt: Attempt) -> AttemptResult:
    facts = derive(attempt_facts(attempt))
    return AttemptResult(attempt.index, attempt.start_line, attempt.end_line, facts,
                         tuple(attempt.events), tuple(attempt.ranks()))


def analyse_events(source: str, events: list[Event], notes: list[str] | None = None,
                   smi: Any = None) -> Analysis:
    notes = list(notes or [])
    if newest_first(events):
        events = list(reversed(events))
        notes.append("the log is in newest-first order (timestamps run backwards); read it oldest-first")
    attempts = tuple(finish_attempt(a) for a in split_attempts(events))
    snapshot = smi.result() if smi is not None else None
    smi_lines = tuple(smi.lines()) if smi is not None and snapshot is not None else ()
    return Analysis(source, attempts, tuple(notes), smi_lines, snapshot)


def analyse_lines(source: str, raw_lines: Iterable[bytes | str]) -> Analysis:
    smi = _smi_reader()
    notes: list[str] = []
    events: list[Event] = []
    try:
        for event in iter_events(normalise(raw_lines), smi):
            events.append(event)
    except Exception as exc:  # InputError from a truncated gzip etc.: keep what was read
        from kvdoctor.lines import InputError

        if not isinstance(exc, InputError):
            raise
        notes.append(f"{source}: {exc}")
    return analyse_events(source, events, notes, smi)
