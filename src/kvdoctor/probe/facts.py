"""A snapshot as flat ``gpu.*`` facts for the rules (see docs/probe.md for each name).

Facts whose value is unknown are left out rather than set to None, so a rule can ask
``exists(gpu.other_process_gib)``.
"""

from __future__ import annotations

import datetime as _dt

from kvdoctor.probe.snapshot import Device, Process, Snapshot


def snapshot_facts(
    snapshot: Snapshot,
    *,
    vllm_pids: frozenset[int] = frozenset(),
    failure_time: str | None = None,
    visible_index: int | None = None,
    card_total_gib: float | None = None,
) -> dict[str, object]:
    facts: dict[str, object] = {"gpu.status": snapshot.status}
    if snapshot.taken_at is not None:
        facts["gpu.taken_at"] = snapshot.taken_at
    after = taken_after(snapshot.taken_at, failure_time)
    if after is not None:
        facts["gpu.taken_after_failure"] = after
    if not snapshot.available:
        return facts
    facts["gpu.count"] = len(snapshot.visible_devices())
    if vllm_pids:
        facts["gpu.vllm_pid_present"] = any(p.pid in vllm_pids for p in snapshot.processes)
    device = target_device(snapshot, vllm_pids, visible_index)
    if device is not None:
        facts.update(_device_facts(device))
        # the host's other GPUs that hold nothing (a query of every GPU, a full table): where a
        # co-tenant holds the one vLLM used, these are where it could run instead
        idle = [
            d.index
            for d in snapshot.devices
            if d.index != device.index and d.used_gib is not None and d.used_gib < 0.5 and not snapshot.processes_on(d)
        ]
        if idle:
            facts["gpu.idle_indices"] = idle
    listed = [p for p in _processes_of(snapshot, device) if p.pid not in vllm_pids]
    # (a vLLM-named process beside processes of other programs is this server; alone, it may be
    # a stale one an earlier start-up left, which holds memory as any other tenant does)
    others = (
        [p for p in listed if not _vllm_named(p)] if not vllm_pids and not all(map(_vllm_named, listed)) else listed
    )
    facts["gpu.other_process_count"] = len(others)
    facts["gpu.other_pids"] = sorted({p.pid for p in others})
    if others and all(map(_vllm_named, others)):
        # (what holds the card is another vLLM engine: a sibling of this deployment, or an earlier
        # server; stopping it may stop the service this one belongs to)
        facts["gpu.other_is_vllm"] = True
    known = [p.used_gib for p in others if p.used_gib is not None]
    if known or not others:
        held = sum(known)
        # (a list that names no GPU, `--query-compute-apps` without the index, whose processes
        # together hold more than the card the log names: they sit on several GPUs, one each, and
        # the card this server used holds the largest of them, not their sum)
        if card_total_gib and held > card_total_gib and len(known) > 1 and all(p.device_index is None for p in others):
            held = max(known)
        facts["gpu.other_process_gib"] = round(held, 2)
    return facts


def target_device(
    snapshot: Snapshot, vllm_pids: frozenset[int] = frozenset(), visible_index: int | None = None
) -> Device | None:
    """The device vLLM used: one holding a vLLM PID, else the host GPU the launch's
    CUDA_VISIBLE_DEVICES (or `docker --gpus device=N`) puts first, else cuda:0 when the visible
    order is known, else the most-used device (nvidia-smi text does not say what vLLM saw)."""
    visible = snapshot.visible_devices()
    for device in visible:
        if any(p.pid in vllm_pids for p in snapshot.processes_on(device)):
            return device
    if not visible:
        return None
    named = [d for d in visible if visible_index is not None and d.index == visible_index]
    if named:
        return named[0]
    if any(d.visible_index is not None for d in visible):
        return visible[0]
    return max(visible, key=lambda d: d.used_gib or 0.0)


def _device_facts(device: Device) -> dict[str, object]:
    facts: dict[str, object] = {
        "gpu.device_index": device.index,
        "gpu.mig": device.mig,
        "gpu.uma": device.uma,
    }
    if device.name and device.name != "unknown":  # (a CSV query without the name column)
        facts["gpu.name"] = device.name
    for name, value in (
        ("gpu.total_gib", device.total_gib),
        ("gpu.free_gib", device.free_gib),
        ("gpu.used_gib", device.used_gib),
    ):
        if value is not None:
            facts[name] = round(value, 2)
    if device.total_gib and device.free_gib is not None:
        facts["gpu.free_fraction"] = round(device.free_gib / device.total_gib, 3)
    return facts


def _processes_of(snapshot: Snapshot, device: Device | None) -> list[Process]:
    # A `--query-compute-apps=pid,used_memory` CSV names no device; such processes count
    # against the device vLLM used, since that is the question the guide asks of them.
    unknown = [p for p in snapshot.processes if p.device_index is None]
    if device is None:
        # (a table whose device rows did not parse: its processes all on one index are that device's)
        indices = {p.device_index for p in snapshot.processes if p.device_index is not None}
        if len(indices) == 1:
            return [p for p in snapshot.processes if p.device_index is not None] + unknown
        return unknown
    return list(snapshot.processes_on(device)) + _on_device(unknown, device, len(snapshot.visible_devices()))


def _on_device(unknown: list[Process], device: Device, devices: int) -> list[Process]:
    """Processes a CSV lists without a device index (by bus id, or none) on a host of several
    GPUs: where together they hold more than the device uses, the few whose sum is the device's
    used memory (to half a GiB) are its own; otherwise all of them, as the guide's question asks."""
    sized = [p for p in unknown if p.used_gib is not None]
    used = device.used_gib
    if devices <= 1 or used is None or len(sized) != len(unknown) or not 1 < len(sized) <= 10:
        return unknown
    if sum(p.used_gib or 0.0 for p in sized) <= used + 0.5:
        return unknown
    best: tuple[float, list[Process]] | None = None
    for mask in range(1, 1 << len(sized)):
        pick = [p for i, p in enumerate(sized) if mask >> i & 1]
        gap = abs(sum(p.used_gib or 0.0 for p in pick) - used)
        if gap <= 0.5 and (best is None or gap < best[0]):
            best = (gap, pick)
    return best[1] if best is not None else unknown


def _vllm_named(process: Process) -> bool:
    """A process the table names as vLLM's (`vllm serve`, `VLLM::EngineCore`, a Ray worker wrapper)."""
    name = (process.name or "").lower()
    return any(w in name for w in ("vllm", "enginecore", "rayworkerwrapper"))


def taken_after(taken_at: str | None, failure_time: str | None) -> bool | None:
    """True when the snapshot was taken after the failure; None when either time is unknown
    or one of them has no time zone (comparing them would be a guess)."""
    if taken_at is None or failure_time is None:
        return None
    try:
        snap, fail = _parse(taken_at), _parse(failure_time)
    except ValueError:
        return None
    if (snap.tzinfo is None) != (fail.tzinfo is None):
        return None
    return snap > fail


def _parse(text: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
