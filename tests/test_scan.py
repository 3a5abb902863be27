"""`kvdoctor scan` as a user sees it: real fixture logs in folders, globs, gzip and bad files;
every output format; exit codes; one-line errors. Engines (pool, Ray, ^C) are in test_scan_engines."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvdoctor.api import diagnose
from kvdoctor.cli import main
from kvdoctor.diagnosis.rules import rules_for
from kvdoctor.fleet.engine_local import run
from kvdoctor.fleet.engines import Job
from kvdoctor.fleet.markdown import render_markdown
from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.summary import Tally
from kvdoctor.fleet.targets import expand
from kvdoctor.fleet.text import render_text
from kvdoctor.fleet.worker import Settings

ROOT = Path(__file__).parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
HEALTHY = CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log"
MAX_LEN = CORPUS / "003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log"
OTHER_PROCESS = CORPUS / "021-v0-064-second-instance-a100-80gb-initial-usage-68gib.log"


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder as a platform team has them: one folder per pod, one log gzipped."""
    (tmp_path / "logs" / "pod-a").mkdir(parents=True)
    (tmp_path / "logs" / "pod-b").mkdir()
    shutil.copy(HEALTHY, tmp_path / "logs" / "pod-a")
    shutil.copy(MAX_LEN, tmp_path / "logs" / "pod-b")
    (tmp_path / "logs" / "pod-b" / "021-second-instance.log.gz").write_bytes(gzip.compress(OTHER_PROCESS.read_bytes()))
    (tmp_path / "logs" / ".hidden.log").write_bytes(MAX_LEN.read_bytes())  # skipped, as hidden files are
    monkeypatch.chdir(tmp_path)
    return Path("logs")


def scan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["scan", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


TEXT = """\
kvdoctor scan: 3 files, 0 unreadable, exit code 1
files under logs/

By verdict
 verdict                   files   share                      e.g.
────────────────────────────────────────────────────────────────────────────────────────────────────
 healthy                       1     33%   ████████████████   pod-a/051-v1…-14b-lmcache-healthy.log
 max_model_len_too_large       1     33%   ████████████████   pod-b/003-v1…dynamo-maxlen-128000.log
 no_cache_blocks               1     33%   ████████████████   pod-b/021-second-instance.log.gz

By cause / phase
 cause / phase                   files   share                      e.g.
────────────────────────────────────────────────────────────────────────────────────────────────────
 healthy                             1     33%   ████████████████   pod-a/051-…-lmcache-healthy.log
 max_model_len_too_large             1     33%   ████████████████   pod-b/003-…mo-maxlen-128000.log
 no_cache_blocks/other_process       1     33%   ████████████████   pod-b/021-…cond-instance.log.gz
"""


def test_text_is_a_table_per_grouping_with_counts_shares_and_a_file(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["scan", "--jobs", "1", str(logs)])
    out = capsys.readouterr().out
    assert code == 1  # the worst file has an error diagnosis, as `diagnose` exits on it
    assert out.startswith(TEXT)
    assert " /models/Qwen2.5-14B-Instruct-GPTQ-Int4       1     33%" in out  # by model
    assert " unnamed 79 GiB card       1     33%" in out  # by GPU: the card's size, the log names none
    assert " free_gpu_memory           1     33%" in out  # by first remedy
    assert "\x1b[" not in out and not any(line != line.rstrip() for line in out.splitlines())


def test_each_record_is_what_diagnose_says_about_that_file(capsys: pytest.CaptureFixture[str]) -> None:
    logs = sorted(CORPUS.glob("*.log"))
    code, doc = scan_json(capsys, "--jobs", "2", *map(str, logs))
    assert [f["path"] for f in doc["files"]] == sorted(map(str, logs))
    worst = 0
    for record in doc["files"]:
        report = diagnose(Path(record["path"])).as_records()
        assert record["verdict"] == report["verdict"], record["path"]
        top = report["diagnoses"][0] if report["diagnoses"] else None
        if top is None:
            assert record["diagnosis"] is None
            continue
        first = top["remedies"][0] if top["remedies"] else None
        assert record["diagnosis"] == {
            "rule": top["rule"],
            "class": top["class"],
            "cause": top["cause"],
            "phase": top["phase"],
            "severity": top["severity"],
            "confidence": top["confidence"],
            "title": top["title"],
            "remedy": first and {"action": first["action"], "value": first["value"]},
        }
        assert record["attempts"] == len(report["attempts"])
        assert record["engine"] == report["facts"].get("engine")
        expected_code = main(["diagnose", record["path"]])
        capsys.readouterr()
        assert record["exit_code"] == expected_code, record["path"]
        worst = max(worst, expected_code)
    assert code == worst == doc["summary"]["exit_code"]


def test_json_document_summary_groups_every_file(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = scan_json(capsys, "--jobs", "2", str(logs))
    assert code == 1
    assert doc["schema_version"] == 1 and set(doc) == {"schema_version", "tool", "summary", "files"}
    summary = doc["summary"]
    names = sorted(f["path"] for f in doc["files"])
    assert names == sorted(
        [
            "logs/pod-a/051-v1-011-qwen3-14b-lmcache-healthy.log",
            "logs/pod-b/003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log",
            "logs/pod-b/021-second-instance.log.gz",
        ]
    )
    assert summary["files"] == 3 and summary["unreadable"] == 0 and summary["interrupted"] is False
    for grouping in ("by_verdict", "by_cause", "by_vllm_version", "by_model", "by_gpu", "by_first_remedy"):
        groups = summary[grouping]
        assert sorted(f for g in groups.values() for f in g["files"]) == names, grouping
        assert all(g["count"] == len(g["files"]) for g in groups.values())
    assert summary["by_cause"]["no_cache_blocks/other_process"]["files"] == ["logs/pod-b/021-second-instance.log.gz"]
    assert summary["by_first_remedy"]["lower_max_model_len"]["count"] == 1
    gz = next(f for f in doc["files"] if f["path"].endswith(".gz"))
    assert gz["diagnosis"]["remedy"] == {"action": "free_gpu_memory", "value": 52.18}
    assert gz["model"] == "/models/Qwen2.5-14B-Instruct-GPTQ-Int4" and gz["gpu_total_gib"] == 79.15


def test_jsonl_streams_one_line_per_file_then_the_summary(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["scan", "--format", "jsonl", "--jobs", "2", str(logs)])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 4 and "summary" in lines[-1]
    assert {r["path"] for r in lines[:-1]} == set(lines[-1]["summary"]["by_verdict"]["healthy"]["files"]) | {
        "logs/pod-b/003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log",
        "logs/pod-b/021-second-instance.log.gz",
    }
    _, doc = scan_json(capsys, "--jobs", "1", str(logs))
    assert lines[-1]["summary"] == doc["summary"]


def test_bad_input_never_stops_the_scan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(MAX_LEN, bad / "good.log")
    (bad / "corrupt.log.gz").write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(4000))
    packed = gzip.compress((CORPUS / "036-v0-025x-runpod-48gb-cudagraph-oom-reverse-order.log").read_bytes(), mtime=0)
    (bad / "truncated.log.gz").write_bytes(packed[: len(packed) * 4 // 5])
    (bad / "random.bin").write_bytes(random.Random(1).randbytes(200_000))
    (bad / "one-line.log").write_bytes(b"x" * (9 << 20))  # a 9 MiB line without a newline
    (bad / "empty.log").write_bytes(b"")
    (bad / "vanished.log").symlink_to(tmp_path / "deleted-since")
    code = main(
        ["scan", "--format", "json", "--jobs", "2", str(bad), str(tmp_path / "no-such.log"), str(tmp_path / "*.none")]
    )
    out, err = capsys.readouterr()
    doc = json.loads(out)
    files = {Path(f["path"]).name: f for f in doc["files"]}
    assert len(files) == 9 == doc["summary"]["files"]
    assert files["good.log"]["error"] is None and files["good.log"]["verdict"] == "max_model_len_too_large"
    assert files["corrupt.log.gz"]["error"].startswith("read error after partial input")
    # what a truncated gzip still holds is diagnosed, and the file is flagged as not fully read
    assert files["truncated.log.gz"]["error"].startswith("read error after partial input")
    assert files["truncated.log.gz"]["verdict"] == "cuda_oom"
    for name in ("random.bin", "one-line.log", "empty.log"):
        assert files[name]["error"].startswith("no vLLM start-up lines found"), name
    assert files["vanished.log"]["error"] == "no such file; check the path"
    assert files["no-such.log"]["error"] == "no such file; check the path"
    assert files["*.none"]["error"] == "no file matches this pattern; check the glob"
    assert doc["summary"]["unreadable"] == 8
    assert code == 2  # as `diagnose` exits on an unreadable file
    assert err.count("\n") == 1 and "8 of 9 file(s) could not be diagnosed" in err


@pytest.mark.parametrize(("fail_on", "code"), [("error", 1), ("warning", 1), ("never", 0)])
def test_exit_code_is_the_worst_file_against_fail_on(
    fail_on: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", "--fail-on", fail_on, "--jobs", "1", str(HEALTHY), str(MAX_LEN)]) == code
    assert main(["scan", "--fail-on", fail_on, "--jobs", "1", str(HEALTHY)]) == 0


def test_globs_dedupe_and_the_output_file(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", "--format", "json", "--output", "logs/report.json", "logs/**/*.log*", "logs"])
    assert code == 1 and capsys.readouterr().out == ""
    doc = json.loads(Path("logs/report.json").read_text())
    assert doc["summary"]["files"] == 3  # each file once; the report itself is not scanned
    assert main(["scan", "--format", "json", "--output", "logs/report.json", "logs"]) == 1
    assert json.loads(Path("logs/report.json").read_text())["summary"]["files"] == 3


def test_markdown_summary(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weird = Path("logs/pod-c/a|b`c.log")
    weird.parent.mkdir()
    shutil.copy(HEALTHY, weird)
    main(["scan", "--format", "markdown", "--jobs", "1", str(logs)])
    out = capsys.readouterr().out
    assert out.startswith("### kvdoctor scan: 4 files, 0 unreadable, exit code 1\n\nFiles under `logs/`.\n")
    assert "| verdict | files | share | files behind it |" in out
    assert "| `healthy` | 2 | 50% | `pod-a/051-v1-011-qwen3-14b-lmcache-healthy.log`, `` pod-c/a\\|b`c.log `` |" in out


def test_rules_and_lang_reach_the_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site-rules"
    site.mkdir()
    text = (ROOT / "rules" / "healthy.yaml").read_text(encoding="utf-8")
    text = text.replace("Start-up reached the KV cache, and no start-up step failed", "Healthy by the site rule")
    (site / "healthy.yaml").write_text(text.replace("../tests/", f"{ROOT}/tests/"), encoding="utf-8")
    _, doc = scan_json(capsys, "--jobs", "2", "--rules", str(site), str(HEALTHY), str(MAX_LEN))
    titles = {Path(f["path"]).name: f["diagnosis"]["title"] for f in doc["files"]}
    assert titles[HEALTHY.name] == "Healthy by the site rule"
    _, doc = scan_json(capsys, "--jobs", "2", "--lang", "zh", str(HEALTHY))
    assert doc["files"][0]["diagnosis"]["title"] == "启动已完成 KV 缓存分配，没有启动步骤失败"


def test_broken_rules_stop_before_the_scan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--rules", str(ROOT / "tests" / "fixtures" / "rules-broken"), str(HEALTHY)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "problem(s) in rule files; fix them or drop --rules" in captured.err


def test_buckets_through_fsspec(capsys: pytest.CaptureFixture[str]) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe("/fleet/pod-a/vllm.log", MAX_LEN.read_bytes())
    memory.pipe("/fleet/pod-b/vllm.log.gz", gzip.compress(OTHER_PROCESS.read_bytes()))
    try:
        code, doc = scan_json(capsys, "--jobs", "1", "memory://fleet", f"file://{HEALTHY}")
    finally:
        memory.rm("/fleet", recursive=True)
    verdicts = {f["path"]: f["verdict"] for f in doc["files"]}
    assert verdicts == {
        "memory:///fleet/pod-a/vllm.log": "max_model_len_too_large",
        "memory:///fleet/pod-b/vllm.log.gz": "no_cache_blocks",
        f"file://{HEALTHY}": "healthy",
    }
    assert code == 1


def test_a_bucket_without_its_filesystem_package_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("fsspec")
    if _importable("s3fs"):
        pytest.skip("s3fs is installed here")
    assert main(["scan", "s3://fleet-logs/2024/"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kvdoctor: s3://fleet-logs/2024/: reading s3:// needs s3fs; pip install 'kvdoctor[buckets]' s3fs\n"
    )


def test_buckets_without_fsspec_name_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec -> ImportError
    assert main(["scan", "gs://fleet-logs/"]) == 2
    assert capsys.readouterr().err == (
        "kvdoctor: gs://fleet-logs/: reading gs:// URLs needs fsspec; pip install 'kvdoctor[buckets]' gcsfs\n"
    )


def test_ray_engine_without_ray_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["scan", "--engine", "ray", str(HEALTHY)]) == 2
    assert capsys.readouterr().err == (
        "kvdoctor: --engine ray needs Ray; pip install 'kvdoctor[ray]', or use --engine local\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "-"], "kvdoctor: scan: reads files, folders and URLs, not stdin; use `kvdoctor diagnose -`"),
        (["scan", "--jobs", "0", "x.log"], "kvdoctor: scan: argument --jobs/-j: --jobs takes a whole number"),
        (["scan", "--format", "pdf", "x.log"], "kvdoctor: scan: argument --format: invalid choice: 'pdf'"),
        (["scan", "--output", "/no/such/dir/r.html", str(HEALTHY)], "kvdoctor: /no/such/dir/r.html: cannot write"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse exits itself on a usage error
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _record(path: str, verdict: str, code: int) -> FileRecord:
    return FileRecord(path, verdict, None, 1, None, None, None, None, None, code, None)


@settings(max_examples=30, deadline=None)
@given(st.permutations([_record(f"f{i}.log", v, i % 3) for i, v in enumerate(["healthy", "other"] * 6)]))
def test_the_summary_does_not_depend_on_the_order_results_arrive_in(records: list[FileRecord]) -> None:
    first, second = Tally(), Tally()
    for r in records:
        first.add(r)
    for r in sorted(records, key=lambda r: r.path):
        second.add(r)
    assert first.summary() == second.summary()
    assert first.summary().as_record()["by_verdict"]["healthy"]["count"] == 6


def _documented_schema() -> dict:  # type: ignore[type-arg]
    text = (ROOT / "docs" / "scan.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```json\n(.*?)```", text, re.S) if '"$schema"' in b)
    return json.loads(block)  # type: ignore[no-any-return]


def test_output_matches_the_schema_in_the_docs(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _documented_schema()
    Path("logs/empty.log").write_bytes(b"")
    _, doc = scan_json(capsys, "--jobs", "1", str(logs), "logs/missing.log", str(CORPUS / "*.log"))
    jsonschema.validate(doc, schema)
    assert doc["summary"]["unreadable"] == 2
    main(["scan", "--format", "jsonl", "--jobs", "2", str(logs)])
    *records, last = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for record in records:
        jsonschema.validate(record, {"$defs": schema["$defs"], "$ref": "#/$defs/record"})
    jsonschema.validate(last["summary"], {"$defs": schema["$defs"], "$ref": "#/$defs/summary"})


def test_a_terminal_gets_colour_and_an_interrupted_scan_says_so(logs: Path) -> None:
    tally = Tally()
    for record in run(expand([str(logs)]), Job(rules=tuple(rules_for()), settings=Settings(), jobs=1)):
        tally.add(record)
    summary = tally.summary(interrupted=True)
    coloured = render_text(summary, color=True, width=120)
    assert "\x1b[1m" in coloured and "no_cache_blocks" in coloured
    plain = render_text(summary, width=120)
    assert plain.startswith(
        "kvdoctor scan: 3 files, 0 unreadable, exit code 1 (interrupted after 3 files; the figures cover those only)\n"
    )
    assert render_markdown(summary).startswith("### kvdoctor scan: 3 files, 0 unreadable, exit code 1 (interrupted")


def test_options_may_come_between_the_paths(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", str(logs / "pod-a"), "--format", "json", str(logs / "pod-b")])
    assert code == 1
    assert json.loads(capsys.readouterr().out)["summary"]["files"] == 3
