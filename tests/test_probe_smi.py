"""nvidia-smi text from several driver generations becomes the same kind of snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvdoctor.probe import ProbeError, SmiReader, load_snapshot_file, snapshot_to_dict
from kvdoctor.probe.facts import snapshot_facts
from kvdoctor.probe.smi import parse_smi_text
from kvdoctor.probe.snapshot import ProcessKind, Snapshot, SnapshotSource

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia-smi"


def _load(name: str) -> Snapshot:
    snap = parse_smi_text((FIXTURES / name).read_text())
    assert snap is not None
    return snap


def _mem(snap: Snapshot) -> list[tuple[int, float | None, float | None]]:
    return [(d.index, d.used_gib and round(d.used_gib, 2), d.total_gib and round(d.total_gib, 2)) for d in snap.devices]


def test_r418_table_without_gi_ci_columns() -> None:
    snap = _load("r418-v100-table.txt")
    assert snap.source is SnapshotSource.SMI_TABLE and snap.driver_version == "418.67"
    assert snap.status == "ok" and snap.taken_at is None
    assert "printed at Tue Jun 11 10:12:31 2019" in snap.note
    assert _mem(snap) == [(0, 29.17, 31.72)]
    assert snap.devices[0].name == "Tesla V100-SXM2..."
    (proc,) = snap.processes
    assert (proc.pid, proc.name, proc.device_index) == (21532, "python", 0)
    assert proc.used_gib == pytest.approx(29860 / 1024)


def test_r470_mig_table_maps_processes_to_instances() -> None:
    snap = _load("r470-a100-mig-table.txt")
    assert [(d.index, d.mig_index, d.mig) for d in snap.devices] == [(0, 0, True), (0, 1, True)]
    assert _mem(snap) == [(0, 20.0, 39.5), (0, 0.03, 39.5)]
    (proc,) = snap.processes
    assert (proc.pid, proc.device_index, proc.mig_index) == (48211, 0, 0)
    assert snap.processes_on(snap.devices[1]) == ()


def test_r535_two_gpus_with_graphics_processes() -> None:
    snap = _load("r535-2x4090-table.txt")
    assert _mem(snap) == [(0, 20.89, 23.99), (1, 5.98, 23.99)]
    rows = [(p.device_index, p.pid, p.kind, p.name) for p in snap.processes]
    assert rows == [
        (0, 2113, ProcessKind.GRAPHICS, "/usr/lib/xorg/Xorg"),
        (0, 184220, ProcessKind.COMPUTE, "python"),
        (1, 2113, ProcessKind.GRAPHICS, "/usr/lib/xorg/Xorg"),
        (1, 97311, ProcessKind.COMPUTE, "...envs/comfy/bin/python"),
    ]
    # without a visible order, the busiest GPU is taken as the one vLLM used
    facts = snapshot_facts(snap)
    assert facts["gpu.device_index"] == 0 and facts["gpu.other_process_count"] == 2
    # with the failing server's PID known, its own memory is not "someone else's"
    facts = snapshot_facts(snap, vllm_pids=frozenset({97311}))
    assert facts["gpu.device_index"] == 1 and facts["gpu.other_pids"] == [2113]


def test_r550_h100_another_tenant_holds_30_gib() -> None:
    snap = _load("r550-h100-table.txt")
    assert _mem(snap) == [(0, 30.01, 79.65)]
    facts = snapshot_facts(snap, vllm_pids=frozenset({5150}))
    assert facts["gpu.other_process_gib"] == 30.0
    assert facts["gpu.free_gib"] == 49.64
    assert facts["gpu.free_fraction"] == pytest.approx(0.623, abs=1e-3)
    assert facts["gpu.vllm_pid_present"] is False
    assert "gpu.taken_after_failure" not in facts  # a pasted table has no reliable clock


def test_r550_no_running_processes() -> None:
    snap = _load("r550-idle-no-processes-table.txt")
    assert snap.processes == () and _mem(snap) == [(0, 0.0, 44.99)]
    assert snapshot_facts(snap)["gpu.other_process_count"] == 0


def test_r580_unified_memory_wide_pid_column() -> None:
    snap = _load("r580-gb10-uma-table.txt")
    (dev,) = snap.devices
    assert dev.uma and dev.total_gib is None and snap.status == "partial"
    assert [(p.pid, p.name) for p in snap.processes] == [
        (3012, "/usr/lib/xorg/Xorg"),
        (118833, "VLLM::EngineCore"),
    ]


def test_query_gpu_csv_with_units_and_compute_apps_by_uuid() -> None:
    snap = _load("query-gpu-header-units.csv")
    assert snap.source is SnapshotSource.SMI_CSV
    assert _mem(snap) == [(0, 30.0, 80.0), (1, 0.0, 80.0)]
    assert snap.devices[0].free_gib == pytest.approx(50644 / 1024)
    (proc,) = snap.processes
    assert (proc.pid, proc.name, proc.device_index) == (412077, "python3", 0)


def test_query_gpu_noheader_nounits_takes_fields_from_the_command() -> None:
    snap = _load("query-gpu-noheader-nounits.txt")
    assert _mem(snap) == [(0, 30.01, 79.65), (1, 0.0, 79.65)]
    (proc,) = snap.processes
    assert proc.device_index is None and proc.used_gib == pytest.approx(30716 / 1024)
    facts = snapshot_facts(snap)
    assert facts["gpu.other_process_gib"] == 30.0 and facts["gpu.device_index"] == 0


def test_query_gpu_not_available_fields() -> None:
    snap = _load("query-gpu-reserved-na.csv")
    assert snap.devices[0].uma and snap.devices[0].total_gib is None


def test_the_guides_compute_apps_command_alone() -> None:
    text = "pid, used_gpu_memory [MiB]\n733104, 30716 MiB\n"
    snap = parse_smi_text(text)
    assert snap is not None and snap.devices == () and snap.status == "partial"
    assert snapshot_facts(snap)["gpu.other_process_gib"] == 30.0


def test_windows_wddm_rows_without_memory() -> None:
    text = (
        "| Processes:                                                                  |\n"
        "|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |\n"
        "|=============================================================================|\n"
        "|    0   N/A  N/A      9172    C+G   ...bbwe\\Microsoft.Photos.exe    N/A      |\n"
        "+-----------------------------------------------------------------------------+\n"
    )
    snap = parse_smi_text(text)
    assert snap is not None
    (proc,) = snap.processes
    assert (proc.pid, proc.used_gib, proc.kind) == (9172, None, ProcessKind.COMPUTE)


def test_reader_inside_a_vllm_log_keeps_the_newest_table_and_its_lines() -> None:
    old = (FIXTURES / "r550-idle-no-processes-table.txt").read_text().splitlines()
    new = (FIXTURES / "r550-h100-table.txt").read_text().splitlines()
    log = (
        ["INFO 03-01 10:00:01 [api_server.py:1] vLLM API server version 0.9.1"]
        + old
        + [
            "INFO 03-01 10:00:09 [gpu_worker.py:1] Available KV cache memory: -2.10 GiB",
            "ERROR 03-01 10:00:09 [core.py:1] ValueError: No available memory for the cache blocks",
        ]
        + new
        + ["$ echo done", "done"]
    )
    reader = SmiReader()
    for number, line in enumerate(log, start=1):
        reader.feed(number, line)
    snap = reader.result()
    assert snap is not None and snap.driver_version == "550.54.15"
    assert [p.pid for p in snap.processes] == [733104]
    first_new = 1 + len(old) + 2 + 1
    assert reader.lines() == list(range(2, 2 + len(old))) + list(range(first_new, first_new + len(new)))


def test_reader_ignores_unrelated_lines() -> None:
    reader = SmiReader()
    for number, line in enumerate(
        ["INFO memory profiling takes 3.2 seconds", "| a | b |", "pid 12, gone", ""], start=1
    ):
        reader.feed(number, line)
    assert reader.result() is None and reader.lines() == []


def test_load_snapshot_file_accepts_probe_json_and_smi_text(tmp_path: Path) -> None:
    smi = _load("r550-h100-table.txt")
    saved = tmp_path / "snap.json"
    saved.write_text(json.dumps(snapshot_to_dict(smi)))
    assert snapshot_to_dict(load_snapshot_file(saved)) == snapshot_to_dict(smi)
    assert load_snapshot_file(FIXTURES / "r550-h100-table.txt") == smi


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{not json",
            "bad.txt:1: not valid JSON (Expecting property name enclosed in double "
            "quotes); write it with `kvdoctor probe --format json`",
        ),
        (
            '{"probe_schema_version": 1, "status": "ok", "source": "nvml", "devices": [{}], "processes": []}',
            "bad.txt: field 'index' is missing; write it with `kvdoctor probe --format json`",
        ),
        (
            '{"probe_schema_version": 7}',
            "bad.txt: probe_schema_version is 7, expected 1; write it with `kvdoctor probe --format json`",
        ),
        (
            "hello\n",
            "bad.txt: neither a kvdoctor probe JSON nor nvidia-smi output; save "
            "`kvdoctor probe --format json` or `nvidia-smi` output into it",
        ),
    ],
)
def test_load_snapshot_file_errors_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    with pytest.raises(ProbeError) as info:
        load_snapshot_file(bad)
    assert str(info.value) == message.replace("bad.txt", str(bad))


def test_missing_file_is_a_probe_error(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="cannot read .*; check the path"):
        load_snapshot_file(tmp_path / "nope.json")


def test_reader_can_be_asked_mid_table_and_keep_reading() -> None:
    table = (FIXTURES / "r535-2x4090-table.txt").read_text().splitlines()
    reader = SmiReader()
    for number, line in enumerate(table[:14], start=1):  # up to GPU 1's memory row
        reader.feed(number, line)
    early = reader.result()
    assert early is not None and [d.index for d in early.devices] == [0, 1]
    for number, line in enumerate(table[14:], start=15):
        reader.feed(number, line)
    late = reader.result()
    assert late is not None and len(late.processes) == 4
    assert reader.lines() == list(range(1, len(table) + 1))


def test_one_process_row_quoted_alone_is_a_process_on_its_gpu() -> None:
    text = "nvidia-smi before starting vLLM:\n\n      |    0   N/A  N/A     31877      C   ...envs/rag/bin/python -m ipykernel_launcher    25498MiB |\n\nCommand: vllm serve m"
    snap = parse_smi_text(text)
    assert snap is not None and not snap.devices
    (proc,) = snap.processes
    assert (proc.pid, proc.device_index, round(proc.used_gib or 0, 1)) == (31877, 0, 24.9)
    # (a table border or a GPU row alone is no process)
    assert parse_smi_text("|   0  NVIDIA A100-SXM4-80GB   On  | 00000000:07:00.0 Off |  0 |") is None


def test_a_gpu_less_process_list_over_one_card_counts_one_process_for_the_card() -> None:
    text = "$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader\n" + "\n".join(
        f"{pid}, ray::WorkerDict, 38768 MiB" for pid in (11, 12, 13, 14)
    )
    snap = parse_smi_text(text)
    assert snap is not None
    assert snapshot_facts(snap)["gpu.other_process_gib"] == 151.44  # (no card size known: their sum)
    assert snapshot_facts(snap, card_total_gib=79.22)["gpu.other_process_gib"] == 37.86
