"""`kvdoctor run --retry N` (issue 15) against a stand-in `vllm` that prints vLLM 0.10.2's lines:
one relaunch with the length vLLM estimated, only after the failed server's process group has
exited; no relaunch (and never a raised fraction) while another process holds the memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor.diagnosis.report import AttemptReport, Avoid, Diagnosis, Remedy, Report
from kvdoctor.live.retry import Retry, plan_retry

FAKE = Path(__file__).parent / "fixtures" / "fakevllm" / "retrying"
LONG_WAIT = 120  # guards against a hung test only
SERVE = ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "40960"]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{FAKE}{os.pathsep}{os.environ.get('PATH', '')}", **extra)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _kvdoctor(*args: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kvdoctor", "run", *args],
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _until_ready(proc: subprocess.Popen[bytes]) -> list[bytes]:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line == b"fake vllm: ready\n":
            return seen
    raise AssertionError(b"".join(seen).decode())


def test_a_too_long_length_is_relaunched_once_with_the_fitted_length_after_the_group_exits(tmp_path: Path) -> None:
    report, marker = tmp_path / "tries.jsonl", tmp_path / "engine-core-gone"
    proc = _kvdoctor(
        "--retry", "2", "--format", "json", "--report", str(report), "--", *SERVE, FAKE_VLLM_MARKER=str(marker)
    )
    out = b"".join(_until_ready(proc)).decode()
    # the relaunch came after the first server's lingering engine core had exited
    assert "fake vllm: the previous engine core had exited: yes" in out
    launches = [line for line in out.splitlines() if line.startswith("INFO fake vllm: argv")]
    assert launches == [
        "INFO fake vllm: argv serve Qwen/Qwen3-8B --max-model-len 40960",
        "INFO fake vllm: argv serve Qwen/Qwen3-8B --max-model-len 23296",
    ]
    # signals still reach the relaunched child; the exit code is the last child's
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=LONG_WAIT)
    assert proc.returncode == 143
    assert rest == b"fake vllm: got SIGTERM\n"
    assert "kvdoctor: retry 1/2: --max-model-len 40960 -> 23296 (lower_max_model_len)\n" in err.decode()
    tries = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    assert [t["verdict"] for t in tries] == ["max_model_len_too_large", "healthy"]
    assert tries[0]["diagnoses"][0]["remedies"][0]["value"] == 23296
    assert tries[1]["source"] == "vllm serve Qwen/Qwen3-8B --max-model-len 23296"
    assert tries[1]["notes"][-1] == "kvdoctor run: retry 1/2: --max-model-len 40960 -> 23296 (lower_max_model_len)"


def test_no_relaunch_while_the_failed_servers_processes_are_still_running(tmp_path: Path) -> None:
    proc = _kvdoctor("--retry", "1", "--wait", "0", "--", *SERVE, FAKE_VLLM_MARKER=str(tmp_path / "m"))
    out, err = proc.communicate(timeout=LONG_WAIT)
    assert proc.returncode == 1  # the first child's code
    assert out.count(b"INFO fake vllm: argv") == 1
    assert "kvdoctor: run: not retrying: the failed server's processes (group" in err.decode()
    assert "still running after 0 s" in err.decode()


def test_a_co_tenant_is_not_retried_and_the_fraction_is_never_raised() -> None:
    proc = _kvdoctor(
        "--retry", "3", "--", "vllm", "serve", "m", "--gpu-memory-utilization", "0.2", FAKE_VLLM_MODE="held"
    )
    out, err = proc.communicate(timeout=LONG_WAIT)
    assert proc.returncode == 1
    assert out.count(b"INFO fake vllm: argv") == 1  # launched once
    text = err.decode()
    assert (
        "kvdoctor: run: not retrying: the first remedy (free_gpu_memory) is not a flag change kvdoctor makes on its own"
        in text
    )
    assert "retry 1/3" not in text and "corrected command" not in text


def test_a_negative_retry_count_is_a_usage_error() -> None:
    proc = _kvdoctor("--retry", "-1", "--", *SERVE)
    _, err = proc.communicate(timeout=LONG_WAIT)
    assert proc.returncode == 2
    assert err.decode().startswith("kvdoctor: run: --retry must be >= 0")


# ---- the policy, on reports the rules could produce --------------------------------------


def _report(
    klass: str, *remedies: Remedy, cause: str | None = None, avoid: tuple[str, ...] = (), **facts: float
) -> Report:
    diagnosis = Diagnosis(
        rule="r",
        klass=klass,
        cause=cause,
        phase=None,
        severity="error",
        confidence="high",
        title="t",
        explanation="e",
        remedies=remedies,
        avoid=tuple(Avoid(a, "why") for a in avoid),
    )
    attempt = AttemptReport(0, 1, 9, klass, (diagnosis,), {k: {"value": v, "source": "log"} for k, v in facts.items()})
    return Report("log", (attempt,))


ARGV = ["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"]


def test_raising_the_fraction_is_refused_while_another_process_holds_memory() -> None:
    raise_it = Remedy("raise_gpu_memory_utilization", "raise", 0.8)
    held = plan_retry(ARGV, _report("no_cache_blocks", raise_it, other_process_gib=12.0))
    assert held == "another process holds GPU memory: raising --gpu-memory-utilization would plan memory it holds"
    assert isinstance(plan_retry(ARGV, _report("no_cache_blocks", raise_it, cause="other_process")), str)
    empty = plan_retry(ARGV, _report("no_cache_blocks", raise_it, cause="utilization_too_low", other_process_gib=0.1))
    assert isinstance(empty, Retry)
    assert empty.describe(1, 2) == "retry 1/2: --gpu-memory-utilization 0.5 -> 0.8 (raise_gpu_memory_utilization)"
    assert empty.argv == ["vllm", "serve", "m", "--gpu-memory-utilization", "0.8"]


def test_no_retry_after_a_non_memory_failure_an_avoided_remedy_or_a_command_that_failed() -> None:
    eager = Remedy("enforce_eager", "eager")
    assert plan_retry(ARGV, _report("other", eager)) == (
        "the failure is not a memory failure (other); the same command would fail again"
    )
    avoided = _report("cuda_oom", eager, avoid=("enforce_eager",))
    assert plan_retry(ARGV, avoided) == "the first remedy (enforce_eager) is also listed under Do NOT"
    first = plan_retry(ARGV, _report("cuda_oom", eager))
    assert isinstance(first, Retry) and first.describe(1, 1).endswith("--enforce-eager off -> on (enforce_eager)")
    assert plan_retry(ARGV, _report("cuda_oom", eager), tried=[first.argv]) == "that command already failed in this run"
    tp = Remedy("increase_tensor_parallel_size", "tp", 2)
    assert plan_retry(ARGV, _report("cuda_oom", tp)) == (
        "the first remedy (increase_tensor_parallel_size) is not a flag change kvdoctor makes on its own; apply it by hand"
    )
    assert plan_retry(ARGV, _report("cuda_oom", Remedy("lower_max_model_len", "lower"))) == (
        "the first remedy (lower_max_model_len) carries no value for the flag; apply it by hand"
    )
