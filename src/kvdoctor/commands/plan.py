"""`kvdoctor plan`: the memory arithmetic before a launch (exit 0 fits, 1 does not, 2 bad input)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from io import StringIO
from typing import Any

from kvdoctor.exitcodes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from kvdoctor.memory.catalog import CatalogError, find_gpu, resolve_model, suggest_gpus, suggest_models
from kvdoctor.memory.plan import (
    ModelSheet,
    Plan,
    PlanRequest,
    fixes,
    make_plan,
    model_sheet,
    serve_command,
    served_model,
)

KV_DTYPES = (
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4",
    "int8_per_token_head",
    "fp8_per_token_head",
    "int4_per_token_head",
)


class UsageError(Exception):
    """A one-line user error: `kvdoctor: plan: <what>; <what to do>`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help="catalog name, HF id, config.json, model dir or HF cache folder (required unless listing)",
    )
    parser.add_argument("--list-models", action="store_true", help="print the model catalog and exit")
    parser.add_argument("--list-gpus", action="store_true", help="print the GPU catalog and exit")
    gpu = parser.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", help="catalog GPU name (h100, a100-40gb, rtx-4090, l4, ...)")
    gpu.add_argument("--gpu-memory", help="total GPU memory as vLLM sees it, e.g. 80GiB or 23.58")
    gpu.add_argument("--probe", action="store_true", help="read the live GPU through NVML")
    gpu.add_argument(
        "--probe-file",
        metavar="F",
        help="a saved `kvdoctor probe --format json` or nvidia-smi output, as --probe reads the live GPU",
    )
    parser.add_argument("--gpu-memory-utilization", type=float, help="fraction of total memory (default by version)")
    parser.add_argument("--max-model-len", type=int, help="context length (default: the model's)")
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"), default=None)
    parser.add_argument("--kv-cache-dtype", choices=KV_DTYPES, default="auto")
    parser.add_argument("--quantization", help="awq, gptq, fp8, bitsandbytes, mxfp4, gguf-q4_k, ...")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--vllm-version", help="vLLM version to plan for (default: newest known)")
    parser.add_argument("--activation-gib", type=float, help="activation peak, e.g. from a previous log")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def parse_gib(text: str) -> float:
    """`80GiB`, `80 GB` (read as GiB like vLLM's logs), `81920MiB`, `23.58`."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(gib|gb|g|mib|mb|m|tib|tb)?\s*", text.lower())
    if not match:
        raise UsageError(f"--gpu-memory {text!r} is not a size; write it like 80GiB or 23.58")
    value, unit = float(match.group(1)), match.group(2) or "gib"
    factor = {"m": 1 / 1024, "t": 1024}.get(unit[0], 1.0)
    if value * factor <= 0:
        raise UsageError("--gpu-memory must be positive; write it like 80GiB")
    return value * factor


def _probe_gpu(path: str | None = None) -> tuple[float, float, str]:
    """(total GiB, free GiB, name) of the first visible GPU via kvdoctor.probe.nvml, if present,
    or of a saved snapshot's first GPU."""
    flag = "--probe-file" if path else "--probe"
    if path:
        from kvdoctor.probe import ProbeError, load_snapshot_file

        try:
            return _first_gpu(load_snapshot_file(path), flag)
        except ProbeError as exc:
            raise UsageError(str(exc)) from None
    try:
        nvml: Any = importlib.import_module("kvdoctor.probe.nvml")
    except ImportError as exc:
        raise UsageError(
            "--probe needs kvdoctor.probe.nvml, which is not installed; use --gpu or --gpu-memory"
        ) from exc
    try:
        snap = nvml.NvmlProbe(visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES")).snapshot()
    except Exception as exc:  # a probe must never crash the plan: one line, exit 2
        raise UsageError(
            f"--probe could not read a GPU ({type(exc).__name__}: {exc}); use --gpu or --gpu-memory"
        ) from exc
    return _first_gpu(snap, flag)


def _first_gpu(snap: Any, flag: str) -> tuple[float, float, str]:
    devices = snap.visible_devices() if snap.available else ()
    device = devices[0] if devices else None
    if device is None or device.total_gib is None or device.free_gib is None:
        why = snap.note or snap.status
        raise UsageError(f"{flag} found no GPU memory reading ({why}); use --gpu or --gpu-memory")
    return float(device.total_gib), float(device.free_gib), str(device.name)


def _gpu(args: argparse.Namespace) -> tuple[float, float | None, str]:
    if args.probe or args.probe_file:
        return _probe_gpu(args.probe_file)
    if args.gpu_memory:
        return parse_gib(args.gpu_memory), None, f"{parse_gib(args.gpu_memory):.2f} GiB GPU"
    entry = find_gpu(args.gpu)
    if entry is None:
        raise UsageError(
            f"unknown GPU {args.gpu!r}; close names: {', '.join(suggest_gpus(args.gpu))} (or give --gpu-memory 80GiB)"
        )
    return entry.total_gib, None, entry.name


def _validate(args: argparse.Namespace, model: Any) -> None:
    """What vLLM itself would refuse, said before any arithmetic (issue 17)."""
    from kvdoctor.memory.model import default_max_model_len
    from kvdoctor.memory.weights import known_quantization
    from kvdoctor.reader.versions import parse_version

    if args.quantization and not known_quantization(args.quantization):
        raise UsageError(
            f"--quantization {args.quantization!r} is not a vLLM method; use awq, gptq, fp8, bitsandbytes, gguf-q4_k, …"
        )
    if args.vllm_version and parse_version(args.vllm_version) is None:
        raise UsageError(f"--vllm-version {args.vllm_version!r} is not a version; write it like 0.11.0")
    heads = int(model.config.get("num_attention_heads") or 0)
    tp = args.tensor_parallel_size
    if heads and tp and heads % tp:
        divisors = [d for d in (1, 2, 4, 8, 16) if heads % d == 0]
        raise UsageError(
            f"--tensor-parallel-size {tp} does not divide the model's {heads} attention heads, and vLLM "
            f"refuses that; use one of {', '.join(map(str, divisors))}"
        )
    longest = default_max_model_len(model.config)
    if args.max_model_len and longest and args.max_model_len > longest:
        raise UsageError(
            f"--max-model-len {args.max_model_len} is beyond the model's maximum ({longest}), and vLLM "
            f"refuses it (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); use at most {longest}"
        )


def _request(args: argparse.Namespace) -> PlanRequest:
    if not args.model:
        raise UsageError("--model is required; name one (see `kvdoctor plan --list-models`)")
    try:
        model = resolve_model(args.model)
    except CatalogError as exc:
        raise UsageError(str(exc)) from exc
    if model is None:
        close = suggest_models(args.model)
        hint = f"close names: {', '.join(close)}" if close else "see docs/plan.md for the catalog"
        raise UsageError(f"unknown model {args.model!r}; {hint} (or pass a local config.json)")
    _validate(args, model)
    for flag in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
    ):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1; got {value}")
    util = args.gpu_memory_utilization
    if util is not None and not 0 < util <= 1:
        raise UsageError(f"--gpu-memory-utilization must be in (0, 1]; got {util}")
    total, free, gpu_name = _gpu(args) if _has_gpu(args) else (0.0, None, "")
    return PlanRequest(
        model=model,
        total_gib=total,
        gpu_name=gpu_name,
        utilization=util,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        dtype=None if args.dtype in (None, "auto") else args.dtype,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enforce_eager=args.enforce_eager,
        vllm_version=args.vllm_version,
        activation_gib=args.activation_gib,
        free_gib=free,
        model_arg=args.model,
    )


def _has_gpu(args: argparse.Namespace) -> bool:
    return bool(args.gpu or args.gpu_memory or args.probe or args.probe_file)


def plan_record(plan: Plan) -> dict[str, Any]:
    b, cap, req = plan.budget, plan.capacity, plan.request
    alternatives = fixes(plan)
    chosen = alternatives[0].plan if alternatives else plan
    return {
        "model": req.model.hf_id or req.model.name,
        "model_catalog_id": req.model.id,
        "gpu": req.gpu_name,
        "total_gpu_gib": round(b.total_gib, 2),
        "vllm_version": plan.version,
        "era": plan.era.value,
        "tensor_parallel_size": req.tensor_parallel_size,
        "pipeline_parallel_size": req.pipeline_parallel_size,
        "gpu_memory_utilization": plan.utilization,
        "budget_gib": round(b.requested_gib, 2),
        "weights_gib": round(b.weights_gib, 2),
        "activation_peak_gib": round(b.activation_gib, 2),
        "non_torch_gib": round(b.non_torch_gib, 2),
        "cuda_graph_gib": round(plan.graphs.value, 2),
        "cuda_graph_in_budget": plan.budget.cuda_graph_gib > 0,
        "kv_cache_gib": round(b.kv_cache_gib, 2),
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "block_size": cap.block_size,
        "block_bytes": plan.block_bytes,
        "gpu_blocks": cap.gpu_blocks,
        "kv_cache_tokens": cap.kv_cache_tokens,
        "max_model_len": plan.max_model_len,
        "max_model_len_that_fits": cap.max_model_len_that_fits,
        "max_concurrency": round(cap.max_concurrency, 2),
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "max_num_seqs": plan.max_num_seqs,
        "fits": plan.fits,
        "problems": list(plan.problems),
        "uncertainty": {
            "kv_cache_gib": [round(x, 2) for x in plan.kv_gib_range],
            "kv_cache_tokens": list(plan.tokens_range),
            "weights": plan.weights.basis,
            "activation": plan.activation.basis,
            "non_torch": plan.non_torch.basis,
            "cuda_graphs": plan.graphs.basis,
        },
        "fixes": [
            {
                "change": f.text,
                "kv_cache_gib": round(f.plan.budget.kv_cache_gib, 2),
                "kv_cache_tokens": f.plan.capacity.kv_cache_tokens,
            }
            for f in alternatives
        ],
        "command": serve_command(chosen) if chosen.fits else None,
        "notes": list(plan.notes),
    }


def sheet_record(sheet: ModelSheet) -> dict[str, Any]:
    req = sheet.request
    return {
        "model": req.model.hf_id or req.model.name,
        "model_catalog_id": req.model.id,
        "gpu": None,
        "vllm_version": sheet.version,
        "tensor_parallel_size": req.tensor_parallel_size,
        "pipeline_parallel_size": req.pipeline_parallel_size,
        "kv_cache_dtype": req.kv_cache_dtype,
        "quantization": req.quantization or req.model.quantization,
        "weights_gib": round(sheet.weights.gib, 2),
        "weights_basis": sheet.weights.basis,
        "kv_bytes_per_token": sheet.kv_bytes_per_token,
        "block_size": sheet.block_size,
        "block_bytes": sheet.block_bytes,
        "tokens_per_gib": sheet.tokens_per_gib,
        "max_model_len": sheet.max_model_len,
        "kv_gib_per_sequence": round(sheet.sequence_gib, 2),
        "notes": [
            "per GPU; no GPU given, so no budget: add --gpu, --gpu-memory or --probe",
            *(f"uncertain catalog field: {u}" for u in req.model.uncertain),
        ],
    }


def render_sheet(sheet: ModelSheet) -> str:
    rec = sheet_record(sheet)
    parallel = f"TP={rec['tensor_parallel_size']}" + (
        f", PP={rec['pipeline_parallel_size']}" if rec["pipeline_parallel_size"] > 1 else ""
    )
    kv_dtype = "" if rec["kv_cache_dtype"] == "auto" else f", KV {rec['kv_cache_dtype']}"
    lines = [
        f"{served_model(sheet.request)}, {parallel}{kv_dtype}, vLLM {sheet.version} (no GPU given: per GPU, no budget)",
        f"weights   {rec['weights_gib']:.2f} GiB per GPU ({rec['weights_basis']})",
        f"KV        {rec['kv_bytes_per_token']:,} B/token per GPU, {rec['block_bytes']:,} B per "
        f"{rec['block_size']}-token block",
        f"          {rec['tokens_per_gib']:,} tokens per GiB; one {rec['max_model_len']:,}-token sequence "
        f"needs {sheet.sequence_gib:.2f} GiB",
        *(f"note: {n}" for n in rec["notes"][1:]),
        "add --gpu NAME, --gpu-memory SIZE or --probe for the budget, the KV cache and a command that fits",
    ]
    return "\n".join(lines) + "\n"


def _bar(plan: Plan, width: int = 50) -> str:
    b = plan.budget
    parts = [
        ("W", b.weights_gib),
        ("A", b.activation_gib),
        ("N", b.non_torch_gib),
        ("G", b.cuda_graph_gib),
        ("K", max(0.0, b.kv_cache_gib)),
    ]
    scale = width / max(b.total_gib, b.requested_gib - min(0.0, b.kv_cache_gib))
    cells = "".join(ch * max(0, round(v * scale)) for ch, v in parts)
    return f"[{cells[:width].ljust(round(b.requested_gib * scale))}]"


def _row(label: str, value: float, why: str) -> str:
    return f"  {label:<16}{value:>8.2f} GiB  {why}"


def render_text(plan: Plan) -> str:
    from rich.console import Console

    rec, b, cap = plan_record(plan), plan.budget, plan.capacity
    out = StringIO()
    con = Console(file=out, width=100, color_system=None, highlight=False, soft_wrap=True)
    lo, hi = rec["uncertainty"]["kv_cache_gib"]
    graphs_where = "in the budget" if b.cuda_graph_gib else "captured after sizing, outside the budget"
    lines = [
        f"{rec['model']} on {rec['gpu']} (total {b.total_gib:.2f} GiB), "
        f"TP={rec['tensor_parallel_size']}, vLLM {plan.version}",
        f"era     {plan.era.describes}",
        f"budget  {plan.utilization:.2f} x {b.total_gib:.2f} = {b.requested_gib:.2f} GiB  " + _bar(plan),
        "        W weights, A activation peak, N non-torch, G CUDA graphs, K KV cache",
        _row("weights", b.weights_gib, plan.weights.basis),
        _row("activation peak", b.activation_gib, plan.activation.basis),
        _row("non-torch", b.non_torch_gib, plan.non_torch.basis),
        _row("CUDA graphs", plan.graphs.value, graphs_where),
        _row("KV cache", b.kv_cache_gib, f"range {lo:.2f}..{hi:.2f} GiB"),
        f"KV      {plan.kv_bytes_per_token:,} B/token, {plan.block_bytes:,} B per "
        f"{cap.block_size}-token block -> {cap.gpu_blocks:,} blocks, "
        f"{cap.kv_cache_tokens:,} tokens "
        f"(range {plan.tokens_range[0]:,}..{plan.tokens_range[1]:,})",
        f"        max_model_len {plan.max_model_len:,}: longest that fits "
        f"{cap.max_model_len_that_fits:,}; concurrency {cap.max_concurrency:.2f}x",
        "FITS" if plan.fits else "DOES NOT FIT: " + "; ".join(plan.problems),
    ]
    for fix in fixes(plan):
        lines.append(
            f"  fix: {fix.text} -> KV {fix.plan.budget.kv_cache_gib:.2f} GiB, "
            f"{fix.plan.capacity.kv_cache_tokens:,} tokens"
        )
    for line in lines:
        con.print(line, markup=False)
    if rec["command"]:
        con.print(f"command: {rec['command']}", markup=False)
    return out.getvalue()


def _catalog(args: argparse.Namespace) -> str:
    from kvdoctor.memory.catalog import gpus, models

    rows: list[str] = []
    if args.list_models:
        rows += [f"{m.id:<36} {m.params_b:>7g}B  {m.hf_id or m.name}" for m in models()]
    if args.list_gpus:
        rows += [f"{g.id:<24} {g.total_gib:>7.2f} GiB  {g.name}" for g in gpus()]
    return "\n".join(rows) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.list_models or args.list_gpus:
        sys.stdout.write(_catalog(args))
        return EXIT_OK
    try:
        request = _request(args)
    except UsageError as exc:
        print(f"kvdoctor: plan: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not _has_gpu(args):  # the KV calculator: the model's side only
        sheet = model_sheet(request)
        sys.stdout.write(
            json.dumps(sheet_record(sheet), indent=2) + "\n" if args.format == "json" else render_sheet(sheet)
        )
        return EXIT_OK
    plan = make_plan(request)
    if args.format == "json":
        sys.stdout.write(json.dumps(plan_record(plan), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(plan))
    return EXIT_OK if plan.fits else EXIT_FINDING
