"""Numbers for a diagnosis: what the arithmetic adds to the facts of one attempt.

``derive_for_diagnosis`` is pure and cheap (catalog lookups are cached; no file system, no
environment). Logged figures always win; estimates fill the gaps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from kvdoctor.memory.budget import (
    GIB,
    Era,
    default_batch,
    default_utilization,
    era_for,
    estimate_activation,
    estimate_cuda_graphs,
    estimate_non_torch,
    is_v1,
    kv_capacity,
)
from kvdoctor.memory.catalog import (
    ModelEntry,
    context_from_name,
    find_model,
    params_from_name,
    quantization_from_name,
)
from kvdoctor.memory.layout import KvLayout, LayerKind, kv_layout
from kvdoctor.memory.model import default_max_model_len
from kvdoctor.memory.weights import estimate_weights, linear_bytes_per_param

FP8_DTYPES = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"})


def _num(facts: Mapping[str, object], key: str) -> float | None:
    value = facts.get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _int(facts: Mapping[str, object], key: str, default: int) -> int:
    value = _num(facts, key)
    return int(value) if value else default


def _str(facts: Mapping[str, object], key: str) -> str | None:
    value = facts.get(key)
    return str(value).replace("torch.", "") if value not in (None, "", "None") else None


class _Ctx:
    """The attempt's settings, with defaults for what the log did not say."""

    def __init__(self, facts: Mapping[str, object]) -> None:
        self.facts = facts
        self.tp = _int(facts, "tensor_parallel_size", 1)
        self.pp = _int(facts, "pipeline_parallel_size", 1)
        self.era = era_for(_str(facts, "vllm_version"), _str(facts, "engine"))
        self.version = _str(facts, "vllm_version")
        self.kv_dtype = (_str(facts, "kv_cache_dtype") or "auto").lower()
        self.dtype = _str(facts, "dtype")
        self.total = _num(facts, "total_gpu_gib")
        self.util = _num(facts, "gpu_memory_utilization")
        if self.util is None and self.total:
            requested = _num(facts, "requested_gib")
            self.util = requested / self.total if requested else default_utilization(self.era)
        model = _str(facts, "model")
        self.entry: ModelEntry | None = find_model(model) if model else None
        # a model the catalog lacks still announces its size in most names ("…-14B-Chat")
        self.params_b = self.entry.params_b if self.entry else (params_from_name(model) if model else None)
        self.quant = _str(facts, "quantization") or (quantization_from_name(model) if model else None)
        if self.entry is not None and self.quant is None:
            self.quant = self.entry.quantization
        self.max_model_len = _int(facts, "max_model_len", 0)
        batched, seqs = default_batch(
            self.era,
            total_gib=self.total or 0.0,
            max_model_len=self.max_model_len or 2048,
            version=self.version,
        )
        self.default_batched, self.default_seqs = batched, seqs
        self.batched = _int(facts, "max_num_batched_tokens", batched)
        self.seqs = _int(facts, "max_num_seqs", seqs)
        self.block_size = _int(facts, "block_size", 0) or None

    def layout(self, *, tp: int | None = None, kv_dtype: str | None = None) -> KvLayout | None:
        if self.entry is None:
            return None
        return kv_layout(
            self.entry.config,
            tp=tp or self.tp,
            pp=self.pp,
            kv_cache_dtype=kv_dtype or self.kv_dtype,
            dtype=self.dtype,
        )

    def weights(self, *, tp: int | None = None, quant: str | None = None) -> float | None:
        tp = tp or self.tp
        logged = _num(self.facts, "weights_gib")
        if self.entry is None:
            if logged is None:
                return self._weights_from_name(tp=tp, quant=quant)
            scale = 1.0 if quant is None else linear_bytes_per_param(quant, 2) / 2
            return logged * self.tp / tp * scale
        est = estimate_weights(
            self.entry.config,
            tp=tp,
            pp=self.pp,
            quantization=quant or self.quant,
            dtype=self.dtype,
            params_b=self.entry.params_b,
            observed_gib=self.entry.observed_weights_gib if quant is None else None,
        )
        if logged is not None and quant is None:
            return logged * self.tp / tp  # the log wins; scale it to another TP
        return est.gib

    def _weights_from_name(self, *, tp: int, quant: str | None) -> float | None:
        """params x bytes per param / (TP x PP): a rough figure from the name alone (marked so)."""
        if not self.params_b:
            return None
        dtype_bytes = 4 if (self.dtype or "") in ("float32", "float") else 2
        per_param = linear_bytes_per_param(quant or self.quant, dtype_bytes)
        return self.params_b * 1e9 * per_param / GIB / (tp * self.pp)

    def overheads(self, tp: int) -> float:
        """Activation + non-torch + budgeted graphs, logged where the log has them."""
        act = _num(self.facts, "activation_peak_gib")
        if act is None:
            cfg = self.entry.config if self.entry else {}
            act = estimate_activation(cfg, tokens=self.batched, seqs=self.seqs, tp=tp).value
        non_torch = _num(self.facts, "non_torch_gib")
        if non_torch is None or tp != self.tp:
            non_torch = (
                estimate_non_torch(self.era, tp).value
                if non_torch is None
                else non_torch + (0.35 if tp > 1 >= self.tp else 0)
            )
        graphs = 0.0
        if self.era is Era.V1_GRAPHS:
            graphs_logged = _num(self.facts, "cuda_graph_gib")
            layers = self.entry.config.get("num_hidden_layers", 32) if self.entry else 32
            eager = bool(self.facts.get("enforce_eager"))
            graphs = (
                graphs_logged
                if graphs_logged is not None
                else estimate_cuda_graphs(
                    int(layers) // max(1, self.pp), enforce_eager=eager, max_num_seqs=self.seqs
                ).value
            )
        return act + non_torch + graphs


def _tokens_for(ctx: _Ctx, layout: KvLayout | None, kv_gib: float, per_token: int | None) -> tuple[int, int] | None:
    """(tokens vLLM would print, longest request that fits) for a KV size."""
    if layout is not None and layout.attention_layers:
        cap = kv_capacity(
            layout,
            kv_gib,
            era=ctx.era,
            max_model_len=ctx.max_model_len or 4096,
            max_num_batched_tokens=ctx.batched,
            block_size=ctx.block_size,
            version=ctx.version,
        )
        return cap.kv_cache_tokens, cap.max_model_len_that_fits
    if per_token:
        bs = ctx.block_size or 16
        tokens = int(max(0.0, kv_gib) * GIB // (per_token * bs)) * bs
        return tokens, tokens
    return None


def _batch_saving(ctx: _Ctx, out: dict[str, object]) -> None:
    """A profiling batch set above the card's default (V1 `vllm serve`): the activation memory
    going back to the default batch gives the KV cache, by the catalog's config (an estimate; the
    profile's own peak, where printed, is the figure the rules read instead)."""
    if ctx.entry is None or not ctx.total or not is_v1(ctx.era) or ctx.batched <= ctx.default_batched:
        return
    cfg = ctx.entry.config
    now = estimate_activation(cfg, tokens=ctx.batched, seqs=ctx.seqs, tp=ctx.tp).value
    default = estimate_activation(cfg, tokens=ctx.default_batched, seqs=min(ctx.seqs, ctx.default_seqs), tp=ctx.tp)
    out["default_max_num_batched_tokens"] = ctx.default_batched
    out["batch_reduction_frees_gib"] = round(now - default.value, 2)
    if now > 0:
        out["batch_activation_ratio"] = round(default.value / now, 3)  # (scales a measured peak)


def derive_for_diagnosis(facts: Mapping[str, object]) -> dict[str, object]:
    """Arithmetic for one attempt's flat facts; only the names that can be computed."""
    ctx = _Ctx(facts)
    out: dict[str, object] = {}
    layout = ctx.layout()
    if ctx.entry is not None:
        out["model_catalog_id"] = ctx.entry.id
    length = ctx.max_model_len
    if not ctx.max_model_len:
        # the length vLLM derives when none is given: the model's config, else what its name says
        longest = default_max_model_len(ctx.entry.config) if ctx.entry is not None else None
        model = _str(facts, "model")
        longest = longest or (context_from_name(model) if model else None)
        if longest:
            out["max_model_len_estimate"] = longest
            length = longest
    per_token = layout.bytes_per_token if layout is not None and layout.bytes_per_token else None
    logged_gib, logged_tokens = _num(facts, "kv_cache_gib"), _num(facts, "kv_cache_tokens")
    if per_token is None and logged_gib and logged_tokens and logged_gib > 0:
        per_token = int(round(logged_gib * GIB / logged_tokens))
    if per_token:
        out["kv_bytes_per_token"] = per_token
    if layout is not None and layout.bytes_per_token and length and _num(facts, "needed_kv_gib") is None:
        # one request at the length asked for (or the one vLLM derives): what the KV check needs,
        # where the log cut it off, not where the check's own line prints it (V1's hybrid manager
        # keeps a sliding layer's window, or a chunked layer's chunk, not the whole length)
        hybrid = _str(facts, "engine") == "v1"
        out["one_request_kv_gib_estimate"] = round(_request_bytes(layout, length, hybrid=hybrid) / GIB, 2)
    if (
        layout is not None
        and layout.bytes_per_token
        and length
        and facts.get("disable_hybrid_kv_cache_manager") is True
    ):
        # every sliding layer held at the whole length: what one request needs with the hybrid
        # manager back (the window only), where the model has sliding layers
        kept = _request_bytes(layout, length, hybrid=True) / GIB
        if kept < 0.8 * _request_bytes(layout, length, hybrid=False) / GIB:
            out["one_request_kv_gib_hybrid"] = round(kept, 2)
    weights = ctx.weights()
    model_name = _str(facts, "model") or ""
    if (
        ctx.quant
        and linear_bytes_per_param(ctx.quant, 2) <= linear_bytes_per_param("awq", 2) + 0.1
        and not re.search(r"(?i)int8|8bit|w8a", model_name)
    ):
        out["weights_already_4bit"] = True  # (no 4-bit checkpoint to suggest: it is one)
    if ctx.entry is not None:
        out["weights_gib_estimate"] = round(_estimate_only(ctx), 2)
        out["weights_estimate_basis"] = "kvdoctor's model catalog"
    elif ctx.params_b and _num(facts, "weights_gib") is None and weights is not None:
        out["weights_gib_estimate"] = round(weights, 2)
        out["weights_estimate_basis"] = f"{ctx.params_b:g}B parameters in the model's name"
    if ctx.total and weights is not None:
        # the smallest fraction that holds the weights, the profile and one request's KV: a
        # fraction suggested below it fails again, with no cache blocks (issue 10)
        # (+0.5 GiB: fragmentation and what the estimate leaves out)
        overheads = ctx.overheads(ctx.tp)
        base, hybrid = weights + overheads + 0.5, _str(facts, "engine") == "v1"
        request = _one_request_gib(ctx, layout, per_token, hybrid=hybrid)
        out["min_utilization_for_model"] = _fraction_of(base + request, ctx.total)
        # (and at a short context: where only the length asked for overflows the card, the model
        # itself fits, and a shorter --max-model-len is the way, not a smaller model)
        short = min(ctx.max_model_len or 2048, _SHORT_CONTEXT)
        short_request = _one_request_gib(ctx, layout, per_token, short, hybrid=hybrid)
        out["min_utilization_for_weights"] = _fraction_of(base + short_request, ctx.total)
        _length_at_safe_fraction(ctx, out, facts, weights + overheads, layout)
    _batch_saving(ctx, out)
    _lora_slots(ctx, out)
    if weights is not None:
        _kv_bytes_to_fit(ctx, out, weights)
    kv_gib = logged_gib
    if ctx.total and ctx.util:
        budget = ctx.total * ctx.util
        out["budget_gib"] = round(budget, 2)
        if weights is not None:
            reconstructed = budget - weights - ctx.overheads(ctx.tp)
            if ctx.era in (Era.V0_LEGACY, Era.V1_EARLY) and _num(facts, "free_gpu_gib_at_startup"):
                reconstructed -= max(0.0, ctx.total - (_num(facts, "free_gpu_gib_at_startup") or ctx.total))
            out["budget_shortfall_gib"] = round(logged_gib if logged_gib is not None else reconstructed, 2)
            kv_gib = logged_gib if logged_gib is not None else reconstructed
            _alternatives(ctx, out, budget)
    if kv_gib is not None:
        found = _tokens_for(ctx, layout, kv_gib, per_token)
        if found is not None:
            out["kv_tokens_estimate"], fit = found
            out["max_model_len_that_fits"] = fit
        fp8 = _fp8_tokens(ctx, kv_gib, per_token, found)
        if fp8 is not None:
            out["kv_cache_tokens_fp8"] = fp8
    longest_fit, whole, weights_only = (
        out.get("max_model_len_that_fits"),
        out.get("min_utilization_for_model"),
        out.get("min_utilization_for_weights"),
    )
    if (
        isinstance(longest_fit, int)
        and isinstance(whole, float)
        and isinstance(weights_only, float)
        and ctx.max_model_len
        and ctx.max_model_len > longest_fit
        and whole >= 1 > weights_only
    ):
        # the model fits the card, one request at the length asked for does not: freed memory or
        # any fraction leaves the length to shorten as well
        out["length_overflows_card"] = True
    return out


def _kv_bytes_to_fit(ctx: _Ctx, out: dict[str, object], weights: float) -> None:
    """What --kv-cache-memory can hold on this card where vLLM skipped the profile that would
    print it: the fraction in force (or what was free, if less) less weights and overheads."""
    if _num(ctx.facts, "kv_cache_memory_bytes") is None or not ctx.total:
        return
    free = _num(ctx.facts, "free_gpu_gib_at_startup") or ctx.total
    room = min(free, ctx.total * (ctx.util or 0.9)) - weights - ctx.overheads(ctx.tp) - 0.5
    if room > 0:
        out["kv_cache_memory_bytes_to_fit_estimate"] = int(room * GIB) // 10**8 * 10**8


def _lora_slots(ctx: _Ctx, out: dict[str, object]) -> None:
    """The memory --enable-lora reserves for its adapter slots on each GPU (V1 counts it in the
    weights line, V0 in the profile's peak): max_loras × max_lora_rank × Σ (in + out) of every
    attention and MLP projection × dtype bytes, the column-parallel B and row-parallel A sharded
    by TP (vLLM's defaults: 1 slot, rank 16). Dense catalog models only."""
    facts = ctx.facts
    if facts.get("enable_lora") is not True or ctx.entry is None:
        return
    cfg = ctx.entry.config
    if cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts"):
        return
    h, inter = int(cfg.get("hidden_size") or 0), int(cfg.get("intermediate_size") or 0)
    heads = int(cfg.get("num_attention_heads") or 0)
    if not (h and inter and heads):
        return
    dim = int(cfg.get("head_dim") or h // heads)
    q, kv = heads * dim, int(cfg.get("num_key_value_heads") or heads) * dim
    tp = max(1, ctx.tp)
    per_rank_unit = (h + q / tp) + 2 * (h + kv / tp) + (q / tp + h) + 2 * (h + inter / tp) + (inter / tp + h)
    slots, rank = _int(facts, "max_loras", 1), _int(facts, "max_lora_rank", 16)
    layers = int(cfg.get("num_hidden_layers") or 0) // max(1, ctx.pp)
    dtype_bytes = 4 if (ctx.dtype or "") in ("float32", "float") else 2
    gib = slots * rank * per_rank_unit * layers * dtype_bytes / GIB
    if gib < 0.25:
        return
    out["lora_slots_gib_estimate"] = round(gib, 2)
    # the most slots that leave one request its KV: what the cache lacks, less what each slot frees
    have, need = _num(facts, "kv_cache_gib"), _num(facts, "needed_kv_gib") or _num(out, "one_request_kv_gib_estimate")
    if have is not None and need is not None and slots > 1:
        short = need - have + 0.25
        per_slot = gib / slots
        keep = slots - math.ceil(max(0.0, short) / per_slot)
        if keep >= 1:
            out["max_loras_that_fits"] = keep


def _length_at_safe_fraction(
    ctx: _Ctx, out: dict[str, object], facts: Mapping[str, object], non_kv_gib: float, layout: KvLayout | None
) -> None:
    """The longest length that still fits when the fraction is lowered into the free memory
    (`max_safe_utilization`), where the length asked for does not: the fraction and the length
    together pass the start-up check and leave one request its KV cache. `non_kv_gib`: the
    weights and the estimated profile."""
    safe = _num(facts, "max_safe_utilization")
    if safe is None or layout is None or not layout.bytes_per_token or not ctx.max_model_len or ctx.total is None:
        return
    kv_gib = safe * ctx.total - non_kv_gib - 0.5
    tokens = int(kv_gib * GIB / layout.bytes_per_token) // 256 * 256
    if 1024 <= tokens < ctx.max_model_len:
        out["max_model_len_at_safe_utilization"] = tokens


def _request_bytes(layout: KvLayout, length: int, *, hybrid: bool) -> float:
    """KV bytes one request of `length` tokens holds on the busiest rank: every attention layer at
    the whole length, or (`hybrid`, V1's hybrid KV manager) a sliding layer's window and a chunked
    layer's chunk only."""
    if not hybrid:
        return float(layout.bytes_per_token * length)
    sliding, chunked = layout.count(LayerKind.SLIDING), layout.count(LayerKind.CHUNKED)
    return layout.token_bytes_per_layer * (
        (layout.attention_layers - sliding - chunked) * length
        + sliding * min(layout.window or length, length)
        + chunked * min(layout.chunk or length, length)
    )


_SHORT_CONTEXT = 4096


def _fraction_of(need_gib: float, total_gib: float) -> float:
    return round(min(1.0, math.ceil(need_gib / total_gib * 100) / 100), 2)


def _one_request_gib(
    ctx: _Ctx, layout: KvLayout | None, per_token: int | None, tokens: int | None = None, *, hybrid: bool = False
) -> float:
    # (every layer at the whole length, but for V1's hybrid manager's sliding and chunked layers:
    # the smallest fraction this plans for is a conservative one)
    tokens = tokens or ctx.max_model_len or 2048
    if layout is not None and layout.bytes_per_token:
        return _request_bytes(layout, tokens, hybrid=hybrid) / GIB
    return (per_token or 0) * tokens / GIB


def _estimate_only(ctx: _Ctx) -> float:
    if ctx.entry is None:
        return 0.0
    return estimate_weights(
        ctx.entry.config,
        tp=ctx.tp,
        pp=ctx.pp,
        quantization=ctx.quant,
        dtype=ctx.dtype,
        params_b=ctx.entry.params_b,
        observed_gib=ctx.entry.observed_weights_gib,
    ).gib


def _fp8_tokens(ctx: _Ctx, kv_gib: float, per_token: int | None, found: tuple[int, int] | None) -> int | None:
    if ctx.kv_dtype in FP8_DTYPES or kv_gib <= 0:
        return None
    layout = ctx.layout(kv_dtype="fp8")
    if layout is not None:
        result = _tokens_for(ctx, layout, kv_gib, None)
        return result[0] if result else None
    if per_token and found:
        return _tokens_for(ctx, None, kv_gib, max(1, per_token // 2))[0]  # type: ignore[index]
    return None


def _alternatives(ctx: _Ctx, out: dict[str, object], budget: float) -> None:
    """Smallest power-of-two TP that leaves room for one request; 4-bit / fp8 weights per rank."""
    need_gib = 0.0
    layout = ctx.layout()
    if layout is not None and ctx.max_model_len:
        need_gib = layout.bytes_per_token * ctx.max_model_len / GIB
    heads = int(ctx.entry.config.get("num_attention_heads", 0)) if ctx.entry else 0
    for tp in (1, 2, 4, 8, 16):
        if heads and heads % tp:
            continue
        weights = ctx.weights(tp=tp)
        if weights is None:
            break
        per_rank_need = need_gib * _kv_shrink(ctx, tp)
        if budget - weights - ctx.overheads(tp) > per_rank_need:
            out["tp_size_that_fits"] = tp
            break
    # (not a precision the checkpoint already has, or one above it: an AWQ model is not told to
    # serve an AWQ checkpoint of the same size)
    here = linear_bytes_per_param(ctx.quant, 2)
    for key, quant in (("weights_gib_int4", "awq"), ("weights_gib_fp8", "fp8")):
        value = ctx.weights(quant=quant)
        if value is not None and linear_bytes_per_param(quant, 2) < here:
            out[key] = round(value, 2)


def _kv_shrink(ctx: _Ctx, tp: int) -> float:
    """Per-rank KV per token at `tp` relative to the attempt's TP (replication stops the split)."""
    here, there = ctx.layout(), ctx.layout(tp=tp)
    if here is None or there is None or not here.bytes_per_token:
        return ctx.tp / tp
    return there.bytes_per_token / here.bytes_per_token
