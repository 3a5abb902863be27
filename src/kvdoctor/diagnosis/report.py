"""The report: one object, serialised once by `as_records()` for every output."""

from __future__ import annotations

from kvdoctor._record import record
from kvdoctor._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2}


@record
class Remedy:
    action: str
    text: str
    value: Any = None


@record
class Avoid:
    action: str
    why: str


@record
class Evidence:
    line: int
    text: str


@record
class Diagnosis:
    rule: str
    klass: str
    cause: str | None
    phase: str | None
    severity: str
    confidence: str
    title: str
    explanation: str
    remedies: tuple[Remedy, ...] = ()
    avoid: tuple[Avoid, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    references: tuple[str, ...] = ()

    def as_record(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "class": self.klass,
            "cause": self.cause,
            "phase": self.phase,
            "severity": self.severity,
            "confidence": self.confidence,
            "title": self.title,
            "explanation": self.explanation,
            "remedies": [{"action": r.action, "text": r.text, "value": r.value} for r in self.remedies],
            "avoid": [{"action": a.action, "why": a.why} for a in self.avoid],
            "evidence": [{"line": e.line, "text": e.text} for e in self.evidence],
            "references": list(self.references),
        }


@record
class AttemptReport:
    index: int
    start_line: int
    end_line: int
    verdict: str
    diagnoses: tuple[Diagnosis, ...]
    facts: dict[str, Any]  # name -> Fact record ({"value", "source", "line"?, "derived"?})
    ranks: tuple[dict[str, Any], ...] = ()

    @property
    def inconclusive(self) -> bool:
        """Nothing decided: no rule fired, or only an informational note (a start-up still running)."""
        top = self.diagnoses[0] if self.diagnoses else None
        return top is None or top.klass == "unknown"

    def as_record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "verdict": self.verdict,
            "diagnoses": [d.as_record() for d in self.diagnoses],
            "facts": {k: v["value"] for k, v in self.facts.items()},
            "fact_sources": {k: {kk: vv for kk, vv in v.items() if kk != "value"} for k, v in self.facts.items()},
            "ranks": list(self.ranks),
        }


@record
class Report:
    source: str
    attempts: tuple[AttemptReport, ...]
    notes: tuple[str, ...] = ()
    lang: str = "en"
    probe: dict[str, Any] | None = None

    @property
    def primary(self) -> AttemptReport | None:
        """The attempt the verdict is about: the last one, unless the log ends in a start-up that
        shows no outcome yet (a banner, a command), then the last one that has an outcome."""
        for attempt in reversed(self.attempts):
            if not attempt.inconclusive:
                return attempt
        return self.attempts[-1] if self.attempts else None

    @property
    def verdict(self) -> str:
        return self.primary.verdict if self.primary else "unknown"

    @property
    def diagnoses(self) -> tuple[Diagnosis, ...]:
        return self.primary.diagnoses if self.primary else ()

    @property
    def facts(self) -> dict[str, Any]:
        return {k: v["value"] for k, v in self.primary.facts.items()} if self.primary else {}

    def exit_code(self, fail_on: str = "error") -> int:
        if fail_on == "never":
            return 0
        threshold = SEVERITY_ORDER.get(fail_on, 2)
        worst = max((SEVERITY_ORDER.get(d.severity, 0) for d in self.diagnoses), default=-1)
        return 1 if worst >= threshold else 0

    def as_records(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "kvdoctor", "version": __version__},
            "source": self.source,
            "verdict": self.verdict,
            "diagnoses": [d.as_record() for d in self.diagnoses],
            "facts": self.facts,
            "attempts": [a.as_record() for a in self.attempts],
            "notes": list(self.notes),
            "lang": self.lang,
        }
        if self.probe is not None:
            record["probe"] = self.probe
        return record
