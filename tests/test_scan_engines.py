"""Where `kvdoctor scan` runs: the local pool gives what one process gives, keeps only a bounded
number of files in flight, stops cleanly on ^C with what it had; a real local Ray gives the same."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvdoctor.cli import main
from kvdoctor.diagnosis.rules import rules_for
from kvdoctor.fleet import engine_local
from kvdoctor.fleet.engines import BATCH, Job
from kvdoctor.fleet.targets import Target
from kvdoctor.fleet.worker import Settings

ROOT = Path(__file__).parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
VALIDATION = ROOT / "tests" / "fixtures" / "validation"
LOGS = [str(CORPUS / "*.log"), str(VALIDATION / "round4-a"), str(VALIDATION / "round5-b")]


def _scan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    main(["scan", "--format", "json", *argv, *LOGS])
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_the_pool_gives_what_one_process_gives(capsys: pytest.CaptureFixture[str]) -> None:
    alone = _scan(capsys, "--jobs", "1")
    pooled = _scan(capsys, "--jobs", "2")
    assert alone["summary"]["files"] > 60
    assert pooled == alone


def test_the_pool_keeps_a_bounded_number_of_files_in_flight() -> None:
    pulled = 0

    def targets() -> Iterator[Target]:
        nonlocal pulled
        log = str(CORPUS / "003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log")
        for i in range(100_000):
            pulled += 1
            yield Target(f"copy-{i}.log", log)

    job = Job(rules=tuple(rules_for()), settings=Settings(), jobs=2)
    records = engine_local.run(targets(), job)
    first = next(records)
    records.close()
    assert first.verdict == "max_model_len_too_large"
    # the window, plus the batch being cut when the first result came back
    assert pulled <= (job.jobs * engine_local.WINDOW + 1) * BATCH + 1


def test_interrupting_prints_what_was_done(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(4000):
        shutil.copy(CORPUS / "021-v0-064-second-instance-a100-80gb-initial-usage-68gib.log", fleet / f"{i:04}.log")
    env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvdoctor", "scan", "--format", "jsonl", "--jobs", "2", str(fleet)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # ^C at a terminal reaches the whole process group: the workers too
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline() for _ in range(5)]  # records stream out while the scan runs
    os.killpg(proc.pid, signal.SIGINT)
    rest, err = proc.stdout.read(), proc.stderr.read()  # not communicate(): it skips what readline buffered
    proc.wait(timeout=60)
    lines = [json.loads(line) for line in head + rest.splitlines()]
    summary = lines[-1]["summary"]
    assert proc.returncode == 130, err
    assert summary["interrupted"] is True
    assert 5 <= summary["files"] < 4000
    assert summary["files"] == len(lines) - 1 == summary["by_verdict"]["no_cache_blocks"]["count"]
    assert "Traceback" not in err


def test_ray_gives_the_same_summary_as_the_local_engine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = _scan(capsys, "--jobs", "2")
    on_ray = _scan(capsys, "--engine", "ray", "--jobs", "2")  # starts a local Ray with 2 CPUs
    assert on_ray["summary"] == local["summary"]
    assert on_ray["files"] == local["files"]


def test_an_unreachable_cluster_is_one_line_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["scan", "--engine", "ray", "--ray-address", f"127.0.0.1:{port}", str(CORPUS)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvdoctor: --engine ray: cannot reach the Ray cluster at 127.0.0.1:{port} (")
    assert err.count("\n") == 1


def test_the_local_engine_imports_neither_ray_nor_fsspec() -> None:
    code = (
        "import sys; from kvdoctor.cli import main; code = main(['scan', '--jobs', '2', 'examples']); "
        "print(code, 'ray' in sys.modules, 'fsspec' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.stdout.splitlines()[-1] == "1 False False", proc.stderr
