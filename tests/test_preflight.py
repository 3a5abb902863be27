"""`kvdoctor preflight`: free >= util × total on every visible GPU, and waiting for it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kvdoctor.cli import main
from kvdoctor.commands.preflight import Readiness, check_ready, wait_until_ready
from kvdoctor.probe import Device, Process, Snapshot, SnapshotSource, UnavailableReason

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia-smi"
NOW = "2025-03-01T10:00:00Z"


def _snap(*frees: float, total: float = 80.0, procs: tuple[Process, ...] = ()) -> Snapshot:
    devices = tuple(
        Device(i, "NVIDIA A100-SXM4-80GB", f"GPU-{i}", total, free, total - free, None, visible_index=i)
        for i, free in enumerate(frees)
    )
    return Snapshot("ok", NOW, SnapshotSource.NVML, devices, procs)


def test_ready_when_every_gpu_has_the_fraction_free() -> None:
    result = check_ready(_snap(79.5, 75.0), 0.9)
    assert result.readiness is Readiness.READY and result.exit_code == 0
    assert result.reason == ("2 visible GPU(s) have 0.90 × total free; smallest margin 3.00 GiB on GPU 1")
    assert result.max_util_now == 0.93


def test_not_ready_names_the_holder_and_the_fraction_that_fits() -> None:
    holder = Process(4242, "python3", 0, 30.0)
    result = check_ready(_snap(50.0, procs=(holder,)), 0.9)
    assert result.readiness is Readiness.NOT_READY and result.exit_code == 1
    assert result.max_util_now == 0.61
    assert result.reason == (
        "GPU 0 has 50.00 GiB free of 80.00 GiB but 0.90 needs 72.00 GiB; held by pid 4242 "
        "(python3) 30.00 GiB; the largest fraction that fits now is 0.61"
    )
    assert result.checks[0].holders == (holder,)


def test_hidden_gpus_do_not_count() -> None:
    snap = _snap(10.0, 79.0)
    hidden = Snapshot(
        "ok",
        NOW,
        SnapshotSource.NVML,
        (
            Device(0, "A", None, 80.0, 10.0, 70.0),
            Device(1, "B", None, 80.0, 79.0, 1.0, visible_index=0),
        ),
    )
    assert check_ready(snap, 0.9).readiness is Readiness.NOT_READY
    assert check_ready(hidden, 0.9).readiness is Readiness.READY


def test_required_memory_larger_than_the_budget() -> None:
    result = check_ready(_snap(79.5), 0.5, required_gib=55.0)
    assert result.readiness is Readiness.NOT_READY
    assert result.reason == "0.50 × total gives 40.00 GiB but the model needs 55.00 GiB"


def test_unavailable_and_unified_memory() -> None:
    gone = Snapshot.unavailable(UnavailableReason.DRIVER_NOT_LOADED, "driver not loaded")
    assert check_ready(gone, 0.9).exit_code == 2
    uma = Snapshot(
        "partial",
        None,
        SnapshotSource.NVML,
        (Device(0, "NVIDIA GB10", None, None, None, None, uma=True),),
    )
    result = check_ready(uma, 0.9)
    assert result.readiness is Readiness.UNAVAILABLE
    assert result.reason == (
        "GPU 0 reports no memory figures (unified memory: check system memory instead); preflight cannot check it"
    )


@dataclass
class _Releasing:
    """A previous server that lets go of its memory after a few probes."""

    frees: list[float]
    calls: int = 0

    def snapshot(self) -> Snapshot:
        free = self.frees[min(self.calls, len(self.frees) - 1)]
        self.calls += 1
        return _snap(free)


@dataclass
class _Clock:
    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_until_released() -> None:
    clock, probe = _Clock(), _Releasing([8.0, 8.0, 79.0])
    polls: list[float | None] = []
    result = wait_until_ready(
        probe,
        0.9,
        timeout_s=60,
        interval_s=5,
        sleep=clock.sleep,
        clock=lambda: clock.now,
        on_poll=lambda r: polls.append(r.max_util_now),
    )
    assert result.readiness is Readiness.READY
    assert probe.calls == 3 and clock.sleeps == [5, 5] and polls == [0.09, 0.09]


def test_wait_gives_up_at_the_deadline() -> None:
    clock, probe = _Clock(), _Releasing([8.0])
    result = wait_until_ready(probe, 0.9, timeout_s=12, interval_s=5, sleep=clock.sleep, clock=lambda: clock.now)
    assert result.readiness is Readiness.NOT_READY
    assert probe.calls == 3 and clock.now == 10


def test_no_wait_probes_once() -> None:
    clock, probe = _Clock(), _Releasing([8.0])
    wait_until_ready(probe, 0.9, timeout_s=0, interval_s=2, sleep=clock.sleep, clock=lambda: clock.now)
    assert probe.calls == 1 and clock.sleeps == []


# ---- the command --------------------------------------------------------------------------


def test_command_not_ready_from_a_pasted_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "preflight",
            "--gpu-memory-utilization",
            "0.9",
            "--probe-file",
            str(FIXTURES / "r550-h100-table.txt"),
        ]
    )
    assert code == 1
    assert capsys.readouterr().out.splitlines() == [
        "preflight: NOT READY for --gpu-memory-utilization 0.90 (probe: nvidia-smi)",
        "  GPU 0 NVIDIA H100 80GB HBM3: free 49.64 of 79.65 GiB, needs 71.68 GiB: short by 22.04 GiB",
        "    held by pid 733104 (/usr/bin/python3) 30.00 GiB",
        "largest --gpu-memory-utilization that fits now: 0.61",
    ]


def test_command_ready_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "preflight",
            "--gpu-memory-utilization",
            "0.6",
            "--format",
            "json",
            "--probe-file",
            str(FIXTURES / "r550-h100-table.txt"),
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ready"] is True and data["max_gpu_memory_utilization_now"] == 0.61
    assert data["devices"][0]["need_gib"] == pytest.approx(47.788, abs=1e-3)


def test_command_unified_memory_is_unavailable(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "preflight",
            "--gpu-memory-utilization",
            "0.9",
            "--probe-file",
            str(FIXTURES / "r580-gb10-uma-table.txt"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (
        "kvdoctor: preflight: GPU 0 reports no memory figures (unified memory: check system "
        "memory instead); preflight cannot check it; pass --probe-file with nvidia-smi output "
        "from that machine\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpu-memory-utilization", "1.5"],
        ["--gpu-memory-utilization", "0.9", "--interval", "0"],
    ],
)
def test_command_bad_values(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", *argv]) == 2
    assert capsys.readouterr().err.startswith("kvdoctor: preflight: --gpu-memory-utilization")


def test_command_bad_probe_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{")
    assert main(["preflight", "--gpu-memory-utilization", "0.9", "--probe-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvdoctor: preflight: {bad}:1: not valid JSON") and err.count("\n") == 1


def test_command_model_too_large_for_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    table = str(FIXTURES / "r550-h100-table.txt")
    base = ["preflight", "--gpu-memory-utilization", "0.5", "--probe-file", table]
    small = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "32768"]
    assert main([*base, *small]) == 0
    capsys.readouterr()
    large = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768"]
    assert main([*base, *large, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["required_gib"] > 100
    assert data["reason"].startswith("0.50 × total gives 39.82 GiB but the model needs ")
    assert main([*base, *large]) == 1  # the text says why, not only "NOT READY"
    text = capsys.readouterr().out
    assert "NOT READY" in text and "0.50 × total gives 39.82 GiB but the model needs " in text


def test_the_command_the_reports_print_runs_as_printed() -> None:
    """free-memory-at-startup-held tells the user `kvdoctor preflight --wait 120`: it must parse."""
    import argparse

    from kvdoctor.commands import preflight

    parser = argparse.ArgumentParser()
    preflight.add_arguments(parser)
    args = parser.parse_args(["--wait", "120"])
    assert args.gpu_memory_utilization == 0.9
