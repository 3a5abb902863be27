"""The NVML probe driven through a fake pynvml module, scenario by scenario."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_pynvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    FakeGpu,
    FakeNvml,
    FakeProc,
)

from kvdoctor.cli import main
from kvdoctor.probe import NvmlProbe, Snapshot, snapshot_from_dict, snapshot_to_dict
from kvdoctor.probe.facts import snapshot_facts
from kvdoctor.probe.nvml import map_visible
from kvdoctor.probe.snapshot import ProcessKind, UnavailableReason

H100 = "NVIDIA H100 80GB HBM3"
UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-99999999-8888-7777-6666-555555555555"
NOW = "2025-03-01T10:00:00Z"
NAMES = {4242: "python3", 777: "Xorg", 5150: "vllm"}


def _probe(fake: FakeNvml, visible: str | None = None, names: dict[int, str] | None = None) -> Snapshot:
    table = NAMES if names is None else names
    return NvmlProbe(visible, load=lambda: fake, resolve_pid=table.get, now=lambda: NOW).snapshot()


def _h100(used: int = 0, procs: list[FakeProc] | None = None, uuid: str = UUID0) -> FakeGpu:
    # an H100 80GB as NVML reports it: 81559 MiB total, about 0.5 GiB kept by the driver
    return FakeGpu(H100, uuid, 81559, used_mib=used, reserved_mib=536, compute=procs or [])


def test_one_idle_gpu() -> None:
    fake = FakeNvml([_h100(used=1)])
    snap = _probe(fake)
    assert snap.status == "ok"
    assert snap.taken_at == NOW and snap.driver_version == "550.54.15"
    (dev,) = snap.devices
    assert (dev.index, dev.name, dev.uuid, dev.visible_index) == (0, H100, UUID0, 0)
    assert dev.total_gib == pytest.approx(79.647, abs=1e-3)
    assert dev.reserved_gib == pytest.approx(0.523, abs=1e-3)
    assert dev.free_gib == pytest.approx(79.647 - 0.523 - 0.001, abs=1e-3)
    assert snap.processes == ()
    assert not dev.mig and not dev.uma
    assert fake.shutdowns == 1  # NVML released even on the happy path
    facts = snapshot_facts(snap)
    assert facts["gpu.other_process_count"] == 0
    assert facts["gpu.other_process_gib"] == 0.0
    assert facts["gpu.free_fraction"] == pytest.approx(0.993, abs=1e-3)


def test_another_process_holds_30_of_80_gib() -> None:
    fake = FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(4242, 30 * 1024)])])
    snap = _probe(fake)
    (proc,) = snap.processes
    assert (proc.pid, proc.name, proc.device_index, proc.kind) == (
        4242,
        "python3",
        0,
        ProcessKind.COMPUTE,
    )
    assert proc.used_gib == pytest.approx(30.0)
    facts = snapshot_facts(snap, vllm_pids=frozenset({5150}), failure_time="2025-03-01T09:59:00Z")
    assert facts["gpu.other_process_count"] == 1
    assert facts["gpu.other_process_gib"] == 30.0
    assert facts["gpu.other_pids"] == [4242]
    assert facts["gpu.vllm_pid_present"] is False
    assert facts["gpu.taken_after_failure"] is True
    assert facts["gpu.used_gib"] == pytest.approx(30.0, abs=0.01)
    assert facts["gpu.free_gib"] == pytest.approx(49.12, abs=0.01)


def test_own_vllm_pid_still_holding_memory_is_not_an_other_process() -> None:
    procs = [FakeProc(5150, 70 * 1024), FakeProc(4242, 2 * 1024)]
    snap = _probe(FakeNvml([_h100(used=72 * 1024, procs=procs)]))
    facts = snapshot_facts(snap, vllm_pids=frozenset({5150}))
    assert facts["gpu.vllm_pid_present"] is True
    assert facts["gpu.other_pids"] == [4242]
    assert facts["gpu.other_process_gib"] == 2.0


def test_graphics_and_compute_both_listed_once() -> None:
    gpu = _h100(used=1024, procs=[FakeProc(4242, 1000)])
    gpu.graphics = [FakeProc(777, 24), FakeProc(4242, 1000)]
    snap = _probe(FakeNvml([gpu]))
    kinds = {p.pid: p.kind for p in snap.processes}
    assert kinds == {777: ProcessKind.GRAPHICS, 4242: ProcessKind.COMPUTE}


def test_mig_instances_read_through_their_own_handles() -> None:
    mig0 = FakeGpu(
        "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
        "MIG-aaaa",
        40448,
        used_mib=20480,
        compute=[FakeProc(4242, 20451)],
    )
    mig1 = FakeGpu("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "MIG-bbbb", 40448, used_mib=13)
    parent = FakeGpu("NVIDIA A100-SXM4-80GB", UUID0, 81920, used_mib=20523, migs=[mig0, mig1])
    fake = FakeNvml([parent])
    snap = _probe(fake, visible="MIG-bbbb")
    assert [(d.mig, d.mig_index, d.uuid) for d in snap.devices] == [
        (True, 0, "MIG-aaaa"),
        (True, 1, "MIG-bbbb"),
    ]
    assert [d.visible_index for d in snap.devices] == [None, 0]
    (proc,) = snap.processes
    assert (proc.device_index, proc.mig_index) == (0, 0)
    # the visible instance is the idle one: the other instance's process is not in its way
    facts = snapshot_facts(snap)
    assert facts["gpu.mig"] is True and facts["gpu.other_process_count"] == 0
    assert facts["gpu.total_gib"] == 39.5


def test_mig_non_root_process_list_refused() -> None:
    mig0 = FakeGpu(
        "NVIDIA A100-SXM4-80GB MIG 7g.80gb",
        "MIG-cccc",
        81152,
        used_mib=9000,
        process_error=NVML_ERROR_NO_PERMISSION,
    )
    snap = _probe(FakeNvml([FakeGpu("NVIDIA A100-SXM4-80GB", UUID0, 81920, migs=[mig0])]))
    assert snap.status == "partial"
    assert "GPU 0 MIG 0: process list not reported (Insufficient Permissions)" in snap.note
    assert snap.devices[0].used_gib == pytest.approx(9000 / 1024)


def test_unified_memory_part_memory_not_supported() -> None:
    gb10 = FakeGpu(
        "NVIDIA GB10",
        UUID0,
        0,
        memory_error=NVML_ERROR_NOT_SUPPORTED,
        compute=[FakeProc(4242, None)],
        addressing_ats=True,
    )
    snap = _probe(FakeNvml([gb10], driver="580.95.05"))
    (dev,) = snap.devices
    assert dev.uma and dev.total_gib is None and dev.free_gib is None
    assert snap.status == "partial"
    assert "memory not reported (Not Supported); unified-memory part" in snap.note
    assert snap.processes[0].used_gib is None
    facts = snapshot_facts(snap)
    assert facts["gpu.uma"] is True
    assert "gpu.total_gib" not in facts and "gpu.free_fraction" not in facts
    assert "gpu.other_process_gib" not in facts  # one process, memory unknown
    assert facts["gpu.other_process_count"] == 1


def test_old_driver_without_v3_or_memory_v2_falls_back() -> None:
    missing = (
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    )
    gpu = FakeGpu(
        "Tesla V100-SXM2-32GB",
        UUID0,
        32480,
        used_mib=29871,
        reserved_mib=0,
        compute=[FakeProc(4242, 29860)],
    )
    fake = FakeNvml([gpu], driver="470.82.01", missing=missing)
    snap = _probe(fake)
    assert snap.status == "ok"
    assert snap.devices[0].reserved_gib is None  # v1 has no reserved field
    assert snap.processes[0].used_gib == pytest.approx(29860 / 1024)
    assert "nvmlDeviceGetComputeRunningProcesses_v2" in fake.calls


def test_driver_with_no_process_query_at_all_degrades() -> None:
    missing = tuple(f"nvmlDeviceGet{k}RunningProcesses{v}" for k in ("Compute", "Graphics") for v in ("_v3", "_v2", ""))
    snap = _probe(FakeNvml([_h100(used=100)], missing=missing))
    assert snap.status == "partial"
    assert "process list not reported (no process query this driver supports)" in snap.note


def test_pid_not_resolvable_in_container() -> None:
    fake = FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(391022, 30 * 1024)])])
    snap = _probe(fake, names={})
    (proc,) = snap.processes
    assert proc.resolvable is False and proc.name is None
    assert "PID 391022 not found here: NVML reports host PIDs" in snap.note
    assert snap.status == "ok"  # the memory figures are complete; only the name is missing
    assert snapshot_facts(snap)["gpu.other_pids"] == [391022]


def test_library_missing() -> None:
    def no_module() -> Any:
        raise ImportError("No module named 'pynvml'")

    snap = NvmlProbe(None, load=no_module, now=lambda: NOW).snapshot()
    assert snap.status == "unavailable: library_missing"
    assert snap.note == "the Python package nvidia-ml-py is not installed"
    assert snapshot_facts(snap) == {
        "gpu.status": "unavailable: library_missing",
        "gpu.taken_at": NOW,
    }


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, UnavailableReason.LIBRARY_MISSING),
        (NVML_ERROR_DRIVER_NOT_LOADED, UnavailableReason.DRIVER_NOT_LOADED),
        (NVML_ERROR_NO_PERMISSION, UnavailableReason.NO_PERMISSION),
    ],
)
def test_init_failures_become_reasons(code: int, reason: UnavailableReason) -> None:
    snap = _probe(FakeNvml([], init_error=code))
    assert snap.reason is reason
    assert snap.devices == ()


def test_no_gpu_and_no_visible_gpu() -> None:
    assert _probe(FakeNvml([])).status == "unavailable: no_gpu"
    snap = _probe(FakeNvml([_h100()]), visible="")
    assert snap.status == "unavailable: no_visible_gpu"
    assert snap.devices[0].visible_index is None


def test_cuda_visible_devices_indices_and_uuids() -> None:
    fake = FakeNvml([_h100(uuid=UUID0), _h100(uuid=UUID1, used=30 * 1024)])
    snap = _probe(fake, visible="1,0")
    assert [d.visible_index for d in snap.devices] == [1, 0]
    assert snapshot_facts(snap)["gpu.device_index"] == 1  # cuda:0 is NVML GPU 1
    by_uuid = _probe(fake, visible="GPU-9999")  # CUDA accepts a unique prefix
    assert [d.visible_index for d in by_uuid.devices] == [None, 0]
    # CUDA stops at the first entry it cannot match
    stopped = _probe(fake, visible="0,7,1")
    assert [d.visible_index for d in stopped.devices] == [0, None]


def test_mixed_models_with_index_list_get_a_note() -> None:
    devices = [*_probe(FakeNvml([_h100()])).devices]
    other = devices[0].__class__(1, "NVIDIA L4", "GPU-x", 22.0, 22.0, 0.0)
    _, notes = map_visible([devices[0], other], "1")
    assert notes and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in notes[0]


def test_snapshot_json_round_trip() -> None:
    fake = FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(4242, 30 * 1024)])])
    snap = _probe(fake, names={})
    data = json.loads(json.dumps(snapshot_to_dict(snap)))
    back = snapshot_from_dict(data)
    assert snapshot_to_dict(back) == data  # a saved probe reads back as it was written
    assert back.devices[0].total_gib == 79.65  # 81,559 MiB, in GiB to two decimals as everywhere
    assert back.processes == snap.processes


# ---- the command, with the fake injected in place of the real loader ----------------------


@pytest.fixture
def use_fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeNvml], None]:
    def install(fake: FakeNvml) -> None:
        # the command's NvmlProbe imports pynvml through this loader: hand it the fake
        monkeypatch.setattr("kvdoctor.probe.nvml.load_pynvml", lambda: fake)
        monkeypatch.setattr("kvdoctor.probe.nvml.proc_name", NAMES.get)
        monkeypatch.setattr("kvdoctor.probe.nvml.utc_now", lambda: NOW)

    return install


def test_probe_command_text(
    use_fake: Callable[[FakeNvml], None],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    use_fake(FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(4242, 30 * 1024)])]))
    assert main(["probe"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"GPU probe (nvml, {NOW}, driver 550.54.15): ok"
    assert out[1] == (f"GPU 0 [cuda:0] {H100}: total 79.65 GiB, used 30.00 GiB, free 49.12 GiB (62%)")
    assert out[2] == "  pid 4242        30.00 GiB  compute  python3"


def test_probe_command_driver_not_loaded(
    use_fake: Callable[[FakeNvml], None], capsys: pytest.CaptureFixture[str]
) -> None:
    use_fake(FakeNvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    assert main(["probe"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kvdoctor: probe: GPU unavailable, driver_not_loaded: the NVIDIA kernel driver is not "
        "loaded; load the NVIDIA driver (nvidia-smi should work) and retry\n"
    )


def test_probe_command_json_then_probe_file(
    use_fake: Callable[[FakeNvml], None], capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    use_fake(FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(4242, 30 * 1024)])]))
    assert main(["probe", "--format", "json", "--devices", "0"]) == 0
    saved = tmp_path / "probe.json"
    saved.write_text(capsys.readouterr().out)
    assert main(["probe", "--probe-file", str(saved)]) == 0
    assert "pid 4242" in capsys.readouterr().out


def test_probe_command_library_missing_json_still_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_module() -> Any:
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr("kvdoctor.probe.nvml.load_pynvml", no_module)
    assert main(["probe", "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "unavailable: library_missing"
    assert captured.err == (
        "kvdoctor: probe: GPU unavailable, library_missing: the Python package nvidia-ml-py is "
        "not installed; install the NVIDIA driver and nvidia-ml-py (pip install 'kvdoctor[gpu]')\n"
    )
    assert "Traceback" not in captured.err


# ---- what the probe changes in a diagnosis (the lead's engine; skipped until it lands) ------

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def test_second_pid_holding_30_gib_turns_no_cache_blocks_into_other_process() -> None:
    api = pytest.importorskip("kvdoctor.api")
    log = CORPUS / "018-v1-vllm-omni-qwen25-omni-3b-h100-lowered-util.log"
    if not log.exists():
        pytest.skip("corpus fixture not in the tree")
    alone = api.diagnose(log).as_records()
    assert alone["verdict"] == "no_cache_blocks"
    assert alone["diagnoses"][0]["cause"] != "other_process"
    snap = _probe(FakeNvml([_h100(used=30 * 1024, procs=[FakeProc(4242, 30 * 1024)])]))
    probed = api.diagnose(log, probe=snap).as_records()
    first = probed["diagnoses"][0]
    assert (probed["verdict"], first["cause"]) == ("no_cache_blocks", "other_process")
    assert first["remedies"][0]["action"] == "free_gpu_memory"
    assert "raise_gpu_memory_utilization" in [a["action"] for a in first["avoid"]]
    # an idle card changes nothing: the probe confirms there is no other tenant
    idle = api.diagnose(log, probe=_probe(FakeNvml([_h100(used=1)]))).as_records()
    assert idle["diagnoses"][0]["cause"] == alone["diagnoses"][0]["cause"]
