"""bytes -> lines -> events -> attempts with facts: the reading half of the data flow."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from kvdoctor._record import field, record, replace
from kvdoctor.reader.attempts import START_KINDS, Attempt, attempt_facts, newest_first, split_attempts
from kvdoctor.reader.derive import derive
from kvdoctor.reader.events import Event, extract
from kvdoctor.reader.facts import Fact, Facts
from kvdoctor.reader.joiner import join_lines
from kvdoctor.reader.lines import Line, normalise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record
class AttemptResult:
    index: int
    start_line: int
    end_line: int
    facts: Facts
    events: tuple[Event, ...]
    ranks: tuple[dict[str, Any], ...]


@record
class Analysis:
    source: str
    attempts: tuple[AttemptResult, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    smi_lines: tuple[int, ...] = ()
    smi_snapshot: Any = None  # kvdoctor.probe.snapshot.Snapshot from nvidia-smi text in the log

    @property
    def last(self) -> AttemptResult:
        return self.attempts[-1]


class _LazySmi:
    """Creates the nvidia-smi reader at the first line that could belong to nvidia-smi output, so
    logs without it never import the probe package."""

    HINTS = ("NVIDIA-SMI", "MiB /", "MiB |", "memory.total", "memory.used", "used_memory", "Processes:")

    def __init__(self) -> None:
        self._reader: Any = None

    def feed(self, line: Line) -> None:
        if self._reader is None:
            if not any(h in line.text for h in self.HINTS):
                return
            try:
                from kvdoctor.probe.smi import SmiReader
            except ImportError:
                return
            self._reader = SmiReader()
        # (an indented table's borders read as a peeled "… | " prefix: the table is the raw line)
        raw = line.raw.lstrip()
        table = raw[:1] in ("|", "+") and line.origin.container is None and not line.text.startswith(("|", "+"))
        self._reader.feed(line.number, raw if table else line.text)

    def result(self) -> Any:
        return None if self._reader is None else self._reader.result()

    def lines(self) -> list[int]:
        return [] if self._reader is None else list(self._reader.lines())


def smi_reader() -> Any:
    return _LazySmi()


_ISO_LEAD = re.compile(r"^\[?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)")


class StampOrder:
    """Counts whether consecutive timestamps run forwards or backwards (newest-first pastes)."""

    def __init__(self) -> None:
        self.up = self.down = 0
        self._last: dict[str, str] = {}  # per clock: vLLM's local header vs a wrapper's ISO stamp

    def feed(self, line: Line) -> None:
        clock, stamp = "vllm", line.origin.stamp
        if stamp is None:
            # (the raw line, else what is left once a container's prefix is peeled: "vllm-1  | 2024-…")
            m = _ISO_LEAD.match(line.raw) or _ISO_LEAD.match(line.text)
            clock, stamp = "iso", (m.group(1) if m else None)
        if stamp is None:
            return
        last = self._last.get(clock)
        if last is not None:
            if stamp > last:
                self.up += 1
            elif stamp < last:
                self.down += 1
        self._last[clock] = stamp

    @property
    def newest_first(self) -> bool:
        return self.down >= 2 and self.down > 2 * self.up


def iter_events(lines: Iterable[Line], smi: Any = None, order: StampOrder | None = None) -> Iterator[Event]:
    for line in join_lines(lines):
        if smi is not None:
            smi.feed(line)
        if order is not None:
            order.feed(line)
        yield from extract(line)
    snapshot = smi.result() if smi is not None else None
    if snapshot is not None:  # a pasted nvidia-smi table or --query CSV, as one event at its first line
        first = smi.lines()[0] if smi.lines() else 0
        yield Event("nvidia_smi", first, "nvidia-smi output", _smi_fields(snapshot))


def _smi_fields(snapshot: Any) -> dict[str, Any]:
    devices = [
        {"index": d.index, "name": d.name, "total_gib": d.total_gib, "used_gib": d.used_gib, "free_gib": d.free_gib}
        for d in snapshot.devices
    ]
    processes = [
        {"pid": p.pid, "name": p.name, "device": p.device_index, "used_gib": p.used_gib} for p in snapshot.processes
    ]
    return {"devices": devices, "processes": processes}


def finish_attempt(attempt: Attempt) -> AttemptResult:
    facts = derive(attempt_facts(attempt))
    return AttemptResult(
        attempt.index,
        attempt.start_line,
        attempt.end_line,
        facts,
        tuple(attempt.events),
        tuple(attempt.ranks()),
    )


def _still_running(attempt: AttemptResult) -> bool:
    """A start-up that sized its KV cache (or reached serving), did not fail and was not shut
    down: its process still holds the memory when a later start-up in the same log begins."""
    facts = attempt.facts
    if facts.get("failed") and facts["failed"].value:
        return False
    if not any(e.kind in START_KINDS for e in attempt.events):
        return False  # quoted lines, not a start-up of its own
    if any(e.kind == "shutdown" for e in attempt.events):
        return False
    kv = [facts[n].value for n in ("kv_cache_gib", "gpu_blocks", "kv_cache_tokens") if n in facts]
    return bool((facts.get("started") and facts["started"].value) or any(v and v > 0 for v in kv))


_MACHINE_KINDS = ("gpu_name", "host_ram", "wrapper_little_free")
# (what a wrapper measured before it started vLLM holds for its own retries, which print no
# wrapper banner, not for a relaunch, which measures again)
_UNTIL_REMEASURED = {"wrapper_little_free": "wrapper_setting"}


def _same_machine(attempts: Iterable[Attempt]) -> Iterator[Attempt]:
    """A card named once (the reporter's "RTX 5080 16GB", `nvidia-smi -L`) is the card of every
    later start-up of the same log that names none of its own: one machine, tried again; so is the
    host's RAM `free` showed, and the little free memory a wrapper saw, for its own retries."""
    named: dict[str, list[Event]] = {}
    for attempt in attempts:
        lend: list[Event] = []
        for kind in _MACHINE_KINDS:
            own = [e for e in attempt.events if e.kind == kind]
            if own:
                named[kind] = own
            elif kind in _UNTIL_REMEASURED and any(e.kind == _UNTIL_REMEASURED[kind] for e in attempt.events):
                named.pop(kind, None)
            else:
                lend.extend(named.get(kind, ()))
        if lend:
            attempt.events[:0] = lend
            attempt.lent = len(lend)
        yield attempt


def _pids_of(attempt: AttemptResult) -> set[int]:
    """The processes a start-up shows: its prefixes' pids and the engine process it says it started."""
    pids = {e.origin.pid for e in attempt.events if e.origin.pid is not None}
    pids.update(e.fields["pid"] for e in attempt.events if e.kind == "engine_process")
    return pids


def _with_earlier_instances(attempts: tuple[AttemptResult, ...]) -> tuple[AttemptResult, ...]:
    out = []
    running: AttemptResult | None = None
    failed: AttemptResult | None = None
    earlier_pids: set[int] = set()
    for attempt in attempts:
        holders = attempt.facts.get("oom_other_pids")
        if holders is not None and isinstance(holders.value, list):
            mine = sorted(p for p in holders.value if p in earlier_pids)
            if mine:
                # the process that holds the memory is an earlier start-up's of this log (its engine
                # core, left running when only the front end was stopped): this server's own leftover
                fact = Fact("oom_holder_earlier_start", mine[0], holders.line, holders.text, True, "derived")
                attempt = replace(attempt, facts={**attempt.facts, "oom_holder_earlier_start": fact})
        earlier_pids |= _pids_of(attempt)
        if failed is not None:
            # (a relaunch after a failed start-up: the failure may be what the reader came with)
            fact = Fact(
                "earlier_attempt_failed",
                True,
                failed.start_line,
                f"an earlier start-up in this log (lines {failed.start_line}-{failed.end_line}) failed",
                True,
                "derived",
            )
            attempt = replace(attempt, facts={**attempt.facts, "earlier_attempt_failed": fact})
        if (
            any(e.kind in START_KINDS for e in attempt.events)
            and attempt.facts.get("failed")
            and attempt.facts["failed"].value
        ):
            failed = attempt
        if running is not None:
            fact = Fact(
                "earlier_instance_running",
                True,
                running.start_line,
                f"an earlier start-up in this log (lines {running.start_line}-{running.end_line}) was still running",
                True,
                "derived",
            )
            attempt = replace(attempt, facts={**attempt.facts, "earlier_instance_running": fact})
            held = running.facts.get("weights_gib")
            if held is not None and isinstance(held.value, (int, float)):
                # (what that still-running engine loaded: the weights it holds, at the least)
                fact = Fact("earlier_weights_gib", held.value, held.line, held.text, True, "derived")
                attempt = replace(attempt, facts={**attempt.facts, "earlier_weights_gib": fact})
        if _still_running(attempt):
            running = attempt
        out.append(attempt)
    return tuple(out)


def analyse_events(
    source: str,
    events: list[Event],
    notes: list[str] | None = None,
    smi: Any = None,
    order: StampOrder | None = None,
) -> Analysis:
    notes = list(notes or [])
    if order.newest_first if order is not None else newest_first(events):
        events = list(reversed(events))
        notes.append("the log is in newest-first order (timestamps run backwards); read it oldest-first")
    attempts = _with_earlier_instances(tuple(finish_attempt(a) for a in _same_machine(split_attempts(events))))
    snapshot = smi.result() if smi is not None else None
    smi_lines = tuple(smi.lines()) if smi is not None and snapshot is not None else ()
    return Analysis(source, attempts, tuple(notes), smi_lines, snapshot)


def analyse_lines(source: str, raw_lines: Iterable[bytes | str | tuple[int, bytes]]) -> Analysis:
    smi = smi_reader()
    order = StampOrder()
    notes: list[str] = []
    events: list[Event] = []
    try:
        for event in iter_events(normalise(raw_lines), smi, order):
            events.append(event)
    except Exception as exc:  # InputError from a truncated gzip etc.: keep what was read
        from kvdoctor.reader.lines import InputError

        if not isinstance(exc, InputError):
            raise
        notes.append(f"{source}: {exc}")
    return analyse_events(source, events, notes, smi, order)
