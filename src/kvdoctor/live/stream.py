"""Live diagnosis of a stream (`kvdoctor watch`, `kvdoctor run`): lines in, one report per
start-up out once its outcome is decided (a quiet interval, the next start-up, or EOF), in memory
bounded by one attempt's events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvdoctor._record import replace
from kvdoctor.api import report_for
from kvdoctor.diagnosis.report import Report
from kvdoctor.diagnosis.rules import Rule, rules_for
from kvdoctor.reader.attempts import FATAL_KINDS, START_KINDS, Attempt
from kvdoctor.reader.events import Event, extract
from kvdoctor.reader.joiner import Joiner
from kvdoctor.reader.lines import Line, decode, peel
from kvdoctor.reader.pipeline import Analysis, finish_attempt

# Events after which the verdict is worth announcing.
DECISIVE = (FATAL_KINDS - {"engine_failed", "traceback"}) | {"serving"}  # wrappers come before the cause
MAX_EVENTS = 20000  # a pathological attempt (a crash loop in one "attempt") stays bounded


def _key(report: Report) -> tuple[str, str]:
    """What a report decides: its verdict and the rule that gave it."""
    return report.verdict, report.diagnoses[0].rule if report.diagnoses else ""


class LiveDiagnoser:
    def __init__(
        self,
        rules: Sequence[Rule] | None = None,
        lang: str = "en",
        source: str = "<stdin>",
        probe: Any = None,
    ) -> None:
        self._rules = list(rules) if rules is not None else rules_for()
        self._lang, self._source, self._probe = lang, source, probe
        self._joiner = Joiner()
        self._number = 0
        self._attempt = Attempt(0)
        self._announced: tuple[str, str] | None = None  # (verdict, rule) last reported
        self._announced_line = 0  # the input line at which it was reported
        self._pending = False
        self._finished: list[Report] = []

    def feed(self, raw: str | bytes) -> list[Report]:
        """Take one physical line; return any reports that became known."""
        self._number += 1
        text = decode(raw if isinstance(raw, bytes) else raw.encode("utf-8", "replace"))
        message, origin = peel(text)
        out: list[Report] = []
        for line in self._joiner.push(Line(self._number, message, text, origin)):
            out.extend(self._take(line))
        return out

    def flush(self) -> list[Report]:
        """The stream went quiet: process a line held back for joining, and report the attempt if
        its outcome changed since the last report (a quiet interval is when an outcome settles)."""
        out: list[Report] = []
        for line in self._joiner.flush():
            out.extend(self._take(line))
        out.extend(self._settle())
        return out

    def close(self) -> Report:
        for line in self._joiner.flush():
            self._take(line)
        self._pending = False
        return self._marked(self._report())

    def _take(self, line: Line) -> list[Report]:
        out: list[Report] = []
        for event in extract(line):
            if event.kind in START_KINDS and self._attempt.progressed():
                out.extend(self._settle())  # the next start-up began: the previous one is decided
                self._attempt = Attempt(self._attempt.index + 1)
                self._announced = None
            if len(self._attempt.events) < MAX_EVENTS:
                self._attempt.events.append(event)
            if event.kind in DECISIVE or self._announced is not None:
                self._pending = True  # (after a report, any new figure may change it)
        return out

    def _settle(self) -> list[Report]:
        """One report per decided outcome: never a first guess from the line that a traceback's
        later lines overturn (the report waits for a quiet interval, the next start-up or EOF)."""
        if not self._pending:
            return []
        self._pending = False
        report = self._report()
        key = _key(report)
        if key == self._announced or not report.diagnoses:
            return []
        report = self._marked(report)
        self._announced, self._announced_line = key, self._number
        return [report]

    def _marked(self, report: Report) -> Report:
        """A report that changes an earlier one for the same start-up says which it supersedes."""
        if self._announced is None or _key(report) == self._announced:
            return report
        verdict, rule = self._announced
        note = (
            f"supersedes the report for this start-up at line {self._announced_line} "
            f"({verdict}, rule {rule}): the lines since then changed the diagnosis"
        )
        return replace(report, notes=(*report.notes, note))

    def _report(self) -> Report:
        analysis = Analysis(self._source, (finish_attempt(self._attempt),))
        return report_for(analysis, rules=self._rules, probe=self._probe, lang=self._lang)

    @property
    def events(self) -> list[Event]:
        return list(self._attempt.events)
