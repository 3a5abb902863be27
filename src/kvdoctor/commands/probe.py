"""`kvdoctor probe`: snapshot GPU memory and the processes holding it.

``--format json`` writes the file that ``--probe-file`` reads back. No NVML library, no
driver or no GPU: one line on stderr and exit 2 (with ``--format json`` the unavailable
snapshot still goes to stdout, so a script keeps a record of why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from kvdoctor.exitcodes import EXIT_OK, EXIT_USAGE
from kvdoctor.probe import NvmlProbe, ProbeError, Snapshot, load_snapshot_file, snapshot_to_dict
from kvdoctor.probe.snapshot import Device, Process

_WHAT_TO_DO = {
    "library_missing": "install the NVIDIA driver and nvidia-ml-py (pip install 'kvdoctor[gpu]')",
    "driver_not_loaded": "load the NVIDIA driver (nvidia-smi should work) and retry",
    "driver_mismatch": "reboot (or reload the driver) after the driver upgrade",
    "no_permission": "run as a user that can open /dev/nvidia*",
    "no_gpu": "run on a machine with an NVIDIA GPU",
    "no_visible_gpu": "check CUDA_VISIBLE_DEVICES (or --devices)",
    "nvml_error": "check that nvidia-smi works",
}


def what_to_do(reason: str) -> str:
    return _WHAT_TO_DO.get(reason, "see docs/probe.md")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--devices", metavar="LIST", help="CUDA_VISIBLE_DEVICES to map (default: this shell's)")
    parser.add_argument(
        "--probe-file",
        metavar="F",
        help="convert saved nvidia-smi text (or a probe JSON) instead of probing",
    )


def run(args: argparse.Namespace) -> int:
    try:
        snap = _snapshot(args)
    except ProbeError as exc:
        print(f"kvdoctor: probe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(snapshot_to_dict(snap), indent=2))
    elif snap.available:
        print(render_text(snap))
    if not snap.available:
        reason = snap.reason.value if snap.reason else snap.status
        print(
            f"kvdoctor: probe: GPU unavailable, {reason}: {snap.note}; {what_to_do(reason)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK


def _snapshot(args: argparse.Namespace) -> Snapshot:
    if args.probe_file:
        return load_snapshot_file(args.probe_file)
    devices = args.devices if args.devices is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    return NvmlProbe(devices).snapshot()


def render_text(snap: Snapshot) -> str:
    when = snap.taken_at or "time unknown"
    driver = f", driver {snap.driver_version}" if snap.driver_version else ""
    lines = [f"GPU probe ({snap.source.value}, {when}{driver}): {snap.status}"]
    for device in snap.devices:
        lines.append(_device_line(device))
        lines.extend(_process_line(p) for p in snap.processes_on(device))
    orphans = [p for p in snap.processes if p.device_index is None]
    if orphans:
        lines.append("processes on an unnamed device:")
        lines.extend(_process_line(p) for p in orphans)
    if snap.note:
        lines.append(f"note: {snap.note}")
    return "\n".join(lines)


def _device_line(d: Device) -> str:
    seen = f" [cuda:{d.visible_index}]" if d.visible_index is not None else ""
    if d.total_gib is None or d.free_gib is None:
        kind = "unified memory, no figures" if d.uma else "memory not reported"
        return f"{d.label}{seen} {d.name}: {kind}"
    used = "?" if d.used_gib is None else f"{d.used_gib:.2f}"
    share = d.free_gib / d.total_gib if d.total_gib else 0.0
    return (
        f"{d.label}{seen} {d.name}: total {d.total_gib:.2f} GiB, used {used} GiB, "
        f"free {d.free_gib:.2f} GiB ({share:.0%})"
    )


def _process_line(p: Process) -> str:
    mem = "memory n/a" if p.used_gib is None else f"{p.used_gib:.2f} GiB"
    name = p.name or ("(host PID, not in this container)" if not p.resolvable else "?")
    return f"  pid {p.pid:<8} {mem:>12}  {p.kind.value:<8} {name}"
