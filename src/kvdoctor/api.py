"""The one function every adapter calls: `diagnose(source) -> Report`."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kvdoctor.engine import evaluate_attempt, external_fact
from kvdoctor.facts import Facts
from kvdoctor.lines import iter_sparse_lines, open_source
from kvdoctor.pipeline import Analysis, analyse_lines
from kvdoctor.report import Report
from kvdoctor.rules import Rule, rules_for

Source = str | bytes | Path | Iterable[str]


def _raw_lines(source: Source) -> tuple[str, Iterable[bytes | str | tuple[int, bytes]]]:
    """A Path (or "-" for stdin) is read as a file; str and bytes are the log itself. A str is
    never taken as a path: text from a user (HTTP, Slack) must not open server files."""
    if isinstance(source, Path) or source == "-":
        return str(source), iter_sparse_lines(open_source(str(source)))
    if isinstance(source, bytes):
        from kvdoctor.lines import _maybe_gunzip

        return "<bytes>", iter_sparse_lines(_maybe_gunzip(io.BytesIO(source)))
    if isinstance(source, str):
        return "<text>", iter_sparse_lines(io.BytesIO(source.encode("utf-8", "replace")))  # type: ignore[arg-type]
    return "<lines>", (line.rstrip("\n") for line in source)


def probe_facts(snapshot: Any, analysis: Analysis) -> Facts:
    """gpu.* facts from a probe snapshot (issue 5), keyed to the failing attempt's PIDs."""
    if snapshot is None:
        return {}
    try:
        from kvdoctor.probe.facts import snapshot_facts
    except ImportError:
        return {}
    pids = frozenset(r["pid"] for r in analysis.last.ranks if r.get("pid")) if analysis.attempts else frozenset()
    values = snapshot_facts(snapshot, vllm_pids=pids)
    return {name: external_fact(name, value, "probe") for name, value in values.items()}


def diagnose(source: Source, *, rules: Sequence[Rule] | None = None, probe: Any = None,
             lang: str = "en", name: str | None = None, rule_dirs: Sequence[str] = ()) -> Report:
    """Read a log (path, bytes, text or lines) and diagnose each start-up attempt in it."""
    label, raw = _raw_lines(source)
    analysis = analyse_lines(name or label, raw)
    return report_for(analysis, rules=rules, probe=probe, lang=lang, rule_dirs=rule_dirs)


def report_for(analysis: Analysis, *, rules: Sequence[Rule] | None = None, probe: Any = None,
               lang: str = "en", rule_dirs: Sequence[str] = ()) -> Report:
    active = list(rules) if rules is not None else rules_for(rule_dirs)
    snapshot = probe if probe is not None else analysis.smi_snapshot
    extra = probe_facts(snapshot, analysis)
    attempts = tuple(evaluate_attempt(a, active, lang, extra if a is analysis.last else None)
                     for a in analysis.attempts)
    notes = list(analysis.notes)
    probe_record = None
    if snapshot is not None:
        probe_record = {"origin": "probe" if probe is not None else "log",
                        "facts": {k: f.value for k, f in extra.items()}}
        if analysis.smi_lines and probe is None:
            notes.append(f"nvidia-smi output found in the log (line {analysis.smi_lines[0]}); its figures are used as gpu.* facts")
    if not any(a.events for a in analysis.attempts):
        notes.append("no vLLM start-up lines found: is this the log of the vLLM server (stdout and stderr)?")
    return Report(analysis.source, attempts, tuple(notes), lang, probe_record)
