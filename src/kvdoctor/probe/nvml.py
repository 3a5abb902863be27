"""Live snapshot through NVML (package ``nvidia-ml-py``, module ``pynvml``; the ``gpu`` extra).

The module is imported lazily through an injectable loader, so kvdoctor works without it and
tests drive a fake. Every NVML call that a driver may refuse (NotSupported, NoPermission, a
function the old driver lacks) degrades to "not reported" plus a note, never an exception.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvdoctor.probe.snapshot import (
    GIB,
    STATUS_OK,
    STATUS_PARTIAL,
    Device,
    Process,
    ProcessKind,
    Snapshot,
    SnapshotSource,
    UnavailableReason,
)

# Newest first: _v3 exists from driver 510 on; older drivers only export _v2 or the
# unsuffixed v1 symbol (pynvml raises FunctionNotFound / NVMLLibraryMismatchError for those).
_COMPUTE_FNS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)
_GRAPHICS_FNS = (
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses",
)

_INIT_REASONS = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        UnavailableReason.LIBRARY_MISSING,
        "libnvidia-ml.so was not found: no NVIDIA driver on this machine or in this container",
    ),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        UnavailableReason.DRIVER_NOT_LOADED,
        "the NVIDIA kernel driver is not loaded",
    ),
    "NVML_ERROR_NO_PERMISSION": (
        UnavailableReason.NO_PERMISSION,
        "no permission to open the GPU device files",
    ),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        UnavailableReason.DRIVER_MISMATCH,
        "the NVML library and the kernel driver have different versions",
    ),
}


# (total, free, used, reserved) in GiB, each None when not reported
_Memory = tuple[float | None, float | None, float | None, float | None]


class _NotReported(Exception):
    """An NVML query the driver refused; the message says why."""


def load_pynvml() -> Any:
    return importlib.import_module("pynvml")


def proc_name(pid: int) -> str | None:
    """Name of a PID in this PID namespace, or None when it does not exist here."""
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return ""  # exists, but unreadable (another user's process on a hardened /proc)


def utc_now() -> str:
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class NvmlProbe:
    """A :class:`GpuProbe` reading NVML. ``visible_devices`` is CUDA_VISIBLE_DEVICES as read
    by the caller (core code never reads the environment)."""

    visible_devices: str | None = None
    # None: the module-level defaults below, looked up at call time
    load: Callable[[], Any] | None = None
    resolve_pid: Callable[[int], str | None] | None = None
    now: Callable[[], str] | None = None

    def snapshot(self) -> Snapshot:
        taken_at = (self.now or utc_now)()
        try:
            nvml = (self.load or load_pynvml)()
        except ImportError:
            return Snapshot.unavailable(
                UnavailableReason.LIBRARY_MISSING,
                "the Python package nvidia-ml-py is not installed",
                taken_at=taken_at,
            )
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError, OSError) as exc:
            reason, why = _init_failure(nvml, exc)
            return Snapshot.unavailable(reason, why, taken_at=taken_at)
        try:
            resolve = self.resolve_pid or proc_name
            return _read_all(nvml, resolve, self.visible_devices, taken_at)
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass  # nothing left to release


def _init_failure(nvml: Any, exc: BaseException) -> tuple[UnavailableReason, str]:
    code = getattr(exc, "value", None)
    for const, (reason, why) in _INIT_REASONS.items():
        if code is not None and code == getattr(nvml, const, object()):
            return reason, why
    return UnavailableReason.NVML_ERROR, f"NVML failed to initialise: {exc}"


@dataclass
class _Collected:
    devices: list[Device] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _read_all(nvml: Any, resolve: Callable[[int], str | None], visible: str | None, taken_at: str) -> Snapshot:
    driver = _text(_maybe(nvml, nvml.nvmlSystemGetDriverVersion))
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as exc:
        return Snapshot.unavailable(UnavailableReason.NVML_ERROR, f"device count: {exc}", taken_at=taken_at)
    if count == 0:
        return Snapshot.unavailable(
            UnavailableReason.NO_GPU, "the driver is loaded but reports no GPU", taken_at=taken_at
        )
    out = _Collected()
    for index in range(count):
        _read_gpu(nvml, index, out)
    devices, vis_notes = map_visible(out.devices, visible)
    processes, pid_notes = _resolve(out.processes, resolve)
    notes = out.notes + vis_notes + pid_notes
    status = STATUS_PARTIAL if out.notes else STATUS_OK
    if not any(d.visible_index is not None for d in devices):
        status = f"unavailable: {UnavailableReason.NO_VISIBLE_GPU.value}"
    return Snapshot(
        status,
        taken_at,
        SnapshotSource.NVML,
        tuple(devices),
        tuple(processes),
        "; ".join(notes),
        driver,
    )


def _read_gpu(nvml: Any, index: int, out: _Collected) -> None:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        out.notes.append(f"GPU {index}: not readable ({exc})")
        return
    if not _mig_enabled(nvml, handle):
        _read_device(nvml, handle, index, None, out)
        return
    migs = list(_mig_handles(nvml, handle))
    if not migs:  # MIG on but no instance created: the parent is all there is
        _read_device(nvml, handle, index, None, out, mig=True)
        out.notes.append(f"GPU {index}: MIG is enabled but no MIG instance exists")
    for mig_index, mig_handle in migs:
        # MIG instances answer memory and process queries only through their own handle
        _read_device(nvml, mig_handle, index, mig_index, out, mig=True)


def _mig_enabled(nvml: Any, handle: Any) -> bool:
    try:
        current = nvml.nvmlDeviceGetMigMode(handle)[0]
    except (nvml.NVMLError, AttributeError):
        return False  # pre-Ampere parts and old drivers: NotSupported
    return bool(current == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1))


def _mig_handles(nvml: Any, handle: Any) -> Iterable[tuple[int, Any]]:
    try:
        slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except nvml.NVMLError:
        return
    for slot in range(slots):
        try:
            yield slot, nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError:
            continue  # NotFound: an empty slot


def _read_device(
    nvml: Any,
    handle: Any,
    index: int,
    mig_index: int | None,
    out: _Collected,
    *,
    mig: bool = False,
) -> None:
    label = f"GPU {index}" + (f" MIG {mig_index}" if mig_index is not None else "")
    name = _text(_maybe(nvml, nvml.nvmlDeviceGetName, handle)) or "unknown"
    uuid = _text(_maybe(nvml, nvml.nvmlDeviceGetUUID, handle))
    memory: _Memory
    try:
        memory = _memory(nvml, handle)
        uma = _addressing_is_unified(nvml, handle)
    except _NotReported as exc:
        memory = (None, None, None, None)
        # Discrete GPUs always report framebuffer memory; a refusal means a unified-memory
        # part (GB10, Grace-Blackwell, Jetson) where the "GPU memory" is system memory.
        uma = True
        out.notes.append(f"{label}: memory not reported ({exc}); unified-memory part")
    out.devices.append(Device(index, name, uuid, *memory, mig=mig, uma=uma, mig_index=mig_index))
    try:
        out.processes.extend(_processes(nvml, handle, index, mig_index))
    except _NotReported as exc:
        out.notes.append(f"{label}: process list not reported ({exc})")


def _memory(nvml: Any, handle: Any) -> _Memory:
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            return (info.total / GIB, info.free / GIB, info.used / GIB, info.reserved / GIB)
        except (nvml.NVMLError, TypeError):
            pass  # driver < 510 lacks nvmlDeviceGetMemoryInfo_v2: v1 below
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
    except nvml.NVMLError as exc:
        raise _NotReported(str(exc)) from None
    return (info.total / GIB, info.free / GIB, info.used / GIB, None)


def _addressing_is_unified(nvml: Any, handle: Any) -> bool:
    fn = getattr(nvml, "nvmlDeviceGetAddressingMode", None)
    if fn is None:
        return False
    try:
        mode = fn(handle)
    except nvml.NVMLError:
        return False
    return bool(mode == getattr(nvml, "NVML_DEVICE_ADDRESSING_MODE_ATS", 2))


def _processes(nvml: Any, handle: Any, index: int, mig_index: int | None) -> list[Process]:
    found: dict[int, Process] = {}
    for kind, names in ((ProcessKind.GRAPHICS, _GRAPHICS_FNS), (ProcessKind.COMPUTE, _COMPUTE_FNS)):
        for info in _first_working(nvml, names, handle):
            used = info.usedGpuMemory
            gib = None if used is None else used / GIB
            prior = found.get(info.pid)
            if prior is not None and prior.used_gib is not None:
                gib = prior.used_gib if gib is None else max(gib, prior.used_gib)
            # compute replaces graphics: a process with both contexts counts as compute
            found[info.pid] = Process(info.pid, None, index, gib, True, kind, mig_index)
    return list(found.values())


def _first_working(nvml: Any, names: tuple[str, ...], handle: Any) -> list[Any]:
    mismatch = getattr(nvml, "NVMLLibraryMismatchError", ())
    not_found = getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", object())
    for name in names:
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            return list(fn(handle))
        except mismatch:
            continue
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == not_found:
                continue
            raise _NotReported(str(exc)) from None
    raise _NotReported("no process query this driver supports")


def _resolve(processes: list[Process], resolve: Callable[[int], str | None]) -> tuple[list[Process], list[str]]:
    out = []
    for proc in processes:
        name = resolve(proc.pid)
        out.append(replace(proc, name=name or None, resolvable=name is not None))
    missing = sorted({p.pid for p in out if not p.resolvable})
    notes = []
    if missing:
        notes.append(
            f"PID {', '.join(map(str, missing))} not found here: NVML reports host PIDs, "
            "so kvdoctor is probably running in a container"
        )
    return out, notes


def map_visible(devices: list[Device], visible: str | None) -> tuple[list[Device], list[str]]:
    """Number devices as CUDA would under ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs)."""
    if visible is None:
        return [replace(d, visible_index=i) for i, d in enumerate(devices)], []
    chosen: list[int] = []  # positions in ``devices``
    for entry in (e.strip() for e in visible.split(",")):
        pos = _match_entry(devices, entry)
        if pos is None:
            break  # CUDA ignores everything from the first entry it cannot match
        if pos not in chosen:
            chosen.append(pos)
    order = {pos: n for n, pos in enumerate(chosen)}
    mapped = [replace(d, visible_index=order.get(i)) for i, d in enumerate(devices)]
    return mapped, _order_note(devices, visible)


def _match_entry(devices: list[Device], entry: str) -> int | None:
    if entry.isdigit():
        wanted = int(entry)
        for pos, dev in enumerate(devices):
            if dev.index == wanted and dev.mig_index in (None, 0):
                return pos
        return None
    if entry.startswith(("GPU-", "MIG-")):
        hits = [pos for pos, d in enumerate(devices) if d.uuid and d.uuid.startswith(entry)]
        return hits[0] if len(hits) == 1 else None  # CUDA accepts a unique UUID prefix
    return None


def _order_note(devices: list[Device], visible: str) -> list[str]:
    names = {d.name for d in devices}
    uses_indices = any(e.strip().isdigit() for e in visible.split(","))
    if uses_indices and len(names) > 1:
        return [
            "CUDA_VISIBLE_DEVICES uses indices on a machine with mixed GPU models: CUDA counts "
            "fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so the mapping may differ"
        ]
    return []


def _maybe(nvml: Any, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
