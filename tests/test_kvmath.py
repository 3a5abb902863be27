"""KV bytes per token / block pinned against hand-checked figures, and the corpus healthy logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.memory.catalog import find_model
from kvdoctor.memory.kvmath import (
    Era,
    derive_for_diagnosis,
    estimate_weights,
    kv_bytes_per_block,
    kv_bytes_per_token,
    kv_capacity,
    kv_layout,
)

GIB = 1 << 30

# (catalog name, tp, per-token bytes, per-16-token-block bytes), figures worked by hand:
# 2 x layers x kv_heads_per_rank x head_dim x 2 B (MLA: layers x 576 x 2 B, no factor 2).
PINNED = [
    ("Llama-3.1-8B", 1, 131_072, 2_097_152),  # 2*32*8*128*2; 2 MiB/block
    ("Llama-3.1-8B", 2, 65_536, 1_048_576),  # 4 heads per rank
    ("Llama-2-7B-Chat", 1, 524_288, 8_388_608),  # MHA 32 heads
    ("Llama-2-13B-Chat", 1, 819_200, 13_107_200),  # 800 KiB/token, 12.5 MiB/block
    ("Llama-3.1-70B", 1, 327_680, 5_242_880),
    ("Llama-3.1-70B", 8, 40_960, 655_360),
    ("Llama-3.2-1B-Instruct", 1, 32_768, 524_288),  # head_dim 64
    ("Qwen2.5-7B-Instruct", 1, 57_344, 917_504),  # 28 layers, 4 KV heads
    ("Qwen2.5-7B-Instruct", 8, 14_336, 229_376),  # 4 heads < tp 8: one replicated head
    ("Qwen3-14B", 1, 163_840, 2_621_440),
    ("Qwen3-32B", 2, 131_072, 2_097_152),  # 64 layers, 4 heads per rank
    ("Qwen3-30B-A3B", 1, 98_304, 1_572_864),
    ("Mistral-Nemo-Instruct-2407", 1, 163_840, 2_621_440),  # head_dim 128, not 5120/32
    ("Mixtral-8x7B-v0.1", 1, 131_072, 2_097_152),
    ("Phi-3-mini-4k-instruct", 1, 393_216, 6_291_456),  # head_dim 96
    ("GLM-4-9B-Chat", 1, 40_960, 655_360),  # multi_query_group_num 2
    ("Falcon-7B", 1, 8_192, 131_072),  # multi-query: one KV head
    ("Falcon-40B", 1, 122_880, 1_966_080),  # new decoder: 8 KV heads, head_dim 64
    ("Command-R v01", 1, 1_310_720, 20_971_520),  # MHA 64 heads
    ("DeepSeek-V3", 1, 70_272, 1_124_352),  # MLA: 61*576*2
    ("DeepSeek-V3", 8, 70_272, 1_124_352),  # the latent is not split by TP
    ("DeepSeek-V2-Lite-Chat", 1, 31_104, 497_664),
    ("Gemma-2-9B-it", 1, 344_064, 5_505_024),  # head_dim 256, all 42 layers (V0 / unified)
    ("gpt-oss-120b", 1, 73_728, 1_179_648),  # head_dim 64 (2880/64 would be 45)
]


@pytest.mark.parametrize(("name", "tp", "per_token", "per_block"), PINNED)
def test_pinned_kv_bytes(name: str, tp: int, per_token: int, per_block: int) -> None:
    cfg = dict(find_model(name).config)  # type: ignore[union-attr]
    assert kv_bytes_per_token(cfg, tp=tp) == per_token
    assert kv_bytes_per_block(cfg, tp=tp) == per_block


def test_every_catalog_entry_matches_its_reference_figure() -> None:
    from kvdoctor.memory.catalog import models

    checked = 0
    for entry in models():
        for key, value in entry.reference_kv_bytes.items():
            if not isinstance(value, int):
                continue
            layout = kv_layout(entry.config)
            full = int(layout.token_bytes_per_layer * layout.count(layout.kinds[0].FULL))
            if "full_layers" in key or "attention_layers" in key:
                assert full == value, (entry.name, key)
            elif "mla_disabled" in key:
                assert kv_layout(entry.config, mla_enabled=False).bytes_per_token == value
            elif key.startswith("kv_bytes"):
                assert layout.bytes_per_token == value, (entry.name, key)
            else:  # Mamba / gated-DeltaNet state per layer per sequence
                assert layout.mamba_state_bytes == value, (entry.name, key)
            checked += 1
    assert checked >= 70


def test_fp8_kv_halves_and_fp8_ds_mla_is_656_bytes() -> None:
    cfg = dict(find_model("Llama-3.1-8B").config)  # type: ignore[union-attr]
    assert kv_bytes_per_token(cfg, kv_cache_dtype="fp8") == 65_536
    v3 = dict(find_model("DeepSeek-V3").config)  # type: ignore[union-attr]
    assert kv_bytes_per_token(v3, kv_cache_dtype="fp8_ds_mla") == 61 * 656


def test_pre_mla_sizing_is_mha() -> None:
    v3 = find_model("DeepSeek-V3").config  # type: ignore[union-attr]
    assert kv_layout(v3, mla_enabled=False).bytes_per_token == 2 * 61 * 128 * 192 * 2


def test_hybrid_block_size_is_raised_to_hold_a_mamba_state() -> None:
    layout = kv_layout(find_model("Qwen3.5-35B-A3B").config, tp=1)  # type: ignore[union-attr]
    cap = kv_capacity(layout, 10.0, era=Era.V1, max_model_len=8192, max_num_batched_tokens=2048)
    assert cap.block_size % 16 == 0
    assert cap.block_size * layout.token_bytes_per_layer >= layout.mamba_state_bytes


def test_sliding_layers_are_cheaper_with_the_hybrid_manager_than_without() -> None:
    layout = kv_layout(find_model("Gemma-3-27B-it").config)  # type: ignore[union-attr]
    on = kv_capacity(layout, 20.0, era=Era.V1, max_model_len=131072, max_num_batched_tokens=2048)
    off = kv_capacity(
        layout,
        20.0,
        era=Era.V1,
        max_model_len=131072,
        max_num_batched_tokens=2048,
        hybrid_manager=False,
    )
    assert on.max_model_len_that_fits > 4 * off.max_model_len_that_fits


def test_weights_match_logged_model_loading() -> None:
    llama = find_model("Llama-3.1-8B").config  # type: ignore[union-attr]
    assert estimate_weights(llama).gib == pytest.approx(14.99, abs=0.02)  # RTX 3090 log
    assert estimate_weights(llama, tp=2).gib == pytest.approx(7.5122, abs=0.01)  # 0.5.4 TP=2 log


# -- the corpus' healthy logs, reproduced from their own figures ------------------------------

# 051 (LMCache#1739, vLLM ~0.11, Qwen/Qwen3-14B, TP=1):
LOG_051 = (Path(__file__).parent / "fixtures/plan/051-qwen3-14b-healthy.log").read_text()


def _rounded_range(kv_gib: float, layout_name: str, **kw: object) -> tuple[int, int]:
    """Tokens for the smallest and largest KV size that prints as kv_gib (2 decimals)."""
    layout = kv_layout(find_model(layout_name).config)  # type: ignore[union-attr]
    lo = kv_capacity(layout, kv_gib - 0.005, **kw).kv_cache_tokens  # type: ignore[arg-type]
    hi = kv_capacity(layout, kv_gib + 0.005, **kw).kv_cache_tokens  # type: ignore[arg-type]
    return lo, hi


def test_corpus_051_qwen3_14b_tokens_and_concurrency() -> None:
    assert "6.51 GiB" in LOG_051 and "42,656 tokens" in LOG_051
    layout = kv_layout(find_model("Qwen/Qwen3-14B").config)  # type: ignore[union-attr]
    cap = kv_capacity(layout, 6.51, era=Era.V1, max_model_len=32768, max_num_batched_tokens=2048)
    assert cap.kv_cache_tokens == 42_656
    assert round(cap.max_concurrency, 2) == 1.30
    derived = derive_for_diagnosis({"model": "Qwen/Qwen3-14B", "kv_cache_gib": 6.51, "max_model_len": 32768})
    assert derived["kv_tokens_estimate"] == 42_656


# 054 (vllm#50722, new one-line budget, H100, Qwen3.5-35B-A3B): the printed KV size is
# util x total - weights - peak activation - non-torch - CUDA graphs.
LOG_054 = (
    "Free memory on device (77.78/79.33 GiB) on startup. Desired GPU memory utilization is "
    "(0.85, 67.43 GiB). Actual usage is 16.92 GiB for weight, 5.66 GiB for peak activation, "
    "0.13 GiB for non-torch memory, and 1.34 GiB for CUDAGraph memory. Replace "
    "gpu_memory_utilization config with `--kv-cache-memory=46421742490` (43.23 GiB) to fit into "
    "requested memory, or "
    "`--kv-cache-memory=57542425088` (53.59 GiB) to fully utilize gpu memory. Current kv cache "
    "memory in use is 43.4 GiB."
)


def test_corpus_054_budget_reproduces_kv_gib() -> None:
    from kvdoctor.memory.kvmath import make_budget

    budget = make_budget(
        Era.V1_GRAPHS,
        total_gib=79.33,
        utilization=0.85,
        weights_gib=16.92,
        activation_gib=5.66,
        non_torch_gib=0.13,
        graphs_gib=1.34,
    )
    assert round(budget.requested_gib, 2) == 67.43
    assert budget.kv_cache_gib == pytest.approx(43.4, abs=0.03)
    # vLLM's own suggestion subtracts a 150 MiB redundancy buffer from the same figure.
    assert budget.kv_cache_gib - 150 / 1024 == pytest.approx(46421742490 / GIB, abs=0.03)
    derived = derive_for_diagnosis(
        {
            "model": "Qwen3.5-35B-A3B",
            "total_gpu_gib": 79.33,
            "gpu_memory_utilization": 0.85,
            "weights_gib": 16.92,
            "activation_peak_gib": 5.66,
            "non_torch_gib": 0.13,
            "cuda_graph_gib": 1.34,
            "vllm_version": "0.26.0",
        }
    )
    assert derived["budget_shortfall_gib"] == pytest.approx(43.4, abs=0.03)
    assert derived["budget_gib"] == 67.43


# 084 (club-3090#127, >= 0.21, TP=4 on RTX 3090s): the graph estimate moves the effective fraction.
LOG_084 = (
    "Estimated CUDA graph memory: 0.17 GiB total / The current --gpu-memory-utilization=0.9200 is "
    "equivalent to --gpu-memory-utilization=0.9129 without CUDA graph memory profiling. ... "
    "increase --gpu-memory-utilization to 0.9271. / Available KV cache memory: 15.72 GiB"
)


def test_corpus_084_graph_estimate_equivalent_fraction() -> None:
    from kvdoctor.memory.catalog import find_gpu

    total = find_gpu("rtx-3090").total_gib  # type: ignore[union-attr]
    graph_gib = 0.17
    # logged 0.17 is rounded: any graph size in [0.165, 0.175) GiB must give the printed pair
    equivalents = {round(0.92 - g / total, 4) for g in (0.1675, 0.168)}
    raised = {round(0.92 + g / total, 4) for g in (0.1675, 0.168)}
    assert 0.9129 in equivalents and 0.9271 in raised
    assert abs(0.92 - graph_gib / total - 0.9129) < 0.0003
    # what remains of 0.92 x total after graphs and KV: weights + activation + non-torch
    assert 0.92 * total - graph_gib - 15.72 == pytest.approx(5.8, abs=0.02)


# 099 (pytorch/serve#3315, vLLM ~0.6.0, V0): "Loading model weights took 7.5122 GB" and
# "# GPU blocks: 61913". V0 prints blocks; tokens are blocks x 16.
LOG_099 = """\
INFO 09-13 22:25:38 model_runner.py:1008] Loading model weights took 7.5122 GB
INFO 09-13 22:25:41 distributed_gpu_executor.py:57] # GPU blocks: 61913, # CPU blocks: 4096
"""


def test_corpus_099_blocks_to_tokens_and_weights_identify_llama_8b_tp2() -> None:
    derived = derive_for_diagnosis({"gpu_blocks": 61913, "block_size": 16, "engine": "v0"})
    assert derived == {}  # no model, no KV figure: nothing to invent
    llama = find_model("Llama-3.1-8B-Instruct").config  # type: ignore[union-attr]
    # 7.5122 GiB is what Llama-3.1-8B weighs per rank at TP=2 (the worker-process layout)
    assert estimate_weights(llama, tp=2).gib == pytest.approx(7.5122, abs=0.01)
    block = kv_bytes_per_block(dict(llama), tp=2)
    assert block == 1 << 20
    assert 61913 * 16 == 990_608  # tokens
    assert 61913 * block / GIB == pytest.approx(60.46, abs=0.01)  # KV GiB per rank
