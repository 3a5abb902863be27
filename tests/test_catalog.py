"""Catalog: size, loose names, close-name suggestions, local config.json / dirs / HF cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvdoctor.memory.catalog import (
    CatalogError,
    find_gpu,
    find_model,
    gpus,
    models,
    resolve_model,
    suggest_models,
)


def test_catalog_has_at_least_60_models_each_with_a_source() -> None:
    assert len(models()) >= 60
    assert all(m.source for m in models())
    assert len({m.id for m in models()}) == len(models())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("llama-3.1-8b", "Llama-3.1-8B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "Llama-3-8B"),
        ("/models/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"),
        ("./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "Qwen3-Coder-30B-A3B-Instruct"),
        ("gemma-3-27b", "Gemma-3-27B-it"),
        ("mistral-nemo", "Mistral-Nemo-Instruct-2407"),
        ("/root/.cache/huggingface/hub/models--Qwen--Qwen3-14B", "Qwen3-14B"),
    ],
)
def test_loose_names(query: str, expected: str) -> None:
    entry = find_model(query)
    assert entry is not None and entry.name == expected


def test_quantized_repo_name_sets_the_checkpoint_format() -> None:
    assert find_model("Qwen/Qwen2.5-7B-Instruct-AWQ").quantization == "awq"  # type: ignore[union-attr]
    assert find_model("Qwen2.5-7B-Instruct").quantization is None  # type: ignore[union-attr]


def test_unknown_model_gets_close_names() -> None:
    assert find_model("lama-3.1-8b") is None
    assert "Llama-3.1-8B" in suggest_models("lama-3.1-8b")


def test_gpus_match_loosely_and_report_vllm_totals() -> None:
    assert find_gpu("NVIDIA H100 80GB HBM3").total_gib == 79.22  # type: ignore[union-attr]
    assert find_gpu("rtx 3090").total_gib == 23.58  # type: ignore[union-attr]
    assert find_gpu("4090") is not None and find_gpu("b300") is None
    assert len(gpus()) >= 15


CONFIG = {
    "_name_or_path": "my-org/finetune",
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
}


def test_local_model_dir_with_index(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 5_730_000_000}}))
    entry = resolve_model(str(tmp_path))
    assert entry is not None and entry.origin == "local"
    assert entry.quantization == "awq" and entry.checkpoint_bytes == 5_730_000_000


def test_hf_cache_folder(tmp_path: Path) -> None:
    snap = tmp_path / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(CONFIG))
    entry = resolve_model(str(tmp_path / "models--acme--tiny"))
    assert entry is not None and entry.name == "acme/tiny"


def test_broken_local_config_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CatalogError, match="cannot read config.json"):
        resolve_model(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CatalogError, match="no config.json"):
        resolve_model(str(empty))


def test_the_dgx_spark_gb10_is_in_the_catalog_at_what_vllm_sees() -> None:
    from kvdoctor.memory.catalog import find_gpu

    entry = find_gpu("GB10")
    assert entry is not None and entry.total_gib == 121.63 and find_gpu("DGX Spark") == entry
