"""vLLM memory arithmetic: KV bytes per token and block, weights, the budget by era.

One import point for the rest of kvdoctor; the pieces live beside it in ``kvdoctor.memory``:

- ``layout``: head_dim / KV-head rules, TP and PP, MLA, sliding and hybrid layers, KV dtype
- ``weights``: params x bytes/param, quantization aware, split by TP/PP
- ``budget``: eras, default batch and fraction, overhead estimates, blocks and tokens
- ``plan``: the ahead-of-launch plan behind ``kvdoctor plan``
- ``estimate``: ``derive_for_diagnosis``, the figures a log did not print, for the diagnosis
"""

from __future__ import annotations

from kvdoctor.memory.budget import (
    GIB,
    Budget,
    Capacity,
    Era,
    Estimate,
    default_batch,
    default_block_size,
    default_utilization,
    era_for,
    estimate_activation,
    estimate_cuda_graphs,
    estimate_non_torch,
    kv_capacity,
    make_budget,
    parse_version,
)
from kvdoctor.memory.estimate import derive_for_diagnosis
from kvdoctor.memory.layout import (
    KvLayout,
    LayerKind,
    head_dim,
    kv_heads_per_rank,
    kv_layout,
    layer_kinds,
    mamba_state_bytes,
    total_kv_heads,
)
from kvdoctor.memory.model import default_max_model_len
from kvdoctor.memory.plan import Fix, Plan, PlanRequest, fixes, make_plan, serve_command
from kvdoctor.memory.weights import (
    WeightsEstimate,
    estimate_weights,
    linear_bytes_per_param,
    total_params,
)

__all__ = [
    "GIB",
    "Budget",
    "Capacity",
    "Era",
    "Estimate",
    "Fix",
    "KvLayout",
    "LayerKind",
    "Plan",
    "PlanRequest",
    "WeightsEstimate",
    "default_batch",
    "default_block_size",
    "default_max_model_len",
    "default_utilization",
    "derive_for_diagnosis",
    "era_for",
    "estimate_activation",
    "estimate_cuda_graphs",
    "estimate_non_torch",
    "estimate_weights",
    "fixes",
    "head_dim",
    "kv_bytes_per_block",
    "kv_bytes_per_token",
    "kv_capacity",
    "kv_heads_per_rank",
    "kv_layout",
    "layer_kinds",
    "linear_bytes_per_param",
    "make_budget",
    "make_plan",
    "mamba_state_bytes",
    "parse_version",
    "serve_command",
    "total_kv_heads",
    "total_params",
]


def kv_bytes_per_token(config: dict[str, object], *, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto") -> int:
    """Per-rank bytes one token takes across every attention layer of the busiest stage."""
    return kv_layout(config, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype).bytes_per_token


def kv_bytes_per_block(
    config: dict[str, object],
    *,
    block_size: int = 16,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
) -> int:
    """Per-rank bytes of one block across every attention layer (V0 get_cache_block_size)."""
    return kv_layout(config, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype).block_bytes(block_size)
