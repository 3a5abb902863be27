"""Ahead-of-launch arithmetic: does this model, on this GPU, with these flags, start?

Pure: takes a resolved model entry and numbers, returns a frozen ``Plan``. The `plan` command
renders it; diagnoses reuse the same pieces through ``derive_for_diagnosis``.
"""

from __future__ import annotations

from kvdoctor._record import record, replace
from kvdoctor.memory.budget import (
    GIB,
    LATEST_VERSION,
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
)
from kvdoctor.memory.catalog import ModelEntry
from kvdoctor.memory.layout import kv_layout
from kvdoctor.memory.model import default_max_model_len
from kvdoctor.memory.startup_check import fraction_free
from kvdoctor.memory.weights import WeightsEstimate, estimate_weights


@record
class PlanRequest:
    model: ModelEntry
    total_gib: float
    gpu_name: str = ""
    utilization: float | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    dtype: str | None = None
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    vllm_version: str | None = None
    activation_gib: float | None = None
    free_gib: float | None = None  # free memory at start-up (probe); None = assume an empty GPU
    block_size: int | None = None
    model_arg: str | None = None  # the model as the user named it (the printed command keeps it)


@record
class Plan:
    request: PlanRequest
    era: Era
    version: str
    utilization: float
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    weights: WeightsEstimate
    activation: Estimate
    non_torch: Estimate
    graphs: Estimate
    budget: Budget
    kv_bytes_per_token: int
    block_bytes: int
    capacity: Capacity
    kv_gib_range: tuple[float, float]
    tokens_range: tuple[int, int]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return not self.problems


def _fits_problems(req: PlanRequest, budget: Budget, cap: Capacity, mml: int) -> list[str]:
    problems = []
    if req.free_gib is not None and req.free_gib < budget.requested_gib and budget.era in (Era.V1, Era.V1_GRAPHS):
        problems.append(
            f"only {req.free_gib:.2f} GiB free at start-up, below the "
            f"{budget.requested_gib:.2f} GiB that --gpu-memory-utilization requests"
        )
    if budget.kv_cache_gib <= 0 or cap.gpu_blocks <= 0:
        problems.append(f"no memory left for the KV cache ({budget.kv_cache_gib:+.2f} GiB)")
    elif cap.max_model_len_that_fits < mml:
        problems.append(f"max_model_len {mml} does not fit; at most {cap.max_model_len_that_fits} tokens do")
    return problems


def make_plan(req: PlanRequest) -> Plan:
    cfg, tp, pp = req.model.config, req.tensor_parallel_size, req.pipeline_parallel_size
    version = req.vllm_version or LATEST_VERSION
    era = era_for(version)
    util = req.utilization if req.utilization is not None else default_utilization(era)
    model_len = default_max_model_len(cfg) or 4096
    mml = req.max_model_len or model_len
    tokens, seqs = default_batch(
        era,
        total_gib=req.total_gib,
        max_model_len=mml,
        a100="a100" in req.gpu_name.lower(),
        version=version,
    )
    tokens = req.max_num_batched_tokens or tokens
    seqs = req.max_num_seqs or seqs
    quant = req.quantization or req.model.quantization
    weights = estimate_weights(
        cfg,
        tp=tp,
        pp=pp,
        quantization=quant,
        dtype=req.dtype,
        params_b=req.model.params_b,
        checkpoint_bytes=req.model.checkpoint_bytes,
        observed_gib=req.model.observed_weights_gib if not req.quantization else None,
    )
    activation = (
        Estimate(req.activation_gib, req.activation_gib, req.activation_gib, "given")
        if req.activation_gib is not None
        else estimate_activation(cfg, tokens=tokens, seqs=seqs, tp=tp)
    )
    layout = kv_layout(cfg, tp=tp, pp=pp, kv_cache_dtype=req.kv_cache_dtype, dtype=req.dtype)
    non_torch = estimate_non_torch(era, tp)
    graphs = estimate_cuda_graphs(
        layout.attention_layers + layout.count(layout.kinds[0].MAMBA),
        enforce_eager=req.enforce_eager,
        max_num_seqs=seqs,
    )
    other = max(0.0, req.total_gib - req.free_gib) if req.free_gib is not None else 0.0
    budget = make_budget(
        era,
        total_gib=req.total_gib,
        utilization=util,
        weights_gib=weights.gib,
        activation_gib=activation.value,
        non_torch_gib=non_torch.value,
        graphs_gib=graphs.value,
        other_used_gib=other,
    )

    def capacity(kv_gib: float) -> Capacity:
        return kv_capacity(
            layout,
            kv_gib,
            era=era,
            max_model_len=mml,
            max_num_batched_tokens=tokens,
            block_size=req.block_size,
            version=version,
        )

    cap = capacity(budget.kv_cache_gib)
    cap = replace(cap, max_model_len_that_fits=min(cap.max_model_len_that_fits, model_len))
    lo_gib = budget.kv_cache_gib - (activation.high - activation.value) - (non_torch.high - non_torch.value)
    hi_gib = budget.kv_cache_gib + (activation.value - activation.low) + (non_torch.value - non_torch.low)
    if era is Era.V1_GRAPHS:
        lo_gib -= graphs.high - graphs.value
        hi_gib += graphs.value - graphs.low
    notes = [f"{era.describes}", f"weights: {weights.basis}", f"activation: {activation.basis}"]
    notes += [f"uncertain catalog field: {u}" for u in req.model.uncertain]
    if mml > model_len:
        notes.append(
            f"max_model_len {mml} exceeds the model's {model_len}; vLLM refuses it unless "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )
    return Plan(
        request=req,
        era=era,
        version=version,
        utilization=util,
        max_model_len=mml,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        graphs=graphs,
        budget=budget,
        kv_bytes_per_token=layout.bytes_per_token,
        block_bytes=layout.block_bytes(cap.block_size),
        capacity=cap,
        kv_gib_range=(lo_gib, hi_gib),
        tokens_range=(capacity(lo_gib).kv_cache_tokens, capacity(hi_gib).kv_cache_tokens),
        problems=tuple(_fits_problems(req, budget, cap, mml)),
        notes=tuple(notes),
    )


@record
class Fix:
    """One change of flags and the plan it leads to."""

    text: str
    plan: Plan


def fixes(plan: Plan) -> list[Fix]:
    """Changes that make a failing plan fit, most direct first."""
    if plan.fits:
        return []
    req, out = plan.request, []
    cap = plan.capacity
    # (None where the plan assumes an empty GPU: no probe said what is free)
    now = fraction_free(req.free_gib, req.total_gib) if req.free_gib is not None else None
    if now is not None and now < plan.utilization and plan.era in (Era.V1, Era.V1_GRAPHS):
        # another tenant holds memory: no other flag passes the start-up check of free memory, so
        # every fix starts from the fraction that passes it now (and the plan at that budget)
        lower = make_plan(replace(req, utilization=now))
        flag = f"--gpu-memory-utilization {now:.2f} (what is free now)"
        if lower.fits:
            return [Fix(flag, lower)]
        return [Fix(f"{flag} {fix.text}", fix.plan) for fix in fixes(lower)]
    if cap.gpu_blocks > 0 and 0 < cap.max_model_len_that_fits < plan.max_model_len:
        length = cap.max_model_len_that_fits // 1024 * 1024 or cap.max_model_len_that_fits
        out.append(Fix(f"--max-model-len {length}", make_plan(replace(req, max_model_len=length))))
    if req.kv_cache_dtype == "auto" and not plan.capacity.max_model_len_that_fits >= plan.max_model_len:
        fp8 = make_plan(replace(req, kv_cache_dtype="fp8"))
        if fp8.fits:
            out.append(Fix("--kv-cache-dtype fp8", fp8))
    for tp in (2, 4, 8):
        if tp > req.tensor_parallel_size and int(req.model.config.get("num_attention_heads", 1)) % tp == 0:
            bigger = make_plan(replace(req, tensor_parallel_size=tp))
            if bigger.fits:
                out.append(Fix(f"--tensor-parallel-size {tp} (needs {tp} GPUs)", bigger))
                break
    if not (req.quantization or req.model.quantization):
        int4 = make_plan(replace(req, quantization="awq"))
        if int4.fits:
            out.append(Fix("a 4-bit (AWQ/GPTQ) checkpoint of this model", int4))
    return out


@record
class ModelSheet:
    """The model's side of the arithmetic, without a GPU: what the KV calculators print."""

    request: PlanRequest
    version: str
    weights: WeightsEstimate
    kv_bytes_per_token: int  # per GPU (the rank's share of the KV heads and layers)
    block_size: int
    block_bytes: int
    max_model_len: int

    @property
    def tokens_per_gib(self) -> int:
        return int(GIB // self.kv_bytes_per_token) if self.kv_bytes_per_token else 0

    @property
    def sequence_gib(self) -> float:
        """KV one max_model_len sequence needs on each GPU."""
        return self.kv_bytes_per_token * self.max_model_len / GIB


def model_sheet(req: PlanRequest) -> ModelSheet:
    """Weights per GPU and KV bytes per token and per block for this model and these flags."""
    cfg = req.model.config
    version = req.vllm_version or LATEST_VERSION
    weights = estimate_weights(
        cfg,
        tp=req.tensor_parallel_size,
        pp=req.pipeline_parallel_size,
        quantization=req.quantization or req.model.quantization,
        dtype=req.dtype,
        params_b=req.model.params_b,
        checkpoint_bytes=req.model.checkpoint_bytes,
        observed_gib=req.model.observed_weights_gib if not req.quantization else None,
    )
    layout = kv_layout(
        cfg,
        tp=req.tensor_parallel_size,
        pp=req.pipeline_parallel_size,
        kv_cache_dtype=req.kv_cache_dtype,
        dtype=req.dtype,
    )
    block_size = default_block_size(layout, era_for(version), req.block_size)
    return ModelSheet(
        request=req,
        version=version,
        weights=weights,
        kv_bytes_per_token=layout.bytes_per_token,
        block_size=block_size,
        block_bytes=layout.block_bytes(block_size),
        max_model_len=req.max_model_len or default_max_model_len(cfg) or 4096,
    )


def served_model(req: PlanRequest) -> str:
    """The model argument of `vllm serve`: as the user named it (an HF id keeps its -Instruct),
    the folder of a config.json, or the catalog entry's HF id for a catalog short name."""
    arg = req.model_arg
    if arg and "models--" in arg:  # an HF cache folder: serve the id it caches
        return req.model.name
    if arg and arg.endswith("config.json"):
        return arg[: -len("config.json")].rstrip("/\\") or "."
    if arg and ("/" in arg or "\\" in arg):
        return arg
    return req.model.hf_id or req.model.name


def serve_command(plan: Plan) -> str:
    req = plan.request
    parts = ["vllm serve", served_model(req)]
    if req.tensor_parallel_size > 1:
        parts.append(f"--tensor-parallel-size {req.tensor_parallel_size}")
    if req.pipeline_parallel_size > 1:
        parts.append(f"--pipeline-parallel-size {req.pipeline_parallel_size}")
    parts.append(f"--max-model-len {plan.max_model_len}")
    parts.append(f"--gpu-memory-utilization {plan.utilization:.2f}")
    if req.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {req.kv_cache_dtype}")
    if req.quantization and req.quantization != req.model.quantization:
        parts.append(f"--quantization {req.quantization}")
    if req.dtype:
        parts.append(f"--dtype {req.dtype}")
    if req.max_num_seqs:
        parts.append(f"--max-num-seqs {req.max_num_seqs}")
    if req.max_num_batched_tokens:
        parts.append(f"--max-num-batched-tokens {req.max_num_batched_tokens}")
    if req.enforce_eager:
        parts.append("--enforce-eager")
    return " ".join(parts)
