"""`kvdoctor run -- vllm serve …` against fake `vllm` executables (tests/fixtures/fakevllm/)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor.probe import Snapshot, UnavailableReason, snapshot_to_dict

FIXTURES = Path(__file__).parent / "fixtures"
FAILING = FIXTURES / "fakevllm" / "failing"
HANGING = FIXTURES / "fakevllm" / "hanging"
LOG_003 = (FIXTURES / "corpus" / "003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log").read_bytes()
SMI_BUSY = FIXTURES / "nvidia-smi" / "r550-h100-table.txt"  # 30 of 80 GiB held by a python3
SMI_IDLE = FIXTURES / "nvidia-smi" / "r550-idle-no-processes-table.txt"
LONG_WAIT = 120  # only guards against a hung test; nothing here measures time
SERVE = [
    "vllm",
    "serve",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "--max-model-len",
    "128000",
    "--gpu-memory-utilization",
    "0.9",
]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")


def _env(fake: Path) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(fake: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kvdoctor", "run", *args],
        env=_env(fake),
        capture_output=True,
        timeout=LONG_WAIT,
        check=False,
    )


def test_failing_server_is_teed_diagnosed_and_its_exit_code_returned(tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    done = _run(FAILING, "--format", "json", "--report", str(report), "--", *SERVE)
    assert done.returncode == 1  # the child's code
    # stdout is the child's merged stdout and stderr, byte for byte
    assert done.stdout == (
        b"INFO fake vllm: argv " + shlex.join(SERVE[1:]).encode() + b"\n" + LOG_003 + b"fake vllm: goodbye\n"
    )
    records = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    assert [r["verdict"] for r in records] == ["max_model_len_too_large"]
    first = records[0]["diagnoses"][0]["remedies"][0]
    assert first["action"] == "lower_max_model_len" and first["value"] < 128000
    corrected = [*SERVE[:4], str(first["value"]), *SERVE[5:]]
    err = done.stderr.decode().splitlines()
    assert err == [
        "kvdoctor: corrected command (lower_max_model_len):",
        "  " + shlex.join(corrected),
    ]


def test_text_diagnosis_goes_to_stderr_by_default() -> None:
    done = _run(FAILING, "--lang", "en", "--", *SERVE)
    assert done.returncode == 1
    assert b"max_model_len_too_large" in done.stderr
    assert b"max_model_len_too_large" not in done.stdout


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_is_forwarded_and_the_child_code_returned(sig: signal.Signals, code: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvdoctor", "run", "--format", "json", "--", "vllm", "serve", "m"],
        env=_env(HANGING),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the child is up and kvdoctor is forwarding once this arrives
        seen.append(line)
        if line == b"fake vllm: ready\n":
            break
    assert proc.poll() is None
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=LONG_WAIT)
    assert proc.returncode == code
    assert rest == f"fake vllm: got {sig.name}\n".encode()
    assert json.loads(err.decode().splitlines()[0])["verdict"] == "healthy"


def test_missing_command_and_missing_executable_are_usage_errors() -> None:
    done = _run(FAILING)
    assert done.returncode == 2 and done.stderr.startswith(b"kvdoctor: run: no command given")
    done = _run(FAILING, "--", "no-such-vllm-binary", "serve", "m")
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and b"no-such-vllm-binary" in done.stderr


def test_preflight_refuses_a_busy_gpu_and_suggests_a_fraction_that_fits() -> None:
    done = _run(FAILING, "--preflight", "--probe-file", str(SMI_BUSY), "--", *SERVE)
    assert done.returncode == 1
    assert done.stdout == b""  # not launched
    err = done.stderr.decode()
    assert "NOT READY" in err and "733104" in err  # who holds the memory
    suggestion = err.splitlines()[
        err.splitlines().index("kvdoctor: corrected command (lower_gpu_memory_utilization):") + 1
    ]
    util = float(shlex.split(suggestion)[shlex.split(suggestion).index("--gpu-memory-utilization") + 1])
    assert 0 < util < 0.9


def test_preflight_ready_launches() -> None:
    done = _run(FAILING, "--preflight", "--probe-file", str(SMI_IDLE), "--", *SERVE)
    assert done.returncode == 1 and LOG_003 in done.stdout
    assert done.stderr.startswith(b"kvdoctor: run: preflight: ready")


def test_preflight_without_a_gpu_says_so_and_launches_unless_required(tmp_path: Path) -> None:
    snapshot = Snapshot.unavailable(UnavailableReason.LIBRARY_MISSING, "libnvidia-ml.so missing")
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(snapshot_to_dict(snapshot)), encoding="utf-8")

    done = _run(FAILING, "--preflight", "--probe-file", str(probe), "--", *SERVE)
    assert done.returncode == 1 and LOG_003 in done.stdout
    first = done.stderr.decode().splitlines()[0]
    assert first.startswith("kvdoctor: run: preflight: GPU unavailable")
    assert first.endswith("launching without the check")

    done = _run(FAILING, "--require-gpu", "--probe-file", str(probe), "--", *SERVE)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1
