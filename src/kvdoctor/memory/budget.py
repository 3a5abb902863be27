"""The memory budget by vLLM era, and how many blocks / tokens the KV part of it holds.

Eras (docs/arithmetic.md): which terms come out of ``util x total`` changed across releases;
CUDA graphs count against the budget only from 0.20, when the default fraction became 0.92.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import Enum

from kvdoctor._record import record
from kvdoctor.memory.layout import KvLayout, LayerKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GIB = float(1 << 30)


class Era(Enum):
    V0_LEGACY = "v0-legacy"  # <= 0.6.4: device-wide non-torch (other processes count)
    V0 = "v0"  # 0.6.5 .. 0.10 V0 engine: per-instance accounting, graphs outside the budget
    V1_EARLY = "v1-early"  # 0.7 .. 0.8 V1: device-wide like V0-legacy
    V1 = "v1"  # 0.9 .. 0.19: util x total - weights - activation - non-torch
    V1_GRAPHS = "v1-graphs"  # >= 0.20: CUDA-graph estimate subtracted too, default util 0.92

    @property
    def describes(self) -> str:
        return ERA_TEXT[self]


ERA_TEXT: dict[Era, str] = {
    Era.V0_LEGACY: "vLLM <= 0.6.4 (V0): util x total - torch peak - device-wide non-torch",
    Era.V0: "vLLM 0.6.5-0.10 (V0): util x total - weights - activation - non-torch; graphs outside",
    Era.V1_EARLY: "vLLM 0.7-0.8 (V1): util x total - torch peak - device-wide non-torch",
    Era.V1: "vLLM 0.9-0.19 (V1): util x total - weights - activation - non-torch; graphs outside",
    Era.V1_GRAPHS: "vLLM >= 0.20 (V1): util x total - weights - activation - non-torch - graphs",
}
LATEST_VERSION = "0.33"


def parse_version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def era_for(version: str | None, engine: str | None = None) -> Era:
    v, eng = parse_version(version), (engine or "").lower()
    if v is None:
        return Era.V0 if eng == "v0" else Era.V1
    if v < (0, 6, 5):
        return Era.V0_LEGACY
    if v < (0, 7):
        return Era.V0
    if v < (0, 9):
        v1 = eng == "v1" or (eng != "v0" and v >= (0, 8))
        return Era.V1_EARLY if v1 else Era.V0
    if v < (0, 20):
        return Era.V0 if eng == "v0" else Era.V1
    return Era.V1_GRAPHS


def default_utilization(era: Era) -> float:
    return 0.92 if era is Era.V1_GRAPHS else 0.90


def is_v1(era: Era) -> bool:
    return era in (Era.V1_EARLY, Era.V1, Era.V1_GRAPHS)


def default_batch(
    era: Era,
    *,
    total_gib: float,
    max_model_len: int,
    a100: bool = False,
    version: str | None = None,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` profiles with by default."""
    if is_v1(era):
        v = parse_version(version) or (0, 0)
        if (0, 8) <= v < (0, 8, 4):
            # V1 raised the default to 1024 sequences on every GPU until vLLM PR #16158 (0.8.4)
            # put most hardware back on V0's 256
            return (8192 if total_gib >= 70 and not a100 else 2048), 1024
        if total_gib >= 160 and v >= (0, 33):
            return 16384, 1024
        if total_gib >= 70 and not a100:
            return 8192, 1024
        return 2048, 256
    if max_model_len > 32768:
        return 512, 256  # V0 turns on chunked prefill above 32K
    return max(max_model_len, 2048), 256


@record
class Estimate:
    value: float
    low: float
    high: float
    basis: str


def estimate_activation(cfg: Mapping[str, Any], *, tokens: int, seqs: int, tp: int = 1) -> Estimate:
    """Profile-run activation peak: MLP and hidden buffers of `tokens`, logits of `seqs`."""
    h = int(cfg.get("hidden_size") or 4096)
    topk = int(cfg.get("num_experts_per_tok") or 0)
    if topk and (cfg.get("moe_intermediate_size") or cfg.get("num_local_experts")):
        inter = topk * int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or h) / tp
        extra = tokens * topk * h * 2
    else:
        inter, extra = int(cfg.get("intermediate_size") or 4 * h) / tp, 0
    mlp = tokens * 3 * inter * 2 + tokens * 3 * h * 2 + extra
    logits = seqs * int(cfg.get("vocab_size") or 32000) * 4 * 2  # fp32 logits + probs
    gib = (mlp + logits) / GIB
    multimodal = any(k in cfg for k in ("vision_config", "audio_config")) or "VL" in str(cfg.get("architectures"))
    basis = f"estimated for {tokens} batched tokens / {seqs} sequences"
    if multimodal:
        basis += "; the multimodal encoder's dummy inputs are not included"
    return Estimate(gib, gib * 0.7, gib * (2.5 if multimodal else 1.3), basis)


def estimate_non_torch(era: Era, tp: int) -> Estimate:
    """CUDA context / cuBLAS / NCCL and custom all-reduce buffers (observed 0.03-3.6 GiB)."""
    base = 0.35 if era in (Era.V0_LEGACY, Era.V1_EARLY) else 0.25
    if tp > 1:
        return Estimate(base + 0.35, 0.2, 3.6, f"typical for TP={tp} (NCCL, custom all-reduce)")
    return Estimate(base, 0.03, 0.6, "typical for one GPU")


def estimate_cuda_graphs(layers: int, *, enforce_eager: bool, max_num_seqs: int) -> Estimate:
    """Graph pool for the default capture sizes (observed 0.17-1.62 GiB per GPU)."""
    if enforce_eager:
        return Estimate(0.0, 0.0, 0.0, "--enforce-eager: no CUDA graphs")
    scale = min(1.0, max(max_num_seqs, 64) / 256) ** 0.5
    gib = (0.2 + 0.013 * layers) * scale
    return Estimate(gib, gib * 0.4, gib * 2.0 + 0.3, "estimated from the layer count and capture sizes")


@record
class Budget:
    era: Era
    total_gib: float
    utilization: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float  # the graph memory vLLM subtracts (0 before 0.20)
    graphs_outside_gib: float  # graph memory captured after sizing (before 0.20)
    other_used_gib: float  # memory other processes hold (counted by <=0.6.4 and 0.7-0.8 V1)

    @property
    def requested_gib(self) -> float:
        return self.total_gib * self.utilization

    @property
    def kv_cache_gib(self) -> float:
        device_wide = self.era in (Era.V0_LEGACY, Era.V1_EARLY)
        other = self.other_used_gib if device_wide else 0.0
        return (
            self.requested_gib
            - self.weights_gib
            - self.activation_gib
            - self.non_torch_gib
            - self.cuda_graph_gib
            - other
        )


def make_budget(
    era: Era,
    *,
    total_gib: float,
    utilization: float,
    weights_gib: float,
    activation_gib: float,
    non_torch_gib: float,
    graphs_gib: float,
    other_used_gib: float = 0.0,
) -> Budget:
    counted = graphs_gib if era is Era.V1_GRAPHS else 0.0
    return Budget(
        era,
        total_gib,
        utilization,
        weights_gib,
        activation_gib,
        non_torch_gib,
        counted,
        graphs_gib - counted,
        other_used_gib,
    )


# -- from KV bytes to blocks and tokens -------------------------------------------------------


@record
class Capacity:
    block_size: int
    gpu_blocks: int
    kv_cache_tokens: int  # as vLLM prints "GPU KV cache size: N tokens"
    max_concurrency: float
    max_model_len_that_fits: int
    num_groups: int


def default_block_size(layout: KvLayout, era: Era, user: int | None = None) -> int:
    """16 on CUDA; FlashMLA wants 64; hybrids raise it until attention pages hold a Mamba state."""
    size = user or (64 if layout.mla and is_v1(era) and era is not Era.V1_EARLY else 16)
    if layout.mamba_state_bytes and layout.attention_layers and is_v1(era):
        one = max(1.0, layout.token_bytes_per_layer)
        aligned = 16 * math.ceil(layout.mamba_state_bytes / (16 * one))
        size = max(size, aligned)
    return size


def _per_layer_usage(kind: LayerKind, layout: KvLayout, length: int, batched: int, bs: int) -> int:
    """Blocks one request needs in one layer (vLLM spec.max_memory_usage_bytes / page)."""
    if kind is LayerKind.FULL:
        return math.ceil(length / bs)
    if kind is LayerKind.SLIDING and layout.window:
        return math.ceil(min(layout.window - 1 + batched, length) / bs) + 1
    if kind is LayerKind.CHUNKED and layout.chunk:
        return math.ceil(min(layout.chunk + batched, length) / bs)
    if kind is LayerKind.MAMBA:
        return 1
    return math.ceil(length / bs) if kind is not LayerKind.NONE else 0


def _effective_kinds(layout: KvLayout, era: Era, hybrid_manager: bool) -> list[LayerKind]:
    """V0 and a disabled hybrid manager (e.g. a KV connector) size every attention layer full."""
    full = not is_v1(era) or not hybrid_manager
    out: list[LayerKind] = []
    for kind in layout.kinds:
        if kind in (LayerKind.SLIDING, LayerKind.CHUNKED) and full:
            kind = LayerKind.FULL
        if kind is LayerKind.MAMBA and not is_v1(era):
            kind = LayerKind.NONE  # V0 keeps Mamba state outside the KV budget
        if kind is not LayerKind.NONE:
            out.append(kind)
    return out


def _groups(kinds: list[LayerKind]) -> tuple[int, list[tuple[LayerKind, int]]]:
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    if not counts:
        return 1, []
    group_size = min(counts.values())
    if max(counts.values()) < group_size * 1.25:  # vLLM pads instead of splitting
        group_size = max(counts.values())
    return group_size, [(k, math.ceil(c / group_size)) for k, c in counts.items()]


def kv_capacity(
    layout: KvLayout,
    kv_gib: float,
    *,
    era: Era,
    max_model_len: int,
    max_num_batched_tokens: int,
    block_size: int | None = None,
    hybrid_manager: bool = True,
    version: str | None = None,
) -> Capacity:
    bs = default_block_size(layout, era, block_size)
    kinds = _effective_kinds(layout, era, hybrid_manager)
    page = layout.page_bytes(bs)
    kv_bytes = max(0.0, kv_gib * GIB)
    if not kinds or page <= 0:
        return Capacity(bs, 0, 0, 0.0, 0, 0)
    group_size, groups = _groups(kinds)
    blocks = int(kv_bytes // page // group_size)
    per_request = sum(n * _per_layer_usage(k, layout, max_model_len, max_num_batched_tokens, bs) for k, n in groups)
    concurrency = blocks / per_request if per_request else 0.0
    n_groups = sum(n for _, n in groups)
    if len(groups) == 1 and groups[0][0] is LayerKind.FULL and n_groups == 1:
        tokens = blocks * bs
    elif (parse_version(version) or (0, 0)) >= (0, 21):
        tokens = int(concurrency * max_model_len)
    else:
        tokens = blocks // n_groups * bs
    fits = _max_len_that_fits(layout, kinds, kv_bytes, page, max_num_batched_tokens, bs, max_model_len)
    return Capacity(bs, blocks, tokens, concurrency, fits, n_groups)


def _needed(kinds: list[LayerKind], layout: KvLayout, length: int, batched: int, bs: int, page: int) -> int:
    return sum(_per_layer_usage(k, layout, length, batched, bs) for k in kinds) * page


def _max_len_that_fits(
    layout: KvLayout,
    kinds: list[LayerKind],
    kv_bytes: float,
    page: int,
    batched: int,
    bs: int,
    ceiling: int,
) -> int:
    """vLLM estimate_max_model_len: the longest request whose per-layer blocks fit."""
    hi = max(ceiling, 1) * 64
    if _needed(kinds, layout, 1, batched, bs, page) > kv_bytes:
        return 0
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _needed(kinds, layout, mid, batched, bs, page) <= kv_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo
