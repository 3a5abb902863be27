"""One small record per scanned file, cut from the same `Report` that `kvdoctor diagnose` prints.

A fleet scan keeps these records (a few hundred bytes each) and never the events, facts or evidence
behind them, so its memory grows with the number of files only by their names and verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdoctor.diagnosis.report import Report
from kvdoctor.exitcodes import EXIT_INTERNAL, EXIT_USAGE

UNKNOWN = "unknown"  # the verdict of a file that could not be read or holds no vLLM start-up


@dataclass(frozen=True, slots=True)
class Finding:
    """The first diagnosis of the verdict's attempt, and its first remedy."""

    rule: str
    klass: str
    cause: str | None
    phase: str | None
    severity: str
    confidence: str
    title: str
    remedy: str | None  # the first remedy's action id
    remedy_value: Any  # its computed value (a number, a string) or None

    def as_record(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "class": self.klass,
            "cause": self.cause,
            "phase": self.phase,
            "severity": self.severity,
            "confidence": self.confidence,
            "title": self.title,
            "remedy": None if self.remedy is None else {"action": self.remedy, "value": self.remedy_value},
        }


@dataclass(frozen=True, slots=True)
class FileRecord:
    path: str
    verdict: str
    diagnosis: Finding | None
    attempts: int
    vllm_version: str | None
    engine: str | None
    model: str | None
    gpu: str | None
    gpu_total_gib: float | None
    exit_code: int  # what `kvdoctor diagnose --fail-on …` exits with on this file alone
    error: str | None  # why the file could not be (fully) read, or holds no vLLM start-up

    def as_record(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "verdict": self.verdict,
            "diagnosis": None if self.diagnosis is None else self.diagnosis.as_record(),
            "attempts": self.attempts,
            "vllm_version": self.vllm_version,
            "engine": self.engine,
            "model": self.model,
            "gpu": self.gpu,
            "gpu_total_gib": self.gpu_total_gib,
            "exit_code": self.exit_code,
            "error": self.error,
        }


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _finding(report: Report) -> Finding | None:
    if not report.diagnoses:
        return None
    top = report.diagnoses[0]
    first = top.remedies[0] if top.remedies else None
    return Finding(
        rule=top.rule,
        klass=top.klass,
        cause=top.cause,
        phase=top.phase,
        severity=top.severity,
        confidence=top.confidence,
        title=top.title,
        remedy=first.action if first else None,
        remedy_value=first.value if first else None,
    )


def record_of(path: str, report: Report, *, problem: str | None, fail_on: str) -> FileRecord:
    """The record of a diagnosed file; `problem` is `api.input_problem`'s line (then exit 2, as
    `diagnose` does, while the verdict of what could be read is kept)."""
    facts = report.facts
    total = facts.get("total_gpu_gib")
    return FileRecord(
        path=path,
        verdict=report.verdict,
        diagnosis=_finding(report),
        attempts=len(report.attempts),
        vllm_version=_text(facts.get("vllm_version")),
        engine=_text(facts.get("engine")),
        model=_text(facts.get("model") or facts.get("served_model_name")),
        gpu=_text(facts.get("gpu_name") or facts.get("gpu.name")),
        gpu_total_gib=float(total) if isinstance(total, (int, float)) else None,
        exit_code=EXIT_USAGE if problem is not None else report.exit_code(fail_on),
        error=None if problem is None else problem.removeprefix(f"{path}: "),
    )


def unreadable(path: str, error: str, *, internal: bool = False) -> FileRecord:
    """The record of a file that could not be opened (or that a bug stopped): no verdict."""
    return FileRecord(
        path=path,
        verdict=UNKNOWN,
        diagnosis=None,
        attempts=0,
        vllm_version=None,
        engine=None,
        model=None,
        gpu=None,
        gpu_total_gib=None,
        exit_code=EXIT_INTERNAL if internal else EXIT_USAGE,
        error=error,
    )
