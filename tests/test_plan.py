"""`kvdoctor plan` through the CLI: verdicts, exit codes, JSON fields, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.fake_pynvml import NVML_ERROR_DRIVER_NOT_LOADED, FakeGpu, FakeNvml, FakeProc

from kvdoctor.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(["plan", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_rtx3090_case_with_the_logged_activation_reproduces_vllm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vllm#10517: 0.9 x 23.58 - 14.99 - 0.35 - 2.99 = 2.89 GiB -> 1,478 blocks = 23,648 tokens
    code, rec = _json(
        capsys,
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "rtx-3090",
        "--max-model-len",
        "29000",
        "--vllm-version",
        "0.6.4.post1",
        "--activation-gib",
        "2.99",
    )
    assert code == 1 and rec["fits"] is False
    assert rec["kv_cache_gib"] == pytest.approx(2.89, abs=0.01)
    assert abs(int(rec["kv_cache_tokens"]) - 23_648) / 23_648 < 0.01  # type: ignore[call-overload]
    assert rec["kv_bytes_per_token"] == 131_072
    assert str(rec["command"]).startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 2")


def test_required_json_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, rec = _json(capsys, "--model", "qwen3-8b", "--gpu", "h100")
    assert code == 0 and rec["fits"] is True
    for key in (
        "weights_gib",
        "activation_peak_gib",
        "non_torch_gib",
        "cuda_graph_gib",
        "kv_cache_gib",
        "kv_bytes_per_token",
        "kv_cache_tokens",
        "gpu_blocks",
        "max_model_len_that_fits",
        "max_concurrency",
        "fits",
        "uncertainty",
    ):
        assert key in rec
    lo, hi = rec["uncertainty"]["kv_cache_gib"]  # type: ignore[index]
    assert lo <= rec["kv_cache_gib"] <= hi  # type: ignore[operator]
    assert rec["command"] == "vllm serve Qwen/Qwen3-8B --max-model-len 40960 --gpu-memory-utilization 0.92"


def test_70b_on_one_h100_does_not_fit_and_proposes_tp(capsys: pytest.CaptureFixture[str]) -> None:
    code, rec = _json(capsys, "--model", "llama-3.1-70b", "--gpu", "h100", "--max-model-len", "32768")
    assert code == 1
    assert rec["kv_cache_gib"] < 0  # type: ignore[operator]
    assert "--tensor-parallel-size 4" in str(rec["command"])


def test_text_output_has_a_bar_and_a_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--model", "llama-3.1-8b", "--gpu-memory", "80GiB", "--max-model-len", "8192"])
    out = capsys.readouterr().out
    assert code == 0
    assert "FITS" in out and "[WWW" in out and "command: vllm serve meta-llama/Llama-3.1-8B" in out


def test_unknown_model_lists_close_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "lama-3.1-8b", "--gpu", "h100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvdoctor: plan: unknown model 'lama-3.1-8b'; close names: Llama-3.1-8B")
    assert err.count("\n") == 1


def test_bad_gpu_and_sizes_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen3-8b", "--gpu", "b300"]) == 2
    assert "unknown GPU 'b300'; close names:" in capsys.readouterr().err
    assert main(["plan", "--model", "qwen3-8b", "--gpu-memory", "lots"]) == 2
    assert "is not a size" in capsys.readouterr().err
    assert main(["plan", "--model", "qwen3-8b", "--gpu", "h100", "--gpu-memory-utilization", "1.5"]) == 2


def _nvml(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> None:
    # the live probe's pynvml, whatever this machine has: the fake's scenario decides
    import kvdoctor.probe.nvml as nvml

    monkeypatch.setattr(nvml, "load_pynvml", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_probe_without_a_gpu_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _nvml(monkeypatch, FakeNvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    assert main(["plan", "--model", "qwen3-8b", "--probe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvdoctor: plan: --probe") and err.count("\n") == 1
    assert "use --gpu or --gpu-memory" in err


def test_probe_plans_on_the_live_gpu_and_its_free_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the H200 of the device check, as NVML reported it: 143771 MiB, another process on 62050 MiB
    busy = FakeGpu("NVIDIA H200", "GPU-0", 143771, used_mib=62050, reserved_mib=614, compute=[FakeProc(550, 62050)])
    _nvml(monkeypatch, FakeNvml([busy], driver="580.159.04"))
    code, rec = _json(capsys, "--model", "llama-3.1-8b", "--probe")
    assert code == 1 and rec["gpu"] == "NVIDIA H200"
    assert rec["total_gpu_gib"] == pytest.approx(140.4, abs=0.01)
    assert rec["fixes"][0]["change"] == "--gpu-memory-utilization 0.56 (what is free now)"  # type: ignore[index]
    # the same card idle: the default fraction fits, nothing to fix
    _nvml(monkeypatch, FakeNvml([FakeGpu("NVIDIA H200", "GPU-0", 143771, reserved_mib=614)]))
    code, rec = _json(capsys, "--model", "llama-3.1-8b", "--probe")
    assert code == 0 and rec["fits"] is True and rec["fixes"] == []


def test_fp8_kv_doubles_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    _, auto = _json(capsys, "--model", "qwen3-8b", "--gpu", "l4")
    _, fp8 = _json(capsys, "--model", "qwen3-8b", "--gpu", "l4", "--kv-cache-dtype", "fp8")
    assert fp8["kv_bytes_per_token"] * 2 == auto["kv_bytes_per_token"]  # type: ignore[operator]
    assert fp8["kv_cache_tokens"] >= 2 * auto["kv_cache_tokens"] - 16  # type: ignore[operator]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "3"], "does not divide the model's 64 attention heads"),
        (["--model", "llama-3.1-8b", "--gpu", "h100", "--quantization", "nonsense"], "is not a vLLM method"),
        (["--model", "llama-3.1-8b", "--gpu", "h100", "--vllm-version", "banana"], "is not a version"),
        (
            ["--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "200000"],
            "beyond the model's maximum (131072)",
        ),
        (["--gpu", "h100"], "--model is required"),
    ],
)
def test_what_vllm_would_refuse_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_the_catalog_can_be_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--list-models", "--list-gpus"]) == 0
    out = capsys.readouterr().out
    assert "meta-llama/Llama-3.1-8B" in out and "NVIDIA H100 80GB" in out


def test_without_a_gpu_plan_is_a_kv_calculator(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3-8B: 36 layers x 2 (K and V) x 8 KV heads x 128 x 2 bytes = 147,456 B per token,
    # the figure behind vLLM's own "5.62 GiB KV cache is needed" for 40,960 tokens
    assert main(["plan", "--model", "Qwen/Qwen3-8B", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["gpu"] is None
    assert rec["kv_bytes_per_token"] == 147456
    assert rec["block_size"] == 16 and rec["block_bytes"] == 16 * 147456
    assert rec["tokens_per_gib"] == (1 << 30) // 147456
    assert rec["max_model_len"] == 40960 and rec["kv_gib_per_sequence"] == 5.62
    assert 15.0 < rec["weights_gib"] < 16.5
    # TP shards the KV heads and the weights
    assert main(["plan", "--model", "Qwen/Qwen3-8B", "-tp", "2", "--kv-cache-dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "Qwen/Qwen3-8B, TP=2, KV fp8" in out
    assert "36,864 B/token per GPU" in out  # halved by TP, halved again by fp8
    assert "add --gpu NAME, --gpu-memory SIZE or --probe" in out


def test_the_printed_command_keeps_the_model_as_the_user_named_it(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100", "-tp", "4", "--format", "json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["command"].startswith(
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 "
    )
    assert main(["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["command"].startswith("vllm serve meta-llama/Llama-3.1-8B ")


# a real NVML probe of an H200 (driver 580) while another process held 60.6 GiB of it
H200_BUSY = Path(__file__).parent / "fixtures" / "nvidia-smi" / "nvml-h200-cotenant.json"


def test_a_probe_with_a_cotenant_proposes_the_fraction_free_now(capsys: pytest.CaptureFixture[str]) -> None:
    # 79.20 GiB free of 140.40: 0.92 asks 129.17 GiB and fails vLLM's start-up check;
    # (79.20 - 0.5) / 140.40 = 0.5605 -> 0.56, and at 0.56 the 8B model keeps its full length
    code, rec = _json(capsys, "--model", "llama-3.1-8b", "--probe-file", str(H200_BUSY))
    assert code == 1 and rec["fits"] is False
    assert "only 79.20 GiB free" in rec["problems"][0]  # type: ignore[index]
    fix = rec["fixes"][0]  # type: ignore[index]
    assert fix["change"] == "--gpu-memory-utilization 0.56 (what is free now)"
    assert fix["kv_cache_gib"] > 50
    assert rec["command"] == "vllm serve meta-llama/Llama-3.1-8B --max-model-len 131072 --gpu-memory-utilization 0.56"


def test_every_fix_under_a_cotenant_starts_from_the_fraction_free_now(capsys: pytest.CaptureFixture[str]) -> None:
    # 70B bf16 needs 131 GiB of weights: no fraction of one busy H200 holds it, so sharding is
    # proposed at the fraction the start-up check passes, not at the default
    code = main(["plan", "--model", "llama-3.1-70b", "--probe-file", str(H200_BUSY)])
    out = capsys.readouterr().out
    assert code == 1
    fix_lines = [line for line in out.splitlines() if line.strip().startswith("fix:")]
    assert fix_lines and all("--gpu-memory-utilization 0.56" in line for line in fix_lines)
    assert "--tensor-parallel-size" in fix_lines[0]


def test_an_unreadable_probe_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "gpu.json"
    bad.write_text("{not json")
    assert main(["plan", "--model", "llama-3.1-8b", "--probe-file", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gpu.json" in err
