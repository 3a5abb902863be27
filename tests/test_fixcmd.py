"""The argv rewriting behind `kvdoctor run`'s corrected command line."""

from __future__ import annotations

import shlex

import pytest

from kvdoctor.diagnosis.report import Remedy
from kvdoctor.live.fixcmd import ACTION_FLAGS, apply_flag, correct_argv, flag_value

BASE = shlex.split(
    "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 --port 8000"
)


def corrected(argv: list[str], *remedies: tuple[str, object]) -> str | None:
    result = correct_argv(argv, [Remedy(a, "", v) for a, v in remedies])
    return None if result is None else shlex.join(result.argv)


@pytest.mark.parametrize(
    ("action", "value", "expected"),
    [
        (
            "lower_max_model_len",
            8192,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.95 --port 8000",
        ),
        (
            "max_model_len_auto",
            -1,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len -1 --gpu-memory-utilization 0.95 --port 8000",
        ),
        (
            "lower_gpu_memory_utilization",
            0.79,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.79 --port 8000",
        ),
        (
            "reduce_max_num_seqs",
            128,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 "
            "--port 8000 --max-num-seqs 128",
        ),
        (
            "increase_tensor_parallel_size",
            2,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 "
            "--port 8000 --tensor-parallel-size 2",
        ),
        (
            "enforce_eager",
            None,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 "
            "--port 8000 --enforce-eager",
        ),
        (
            "kv_cache_dtype_fp8",
            138928,
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 "
            "--port 8000 --kv-cache-dtype fp8",
        ),
    ],
)
def test_each_flag_remedy_replaces_or_adds_its_flag(action: str, value: object, expected: str) -> None:
    assert corrected(BASE, (action, value)) == expected


def test_the_users_spelling_and_position_are_kept() -> None:
    argv = shlex.split(
        "python -m vllm.entrypoints.openai.api_server --model m "
        "--max_model_len=16384 --gpu-memory-utilization 0.9 -tp 1"
    )
    assert corrected(argv, ("lower_max_model_len", 4096)) == (
        "python -m vllm.entrypoints.openai.api_server --model m --max_model_len=4096 --gpu-memory-utilization 0.9 -tp 1"
    )
    assert corrected(argv, ("increase_tensor_parallel_size", 2)) == (
        "python -m vllm.entrypoints.openai.api_server --model m --max_model_len=16384 "
        "--gpu-memory-utilization 0.9 -tp 2"
    )


def test_repeated_and_negated_flags_collapse_into_one() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--no-enforce-eager",
        "--max-num-seqs",
        "512",
        "--max-num-seqs=256",
    ]
    assert corrected(argv, ("enforce_eager", None)) == (
        "vllm serve m --enforce-eager --max-num-seqs 512 --max-num-seqs=256"
    )
    assert corrected(argv, ("reduce_max_num_seqs", 64)) == ("vllm serve m --no-enforce-eager --max-num-seqs 64")


def test_only_the_primary_remedy_becomes_a_command() -> None:
    """A weak later remedy (eager mode after 'free the GPU') is never promoted to the fix (issue 17)."""
    argv = ["vllm", "serve", "m"]
    later = [Remedy("raise_gpu_memory_utilization", "", None), Remedy("enforce_eager", "", None)]
    assert correct_argv(argv, [Remedy("free_gpu_memory", "", 68.0), *later]) is None
    assert correct_argv(argv, [Remedy("increase_tensor_parallel_size", "", None), *later]) is None  # no value
    result = correct_argv(argv, [Remedy("enforce_eager", "", None), Remedy("reduce_max_num_seqs", "", 128)])
    assert result is not None
    assert (result.action, result.flag, result.value) == ("enforce_eager", "--enforce-eager", None)
    assert result.argv == ("vllm", "serve", "m", "--enforce-eager")


@pytest.mark.parametrize(
    ("action", "value", "argv"),
    [
        ("free_gpu_memory", 12.5, BASE),  # not a flag
        ("use_quantized_checkpoint", None, BASE),
        ("lower_max_model_len", None, BASE),  # no value to set
        ("lower_gpu_memory_utilization", 0.0, BASE),  # vLLM rejects 0
        ("lower_gpu_memory_utilization", 1.5, BASE),
        ("lower_gpu_memory_utilization", 0.97, BASE),  # not lower than 0.95
        ("raise_gpu_memory_utilization", 0.85, ["vllm", "serve", "m"]),  # default is 0.9
        ("lower_max_model_len", 65536, BASE),  # not lower
        ("reduce_max_num_seqs", 2.5, BASE),
        ("enforce_eager", None, [*BASE, "--enforce-eager"]),  # already set
        ("kv_cache_dtype_fp8", None, [*BASE, "--kv-cache-dtype=fp8"]),
    ],
)
def test_no_correction_when_it_would_not_be_one_sensible_flag_change(
    action: str, value: object, argv: list[str]
) -> None:
    assert corrected(argv, (action, value)) is None


def test_flag_value_text_is_what_vllm_parses() -> None:
    spec, text = flag_value("raise_gpu_memory_utilization", 0.93, {}) or (None, None)
    assert spec is ACTION_FLAGS["raise_gpu_memory_utilization"] and text == "0.93"
    assert flag_value("lower_max_model_len", 2304.0, {"max_model_len": 8192}) == (
        ACTION_FLAGS["lower_max_model_len"],
        "2304",
    )


def test_apply_flag_appends_when_absent() -> None:
    spec = ACTION_FLAGS["lower_gpu_memory_utilization"]
    assert apply_flag(["vllm", "serve", "m"], spec, "0.5") == [
        "vllm",
        "serve",
        "m",
        "--gpu-memory-utilization",
        "0.5",
    ]
