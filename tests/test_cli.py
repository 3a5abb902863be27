"""The command line as a user sees it: output, exit codes, errors, JSON contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvdoctor.cli import main

ROOT = Path(__file__).parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())


@pytest.mark.parametrize("log", sorted(p.name for p in CORPUS.glob("*.log")))
def test_json_output_validates_against_the_schema(log: str, capsys: pytest.CaptureFixture[str]) -> None:
    main(["diagnose", "--format", "json", str(CORPUS / log)])
    jsonschema.validate(json.loads(capsys.readouterr().out), SCHEMA)


def test_text_output_shows_verdict_evidence_remedies_avoid_and_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "diagnose",
            "--lang",
            "en",
            str(CORPUS / "015-v0-whisper-8gb-profile-peak-cuda-blocks-0.log"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("Verdict: no_cache_blocks")
    assert "reduce_max_num_batched_tokens" in out and "Do NOT" in out
    assert "Evidence" in out and "7.09" in out
    assert "Memory budget" in out and "activation 7.09" in out
    assert "\x1b[" not in out  # not a TTY: no colour


def test_chinese_output(capsys: pytest.CaptureFixture[str]) -> None:
    main(["diagnose", "--lang", "zh", str(CORPUS / "027-v1-laptop-4gb-free-memory-322of40.log")])
    out = capsys.readouterr().out
    assert out.startswith("结论：启动时空闲显存不足") and "不要这样做" in out  # the class by its zh name (issue 16)


def test_markdown_output(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "diagnose",
            "--format",
            "markdown",
            str(CORPUS / "075-v1-kaito-k8s-h100-preset-maxlen-1048576.log"),
        ]
    )
    out = capsys.readouterr().out
    assert out.startswith("**Verdict: `max_model_len_too_large`**")
    assert "1. `lower_max_model_len` → `" in out


@pytest.mark.parametrize(
    ("fail_on", "log", "code"),
    [
        ("error", "051-v1-011-qwen3-14b-lmcache-healthy.log", 0),
        ("error", "090-v1-l40s-second-tinyllama-instance-util02-no-cache-blocks.log", 1),
        ("never", "090-v1-l40s-second-tinyllama-instance-util02-no-cache-blocks.log", 0),
    ],
)
def test_exit_codes(fail_on: str, log: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--fail-on", fail_on, str(CORPUS / log)]) == code


def test_missing_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "no/such.log"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "kvdoctor: no/such.log: no such file; check the path"


def test_facts_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "facts",
                "--format",
                "json",
                str(CORPUS / "015-v0-whisper-8gb-profile-peak-cuda-blocks-0.log"),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    assert data["facts"]["activation_peak_gib"] == 7.09
    assert data["attempts"][0]["sources"]["activation_peak_gib"]["line"] == 6
    assert data["attempts"][0]["sources"]["budget_gib"]["source"] == "log"
    assert data["attempts"][0]["sources"]["kv_reconstructed_gib"]["derived"] is True


def test_facts_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    main(["facts", str(CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log")])
    out = capsys.readouterr().out
    assert "kv_cache_tokens" in out and "42656" in out and "line 2" in out


def test_events_stream_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "events",
            "--kind",
            "kv_cache_size",
            str(CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["kv_cache_tokens"] for x in lines] == [42656]


def test_several_attempts_verdict_is_the_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = (CORPUS / "027-v1-laptop-4gb-free-memory-322of40.log").read_text()
    log = tmp_path / "restarts.log"
    log.write_text(
        "INFO 01-01 [api_server.py:1] vLLM API server version 0.10.2\n"
        + first
        + "INFO 01-01 [api_server.py:1] vLLM API server version 0.10.2\n"
        + (CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log").read_text()
    )
    assert main(["diagnose", "--format", "json", str(log)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["verdict"] for a in data["attempts"]] == [
        "insufficient_free_memory_at_startup",
        "healthy",
    ]
    assert data["verdict"] == "healthy"


def test_stdin_and_gzip(tmp_path: Path) -> None:
    import gzip

    data = (CORPUS / "081-v1-k8s-openshift-flaky-free-memory-2265of7918.log").read_bytes()
    packed = tmp_path / "x.log.gz"
    packed.write_bytes(gzip.compress(data))
    for args, stdin in ((["-"], data), ([str(packed)], b"")):
        proc = subprocess.run(
            [sys.executable, "-m", "kvdoctor", "diagnose", "--format", "json", *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        assert json.loads(proc.stdout)["verdict"] == "insufficient_free_memory_at_startup"


def test_no_color_env_and_empty_input(capsys: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "diagnose", "-"],
        input=b"hello\n",
        capture_output=True,
        check=False,
        env={"NO_COLOR": "1", "PATH": "/usr/bin"},
    )
    assert proc.returncode == 2  # nothing to gate on is a usage error, said on one line
    assert b"No vLLM start-up found" in proc.stdout and b"\x1b[" not in proc.stdout
    assert proc.stderr.decode().count("\n") == 1 and "stdin: no vLLM start-up lines found" in proc.stderr.decode()


def test_a_start_up_cut_off_mid_way_is_not_called_the_wrong_log() -> None:
    log = b"INFO 03-03 20:36:02 [model_runner.py:1117] Model loading took 15.4137 GB and 9.03 seconds\n"
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "diagnose", "-"], input=log, capture_output=True, check=False
    )
    assert proc.returncode == 0  # an informational verdict: the start-up had not finished
    assert b"The start-up had not finished" in proc.stdout
    assert b"no vLLM start-up lines found" not in proc.stderr


def test_every_file_is_diagnosed_and_several_in_json_are_json_lines(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    good = ROOT / "examples" / "max-model-len-too-large.log"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvdoctor",
            "diagnose",
            str(tmp_path / "missing.log"),
            str(empty),
            str(good),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2  # the worst of: a missing file, an empty one, a finding
    lines = proc.stdout.splitlines()
    assert [json.loads(line)["verdict"] for line in lines] == ["unknown", "max_model_len_too_large"]
    errors = proc.stderr.splitlines()
    assert len(errors) == 2 and "missing.log: no such file" in errors[0] and "empty.log: no vLLM" in errors[1]


def test_a_corrupt_gzip_is_a_usage_error_that_keeps_what_was_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(b"\x1f\x8bgarbage")
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "diagnose", str(bad)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "bad.log.gz: read error after partial input" in proc.stderr and "copy or download" in proc.stderr


SMI = ROOT / "tests" / "fixtures" / "nvidia-smi"


def _smi_with_other_process() -> Path:
    # a driver-535 table whose process list shows memory held by some process
    return SMI / "r535-2x4090-table.txt"


def _diagnose_with_probe(capsys: pytest.CaptureFixture[str], probe: Path, log: Path) -> tuple[int, dict[str, Any]]:
    """`kvdoctor diagnose --format json --probe-file PROBE LOG`: the exit code and the report,
    checked against the JSON schema."""
    code = main(["diagnose", "--format", "json", "--probe-file", str(probe), str(log)])
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    return code, data


def test_probe_file_confirms_other_process(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _diagnose_with_probe(
        capsys, _smi_with_other_process(), CORPUS / "018-v1-vllm-omni-qwen25-omni-3b-h100-lowered-util.log"
    )
    assert code == 1
    assert data["probe"]["origin"] == "probe"
    assert data["probe"]["facts"]["gpu.other_process_gib"] >= 1
    top = data["diagnoses"][0]
    assert top["cause"] == "other_process" and top["remedies"][0]["action"] == "free_gpu_memory"
    assert "raise_gpu_memory_utilization" in [a["action"] for a in top["avoid"]]
    assert any("confirms the diagnosis" in n for n in data["notes"])


def test_nvidia_smi_pasted_after_the_failure_is_labelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ticket.log"
    log.write_text(
        (CORPUS / "090-v1-l40s-second-tinyllama-instance-util02-no-cache-blocks.log").read_text()
        + "\n$ nvidia-smi\n"
        + _smi_with_other_process().read_text()
    )
    main(["diagnose", "--format", "json", str(log)])
    data = json.loads(capsys.readouterr().out)
    assert data["probe"]["origin"] == "log"
    assert data["facts"]["gpu.taken_after_failure"] is True
    assert any("taken after the failure" in n for n in data["notes"])


def test_unreadable_probe_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "probe.json"
    bad.write_text("{not json")
    assert (
        main(
            [
                "diagnose",
                "--probe-file",
                str(bad),
                str(CORPUS / "090-v1-l40s-second-tinyllama-instance-util02-no-cache-blocks.log"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvdoctor: ") and "\n" not in err


def test_an_unknown_event_kind_is_a_usage_error() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvdoctor",
            "events",
            "--kind",
            "nosuchkind",
            str(ROOT / "examples" / "max-model-len-too-large.log"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "unknown --kind nosuchkind" in proc.stderr and proc.stdout == ""


def test_the_python_api_refuses_a_file_name_given_as_text() -> None:
    import kvdoctor

    with pytest.raises(ValueError, match=r"pass Path\('vllm.log'\)"):
        kvdoctor.diagnose("vllm.log")
    assert kvdoctor.diagnose("ValueError: No available memory for the cache blocks.").verdict == "no_cache_blocks"


def test_piped_text_is_one_line_per_paragraph_and_a_terminal_width_wraps_with_hanging_indents() -> None:
    from kvdoctor.api import diagnose
    from kvdoctor.render import render

    report = diagnose(ROOT / "examples" / "second-instance-no-cache-blocks.log")
    piped = render(report, "text")
    assert not any(line.endswith(" ") for line in piped.splitlines())
    why = piped.split("Why\n", 1)[1].split("\n")[0]
    assert why.startswith("vLLM found no room") and why.endswith("has the same effect.")  # one line
    wrapped = render(report, "text", width=70)
    lines = wrapped.splitlines()
    assert max(len(line) for line in lines if not line.startswith("Verdict")) <= 70
    first = next(i for i, line in enumerate(lines) if line.startswith(" 1. free_gpu_memory"))
    assert lines[first + 1].startswith("    ") and not lines[first + 1].startswith("     ")
    assert "--query-compute-apps=pid,used_memory" in wrapped  # a flag is never split at its hyphens


def test_a_long_evidence_line_is_cut_with_a_mark() -> None:
    from kvdoctor.api import diagnose
    from kvdoctor.render import render

    long_line = "ValueError: No available memory for the cache blocks. " + "x" * 500
    out = render(diagnose(long_line), "text")
    evidence = [line for line in out.splitlines() if "No available memory for the cache blocks. xx" in line][0]
    assert evidence.endswith("…") and len(evidence) < 320


def test_usage_errors_are_one_line_naming_the_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "diagnose", "--bogus"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr == "kvdoctor: diagnose: unrecognized arguments: --bogus; see `kvdoctor diagnose --help`\n"


def test_plain_text_does_not_import_rich() -> None:
    code = (
        "import sys; from pathlib import Path; from kvdoctor.api import diagnose; from kvdoctor.render import render; "
        "out = render(diagnose(Path('examples/second-instance-no-cache-blocks.log')), 'text'); "
        "assert 'free_gpu_memory' in out and '[dim]' not in out and '[/]' not in out; "
        "print(any(m.startswith('rich') for m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def test_ascii_draws_the_budget_bar_without_block_glyphs(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(Path(__file__).parents[1] / "examples" / "profile-peak-no-cache-blocks.log")
    main(["diagnose", "--lang", "en", log])
    assert "█" in capsys.readouterr().out
    main(["diagnose", "--lang", "en", "--ascii", log])
    bar = [line for line in capsys.readouterr().out.splitlines() if "budget 0.9 × total" in line]
    assert bar and bar[0].startswith("|W") and "█" not in bar[0]


def test_diagnose_takes_options_between_its_files(capsys: pytest.CaptureFixture[str]) -> None:
    examples = Path(__file__).parents[1] / "examples"
    main(
        [
            "diagnose",
            str(examples / "max-model-len-too-large.log"),
            "--format",
            "json",
            str(examples / "profile-peak-no-cache-blocks.log"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["verdict"] for line in lines] == ["max_model_len_too_large", "no_cache_blocks"]


def test_a_probe_of_another_card_is_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    # the log failed on a 24 GiB card with 1.24 GiB in use; the probe (a real NVML snapshot) is of
    # an H200 elsewhere with 60.6 GiB held: none of its figures may enter the diagnosis
    code, data = _diagnose_with_probe(
        capsys, SMI / "nvml-h200-cotenant.json", CORPUS / "033-v1-new-request-memory-24gb-util097-free-2276of24.log"
    )
    assert code == 1
    assert data["probe"]["facts"] == {} and "24.00 GiB card" in data["probe"]["ignored"]
    assert not any(name.startswith("gpu.") for name in data["facts"])
    top = data["diagnoses"][0]
    assert top["class"] == "insufficient_free_memory_at_startup"
    assert top["remedies"][0] == {**top["remedies"][0], "action": "lower_gpu_memory_utilization", "value": 0.93}
    assert all(r["value"] != 60.6 for r in top["remedies"])
    assert any("NVIDIA H200 (140.40 GiB)" in n and "left out" in n for n in data["notes"])
    assert not any("confirms the diagnosis" in n for n in data["notes"])


def test_a_probe_of_the_same_card_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "h200.log"
    log.write_text(
        "(EngineCore_DP0 pid=81) ERROR 12-04 18:20:11 [core.py:708] ValueError: Free memory on device "
        "cuda:0 (79.2/140.4 GiB) on startup is less than desired GPU memory utilization (0.9, 126.36 GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"
    )
    _, data = _diagnose_with_probe(capsys, SMI / "r580-h200-cotenant-table.txt", log)
    assert "ignored" not in data["probe"]
    assert data["facts"]["gpu.other_process_gib"] == pytest.approx(60.6, abs=0.05)
    assert any("confirms the diagnosis" in n for n in data["notes"])
