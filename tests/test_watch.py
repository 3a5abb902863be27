"""`kvdoctor watch`: the log passes through untouched and the diagnosis arrives while the stream
is still open (the writer keeps the pipe open until the test has seen the diagnosis)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

from kvdoctor.api import diagnose

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
FREE_MEMORY = (CORPUS / "027-v1-laptop-4gb-free-memory-322of40.log").read_bytes()
HEALTHY = (CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log").read_bytes()
BANNER = b"INFO 09-28 15:47:01 [api_server.py:1885] vLLM API server version 0.10.2\n"
SERVING = b"INFO:     Application startup complete.\n"
NOISE = (
    b"Loading safetensors checkpoint shards:  50% 1/2\rLoading safetensors checkpoint "
    b"shards: 100% 2/2\n\x1b[32mINFO\x1b[0m bytes that are not UTF-8: \xff\xfe\n"
)
LONG_WAIT = 120  # only guards against a hung test; nothing here measures time


def _watch(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kvdoctor", "watch", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _lines_of(stream: object) -> queue.Queue[bytes]:
    """Read a pipe line by line in the background (so the test never blocks on it)."""
    out: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            out.put(line)
        out.put(b"")

    threading.Thread(target=pump, daemon=True).start()
    return out


def _next_report(lines: queue.Queue[bytes]) -> dict[str, object]:
    line = lines.get(timeout=LONG_WAIT)
    assert line, "stderr closed before a diagnosis arrived"
    record: dict[str, object] = json.loads(line)
    return record


def test_diagnosis_arrives_before_the_stream_ends_and_stdout_is_the_input() -> None:
    failing_part, rest = FREE_MEMORY.split(b"\n", 7)[:7], FREE_MEMORY.split(b"\n", 7)[7]
    # the stream stops right after the ValueError line: the diagnosis must come from the pause,
    # not from more input or EOF
    first = BANNER + NOISE + b"\n".join(failing_part) + b"\n"
    assert b"Free memory on device" in first.splitlines()[-1]
    second = rest + BANNER + HEALTHY + SERVING + b"last line without a newline"
    proc = _watch("--format", "json")
    assert proc.stdin is not None and proc.stdout is not None
    stdout = _lines_of(proc.stdout)
    reports = _lines_of(proc.stderr)
    proc.stdin.write(first)
    proc.stdin.flush()

    early = _next_report(reports)  # stdin is still open here
    assert proc.poll() is None
    assert early["verdict"] == "insufficient_free_memory_at_startup"
    remedies = [r["action"] for r in early["diagnoses"][0]["remedies"]]  # type: ignore[index]
    assert remedies[0] == "lower_gpu_memory_utilization"
    seen = b""
    while seen != first:  # the log got through before the stream ended, unchanged
        seen += stdout.get(timeout=LONG_WAIT)

    proc.stdin.write(second)  # the supervisor restarts the server, which comes up
    proc.stdin.close()
    later = _next_report(reports)
    assert later["verdict"] == "healthy"
    assert proc.wait(timeout=LONG_WAIT) == 0  # the last attempt is healthy
    assert reports.get(timeout=LONG_WAIT) == b""  # nothing more (the EOF report was known)
    rest_out = b"".join(iter(lambda: stdout.get(timeout=LONG_WAIT), b""))
    assert seen + rest_out == first + second
    assert diagnose(first + second).exit_code() == 0


def test_exit_code_at_eof_is_what_diagnose_gives(tmp_path: Path) -> None:
    report_file = tmp_path / "diagnosis.md"
    proc = _watch("--report", str(report_file), "--format", "markdown")
    out, err = proc.communicate(FREE_MEMORY, timeout=LONG_WAIT)
    assert out == FREE_MEMORY
    assert err == b""  # diagnoses went to the file
    assert proc.returncode == diagnose(FREE_MEMORY).exit_code() == 1
    assert "`insufficient_free_memory_at_startup`" in report_file.read_text(encoding="utf-8")


def test_fail_on_never_and_input_without_vllm_lines() -> None:
    proc = _watch("--fail-on", "never")
    out, err = proc.communicate(FREE_MEMORY, timeout=LONG_WAIT)
    assert proc.returncode == 0 and out == FREE_MEMORY
    assert b"insufficient_free_memory_at_startup" in err

    proc = _watch("--format", "json")
    out, err = proc.communicate(b"hello\nworld\n", timeout=LONG_WAIT)
    assert out == b"hello\nworld\n" and proc.returncode == 0
    assert json.loads(err)["verdict"] == "unknown"  # said once, at EOF


def test_unwritable_report_is_a_one_line_usage_error(tmp_path: Path) -> None:
    proc = _watch("--report", str(tmp_path / "missing" / "r.txt"))
    out, err = proc.communicate(b"x\n", timeout=LONG_WAIT)
    assert proc.returncode == 2
    assert err.decode().count("\n") == 1 and err.startswith(b"kvdoctor: watch: cannot write")
