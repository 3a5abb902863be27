"""The GPU snapshot: what every probe returns and what `kvdoctor probe --format json` writes.

A snapshot is plain data. It can come from NVML (live), from `nvidia-smi` text pasted into
a log or a ticket, or from a file written earlier; all three look the same to the rest of
kvdoctor. Memory is in GiB (2**30 bytes) as floats; ``None`` means "not reported".
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

SCHEMA_VERSION = 1
GIB = float(2**30)
MIB_PER_GIB = 1024.0


class ProbeError(Exception):
    """Bad probe input (a snapshot file, a CSV). The message is one line."""


class SnapshotSource(str, enum.Enum):
    NVML = "nvml"
    SMI_TABLE = "nvidia-smi"
    SMI_CSV = "nvidia-smi-csv"


class ProcessKind(str, enum.Enum):
    COMPUTE = "compute"
    GRAPHICS = "graphics"


class UnavailableReason(str, enum.Enum):
    """Why a probe returned nothing; docs/probe.md says what each means and what to do."""

    LIBRARY_MISSING = "library_missing"
    DRIVER_NOT_LOADED = "driver_not_loaded"
    DRIVER_MISMATCH = "driver_mismatch"
    NO_PERMISSION = "no_permission"
    NO_GPU = "no_gpu"
    NO_VISIBLE_GPU = "no_visible_gpu"
    NVML_ERROR = "nvml_error"


STATUS_OK = "ok"
STATUS_PARTIAL = "partial"
_STATUS_RE = re.compile(r"^(ok|partial|unavailable: [a-z_]+)$")


@dataclass(frozen=True)
class Device:
    """One physical GPU, or one MIG instance (``mig`` true, ``mig_index`` set)."""

    index: int  # NVML index of the physical GPU (nvidia-smi's "GPU" column)
    name: str
    uuid: str | None
    total_gib: float | None
    free_gib: float | None
    used_gib: float | None
    reserved_gib: float | None = None  # driver-reserved memory (NVML memory info v2 only)
    mig: bool = False
    uma: bool = False  # unified memory: the driver reports no framebuffer figures
    mig_index: int | None = None
    # The ordinal a CUDA process sees (cuda:N) under CUDA_VISIBLE_DEVICES; None when the
    # device is hidden from it or when the source cannot know (nvidia-smi ignores the variable).
    visible_index: int | None = None

    @property
    def label(self) -> str:
        mig = f" MIG {self.mig_index}" if self.mig_index is not None else ""
        return f"GPU {self.index}{mig}"


@dataclass(frozen=True)
class Process:
    pid: int
    name: str | None
    device_index: int | None  # NVML index of the device; None when the source does not say
    used_gib: float | None
    resolvable: bool = True  # False: the PID does not exist here (a host PID seen from a container)
    kind: ProcessKind = ProcessKind.COMPUTE
    mig_index: int | None = None


@dataclass(frozen=True)
class Snapshot:
    status: str  # "ok" | "partial" | "unavailable: <UnavailableReason>"
    taken_at: str | None  # ISO-8601 UTC ("...Z"); None when the source has no reliable clock
    source: SnapshotSource
    devices: tuple[Device, ...] = ()
    processes: tuple[Process, ...] = ()
    note: str = ""
    driver_version: str | None = None

    def __post_init__(self) -> None:
        if not _STATUS_RE.match(self.status):
            raise ValueError(f"bad snapshot status {self.status!r}")

    @classmethod
    def unavailable(
        cls,
        reason: UnavailableReason,
        note: str,
        *,
        source: SnapshotSource = SnapshotSource.NVML,
        taken_at: str | None = None,
    ) -> Snapshot:
        return cls(f"unavailable: {reason.value}", taken_at, source, note=note)

    @property
    def available(self) -> bool:
        return not self.status.startswith("unavailable")

    @property
    def reason(self) -> UnavailableReason | None:
        if not self.available:
            return UnavailableReason(self.status.split(": ", 1)[1])
        return None

    def visible_devices(self) -> tuple[Device, ...]:
        """Devices a CUDA process would see, in cuda:N order; all of them when unknown."""
        visible = [d for d in self.devices if d.visible_index is not None]
        if not visible:
            return self.devices
        return tuple(sorted(visible, key=lambda d: d.visible_index or 0))

    def processes_on(self, device: Device) -> tuple[Process, ...]:
        return tuple(
            p
            for p in self.processes
            if p.device_index == device.index and (device.mig_index is None or p.mig_index in (None, device.mig_index))
        )


class GpuProbe(Protocol):
    """Anything that can take a snapshot now (NVML, a file re-read on every call, a fake)."""

    def snapshot(self) -> Snapshot: ...


# ---- JSON edge -------------------------------------------------------------------------


def snapshot_to_dict(snap: Snapshot) -> dict[str, Any]:
    return {
        "probe_schema_version": SCHEMA_VERSION,
        "status": snap.status,
        "taken_at": snap.taken_at,
        "source": snap.source.value,
        "driver_version": snap.driver_version,
        "note": snap.note,
        "devices": [_device_dict(d) for d in snap.devices],
        "processes": [_process_dict(p) for p in snap.processes],
    }


def _gib(value: float | None) -> float | None:
    """GiB in JSON as everywhere else in kvdoctor: two decimals, never negative zero."""
    return None if value is None else round(value, 2) + 0.0


def _device_dict(d: Device) -> dict[str, Any]:
    return {
        "index": d.index,
        "name": d.name,
        "uuid": d.uuid,
        "total_gib": _gib(d.total_gib),
        "free_gib": _gib(d.free_gib),
        "used_gib": _gib(d.used_gib),
        "reserved_gib": _gib(d.reserved_gib),
        "mig": d.mig,
        "mig_index": d.mig_index,
        "uma": d.uma,
        "visible_index": d.visible_index,
    }


def _process_dict(p: Process) -> dict[str, Any]:
    return {
        "pid": p.pid,
        "name": p.name,
        "device_index": p.device_index,
        "mig_index": p.mig_index,
        "used_gib": _gib(p.used_gib),
        "resolvable": p.resolvable,
        "kind": p.kind.value,
    }


def snapshot_from_dict(data: Mapping[str, Any]) -> Snapshot:
    """Inverse of :func:`snapshot_to_dict`; raises ProbeError naming the bad field."""
    if data.get("probe_schema_version") != SCHEMA_VERSION:
        raise ProbeError(f"probe_schema_version is {data.get('probe_schema_version')!r}, expected {SCHEMA_VERSION}")
    try:
        return Snapshot(
            status=_get(data, "status", str),
            taken_at=_opt(data, "taken_at", str),
            source=SnapshotSource(_get(data, "source", str)),
            devices=tuple(_device(d) for d in _get(data, "devices", list)),
            processes=tuple(_process(p) for p in _get(data, "processes", list)),
            note=_opt(data, "note", str) or "",
            driver_version=_opt(data, "driver_version", str),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise ProbeError(str(exc)) from None


def _device(d: Mapping[str, Any]) -> Device:
    return Device(
        index=_get(d, "index", int),
        name=_get(d, "name", str),
        uuid=_opt(d, "uuid", str),
        total_gib=_num(d, "total_gib"),
        free_gib=_num(d, "free_gib"),
        used_gib=_num(d, "used_gib"),
        reserved_gib=_num(d, "reserved_gib"),
        mig=bool(_opt(d, "mig", bool)),
        uma=bool(_opt(d, "uma", bool)),
        mig_index=_opt(d, "mig_index", int),
        visible_index=_opt(d, "visible_index", int),
    )


def _process(p: Mapping[str, Any]) -> Process:
    resolvable = _opt(p, "resolvable", bool)
    return Process(
        pid=_get(p, "pid", int),
        name=_opt(p, "name", str),
        device_index=_opt(p, "device_index", int),
        used_gib=_num(p, "used_gib"),
        resolvable=True if resolvable is None else resolvable,
        kind=ProcessKind(_opt(p, "kind", str) or "compute"),
        mig_index=_opt(p, "mig_index", int),
    )


def _get(d: Mapping[str, Any], key: str, typ: type) -> Any:
    value = _opt(d, key, typ)
    if value is None:
        raise ValueError(f"field {key!r} is missing")
    return value


def _opt(d: Mapping[str, Any], key: str, typ: type) -> Any:
    if not isinstance(d, Mapping):
        raise ValueError(f"expected an object, got {type(d).__name__}")
    value = d.get(key)
    # bool is an int subclass: a true/false where a number belongs is still a mistake
    wrong = not isinstance(value, typ) or (typ is int and isinstance(value, bool))
    if value is not None and wrong:
        raise ValueError(f"field {key!r} should be {typ.__name__}, got {value!r}")
    return value


def _num(d: Mapping[str, Any], key: str) -> float | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"field {key!r} should be a number, got {value!r}")
    return float(value)
