"""A stand-in for the ``pynvml`` module (nvidia-ml-py), driven by a scenario description.

It exposes the names kvdoctor.probe.nvml uses with pynvml's calling conventions and error
codes: ``NVMLError(value)``, ``NVML_ERROR_*``, memory info v1/v2 structures in bytes,
process objects with ``pid`` / ``usedGpuMemory`` (None when the driver cannot say), MIG
handles. A scenario removes functions to imitate old drivers, or makes them raise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

GIB = 2**30
MIB = 2**20

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_DEVICE_MIG_ENABLE = 1
NVML_DEVICE_ADDRESSING_MODE_ATS = 2
nvmlMemory_v2 = 0x02000028

_NAMES = {
    3: "Not Supported",
    4: "Insufficient Permissions",
    6: "Not Found",
    9: "Driver Not Loaded",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    18: "RM has detected an NVML/RM version mismatch.",
}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _NAMES.get(self.value, f"NVML Error with code {self.value}")


class NVMLLibraryMismatchError(Exception):
    pass


@dataclass
class FakeProc:
    pid: int
    used_mib: int | None  # None: the driver reports NVML_VALUE_NOT_AVAILABLE


@dataclass
class FakeGpu:
    name: str
    uuid: str
    total_mib: int
    used_mib: int = 0
    reserved_mib: int = 0
    compute: list[FakeProc] = field(default_factory=list)
    graphics: list[FakeProc] = field(default_factory=list)
    migs: list[FakeGpu] = field(default_factory=list)  # non-empty: MIG mode on
    memory_error: int | None = None  # e.g. NOT_SUPPORTED on unified-memory parts
    process_error: int | None = None  # e.g. NO_PERMISSION
    addressing_ats: bool = False


class FakeNvml:
    """Module-like object: pass ``lambda: fake`` as NvmlProbe(load=...)."""

    NVMLError = NVMLError
    NVMLLibraryMismatchError = NVMLLibraryMismatchError

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        init_error: int | None = None,
        driver: str = "550.54.15",
        missing: tuple[str, ...] = (),
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.driver = driver
        self.missing = set(missing)  # C symbols the "driver" lacks → FunctionNotFound
        self.initialised = False
        self.shutdowns = 0
        self.calls: list[str] = []
        for name, value in globals().items():
            if name.startswith(("NVML_", "nvmlMemory")):
                setattr(self, name, value)

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name.startswith("nvml") and callable(value):
            return object.__getattribute__(self, "_guard")(name, value)
        return value

    def _guard(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self.missing:
                raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
            if name not in ("nvmlInit",) and not self.initialised:
                raise NVMLError(NVML_ERROR_UNINITIALIZED)
            return fn(*args, **kwargs)

        return call

    # ---- library ----------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str:
        return handle.name

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        return handle.uuid

    # ---- memory -----------------------------------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu, version: int | None = None) -> Any:
        if version is not None and "nvmlDeviceGetMemoryInfo_v2" in self.missing:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        if handle.memory_error is not None:
            raise NVMLError(handle.memory_error)
        total, used, reserved = (
            handle.total_mib * MIB,
            handle.used_mib * MIB,
            handle.reserved_mib * MIB,
        )
        free = total - used - reserved
        if version is None:  # v1: "used" includes what the driver reserved
            return SimpleNamespace(total=total, free=free, used=used + reserved)
        return SimpleNamespace(version=version, total=total, reserved=reserved, free=free, used=used)

    def nvmlDeviceGetAddressingMode(self, handle: FakeGpu) -> int:
        return NVML_DEVICE_ADDRESSING_MODE_ATS if handle.addressing_ats else 0

    # ---- processes --------------------------------------------------------------------
    def _procs(self, handle: FakeGpu, procs: list[FakeProc]) -> list[Any]:
        if handle.process_error is not None:
            raise NVMLError(handle.process_error)
        return [
            SimpleNamespace(
                pid=p.pid,
                usedGpuMemory=None if p.used_mib is None else p.used_mib * MIB,
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
            for p in procs
        ]

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: FakeGpu) -> list[Any]:
        return self._procs(handle, handle.compute)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeGpu) -> list[Any]:
        return self._procs(handle, handle.compute)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[Any]:
        # pynvml's unversioned wrapper calls _v3 and turns FunctionNotFound into this
        if "nvmlDeviceGetComputeRunningProcesses_v3" in self.missing:
            raise NVMLLibraryMismatchError("Unversioned function called")
        return self._procs(handle, handle.compute)

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: FakeGpu) -> list[Any]:
        return self._procs(handle, handle.graphics)

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: FakeGpu) -> list[Any]:
        return self._procs(handle, handle.graphics)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeGpu) -> list[Any]:
        if "nvmlDeviceGetGraphicsRunningProcesses_v3" in self.missing:
            raise NVMLLibraryMismatchError("Unversioned function called")
        return self._procs(handle, handle.graphics)

    # ---- MIG --------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: FakeGpu) -> list[int]:
        if handle in [m for g in self.gpus for m in g.migs]:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not handle.migs and "A100" not in handle.name and "H100" not in handle.name:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # pre-Ampere / consumer parts
        mode = NVML_DEVICE_MIG_ENABLE if handle.migs else 0
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeGpu) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeGpu, index: int) -> FakeGpu:
        if index >= len(handle.migs):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return handle.migs[index]
