"""The one function every adapter calls: `diagnose(source) -> Report`."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence

from kvdoctor.diagnosis.engine import evaluate_attempt, external_fact
from kvdoctor.diagnosis.report import Report
from kvdoctor.diagnosis.rules import Rule, rules_for
from kvdoctor.reader.attempts import START_KINDS, card_key
from kvdoctor.reader.facts import Facts
from kvdoctor.reader.lines import READ_ERROR, iter_sparse_lines, open_source
from kvdoctor.reader.pipeline import Analysis, analyse_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

Source = str | bytes | os.PathLike[str] | Iterable[str]


# the note a report carries when its input holds no vLLM start-up at all (the CLI exits 2 on it)
NO_STARTUP_NOTE = "no vLLM start-up lines found: is this the log of the vLLM server (stdout and stderr)?"

_PATH_LIKE = re.compile(r"^[\w.~/\\:-]+\.(?:log|txt|out|err|gz|jsonl?)$|^[\w.~-]*/[\w./~-]+$")


def _looks_like_a_path(text: str) -> bool:
    """One short token with no newline that reads as a file name ("vllm.log", "/var/log/x")."""
    return "\n" not in text and len(text) < 4096 and _PATH_LIKE.match(text.strip()) is not None


def _raw_lines(source: Source) -> tuple[str, Iterable[bytes | str | tuple[int, bytes]]]:
    """A Path (or "-" for stdin) is read as a file; str and bytes are the log itself. A str is
    never taken as a path: text from a user (HTTP, Slack) must not open server files."""
    if isinstance(source, os.PathLike) or source == "-":  # a Path, without importing pathlib
        return os.fspath(source), iter_sparse_lines(open_source(os.fspath(source)))
    if isinstance(source, bytes):
        from kvdoctor.reader.lines import _maybe_gunzip

        return "<bytes>", iter_sparse_lines(_maybe_gunzip(io.BytesIO(source)))
    if isinstance(source, str):
        if _looks_like_a_path(source):
            raise ValueError(
                f"diagnose({source!r}): a str is read as log text, and this one looks like a file name; "
                f"pass Path({source!r}) to read the file"
            )
        return "<text>", iter_sparse_lines(io.BytesIO(source.encode("utf-8", "replace")))
    return "<lines>", (line.rstrip("\n") for line in source)


def probe_facts(snapshot: Any, analysis: Analysis, *, live: bool) -> Facts:
    """gpu.* facts from a probe snapshot (issue 5), keyed to the failing attempt's PIDs.

    Whether the snapshot was taken after the failure: a live probe always is (the log was written
    before kvdoctor ran); nvidia-smi text in the log is when it comes after the failing line.
    vLLM's timestamps carry no year or time zone, so a saved snapshot's time is not compared."""
    if snapshot is None:
        return {}
    try:
        from kvdoctor.probe.facts import snapshot_facts
    except ImportError:
        return {}
    last = analysis.last if analysis.attempts else None
    pids = frozenset(r["pid"] for r in last.ranks if r.get("pid")) if last else frozenset()
    shown = (last.facts.get("cuda_visible_devices") or last.facts.get("docker_gpu_devices")) if last else None
    listed = [d.strip() for d in str(shown.value).split(",")] if shown is not None else []
    failing = last.facts.get("oom_gpu_index") if last else None
    index = int(failing.value) if failing is not None and isinstance(failing.value, int) else 0
    # the GPU the OOM names (cuda:N), through CUDA_VISIBLE_DEVICES to the host's index; else the first
    host = listed[index] if index < len(listed) else (listed[0] if listed else (str(index) if failing else ""))
    total = last.facts.get("total_gpu_gib") if last else None
    values = snapshot_facts(
        snapshot,
        vllm_pids=pids,
        visible_index=int(host) if host.isdigit() else None,
        card_total_gib=float(total.value) if total is not None and isinstance(total.value, (int, float)) else None,
    )
    launch = min((e.line for e in last.events if e.kind in START_KINDS), default=None) if last else None
    if (
        not live
        and launch is not None
        and analysis.smi_lines
        and analysis.smi_lines[-1] < launch
        and not values.get("gpu.other_process_count")
        and float(values.get("gpu.used_gib") or 0.0) >= 1.0  # type: ignore[arg-type]
    ):
        # nvidia-smi run before this launch ("$ nvidia-smi --query-gpu=…", then "$ vllm serve …"),
        # no process listed: what the device had in use then was other programs' memory
        values["gpu.other_process_gib"] = round(float(values["gpu.used_gib"]), 2)  # type: ignore[arg-type]
        values["gpu.taken_before_start"] = True
    mismatch = _order_mismatch(snapshot, listed, last.facts.get("oom_total_gib") if last else None)
    if mismatch is not None:
        values["gpu.order_mismatch"] = mismatch
    idle = values.get("gpu.idle_indices")
    if isinstance(idle, list) and last is not None and values.get("gpu.other_process_count"):
        # as many idle GPUs as the layout needs (those the launch already named first): pin there
        size = _int_fact(last.facts, "tensor_parallel_size") * _int_fact(last.facts, "pipeline_parallel_size")
        size *= _int_fact(last.facts, "data_parallel_size")  # (every data-parallel engine its own GPUs)
        if len(idle) >= size:
            chosen = sorted(idle, key=lambda i: (str(i) not in listed, i))[:size]
            values["gpu.pin_devices"] = ",".join(str(i) for i in sorted(chosen))
    failed_at = _failure_line(last)
    if failed_at is not None and "gpu.taken_after_failure" not in values:
        if live:
            values["gpu.taken_after_failure"] = True
        elif analysis.smi_lines:
            values["gpu.taken_after_failure"] = analysis.smi_lines[0] > failed_at
    return {name: external_fact(name, value, "probe") for name, value in values.items()}


def log_probe_facts(analysis: Analysis) -> Facts:
    """The gpu.* facts of the nvidia-smi listing a log holds, as `diagnose` adds them."""
    return probe_facts(analysis.smi_snapshot, analysis, live=False)


def other_card(snapshot: Any, attempt: Any) -> str | None:
    """The snapshot is of another machine than the log: the log names its card (the total memory
    vLLM printed, or the GPU's name) and no GPU of the snapshot is that card. A probe taken where
    kvdoctor runs, not where the server failed, would put that machine's memory and processes in
    the diagnosis ("60 GiB held" on a 24 GiB card)."""
    devices = [d for d in snapshot.visible_devices() if d.total_gib] if snapshot.available else []
    if attempt is None or not devices:
        return None
    shown = ", ".join(sorted({f"{d.name} ({d.total_gib:.2f} GiB)" for d in devices}))
    for name in ("total_gpu_gib", "oom_total_gib"):
        fact = attempt.facts.get(name)
        total = getattr(fact, "value", None)
        if fact is not None and fact.line is not None and isinstance(total, (int, float)) and total > 0:
            # (vLLM's total is the device's, to a few per cent: the driver's reserve, GB or GiB)
            if any(abs(d.total_gib - total) <= 0.06 * d.total_gib for d in devices):
                return None
            return f"{shown}, not the {total:.2f} GiB card this log ran on"
    named = attempt.facts.get("gpu_name")
    if named is None or named.line is None or not all(d.name and d.name != "unknown" for d in devices):
        return None
    key = card_key(str(named.value))
    if not key or any(key in card_key(d.name) or card_key(d.name) in key for d in devices):
        return None
    return f"{shown}, not the {named.value} this log ran on"


def _order_mismatch(snapshot: Any, listed: list[str], oom_total: Any) -> str | None:
    """The OOM names a card of another size than every GPU CUDA_VISIBLE_DEVICES lists, and the
    host has one of that size outside the list: CUDA numbers the GPUs fastest first, nvidia-smi by
    PCI bus, so the launch's indices picked another card (CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
    total = getattr(oom_total, "value", None)
    if not isinstance(total, (int, float)) or not listed or not all(i.isdigit() for i in listed):
        return None
    devices = [d for d in getattr(snapshot, "devices", ()) if d.total_gib]
    named = [d for d in devices if str(d.index) in listed]
    others = [d for d in devices if str(d.index) not in listed and abs(d.total_gib - total) <= 0.06 * d.total_gib]
    if len(named) != len(listed) or not others or any(abs(d.total_gib - total) <= 0.15 * d.total_gib for d in named):
        return None
    card = others[0]
    return f"GPU {card.index} ({card.name})" if card.name and card.name != "unknown" else f"GPU {card.index}"


def _int_fact(facts: Facts, name: str) -> int:
    fact = facts.get(name)
    return int(fact.value) if fact is not None and isinstance(fact.value, int) and fact.value > 0 else 1


def _failure_line(attempt: Any) -> int | None:
    if attempt is None or not attempt.facts.get("failed") or not attempt.facts["failed"].value:
        return None
    lines = [f.line for n, f in attempt.facts.items() if n.startswith("seen.") and f.line is not None]
    return min(lines) if lines else int(attempt.end_line)


# (figure printed by vLLM, the catalog's estimate of the same thing, what it is)
_ESTIMATED = (
    ("weights_gib", "weights_gib_estimate", "weights per GPU"),
    ("kv_cache_tokens", "kv_tokens_estimate", "KV cache tokens"),
)


def _estimate_notes(facts: dict[str, Any]) -> list[str]:
    """The log wins over the arithmetic; say so when they disagree by more than 10%."""
    notes = []
    for logged, estimated, what in _ESTIMATED:
        a, b = facts.get(logged), facts.get(estimated)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and abs(a - b) / a > 0.10:
            notes.append(
                f"{what}: the log says {a:g}, the catalog estimate for {facts.get('model_catalog_id', 'the model')} "
                f"is {b:g}; the log's figure is used"
            )
    return notes


def _probe_notes(report_facts: dict[str, Any], diagnoses: tuple[Any, ...], live: bool) -> list[str]:
    """Say whether the probe confirms the verdict, and when it was taken."""
    if "gpu.status" not in report_facts:
        return []
    where = "the live GPU probe" if live else "the GPU snapshot"
    taken = report_facts.get("gpu.taken_at")
    notes = []
    if report_facts.get("gpu.status") != "ok" and str(report_facts.get("gpu.status", "")).startswith("unavailable"):
        reason = str(report_facts["gpu.status"]).removeprefix("unavailable:").strip()
        return [f"{where} is unavailable ({reason}); the diagnosis uses the log only"]
    held = report_facts.get("gpu.other_process_gib")
    pids = report_facts.get("gpu.other_pids") or []
    top = diagnoses[0] if diagnoses else None
    claims_other = top is not None and (
        top.cause == "other_process" or top.klass == "insufficient_free_memory_at_startup"
    )
    if held is not None and top is not None:
        if held >= 1.0:
            state = "confirms" if claims_other else "adds to"
            notes.append(f"{where} {state} the diagnosis: {len(pids)} other process(es) {pids} hold {held:.1f} GiB")
        elif claims_other and (report_facts.get("gpu.used_gib") or 0.0) >= 1.0:
            # (no process named, the device's memory in use all the same: a per-GPU query, MIG, or
            # a container whose processes the driver does not list)
            used = report_facts["gpu.used_gib"]
            notes.append(f"{where} names no process, but shows {used:.1f} GiB in use on the device")
        elif claims_other:
            notes.append(f"{where} contradicts the diagnosis: no other process holds memory now")
    if taken:
        notes.append(f"{where} was taken at {taken}")
    if report_facts.get("gpu.taken_after_failure"):
        notes.append(f"{where} was taken after the failure: memory held then may already be released")
    return notes


def diagnose(
    source: Source,
    *,
    rules: Sequence[Rule] | None = None,
    probe: Any = None,
    lang: str = "en",
    name: str | None = None,
    rule_dirs: Sequence[str] = (),
) -> Report:
    """Read a log (path, bytes, text or lines) and diagnose each start-up attempt in it."""
    label, raw = _raw_lines(source)
    analysis = analyse_lines(name or label, raw)
    return report_for(analysis, rules=rules, probe=probe, lang=lang, rule_dirs=rule_dirs)


def diagnose_file(path: str, *, rules: Sequence[Rule] | None = None, probe: Any = None, lang: str = "en") -> Report:
    """`diagnose(Path(path))` for a path as typed ("-" for stdin): the CLI's way in, which needs
    no pathlib on its cold path."""
    analysis = analyse_lines(path, iter_sparse_lines(open_source(path)))
    return report_for(analysis, rules=rules, probe=probe, lang=lang)


def report_for(
    analysis: Analysis,
    *,
    rules: Sequence[Rule] | None = None,
    probe: Any = None,
    lang: str = "en",
    rule_dirs: Sequence[str] = (),
) -> Report:
    active = list(rules) if rules is not None else rules_for(rule_dirs)
    snapshot = probe if probe is not None else analysis.smi_snapshot
    live = probe is not None and getattr(getattr(probe, "source", None), "value", "") == "nvml"
    elsewhere = other_card(probe, analysis.last) if probe is not None and analysis.attempts else None
    extra = probe_facts(snapshot, analysis, live=live) if elsewhere is None else {}
    attempts = tuple(
        evaluate_attempt(a, active, lang, extra if a is analysis.last else None) for a in analysis.attempts
    )
    notes = list(analysis.notes)
    probe_record = None
    if snapshot is not None:
        probe_record = {
            "origin": "probe" if probe is not None else "log",
            "facts": {k: f.value for k, f in extra.items()},
        }
        if elsewhere is not None:
            probe_record["ignored"] = elsewhere
            where = "the live GPU probe" if live else "the GPU snapshot"
            notes.append(
                f"{where} shows {elsewhere}: its figures are left out; "
                "probe the machine that failed (`kvdoctor probe --format json` there, then --probe-file)"
            )
        if analysis.smi_lines and probe is None:
            notes.append(
                f"nvidia-smi output found in the log (line {analysis.smi_lines[0]}); its figures are used as gpu.* facts"  # noqa: E501
            )
    report = Report(analysis.source, attempts, (), lang, probe_record)
    primary = report.primary
    if primary is not None and primary.verdict == "healthy":
        # a relaunch that started: the failure before it is what the reader came with
        failed = [a for a in attempts if a.index < primary.index and a.verdict not in ("healthy", "unknown")]
        if failed:
            last = failed[-1]
            notes.append(
                f"an earlier start-up in this log (lines {last.start_line}-{last.end_line}) failed "
                f"({last.verdict}); a later one started"
            )
    if report.primary is not None and report.primary is not attempts[-1]:
        last = attempts[-1]
        notes.append(
            f"the last start-up (lines {last.start_line}-{last.end_line}) shows no outcome yet; "
            f"the verdict is that of the one before (lines {report.primary.start_line}-{report.primary.end_line})"
        )
    if attempts:
        notes.extend(_estimate_notes({k: v["value"] for k, v in attempts[-1].facts.items()}))
        notes.extend(
            _probe_notes(
                attempts[-1].facts and {k: v["value"] for k, v in attempts[-1].facts.items()},
                attempts[-1].diagnoses,
                live,
            )
        )
    # (a start-up the log cuts off mid-way is diagnosed as such: it is not the wrong log)
    if not any(a.events for a in analysis.attempts) or all(not a.diagnoses for a in attempts):
        notes.append(NO_STARTUP_NOTE)
    return Report(analysis.source, attempts, tuple(notes), lang, probe_record)


def input_problem(report: Report, path: str) -> str | None:
    """A one-line error when the input was not a vLLM log one can gate on: unreadable past some
    point, empty, or without any vLLM start-up line (the report is still printed)."""
    name = "stdin" if path == "-" else path
    for note in report.notes:
        if note.startswith(f"{report.source}: {READ_ERROR}"):
            return f"{name}: {note.split(': ', 1)[1]}; copy or download the file again"
    if NO_STARTUP_NOTE in report.notes:
        return (
            f"{name}: no vLLM start-up lines found; pass the vLLM server's own output "
            "(`vllm serve … 2>&1 | tee vllm.log`)"
        )
    return None
