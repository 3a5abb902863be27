"""Weights bytes per rank: params x bytes/param, quantization aware, split by TP and PP.

"Model loading took X GiB" is torch memory after loading: linear weights (split by TP, the KV
projection replicated when KV heads < tp), the vocab-parallel embedding and lm_head (vocab
padded to a multiple of 64, then split), plus the rotary cos/sin cache in the model dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kvdoctor._record import record
from kvdoctor.memory.layout import head_dim, is_mla, model_dtype_bytes, total_kv_heads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GIB = float(1 << 30)

# GGUF block formats: bytes per weight (gguf GGML_QUANT_SIZES: block bytes / block weights).
GGUF_BYTES: dict[str, float] = {
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "q8_0": 34 / 32,
    "q2_k": 84 / 256,
    "q3_k": 110 / 256,
    "q4_k": 144 / 256,
    "q5_k": 176 / 256,
    "q6_k": 210 / 256,
    # (the _M/_S mixes keep some tensors in a wider format: llama.cpp's measured bits per weight)
    "q3_k_m": 3.91 / 8,
    "q4_k_s": 4.58 / 8,
    "q4_k_m": 4.83 / 8,
    "q5_k_s": 5.54 / 8,
    "q5_k_m": 5.69 / 8,
    "iq4_xs": 136 / 256,
    "iq4_nl": 18 / 32,
    "f16": 2.0,
    "bf16": 2.0,
}
INT4_METHODS = frozenset(
    {
        "awq",
        "awq_marlin",
        "gptq",
        "gptq_marlin",
        "int4",
        "w4a16",
        "marlin",
        "compressed-tensors-w4a16",
    }
)
FP8_METHODS = frozenset({"fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "w8a8", "compressed-tensors"})


# vLLM's --quantization method names (model_executor/layers/quantization QUANTIZATION_METHODS,
# 0.2 to 0.1x), plus the short names kvdoctor's own estimates accept
VLLM_QUANTIZATION_METHODS = frozenset(
    {
        "aqlm",
        "awq",
        "awq_marlin",
        "awq_triton",
        "bitblas",
        "bitsandbytes",
        "compressed-tensors",
        "deepspeedfp",
        "experts_int8",
        "fbgemm_fp8",
        "fp8",
        "gguf",
        "gptq",
        "gptq_bitblas",
        "gptq_marlin",
        "gptq_marlin_24",
        "hqq",
        "inc",
        "ipex",
        "marlin",
        "modelopt",
        "modelopt_fp4",
        "moe_wna16",
        "mxfp4",
        "neuron_quant",
        "petit_nvfp4",
        "ptpc_fp8",
        "qqq",
        "quark",
        "rtn",
        "squeezellm",
        "torchao",
        "tpu_int8",
        "auto-round",
        "fp_quant",
    }
)


def known_quantization(name: str) -> bool:
    """Whether vLLM (or kvdoctor's estimate) knows this --quantization value."""
    q = name.lower()
    return (
        q in VLLM_QUANTIZATION_METHODS
        or q in INT4_METHODS
        or q in FP8_METHODS
        or q in ("none", "auto", "bnb", "nf4", "int8", "gptq_int8", "sq")
        or q.startswith("gguf")
        or q in GGUF_BYTES
    )


def linear_bytes_per_param(quantization: str | None, dtype_bytes: int, *, group_size: int = 128) -> float:
    """Bytes per linear-layer parameter for a checkpoint format (embeddings stay 16-bit)."""
    q = (quantization or "").lower()
    if not q or q in ("none", "auto"):
        return float(dtype_bytes)
    if q in INT4_METHODS:
        # int32-packed 4-bit weights + fp16 scales + packed zeros per group (gptq.py / awq.py)
        return 0.5 + (2 + 0.5) / group_size
    if q in FP8_METHODS:
        return 1.0 + 4 / 16384  # + block/channel scales (DeepSeek block fp8: 4 B per 128x128)
    if q in ("bitsandbytes", "bnb", "nf4"):
        return 0.5 + 1 / 64  # packed nibbles + absmax per 64 (double-quant ignored)
    if q in ("mxfp4",):
        return 4.25 / 8  # 4-bit values + one 8-bit scale per 32
    if q.startswith("gguf") or q in GGUF_BYTES:
        return GGUF_BYTES.get(q.removeprefix("gguf").strip("-_:") or "q4_k", GGUF_BYTES["q4_k"])
    if q in ("int8", "gptq_int8", "sq"):
        return 1.0 + 2 / group_size
    return float(dtype_bytes)


@record
class ParamSplit:
    """Parameters by how they are sharded and stored."""

    embed: int  # embedding (+ lm_head when not tied), vocab padded
    attention: int  # per layer, before TP
    kv_proj: int  # per layer, the K and V projections (replicated when heads < tp)
    mlp_dense: int  # per layer, dense MLP (0 for MoE layers)
    experts: int  # per layer, routed + shared experts and router
    layers: int
    dense_layers: int  # layers with a dense MLP instead of experts
    rope_cache: int  # elements of the cos/sin cache


def _rounded_vocab(cfg: Mapping[str, Any]) -> int:
    return int(math.ceil(int(cfg.get("vocab_size") or 32000) / 64) * 64)


def param_split(cfg: Mapping[str, Any]) -> ParamSplit:
    h, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    tied = bool(cfg.get("tie_word_embeddings", str(cfg.get("model_type", "")).startswith("gemma")))
    embed = _rounded_vocab(cfg) * h * (1 if tied else 2)
    if is_mla(cfg):
        qk = int(cfg.get("qk_nope_head_dim") or 128) + int(cfg.get("qk_rope_head_dim") or 64)
        lora, qlora = int(cfg["kv_lora_rank"]), int(cfg.get("q_lora_rank") or 0)
        q = (h * qlora + qlora * heads * qk) if qlora else h * heads * qk
        kv_a = h * (lora + int(cfg.get("qk_rope_head_dim") or 64))
        kv_b = lora * heads * (int(cfg.get("qk_nope_head_dim") or 128) + int(cfg.get("v_head_dim") or 128))
        attention, kv_proj = q + kv_a + kv_b + heads * int(cfg.get("v_head_dim") or 128) * h, 0
        rope = int(cfg.get("qk_rope_head_dim") or 64)
    else:
        d = head_dim(cfg)
        kv_proj = 2 * h * total_kv_heads(cfg) * d
        attention = 2 * h * heads * d
        rope = d
    experts_n = int(cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    inter = int(cfg.get("intermediate_size") or 4 * h)
    moe_inter = int(cfg.get("moe_intermediate_size") or inter)
    shared = int(cfg.get("n_shared_experts") or 0) * moe_inter + int(cfg.get("shared_expert_intermediate_size") or 0)
    experts = (experts_n * 3 * h * moe_inter + 3 * h * shared + h * experts_n) if experts_n else 0
    dense_layers = int(cfg.get("first_k_dense_replace") or 0) if experts_n else layers
    return ParamSplit(
        embed=embed,
        attention=attention,
        kv_proj=kv_proj,
        mlp_dense=3 * h * inter,
        experts=experts,
        layers=layers,
        dense_layers=dense_layers,
        rope_cache=int(cfg.get("max_position_embeddings") or 0) * rope,
    )


def total_params(cfg: Mapping[str, Any]) -> int:
    s = param_split(cfg)
    per_layer = s.attention + s.kv_proj
    return s.embed + s.layers * per_layer + s.dense_layers * s.mlp_dense + (s.layers - s.dense_layers) * s.experts


@record
class WeightsEstimate:
    gib: float  # per rank (the busiest)
    basis: str  # "checkpoint size" | "observed" | "config" | "catalog params"
    params_b: float | None


def _linear_bpp(quant: str | None, dtype_bytes: int, *, experts: bool) -> float:
    if (quant or "").lower() == "mxfp4" and not experts:
        return float(dtype_bytes)  # gpt-oss keeps attention in bf16; only experts are MXFP4
    return linear_bytes_per_param(quant, dtype_bytes)


def weights_from_config(
    cfg: Mapping[str, Any], *, tp: int, pp: int, quantization: str | None, dtype: str | None = None
) -> float:
    """Per-rank bytes of the busiest rank, from config dims."""
    s, db = param_split(cfg), model_dtype_bytes(cfg, dtype)
    kv_heads = max(1, total_kv_heads(cfg))
    kv_per_rank = s.kv_proj / kv_heads * max(1, kv_heads // tp) if not is_mla(cfg) else 0
    dense_bpp = _linear_bpp(quantization, db, experts=False)
    layer_bytes = (s.attention / tp + kv_per_rank) * dense_bpp
    moe_layers = s.layers - s.dense_layers
    mlp_bytes = (
        s.dense_layers * s.mlp_dense * dense_bpp + moe_layers * s.experts * _linear_bpp(quantization, db, experts=True)
    ) / tp
    stage_share = math.ceil(s.layers / pp) / s.layers
    embed_share = 1.0 if pp == 1 else 0.5  # first stage holds the embedding, last the lm_head
    body = (s.layers * layer_bytes + mlp_bytes) * stage_share
    return body + s.embed * db / tp * embed_share + s.rope_cache * db


def estimate_weights(
    cfg: Mapping[str, Any],
    *,
    tp: int = 1,
    pp: int = 1,
    quantization: str | None = None,
    dtype: str | None = None,
    params_b: float | None = None,
    checkpoint_bytes: int | None = None,
    observed_gib: float | None = None,
) -> WeightsEstimate:
    """Weights per rank: observed > checkpoint file size > config dims > catalog params."""
    if observed_gib and tp == 1 and pp == 1:
        return WeightsEstimate(observed_gib, "observed", params_b)
    if observed_gib:
        return WeightsEstimate(observed_gib / (tp * pp), "observed, divided by TP x PP", params_b)
    if checkpoint_bytes:
        return WeightsEstimate(checkpoint_bytes / (tp * pp) / GIB, "checkpoint size", params_b)
    try:
        computed = total_params(cfg)
    except (KeyError, TypeError, ValueError):
        computed = 0
    if params_b and (not computed or abs(computed / 1e9 - params_b) / params_b > 0.15):
        bpp = linear_bytes_per_param(quantization, model_dtype_bytes(cfg, dtype))
        return WeightsEstimate(params_b * 1e9 * bpp / (tp * pp) / GIB, "catalog params", params_b)
    gib = weights_from_config(cfg, tp=tp, pp=pp, quantization=quantization, dtype=dtype) / GIB
    return WeightsEstimate(gib, "config", round(computed / 1e9, 3) if computed else params_b)
