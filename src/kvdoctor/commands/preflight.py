"""`kvdoctor preflight`: are the GPUs free enough for the intended --gpu-memory-utilization?

vLLM takes the fraction of TOTAL memory and refuses to start ("Free memory on device … on
startup is less than desired GPU memory utilization") or plans a budget that is not there
when someone else holds memory. So: every visible GPU needs free >= util × total.

:func:`check_ready` and :func:`wait_until_ready` are the core (no I/O of their own);
``kvdoctor run --preflight`` calls them too. ``run`` below is the thin command adapter.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvdoctor.commands.probe import what_to_do
from kvdoctor.exitcodes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from kvdoctor.live.fixcmd import DEFAULT_UTILIZATION
from kvdoctor.memory.startup_check import fraction_free
from kvdoctor.probe import FileProbe, GpuProbe, NvmlProbe, ProbeError, snapshot_to_dict
from kvdoctor.probe.snapshot import Device, Process, Snapshot


class Readiness(str, enum.Enum):
    READY = "ready"
    NOT_READY = "not_ready"
    UNAVAILABLE = "unavailable"


_EXIT = {
    Readiness.READY: EXIT_OK,
    Readiness.NOT_READY: EXIT_FINDING,
    Readiness.UNAVAILABLE: EXIT_USAGE,
}


@dataclass(frozen=True)
class DeviceCheck:
    device: Device
    need_gib: float  # util × total: what vLLM will ask for on this device
    free_gib: float
    holders: tuple[Process, ...]  # processes holding memory on it, largest first

    @property
    def ok(self) -> bool:
        return self.free_gib >= self.need_gib

    @property
    def margin_gib(self) -> float:
        return self.free_gib - self.need_gib


@dataclass(frozen=True)
class PreflightResult:
    readiness: Readiness
    util: float
    checks: tuple[DeviceCheck, ...]
    max_util_now: float | None  # the largest fraction every visible GPU can give right now
    reason: str  # one line
    snapshot: Snapshot
    required_gib: float | None = None

    @property
    def exit_code(self) -> int:
        return _EXIT[self.readiness]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ready": self.readiness is Readiness.READY,
            "readiness": self.readiness.value,
            "gpu_memory_utilization": self.util,
            "required_gib": self.required_gib,
            "max_gpu_memory_utilization_now": self.max_util_now,
            "reason": self.reason,
            "devices": [_check_dict(c) for c in self.checks],
            "snapshot": snapshot_to_dict(self.snapshot),
        }


def check_ready(snapshot: Snapshot, util: float, *, required_gib: float | None = None) -> PreflightResult:
    """Whether every visible GPU has ``free >= util × total`` (and, when ``required_gib`` is
    given, whether that budget holds the model)."""
    if not snapshot.available:
        return _unavailable(snapshot, util, snapshot.note or snapshot.status)
    devices = snapshot.visible_devices()
    blind = [d for d in devices if d.total_gib is None or d.free_gib is None]
    if not devices or blind:
        what = f"{blind[0].label} reports no memory figures" if blind else "no GPU in the snapshot"
        hint = " (unified memory: check system memory instead)" if blind and blind[0].uma else ""
        return _unavailable(snapshot, util, f"{what}{hint}; preflight cannot check it")
    checks = tuple(_check(snapshot, d, util) for d in devices)
    # vLLM's own CUDA context comes out of free memory before its check: leave it room
    max_now = min(fraction_free(c.free_gib, c.device.total_gib or 1.0) for c in checks)
    short = [c for c in checks if not c.ok]
    readiness, reason = _verdict(checks, short, util, required_gib, max_now)
    return PreflightResult(readiness, util, checks, max_now, reason, snapshot, required_gib)


def wait_until_ready(
    probe: GpuProbe,
    util: float,
    *,
    timeout_s: float,
    interval_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    required_gib: float | None = None,
    on_poll: Callable[[PreflightResult], None] | None = None,
) -> PreflightResult:
    """Probe until ready, unavailable, or ``timeout_s`` has passed; returns the last result."""
    deadline = clock() + timeout_s
    while True:
        result = check_ready(probe.snapshot(), util, required_gib=required_gib)
        if result.readiness is not Readiness.NOT_READY or clock() + interval_s > deadline:
            return result
        if on_poll is not None:
            on_poll(result)
        sleep(interval_s)


def _check(snapshot: Snapshot, device: Device, util: float) -> DeviceCheck:
    holders = sorted(snapshot.processes_on(device), key=lambda p: -(p.used_gib or 0.0))
    return DeviceCheck(device, util * (device.total_gib or 0.0), device.free_gib or 0.0, tuple(holders))


def _verdict(
    checks: tuple[DeviceCheck, ...],
    short: list[DeviceCheck],
    util: float,
    required_gib: float | None,
    max_now: float,
) -> tuple[Readiness, str]:
    if short:
        worst = min(short, key=lambda c: c.margin_gib)
        return Readiness.NOT_READY, (
            f"{worst.device.label} has {worst.free_gib:.2f} GiB free of "
            f"{worst.device.total_gib or 0:.2f} GiB but {util:.2f} needs {worst.need_gib:.2f} GiB"
            f"{_held_by(worst.holders)}; the largest fraction that fits now is {max_now:.2f}"
        )
    budget = min(c.need_gib for c in checks)
    if required_gib is not None and budget < required_gib:
        return Readiness.NOT_READY, (
            f"{util:.2f} × total gives {budget:.2f} GiB but the model needs {required_gib:.2f} GiB"
        )
    tight = min(checks, key=lambda c: c.margin_gib)
    return Readiness.READY, (
        f"{len(checks)} visible GPU(s) have {util:.2f} × total free; smallest margin "
        f"{tight.margin_gib:.2f} GiB on {tight.device.label}"
    )


def _held_by(holders: tuple[Process, ...]) -> str:
    if not holders:
        return " and no process is listed (held by a process in another container or freed late)"
    shown = ", ".join(_who(p) for p in holders[:3])
    more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
    return f"; held by {shown}{more}"


def _who(p: Process) -> str:
    mem = "?" if p.used_gib is None else f"{p.used_gib:.2f} GiB"
    name = p.name or ("not in this container" if not p.resolvable else "?")
    return f"pid {p.pid} ({name}) {mem}"


def _unavailable(snapshot: Snapshot, util: float, reason: str) -> PreflightResult:
    return PreflightResult(Readiness.UNAVAILABLE, util, (), None, reason, snapshot)


def _check_dict(c: DeviceCheck) -> dict[str, Any]:
    return {
        "index": c.device.index,
        "mig_index": c.device.mig_index,
        "name": c.device.name,
        "total_gib": c.device.total_gib,
        "free_gib": c.free_gib,
        "need_gib": round(c.need_gib, 3),
        "ok": c.ok,
        "holders": [{"pid": p.pid, "name": p.name, "used_gib": p.used_gib} for p in c.holders],
    }


# ---- command adapter ---------------------------------------------------------------------


def add_wait_arguments(
    parser: argparse.ArgumentParser, *, wait_default: float | None, wait_help: str, probe_file_help: str
) -> None:
    """--wait, --interval and --probe-file, shared with `kvdoctor run --preflight`."""
    parser.add_argument("--wait", type=float, default=wait_default, metavar="SECONDS", help=wait_help)
    parser.add_argument(
        "--interval", type=float, default=2.0, metavar="S", help="seconds between probes while waiting (default 2)"
    )
    parser.add_argument("--probe-file", metavar="F", help=probe_file_help)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=DEFAULT_UTILIZATION,
        metavar="U",
        help=f"the fraction you will pass to vllm serve (default {DEFAULT_UTILIZATION}, vLLM's, as `run --preflight`)",
    )
    add_wait_arguments(
        parser,
        wait_default=0.0,
        wait_help="keep probing until the GPUs are free, for up to SECONDS",
        probe_file_help="a saved snapshot (probe JSON or nvidia-smi text) instead of NVML",
    )
    parser.add_argument(
        "--devices",
        metavar="LIST",
        help="CUDA_VISIBLE_DEVICES of the server (default: this shell's)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--model", help="also check the budget holds this model (catalog name or config.json)")
    parser.add_argument("--max-model-len", type=int, help="with --model: the context length")
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)


class _Usage(Exception):
    """A one-line user error from the optional model arithmetic."""


def run(args: argparse.Namespace) -> int:
    util = args.gpu_memory_utilization
    if not 0.0 < util <= 1.0 or args.wait < 0 or args.interval <= 0:
        print(
            "kvdoctor: preflight: --gpu-memory-utilization must be in (0, 1], --wait >= 0 "
            "and --interval > 0; fix the value",
            file=sys.stderr,
        )
        return EXIT_USAGE
    probe = _probe(args)
    progress = None if args.format == "json" else _print_waiting
    try:
        required = _required_gib(args, probe) if args.model else None
        result = wait_until_ready(
            probe,
            util,
            timeout_s=args.wait,
            interval_s=args.interval,
            on_poll=progress,
            required_gib=required,
        )
    except (ProbeError, _Usage) as exc:
        print(f"kvdoctor: preflight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(result.as_dict(), indent=2))
    elif result.readiness is not Readiness.UNAVAILABLE:
        print(render_text(result))
    if result.readiness is Readiness.UNAVAILABLE:
        print(f"kvdoctor: preflight: {_unavailable_line(result)}", file=sys.stderr)
    return result.exit_code


def _unavailable_line(result: PreflightResult) -> str:
    reason = result.snapshot.reason
    if reason is None:  # the snapshot is fine but has no usable memory figures
        return f"{result.reason}; pass --probe-file with nvidia-smi output from that machine"
    return f"GPU unavailable, {reason.value}: {result.reason}; {what_to_do(reason.value)}"


def _probe(args: argparse.Namespace) -> GpuProbe:
    if args.probe_file:
        return FileProbe(Path(args.probe_file))
    devices = args.devices if args.devices is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    return NvmlProbe(devices)


def _required_gib(args: argparse.Namespace, probe: GpuProbe) -> float | None:
    """Memory the model needs inside the budget: weights, activations, non-torch memory and
    graphs as ``kvdoctor plan`` estimates them, plus the KV cache of one full-length sequence."""
    try:  # the arithmetic is another part of kvdoctor; preflight works without it
        catalog: Any = importlib.import_module("kvdoctor.memory.catalog")
        kvplan: Any = importlib.import_module("kvdoctor.memory.plan")
    except ImportError:
        raise _Usage("--model needs kvdoctor.memory.kvmath, which this install lacks; drop --model") from None
    devices = [d for d in probe.snapshot().visible_devices() if d.total_gib]
    if not devices:
        return None  # check_ready reports the missing GPU itself
    try:
        model = catalog.resolve_model(args.model)
    except catalog.CatalogError as exc:
        raise _Usage(f"--model: {exc}") from None
    if model is None:
        raise _Usage(f"unknown model {args.model!r}; see `kvdoctor plan --help` for the catalog")
    plan = kvplan.make_plan(
        kvplan.PlanRequest(
            model=model,
            total_gib=float(devices[0].total_gib or 0.0),
            utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            tensor_parallel_size=args.tensor_parallel_size,
        )
    )
    overhead = plan.budget.requested_gib - plan.budget.kv_cache_gib
    return float(overhead + plan.max_model_len * plan.kv_bytes_per_token / 2**30)


def _print_waiting(result: PreflightResult) -> None:
    print(f"waiting: {result.reason}", file=sys.stderr, flush=True)


def render_text(result: PreflightResult) -> str:
    snap = result.snapshot
    head = {
        Readiness.READY: "READY",
        Readiness.NOT_READY: "NOT READY",
        Readiness.UNAVAILABLE: "UNAVAILABLE",
    }[result.readiness]
    when = f", {snap.taken_at}" if snap.taken_at else ""
    lines = [f"preflight: {head} for --gpu-memory-utilization {result.util:.2f} (probe: {snap.source.value}{when})"]
    for c in result.checks:
        margin = abs(c.margin_gib)
        verdict = f"ok, margin {margin:.2f} GiB" if c.ok else f"short by {margin:.2f} GiB"
        lines.append(
            f"  {c.device.label} {c.device.name}: free {c.free_gib:.2f} of "
            f"{c.device.total_gib or 0:.2f} GiB, needs {c.need_gib:.2f} GiB: {verdict}"
        )
        lines.extend(f"    held by {_who(p)}" for p in c.holders if not c.ok)
    if result.readiness is Readiness.READY or (result.checks and all(c.ok for c in result.checks)):
        lines.append(f"  {result.reason}")  # ready; or free memory is there and the model does not fit
    elif result.max_util_now is not None:
        lines.append(f"largest --gpu-memory-utilization that fits now: {result.max_util_now:.2f}")
    return "\n".join(lines)
