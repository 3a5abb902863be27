"""Per-rank KV layout: which layers keep KV, how wide one token is, how big one block is.

Mirrors vLLM's sizing (see docs/arithmetic.md): head_dim and KV-head rules of
``ModelConfig.get_head_size`` / ``get_total_num_kv_heads``, KV heads per rank under TP (one
replicated head when heads < tp), layers per pipeline stage, MLA (one latent, no x2, not
sharded), sliding / chunked-local layers, Mamba / linear-attention state, and kv_cache_dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum

from kvdoctor._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "longcat_flash"})
DTYPE_BYTES: dict[str, float] = {
    "auto": 0,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}


class LayerKind(Enum):
    FULL = "full"
    SLIDING = "sliding"
    CHUNKED = "chunked"
    MAMBA = "mamba"
    NONE = "none"  # MLP-only blocks of hybrids, encoder-only layers


def model_dtype_bytes(cfg: Mapping[str, Any], dtype: str | None = None) -> int:
    name = (dtype or "auto").replace("torch.", "")
    if name == "auto":
        name = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return 4 if name in ("float32", "float") else 2


def is_mla(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("model_type") in MLA_MODEL_TYPES and bool(cfg.get("kv_lora_rank"))


def head_dim(cfg: Mapping[str, Any], *, mla_enabled: bool = True) -> int:
    """vLLM ModelConfig.get_head_size(): explicit head_dim wins over hidden // heads."""
    if is_mla(cfg):
        rope = int(cfg.get("qk_rope_head_dim") or 0)
        if mla_enabled:
            return int(cfg["kv_lora_rank"]) + rope
        return int(cfg.get("qk_nope_head_dim") or 0) + rope
    if cfg.get("model_type") == "zamba2" and cfg.get("attention_head_dim"):
        return int(cfg["attention_head_dim"])
    for key in ("head_dim", "hidden_size_per_head"):
        if cfg.get(key):
            return int(cfg[key])
    return int(cfg["hidden_size"]) // int(cfg["num_attention_heads"])


def total_kv_heads(cfg: Mapping[str, Any]) -> int:
    """vLLM get_total_num_kv_heads()."""
    falcon = cfg.get("model_type") == "falcon"
    if not cfg.get("new_decoder_architecture") and cfg.get("multi_query", falcon):
        return 1  # Falcon-7B style multi-query
    for key in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"):
        if cfg.get(key):
            return int(cfg[key])
    return int(cfg["num_attention_heads"])


def kv_heads_per_rank(cfg: Mapping[str, Any], tp: int, *, mla_enabled: bool = True) -> int:
    if is_mla(cfg) and mla_enabled:
        return 1  # the latent is replicated on every TP rank, never split
    return max(1, total_kv_heads(cfg) // tp)


def layer_kinds(cfg: Mapping[str, Any]) -> list[LayerKind]:
    """Per-layer attention type, with the defaults transformers/vLLM apply to terse configs."""
    n = int(cfg["num_hidden_layers"])
    explicit = cfg.get("layer_types")
    if isinstance(explicit, list) and len(explicit) == n:
        return [_kind_from_name(str(x)) for x in explicit]
    mt = str(cfg.get("model_type") or "")
    hybrid = _hybrid_kinds(cfg, n)
    if hybrid is not None:
        return hybrid
    window = cfg.get("sliding_window")
    if mt == "gemma2" or explicit == "alternate_sliding_first" or mt == "gpt_oss":
        return [LayerKind.SLIDING if i % 2 == 0 else LayerKind.FULL for i in range(n)]
    if mt.startswith("gemma3"):
        every = int(cfg.get("sliding_window_pattern") or 6)
        return [LayerKind.FULL if (i + 1) % every == 0 else LayerKind.SLIDING for i in range(n)]
    if mt.startswith("llama4") and cfg.get("attention_chunk_size"):
        return [LayerKind.FULL if i % 4 == 3 else LayerKind.CHUNKED for i in range(n)]
    qwen_without_window = mt.startswith("qwen2") and not cfg.get("use_sliding_window")
    if window and not qwen_without_window and int(window) < int(cfg.get("max_position_embeddings") or 1 << 30):
        return [LayerKind.SLIDING] * n
    return [LayerKind.FULL] * n


def _kind_from_name(name: str) -> LayerKind:
    name = name.lower()
    if "sliding" in name or name == "local":
        return LayerKind.SLIDING
    if "chunk" in name:
        return LayerKind.CHUNKED
    if name in ("mamba", "linear_attention", "linear", "mamba2", "conv", "mamba1"):
        return LayerKind.MAMBA
    if name in ("mlp", "moe", "none"):
        return LayerKind.NONE
    return LayerKind.FULL


def _hybrid_kinds(cfg: Mapping[str, Any], n: int) -> list[LayerKind] | None:
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str):  # Nemotron-H: M=mamba2, *=attention, -=MLP, E=MoE
        table = {"M": LayerKind.MAMBA, "*": LayerKind.FULL}
        return [table.get(ch, LayerKind.NONE) for ch in pattern]
    if cfg.get("full_attention_interval"):  # Qwen3-Next / Qwen3.5 gated DeltaNet
        every = int(cfg["full_attention_interval"])
        return [LayerKind.FULL if (i + 1) % every == 0 else LayerKind.MAMBA for i in range(n)]
    if cfg.get("attn_layer_period"):  # Jamba
        period, offset = int(cfg["attn_layer_period"]), int(cfg.get("attn_layer_offset") or 0)
        return [LayerKind.FULL if i % period == offset else LayerKind.MAMBA for i in range(n)]
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and len(blocks) == n:
        return [LayerKind.FULL if "attention" in str(b) else LayerKind.MAMBA for b in blocks]
    return None


def stage_layers(kinds: list[LayerKind], pp: int, partition: tuple[int, ...] = ()) -> list[LayerKind]:
    """Layers of the busiest pipeline stage (even split unless VLLM_PP_LAYER_PARTITION says)."""
    if partition:
        starts = [sum(partition[:i]) for i in range(len(partition))]
        stages = [kinds[s : s + n] for s, n in zip(starts, partition, strict=True)]
        return max(stages, key=lambda s: sum(k is not LayerKind.NONE for k in s))
    if pp <= 1:
        return kinds
    size = math.ceil(len(kinds) / pp)
    stages = [kinds[i * size : (i + 1) * size] for i in range(pp)]
    return max(stages, key=lambda s: sum(k is not LayerKind.NONE for k in s))


def slot_bytes(width: int, kv_cache_dtype: str, model_bytes: int, *, mla: bool) -> float:
    """Bytes one token takes in one layer for one KV head slot (K and V together unless MLA)."""
    dt = (kv_cache_dtype or "auto").lower()
    sides = 1 if mla else 2
    if dt == "fp8_ds_mla":
        return 656.0
    if dt == "nvfp4_ds_mla":
        return 352.0
    if dt in ("int8_per_token_head", "fp8_per_token_head"):
        return sides * width + (8 if not mla else 8)
    if dt == "int4_per_token_head":
        return sides * width / 2 + 8
    if dt == "nvfp4":
        return sides * (width / 2 + width / 16)
    per = DTYPE_BYTES.get(dt, 0) or model_bytes
    return float(sides * width * per)


@record
class KvLayout:
    """KV shape of the busiest rank."""

    kinds: tuple[LayerKind, ...]
    kv_heads: int
    head_dim: int
    mla: bool
    token_bytes_per_layer: float  # one token, one attention layer, this rank
    window: int | None
    chunk: int | None
    mamba_state_bytes: int  # one sequence, one Mamba/linear layer, this rank (unpadded)

    def count(self, kind: LayerKind) -> int:
        return sum(k is kind for k in self.kinds)

    @property
    def attention_layers(self) -> int:
        return sum(k in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED) for k in self.kinds)

    @property
    def bytes_per_token(self) -> int:
        """Per-rank bytes for one token kept in every attention layer (V0 / unified sizing)."""
        return int(self.token_bytes_per_layer * self.attention_layers)

    def page_bytes(self, block_size: int) -> int:
        """One block of one attention layer (vLLM AttentionSpec.page_size_bytes)."""
        return int(self.token_bytes_per_layer * block_size)

    def block_bytes(self, block_size: int) -> int:
        """One block across every attention layer of the rank (V0 get_cache_block_size)."""
        return self.page_bytes(block_size) * self.attention_layers


def kv_layout(
    cfg: Mapping[str, Any],
    *,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    dtype: str | None = None,
    mla_enabled: bool = True,
    pp_partition: tuple[int, ...] = (),
) -> KvLayout:
    mla = is_mla(cfg) and mla_enabled
    width = head_dim(cfg, mla_enabled=mla_enabled)
    heads = kv_heads_per_rank(cfg, tp, mla_enabled=mla_enabled)
    mbytes = model_dtype_bytes(cfg, dtype)
    per_layer = heads * slot_bytes(width, kv_cache_dtype, mbytes, mla=mla)
    kinds = stage_layers(layer_kinds(cfg), pp, pp_partition)
    return KvLayout(
        kinds=tuple(kinds),
        kv_heads=heads,
        head_dim=width,
        mla=mla,
        token_bytes_per_layer=per_layer,
        window=int(cfg["sliding_window"]) if cfg.get("sliding_window") else None,
        chunk=int(cfg["attention_chunk_size"]) if cfg.get("attention_chunk_size") else None,
        mamba_state_bytes=mamba_state_bytes(cfg, tp, mbytes) if LayerKind.MAMBA in kinds else 0,
    )


def mamba_state_bytes(cfg: Mapping[str, Any], tp: int, dtype_bytes: int) -> int:
    """Conv + SSM state of one sequence in one layer on one rank (vLLM mamba_utils shapes)."""
    if cfg.get("linear_num_value_heads"):  # gated DeltaNet (Qwen3-Next, Qwen3.5)
        hk, hv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
        dk, dv = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"])
        conv = (int(cfg.get("linear_conv_kernel_dim") or 4) - 1) * (2 * hk * dk + hv * dv) // tp
        return (conv + hv // tp * dk * dv) * dtype_bytes
    hidden = int(cfg["hidden_size"])
    heads = int(cfg.get("mamba_num_heads") or cfg.get("mamba_n_heads") or 0)
    if heads:  # Mamba2 (Nemotron-H, Bamba, Granite-4.0-H)
        hd = int(cfg.get("mamba_head_dim") or cfg.get("mamba_d_head") or 64)
        state = int(cfg.get("ssm_state_size") or cfg.get("mamba_d_state") or 128)
        groups = int(cfg.get("n_groups") or cfg.get("mamba_n_groups") or 1)
        groups = groups if groups % tp == 0 else tp  # replicated up to tp
        kernel = int(cfg.get("conv_kernel") or cfg.get("mamba_d_conv") or 4)
        conv = (kernel - 1) * (heads * hd + 2 * groups * state) // tp
        return (conv + heads // tp * hd * state) * dtype_bytes
    inner = int(cfg.get("mamba_expand") or 2) * hidden  # Mamba1 (Jamba)
    conv = (int(cfg.get("mamba_d_conv") or 4) - 1) * inner // tp
    return (conv + inner // tp * int(cfg.get("mamba_d_state") or 16)) * dtype_bytes
