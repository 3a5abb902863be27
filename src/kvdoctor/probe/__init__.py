"""GPU probe: who holds GPU memory right now, from NVML, pasted nvidia-smi, or a saved file.

Entry points for the rest of kvdoctor:

- :func:`live_probe` — NVML now; never raises, returns ``unavailable: <reason>`` instead.
- :func:`load_snapshot_file` — what ``kvdoctor probe --format json`` wrote, or saved
  nvidia-smi text; raises :class:`ProbeError` with a one-line message.
- :class:`FileProbe` — a :class:`GpuProbe` that re-reads a file on every call (for
  ``preflight --wait`` fed by another process).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvdoctor.probe.snapshot import (
    Device,
    GpuProbe,
    ProbeError,
    Process,
    ProcessKind,
    Snapshot,
    SnapshotSource,
    UnavailableReason,
    snapshot_from_dict,
    snapshot_to_dict,
)

if TYPE_CHECKING:
    from kvdoctor.probe.nvml import NvmlProbe
    from kvdoctor.probe.smi import SmiReader

# NVML and the nvidia-smi parser load on first use: the reader imports `kvdoctor.probe.smi` for a
# pasted nvidia-smi table, and a log without one (or a diagnosis without --probe) pays for neither
_LAZY = {"NvmlProbe": "kvdoctor.probe.nvml", "SmiReader": "kvdoctor.probe.smi"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Device",
    "FileProbe",
    "GpuProbe",
    "NvmlProbe",
    "Process",
    "ProbeError",
    "ProcessKind",
    "SmiReader",
    "Snapshot",
    "SnapshotSource",
    "UnavailableReason",
    "live_probe",
    "load_snapshot_file",
    "parse_snapshot_text",
    "snapshot_from_dict",
    "snapshot_to_dict",
]


def live_probe(visible_devices: str | None) -> Snapshot:
    """Snapshot through NVML; ``visible_devices`` is CUDA_VISIBLE_DEVICES as the caller read it."""
    from kvdoctor.probe.nvml import NvmlProbe

    return NvmlProbe(visible_devices).snapshot()


def parse_snapshot_text(text: str, *, where: str = "<text>") -> Snapshot:
    """A probe JSON document or nvidia-smi output (table or CSV) → Snapshot."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProbeError(
                f"{where}:{exc.lineno}: not valid JSON ({exc.msg}); write it with `kvdoctor probe --format json`"
            ) from None
        if not isinstance(data, dict):
            raise ProbeError(f"{where}: expected a JSON object; write it with `kvdoctor probe`")
        try:
            return snapshot_from_dict(data)
        except ProbeError as exc:
            raise ProbeError(f"{where}: {exc}; write it with `kvdoctor probe --format json`") from None
    from kvdoctor.probe.smi import parse_smi_text

    snap = parse_smi_text(text)
    if snap is None:
        raise ProbeError(
            f"{where}: neither a kvdoctor probe JSON nor nvidia-smi output; save "
            "`kvdoctor probe --format json` or `nvidia-smi` output into it"
        )
    return snap


def load_snapshot_file(path: str | Path) -> Snapshot:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read ({exc.strerror or exc}); check the path") from None
    return parse_snapshot_text(raw.decode("utf-8", errors="replace"), where=str(path))


@dataclass(frozen=True)
class FileProbe:
    """A :class:`GpuProbe` over a file another process keeps rewriting."""

    path: Path

    def snapshot(self) -> Snapshot:
        return load_snapshot_file(self.path)
