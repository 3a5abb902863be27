"""The extractor table: for each kind of line vLLM (or PyTorch) prints about start-up memory, a
cheap literal precheck, a pattern and a conversion (sizes to GiB floats, counts to ints).

Formats and the releases that print them are in shared/reference/vllm-log-formats.md (section
numbers cited below as §N). Add a line format here, with a case in tests/test_events.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from kvdoctor._record import record
from kvdoctor.reader.units import bytes_or_gib, size_gib, to_float, to_int
from kvdoctor.reader.vllmargs import is_vllm_command, parse_command_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    Fields = dict[str, Any]


@record(slots=True)
class Extractor:
    kind: str
    needles: tuple[str, ...]  # at least one must occur in the line (cheap precheck)
    source: str  # the pattern, compiled on first use (most never run on a given log)
    convert: Callable[[re.Match[str]], Fields | None]

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source)  # re's own cache makes repeat calls cheap


_N = r"(-?[\d,]*\.?\d+)"  # a number, maybe comma-grouped, maybe negative
_SIZE = r"(-?[\d,]*\.?\d+)\s*(bytes|[KMGT]i?B)"
_GB = r"(-?\d+(?:\.\d+)?)\s*Gi?[Bb]"


def _g(m: re.Match[str], i: int) -> float:
    return to_float(m.group(i))


def _opt(m: re.Match[str], i: int) -> str | None:
    return m.group(i) if m.group(i) is not None else None


def _size(m: re.Match[str], i: int) -> float:
    return size_gib(m.group(i), m.group(i + 1))


# --- conversions -----------------------------------------------------------------------------------


def _version(m: re.Match[str]) -> Fields:
    return {"version": m.group(1).rstrip(".,")}


def _banner(m: re.Match[str]) -> Fields:
    engine = {"V0": "v0", "V1": "v1"}.get(m.group(1) or "", None)
    fields: Fields = {"engine": engine, "dump": m.group(3)}
    if m.group(2):
        fields["version"] = m.group(2)
    return fields


def _weights(m: re.Match[str]) -> Fields:
    return {"weights_gib": _g(m, 1)}


def _profile_v064(m: re.Match[str]) -> Fields:
    fields: Fields = {}
    for key, value in re.findall(r"(\w+)=(-?\d+(?:\.\d+)?)(?:Gi[Bb])?", m.group(0)):
        fields[key] = float(value)
    return fields


def _budget(m: re.Match[str]) -> Fields:
    return {"total_gpu_gib": _g(m, 1), "gpu_memory_utilization": _g(m, 2), "budget_gib": _g(m, 3)}


def _breakdown(m: re.Match[str]) -> Fields:
    fields = {"weights_gib": _g(m, 1), "non_torch_gib": _g(m, 2), "activation_peak_gib": _g(m, 3)}
    if m.group(4) is not None:
        fields["kv_cache_gib"] = _g(m, 4)
    return fields


# a profiling table (a 0.6 development build, Dec 2024): one "key  value" row per log line
_TABLE_ROWS = {
    "total_gpu_memory": "total_gpu_gib",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "the current vLLM instance can use": "budget_gib",
    "model weights take": "weights_gib",
    "non_torch_memory": "non_torch_gib",
    "PyTorch activation peak memory": "activation_peak_gib",
    "available_kv_cache_memory": "kv_cache_gib",
}


def _profile_row(m: re.Match[str]) -> Fields:
    return {_TABLE_ROWS[m.group(1)]: _g(m, 2)}


def _profile_debug(m: re.Match[str]) -> Fields:
    text = m.group(0)
    fields: Fields = {}
    for key, name in (
        ("Total non KV cache memory", "non_kv_gib"),
        ("torch peak memory increase", "activation_peak_gib"),
        ("non-torch forward increase memory", "non_torch_gib"),
        ("weights memory", "weights_gib"),
        ("total consumed \\(from mem_get_info\\)", "consumed_gib"),
    ):
        found = re.search(key + r":\s*(-?\d+(?:\.\d+)?)\s*GiB", text)
        if found:
            fields[name] = float(found.group(1))
    return fields or None  # type: ignore[return-value]


def _kv_gib(m: re.Match[str]) -> Fields:
    return {"kv_cache_gib": _g(m, 1)}


def _blocks(m: re.Match[str]) -> Fields:
    fields: Fields = {"device": m.group(1), "gpu_blocks": to_int(m.group(2))}
    if m.group(3):
        fields["cpu_blocks"] = to_int(m.group(3))
    return fields


def _kv_size(m: re.Match[str]) -> Fields:
    fields: Fields = {"device": m.group(1).strip(), "kv_cache_tokens": to_int(m.group(2))}
    if m.group(3):
        fields["max_model_len"] = to_int(m.group(3))
        fields["max_concurrency"] = float(m.group(4))
    return fields


def _concurrency(m: re.Match[str]) -> Fields:
    return {"max_model_len": to_int(m.group(1)), "max_concurrency": float(m.group(2))}


def _graph_done(m: re.Match[str]) -> Fields:
    fields: Fields = {"seconds": float(m.group(1))}
    if m.group(2):
        fields["cuda_graph_gib"] = float(m.group(2))
    return fields


def _graph_estimate(m: re.Match[str]) -> Fields:
    return {"cuda_graph_estimate_gib": _g(m, 1)}


def _graph_pool(m: re.Match[str]) -> Fields:
    return {"cuda_graph_gib": _g(m, 1), "cuda_graph_estimate_gib": _g(m, 2)}


def _graph_util_hint(m: re.Match[str]) -> Fields:
    return {"gpu_memory_utilization": _g(m, 1), "suggested_utilization": _g(m, 2)}


def _free_error(m: re.Match[str]) -> Fields:
    return {
        "device": m.group(1),
        "free_gpu_gib_at_startup": _g(m, 2),
        "total_gpu_gib": _g(m, 3),
        "gpu_memory_utilization": _g(m, 4),
        "requested_gib": _g(m, 5),
    }


def _free_engine_budget(m: re.Match[str]) -> Fields:
    """0.32+, weights held for this engine by another process (shared by IPC): the figure in the
    brackets is the engine's budget, the fraction of the TOTAL less those weights, and the free
    memory already excludes them. The fraction asked for is of the total, as everywhere."""
    fields = _free_error(m)
    util, total, engine = _g(m, 4), _g(m, 3), _g(m, 5)
    requested = util * total
    fields["requested_gib"] = round(requested, 2)
    fields["external_weights_gib"] = round(max(requested - engine, 0.0), 2)
    return fields


def _free_summary(m: re.Match[str]) -> Fields:
    text = m.group(0)
    fields: Fields = {
        "device": m.group(1),
        "free_gpu_gib_at_startup": _g(m, 2),
        "total_gpu_gib": _g(m, 3),
    }
    if m.group(4):  # (the "Desired …" sentence, where the excerpt kept it)
        fields |= {"gpu_memory_utilization": _g(m, 4), "requested_gib": _g(m, 5)}
    for pattern, name in (
        (r"(-?\d+(?:\.\d+)?) GiB for weights?\b", "weights_gib"),
        (r"(-?\d+(?:\.\d+)?) GiB for peak activation", "activation_peak_gib"),
        (r"(-?\d+(?:\.\d+)?) GiB for non-torch memory", "non_torch_gib"),
        (r"(-?\d+(?:\.\d+)?) GiB for (?:CUDAGraph|CUDA graph|NPU graph|graph) memory", "cuda_graph_gib"),
        (r"(-?\d+(?:\.\d+)?) GiB for consumed memory", "consumed_gib"),
    ):
        found = re.search(pattern, text)
        if found:
            fields[name] = float(found.group(1))
    # (vllm-ascend's worker: "… to fully utilize NPU free memory. Current KV cache memory: 7.03 GiB.")
    kv = re.search(r"(?i:kv cache memory in use is|Current KV cache memory:) (-?\d+(?:\.\d+)?)( GiB| bytes)?", text)
    if kv:
        value = float(kv.group(1))
        fields["kv_cache_gib"] = value if (kv.group(2) or "").strip() == "GiB" else bytes_or_gib(kv.group(1))
    fits = re.search(r"--kv-cache-memory=(\d+)`?(?: \([\d.]+ GiB\))? to fit", text)
    if fits:
        fields["kv_cache_memory_bytes_to_fit"] = int(fits.group(1))
    full = re.search(r"--kv-cache-memory=(\d+)`?(?: \([\d.]+ GiB\))? to fully", text)
    if full:
        fields["kv_cache_memory_bytes_full"] = int(full.group(1))
    return fields


def _kv_bytes(m: re.Match[str]) -> Fields:
    kv = _g(m, 2)
    return {
        "free_gpu_gib_at_startup": bytes_or_gib(m.group(1)),
        "kv_cache_gib": kv,
        # (the bytes rounded to GiB: the flag's own value, where the arguments show it, is exact)
        "kv_cache_memory_bytes_reserved": int(kv * (1 << 30)),
    }


_FREE_UNITS = {"B": 1 / (1 << 30), "Ki": 1 / (1 << 20), "Mi": 1 / 1024, "Gi": 1.0, "Ti": 1024.0}


def _host_ram(m: re.Match[str]) -> Fields | None:
    """`free`'s "Mem:" row (total, used, free, shared, buff/cache, available): the host's RAM, for
    the launches that ask it for something (the CPU backend's KV space, swap space, CPU offload).
    `free -h` names its units; plain figures are `-g`, `-m` or `free`'s KiB, told by their size."""
    cells = [(float(v), u) for v, u in re.findall(r"(\d+(?:[.,]\d+)?)(B|[KMGT]i)?", m.group(1).replace(",", "."))]
    if len(cells) < 6:
        return None
    total = cells[0][0]
    plain = 1.0 if total < 4096 else 1 / 1024 if total < 4 * 1024 * 1024 else 1 / (1 << 20)
    gib = [v * (_FREE_UNITS[u] if u else plain) for v, u in cells]
    return {"host_ram_total_gib": round(gib[0], 1), "host_ram_available_gib": round(gib[5], 1)}


def _ascend_memory(m: re.Match[str]) -> Fields:
    # vllm-ascend worker_v1: "Available memory: <bytes>, total memory: <bytes>"
    return {
        "kv_cache_gib": round(int(m.group(1)) / (1 << 30), 4),
        "total_gpu_gib": round(int(m.group(2)) / (1 << 30), 2),
    }


_KEYWORD_SETTINGS = (
    "gpu_memory_utilization",
    "max_model_len",
    "tensor_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enforce_eager",
)
# a pattern's source, compiled on first use (re's cache), like the extractors' own
# (not a quotient in prose: "(max_num_batched_tokens / max_num_seqs = 32768)" is no setting)
_KEYWORD = (
    r"(?<![/*] )(?<![/*])['\"]?\b("
    + "|".join(_KEYWORD_SETTINGS)
    + r")['\"]?\s*(?::|=)\s*['\"]?(\d+(?:\.\d+)?|True|False|true|false)\b"
)


_PREFIXED = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "tensor_model_parallel_size": "tensor_parallel_size",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    # LLaMA-Factory's own names (`--vllm_gpu_util 0.5`, `--vllm_maxlen 4096`)
    "gpu_util": "gpu_memory_utilization",
    "maxlen": "max_model_len",
}
_PREFIXED_SETTING = (
    r"(?:--vllm[_-]|\brollout\.)("
    + "|".join(n.replace("_", "[_-]") for n in _PREFIXED)
    + r")(?:=|\s+)(\d+(?:\.\d+)?)\b"
)


def _prefixed_settings(m: re.Match[str]) -> Fields:
    flags: dict[str, Any] = {}
    for name, raw in re.findall(_PREFIXED_SETTING, m.string):
        flags.setdefault(_PREFIXED[name.replace("-", "_")], float(raw) if "." in raw else int(raw))
    return {"flags": flags}


# the model a wrapper or a Python call names: LLM(model="lmsys/vicuna-7b-v1.3"), lm-eval's
# {'pretrained': '/models/Llama3.1-70B-Instruct', …}, a JSON {"model": "…"}
_MODEL_KEYWORD = r"""(?:\bLLM\(\s*|['"](?:pretrained|model)['"]\s*:\s*|\bmodel\s*=\s*)['"]([^'"\s]{3,})['"]"""


def _keyword_settings(m: re.Match[str]) -> Fields:
    flags: dict[str, Any] = {}
    model = re.search(_MODEL_KEYWORD, m.string)
    if model is not None:
        flags["model"] = model.group(1)
    for name, raw in re.findall(_KEYWORD, m.string):
        if raw in ("True", "False", "true", "false"):
            # (not vLLM's own advice before the capture: "To run the model in eager mode, set
            # 'enforce_eager=True' or use '--enforce-eager'")
            if name == "enforce_eager" and "in eager mode, set" not in m.string:
                flags[name] = raw in ("True", "true")
            continue
        flags.setdefault(name, float(raw) if "." in raw else int(raw))
    return {"flags": flags}


_FLAG_PAIR = r"--(gpu-memory-utilization|max-model-len)(?:[ =]|\",\s*\")(\d+(?:\.\d+)?)\b"


def _flag_pairs(text: str) -> dict[str, float | int]:
    flags: dict[str, float | int] = {}
    for f in re.finditer(_FLAG_PAIR, text):
        flags.setdefault(f.group(1).replace("-", "_"), float(f.group(2)) if "." in f.group(2) else int(f.group(2)))
    return flags


# a card named where the log (or the ticket around it) says what it ran on: collect_env /
# `nvidia-smi -L` ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: …)") or prose ("on 2x A100 80GB",
# "RTX 4090 24GB"); the catalog turns the name into a total when the log prints none
_GPU_MODEL = (
    r"(?:(?:NVIDIA|Tesla|Quadro)[\s-]+)?(?:GeForce\s+)?"
    r"((?:RTX\s*)?(?:GH200|GB10|H200|H100|H800|H20|A100|A800|A10G|A6000|A4000|A40|A10|L40S|L40|L20|L4|V100S?|T4|B200|MI300X)"
    r"(?:[- ](?:SXM\d?|PCIe|NVL|HBM3))*(?:[- ]?\d{2,3}\s?G(?:B|iB)?)?"
    r"|RTX\s*[345]0[6-9]0(?:\s?Ti)?|RTX\s*6000\s+Ada"
    # (the flagship named bare, "my 4090 box", "2x 3090": not a count of tokens or bytes)
    r"|[345]090(?:\s?Ti)?(?!\s*(?:-?\s*tokens?|[KMG]i?B|ms|s)\b))\b"
)
_GPU_NAME = (
    r"(?i)\bGPU \d+: "
    + _GPU_MODEL
    # (a count, "2x", "8*", "2张"; a determiner; a Chinese "single card" / "graphics card:")
    + r"|(?:\b(\d+)\s*[x×*张块]\s*|\b(?:on|with|using|an?|one|single|my|our|the|two|four|eight)\s+"
    + r"|(?:单卡|双卡|显卡[:：]?)\s*)"
    + _GPU_MODEL
    # a ticket's "GPU: NVIDIA A100-SXM4-80GB", a node label "nvidia.com/gpu.product: NVIDIA-H200"
    + r"|\b(?:GPUs?(?: (?:type|model|name))?|gpu\.product|[Aa]ccelerators?|Box|Hardware|Machine|Rig|Setup)"
    + r"\s*[:=：]\s*[\"']?"
    + _GPU_MODEL
    # the label's value alone, as `kubectl get node -o jsonpath=…gpu\.product…` prints it
    + r"|^\s*(?=NVIDIA-)"
    + _GPU_MODEL
    + r"\s*$"
    # a GeForce card named with its memory, anywhere in a sentence ("RTX 5080 16GB under WSL2")
    + r"|(?<![\w-])(?=RTX\s*[345]0[6-9]0(?:\s?Ti)?\s*\d{1,2}\s?G(?:B|iB)\b)"
    + _GPU_MODEL
)


_CARD_ON_LINE = re.compile(
    r"(?i)\b(?:RTX\s*[345]0[6-9]0(?:\s?Ti)?"
    r"|(?:H200|H100|A100|A800|A6000|A4000|A40|A10G|L40S|L4|V100|T4)(?:[- ]?\d{2,3}\s?GB)?)\b"
)


def _gpu_name(m: re.Match[str]) -> Fields | None:
    name = m.group(1) or m.group(3) or m.group(4) or m.group(5) or m.group(6)
    # (a MIG slice named beside the card, "MIG 3g.47gb": the card's total is not what vLLM saw)
    if not name or re.search(r"(?i)\bMIG\b|\b\d+g\.\d+gb\b", m.string):
        return None
    fields: Fields = {"gpu_name": " ".join(name.split())}
    # (every card the line names: "RTX 4090 (GPU 0) + RTX 3080 10GB (GPU 1)")
    others = {" ".join(n.split()) for n in _CARD_ON_LINE.findall(m.string)}
    if len(others) > 1:
        fields["gpu_names"] = sorted(others)
    if m.group(2):
        fields["gpu_count"] = int(m.group(2))
    return fields


_GAUDI_WEIGHTS = (
    # "Loading model weights took in total …" and, per worker, "Pre-loading model weights on hpu:0 took …"
    r"(?:Loading model weights took in total|Pre-loading model weights on hpu:\d+ took) (\d+(?:\.\d+)?) GiB of "
    r"device memory \((?:\d+(?:\.\d+)?) GiB/(\d+(?:\.\d+)?) GiB used\)"
)

# the steps a traceback's code lines name (`self.model_executor.determine_num_available_blocks()`
# under a `_initialize_kv_caches` frame): the deepest one says which step failed
_CODE_LINE_STEPS = (
    # the sampler's top-k/top-p sort: at start-up it runs inside the profiling pass (V0) or the
    # sampler warm-up (V1, whose frames say so)
    "logits.sort",
    "_apply_top_k_top_p",
    "capture_model",
    "_dummy_sampler_run",
    "profile_run",
    "load_model",
    "determine_num_available_blocks",
    "profile_num_available_blocks",
    "determine_available_memory",
    "initialize_cache",
    "initialize_from_config",
    "get_kv_cache_config",
    "check_enough_kv_cache_memory",
    "raise_if_cache_size_invalid",
)
_METHOD_PHASES = {
    "load_model": "weight_loading",
    "determine_num_available_blocks": "profile_run",
    "profile_num_available_blocks": "profile_run",  # 0.1.4-0.4.0.post1
    "determine_available_memory": "profile_run",
    "profile_run": "profile_run",
    "capture_model": "cuda_graph_capture",
    "compile_or_warm_up_model": "cuda_graph_capture",
    "initialize_cache": "kv_cache_allocation",
    "initialize_from_config": "kv_cache_allocation",
}


def _worker_exception(m: re.Match[str]) -> Fields | None:
    # V0 "Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: …, Traceback"
    message = (m.group(2) or "").strip()
    if not message:
        return None  # only the method (its phase is read by another extractor); the cause follows
    return {"type": "WorkerException", "message": message, "method": m.group(1)}


def _method_phase(m: re.Match[str]) -> Fields | None:
    phase = _METHOD_PHASES.get(m.group(1))
    return {"phase": phase, "method": m.group(1)} if phase else None


def _uvicorn_error(m: re.Match[str]) -> Fields:
    return {"type": "OSError", "message": f"[Errno {m.group(1)}] {m.group(2)}"}


def _config_dict(m: re.Match[str]) -> Fields:
    return {"dump": m.group(1)}


def _startup_plan(m: re.Match[str]) -> Fields:
    return {"kv_cache_memory_bytes": int(m.group(1)), "kv_cache_gib": _g(m, 2)}


def _auto_fit(m: re.Match[str]) -> Fields:
    return {"original_max_model_len": to_int(m.group(1)), "max_model_len": to_int(m.group(2))}


def _max_len_v0(m: re.Match[str]) -> Fields:
    return {"max_model_len": to_int(m.group(1)), "max_tokens_in_kv_cache": to_int(m.group(2))}


def _max_len_v1(m: re.Match[str]) -> Fields:
    fields: Fields = {
        "max_model_len": to_int(m.group(1)),
        "needed_kv_gib": _g(m, 2),
    }
    if m.group(3):
        fields["kv_cache_gib"] = _g(m, 3)
        fields["check_kv_gib"] = _g(m, 3)  # (the rank that raised: its own figure, beside the others')
    est = re.search(r"estimated maximum model length is (\d+(?:,\d{3})*)", m.string)
    if est:
        fields["estimated_max_model_len"] = to_int(est.group(1))
    elif re.search(r"GiB\)\.\s+Try increas", m.string):
        # a whole message (GiB, up to "Try increasing") without the estimate's sentence: on 0.9.1+,
        # which prints it whenever a length fits, no length fits at all (the rule checks the release)
        fields["no_length_fits"] = True
    return fields


def _profiling_assert(m: re.Match[str]) -> Fields:
    fields: Fields = {"measure": m.group(1)}
    if m.group(2):
        fields["initial_gib"] = bytes_or_gib(m.group(2))
        fields["current_gib"] = bytes_or_gib(m.group(3))
    return fields


_OOM_FIELD_SOURCES = (
    (r"Tried to allocate " + _SIZE, "tried_gib"),
    (r"total capac(?:i)?ty of " + _SIZE, "total_gpu_gib"),
    (r"of which " + _SIZE + " is free", "free_gib"),
    (r"this process has " + _SIZE, "this_process_gib"),
    (r"memory " + _SIZE + r" is allocated by PyTorch", "allocated_gib"),
    (
        r"and " + _SIZE + r" is reserved by PyTorch but unallocated",
        "reserved_unallocated_gib",
    ),
    (r"with " + _SIZE + r" allocated in private pools", "private_pools_gib"),
    # a per-process cap (torch.cuda.set_per_process_memory_fraction) adds "39.59 GiB allowed; "
    (_SIZE + r" allowed;", "allowed_gib"),
    # torch <= 2.0: "(GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; …)"
    (_SIZE + r" total capacity;", "total_gpu_gib"),
    # (the same message cut after its first figure: "(GPU 0; 12.00 GiB total")
    (r"\(GPU \d+; " + _SIZE + r" total\b", "total_gpu_gib"),
    (_SIZE + r" already allocated", "allocated_gib"),
    (r"; " + _SIZE + r" free;", "free_gib"),
    (r"; " + _SIZE + r" reserved in total by PyTorch", "this_process_gib"),
)


@lru_cache(maxsize=1)
def _oom_fields() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(source), name) for source, name in _OOM_FIELD_SOURCES)


_TPU_HBM = re.compile(r"Used \d+(?:\.\d+)?[GM] of (\d+(?:\.\d+)?)G hbm")
_OOM_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + " memory in use")
_OOM_GPU = re.compile(r"\(?GPU (\d+)[;)]? has|\(GPU (\d+);")


def _cuda_oom(m: re.Match[str]) -> Fields:
    text = m.string
    fields: Fields = {"device": m.group(1)}
    for pattern, name in _oom_fields():
        if name in fields:
            continue
        found = pattern.search(text)
        if found:
            fields[name] = size_gib(found.group(1), found.group(2))
    # (each PID once: a wrapper that repeats the OOM's message on the same line, Xinference's
    # "Leave launch_builtin_model, error: …" around the traceback's own, lists every process again)
    others = list({int(pid): size_gib(v, u) for pid, v, u in _OOM_PROCESS.findall(text)}.items())
    if others:
        fields["processes"] = [{"pid": pid, "gib": round(gib, 3)} for pid, gib in others]
        fields["process_gib"] = round(sum(g for _, g in others), 3)
    gpu = _OOM_GPU.search(text)
    if gpu:
        fields["gpu_index"] = int(gpu.group(1) or gpu.group(2))
    return fields


_TEMPLATE_SETTINGS = {
    "GPU_MEMORY_UTILIZATION": "gpu_memory_utilization",
    "MAX_MODEL_LEN": "max_model_len",
    "TENSOR_PARALLEL_SIZE": "tensor_parallel_size",
    "MAX_NUM_SEQS": "max_num_seqs",
    "MAX_NUM_BATCHED_TOKENS": "max_num_batched_tokens",
    "MODEL_NAME": "model",
    "gpuMemoryUtilization": "gpu_memory_utilization",
    "maxModelLen": "max_model_len",
    "tensorParallelSize": "tensor_parallel_size",
    "maxNumSeqs": "max_num_seqs",
    "maxNumBatchedTokens": "max_num_batched_tokens",
    "modelURL": "model",
}


def _template_setting(m: re.Match[str]) -> Fields | None:
    name, raw = _TEMPLATE_SETTINGS[m.group(1)], m.group(2)
    if name == "model":
        return {"flags": {"model": raw}} if "/" in raw or "-" in raw else None
    try:
        value: float | int = float(raw) if "." in raw else int(raw)
    except ValueError:
        return None
    if name == "gpu_memory_utilization" and not 0 < value <= 1:
        return None
    return {"flags": {name: value}}


def _warmup_oom(m: re.Match[str]) -> Fields:
    return {"what": m.group(1), "dummy_requests": to_int(m.group(2))}


def _mamba(m: re.Match[str]) -> Fields:
    return {"max_num_seqs": to_int(m.group(1)), "mamba_blocks": to_int(m.group(2))}


def _mamba_cap(m: re.Match[str]) -> Fields:
    return {"mamba_blocks": to_int(m.group(1))}


def _user_len(m: re.Match[str]) -> Fields:
    fields: Fields = {"max_model_len": to_int(m.group(1)), "derived": m.group(2)}
    # ("max_position_embeddings=4096 in model's config.json", "max_model_len=32768 …"): the model's own length
    derived = re.search(r"=(\d+)", m.group(2))
    if derived:
        fields["derived_max_model_len"] = int(derived.group(1))
    return fields


def _long_ctx(m: re.Match[str]) -> Fields:
    return {"max_model_len": to_int(m.group(1))}


def _batched_error(m: re.Match[str]) -> Fields:
    return {"max_num_batched_tokens": to_int(m.group(1)), "max_model_len": to_int(m.group(2))}


def _setting(m: re.Match[str]) -> Fields:
    return {m.group(1): to_int(m.group(2))}


def _chunked(m: re.Match[str]) -> Fields:
    return {"max_num_batched_tokens": to_int(m.group(1)), "enable_chunked_prefill": True}


def _environment_error(m: re.Match[str]) -> Fields:
    text = m.group(1).lower()
    # a warning the run may get past (NCCL's failed call, torch's rendezvous retrying): it counts
    # only where the start-up stopped there (attempts.py, `_recovered`)
    soft = "nccl warn" in text or "tcp client" in text
    if "80" in text[:9] or "forward compat" in text or "unsupported toolchain" in text:
        kind = "driver"
    elif "device ordinal" in text or "cudacontext" in text:
        kind = "device visibility"
    elif "disk" in text or "space left" in text:
        kind = "disk"
    elif "shm" in text:
        kind = "shared memory"
    elif "bus error" in text or "sigbus" in text:
        # (a page of a mapped file that cannot be backed: /dev/shm in a container, or the weights'
        # own file on a network disk or changed while it loads)
        kind = "shared memory or a mapped file"
    elif "ptx" in text:
        kind = "toolchain"
    elif text.startswith("cuda error (") or "no kernel image" in text:
        kind = "kernel build"
    elif "gloo" in text or "tcp client" in text or "sending request" in text:
        kind = "network"
    elif "bind for" in text or "already allocated" in text:
        kind = "port"
    elif "hami" in text:
        kind = "vGPU layer (HAMi)"
    elif "memory access fault" in text:
        kind = "driver"
    elif "opp_kernel" in text:
        kind = "operator package"
    elif "ioctl" in text or "driver error" in text:
        kind = "driver"
    elif "nccl warn net/" in text:
        kind = "network"
    elif "nccl warn" in text:
        kind = "NCCL's CUDA call"
    elif any(
        w in text
        for w in (
            "mmap",
            "oom killer",
            "oom-killer",
            "killed process",
            "low on memory",
            "usage threshold",
            "oom-prevention",
        )
    ):
        kind = "host memory"
    else:
        kind = "cluster"
    fields: Fields = {"reason": m.group(1).strip(), "kind": kind}
    if soft:
        fields["soft"] = True
    return fields


def _kernel_length_limit(m: re.Match[str]) -> Fields | None:
    """The longest length the kernel's shared memory allows: 4 bytes of logits per token plus a
    fixed part (required − 4 × max_model_len), rounded down to 256 tokens."""
    length, required, available = int(m.group(1)), float(m.group(2)), float(m.group(3))
    fixed = required - 4 * length
    limit = int((available - fixed) // 4) // 256 * 256
    return {"limit": limit} if 0 < limit < length else None


_METAL_KEYS = "metal_limit|fraction|usable_metal|model_memory|overhead|kv_budget|num_blocks|max_tokens_cached"
_METAL_PAIR = r"\b(" + _METAL_KEYS + r")=(-?\d+(?:\.\d+)?)(GB)?"


def _metal_memory(m: re.Match[str]) -> Fields:
    """Every key=value of vllm-metal's budget on the line; its GB are decimal (10^9 bytes)."""
    fields: dict[str, Any] = {}
    for key, raw, unit in re.findall(_METAL_PAIR, m.string):
        value = float(raw)
        fields[key] = round(value * 1e9 / 2**30, 4) if unit else (int(value) if raw.isdigit() else value)
    return fields


def _exception(m: re.Match[str]) -> Fields:
    return {"type": m.group(1), "message": m.group(2).strip()}


def _ipython_header(m: re.Match[str]) -> Fields | None:
    """IPython's header line: the type only (torch's OOM is left to its frames and its message,
    which the OOM readers know)."""
    if m.group(1).endswith("OutOfMemoryError"):
        return None
    return {"type": m.group(1), "message": "(message cut; IPython named the type above the frames)"}


def _message_as(exception_type: str) -> Callable[[re.Match[str]], Fields]:
    """An error's message printed without its exception type, under the type that raises it."""

    def fields(m: re.Match[str]) -> Fields:
        return {"type": exception_type, "message": m.group(1).strip()}

    return fields


def _frame(m: re.Match[str]) -> Fields:
    return {"file": m.group(1), "function": m.group(2)}


def _ipython7_frame(m: re.Match[str]) -> Fields:
    return {"file": m.group(1) or "<ipython-input>", "function": m.group(2)}


def _command(m: re.Match[str]) -> Fields | None:
    text = m.string
    if 'File "' in text or not is_vllm_command(text):
        return None
    if "launched with command" in text:
        return None  # vLLM's launcher naming the process that holds its port, not a launch
    flags = parse_command_line(text)
    return {"flags": flags} if flags else None


def _nothing(m: re.Match[str]) -> Fields:
    return {}


def _platform(m: re.Match[str]) -> Fields:
    return {"platform": m.group(1).lower()}


# collect_env's lines on a machine without that stack ("HIP runtime version: N/A", "ROCM used to
# build PyTorch: N/A", "ROCm: Disabled"): they name the vendor only to say it is absent
_ABSENT = re.compile(r"(?i):\s*(?:N/A|Disabled|None|False|No)\s*$")


def _accelerator(m: re.Match[str]) -> Fields | None:
    if _ABSENT.search(m.string):
        return None
    return {"vendor": ("ascend", "gaudi", "amd", "intel", "tpu")[m.lastindex - 1 if m.lastindex else 0]}


def _tpu_oom(m: re.Match[str]) -> Fields:
    fields: Fields = {"device": "TPU"}
    if m.group(1):
        fields["tried_gib"] = float(m.group(1)) / (1024 if m.group(2) == "M" else 1)
    elif m.group(4):
        fields["tried_gib"] = round(float(m.group(4)) / (1024 if m.group(5) == "M" else 1), 3)
    if m.group(4) or m.group(6):
        # a compiled program is loaded at the warm-up that stands for graph capture on TPU
        fields["phase"] = "cuda_graph_capture"
    if m.group(8):
        fields["total_gpu_gib"] = float(m.group(8))
    elif h := _TPU_HBM.search(m.string):  # "Used 20.44G of 15.75G hbm": the chip's HBM
        fields["total_gpu_gib"] = float(h.group(1))
    return fields


def _logo_model(m: re.Match[str]) -> Fields:
    return {"model": m.group(1)}


def _server_version(m: re.Match[str]) -> Fields:
    return {"version": m.group(1), "model": m.group(2)}


def _phase(m: re.Match[str]) -> Fields:
    text = m.group(0).lower()
    if "profiling cuda graph" in text:
        phase = "cuda_graph_profile"
    elif "captur" in text or "cuda graphs can take" in text:
        phase = "cuda_graph_capture"
    elif "profil" in text:
        phase = "profile_run"
    elif "sampler" in text or "warm" in text:
        phase = "sampler_warmup"
    else:
        phase = "weight_loading"
    fields: Fields = {"phase": phase}
    # (V1's "Starting to load model Qwen/Qwen2.5-3B-Instruct...": the model this engine loads)
    named = _LOADING_MODEL.search(m.string) if phase == "weight_loading" else None
    if named:
        fields["model"] = named.group(1)
    return fields


_LOADING_MODEL = re.compile(r"Starting to load model (\S+?)\.{3}")


def _cache_info(m: re.Match[str]) -> Fields:
    # "%d Engines: …" (0.11.1+) is the SUM over the data-parallel engines (the front end adds
    # each engine's count): one engine's share is not printed, unless the sum is 0
    engines, blocks = int(m.group(1) or 1), to_int(m.group(2))
    return {"gpu_blocks": blocks} if engines == 1 or blocks == 0 else {}


def _override(m: re.Match[str]) -> Fields:
    return {"gpu_blocks": to_int(m.group(2)), "gpu_blocks_measured": to_int(m.group(1))}


# what each request-time marker says was running when the error came
_REQUEST_ERRORS: dict[str, Fields] = {
    "Exception in ASGI application": {"during": "an API request (Exception in ASGI application)", "scheduled": False},
    "Dumping input data": {"during": "the engine step on a scheduled batch, whose input it dumped", "scheduled": True},
}


def _F(source: str) -> str:
    return source


EXTRACTORS: tuple[Extractor, ...] = (
    # the OS killed the process (the kernel's OOM killer, a container's memory limit): the shell's
    # "Killed" (bash: "line 1:  4242 Killed  python …"), Kubernetes' OOMKilled, exit code 137
    Extractor(
        "process_killed",
        ("Killed", "exit code 137", "exited with code 137", "exit code: 137", "main process disappeared"),
        _F(
            r"(?:^|\|)\s*(?:[\w./-]+: line \d+:\s+\d+\s+)?Killed(?::? 9)?(?:\s+(?:python|vllm|\$).*)?\s*$"
            r"|\bOOMKilled\b|\bexit(?:ed with)? code:? 137\b"
            # Ascend's kernel compiler (TBE) workers outliving the engine: "[ERROR] TBE
            # Subprocess[task_distribute] raise error[], main process disappeared!"
            r"|TBE Subprocess\[\w+\] raise error\[\], main process disappeared"
        ),
        _nothing,
    ),
    # an orchestrator's health probe killing the container while it still loads (kubelet: "Container
    # vllm failed startup probe, will be restarted"; a probe that merely failed once is no kill)
    Extractor(
        "probe_killed",
        ("probe, will be restarted",),
        _F(r"failed (startup|liveness) probe, will be restarted"),
        lambda m: {"probe": m.group(1)},
    ),
    # vLLM (or torch) sees no GPU: the container has no GPU runtime, the driver library is missing
    Extractor(
        "no_gpu",
        (
            "UnspecifiedPlatform",
            "NVML Shared Library Not Found",
            "Can't initialize NVML",
            "Failed to infer device type",
            "libcuda.so",
            "No CUDA GPUs are available",
            "Found no NVIDIA driver",
            "Device string must not be empty",
        ),
        _F(
            r"(No platform detected, vLLM is running on UnspecifiedPlatform|NVML Shared Library Not Found|"
            r"Can't initialize NVML|Failed to infer device type|libcuda\.so(?:\.1)?: cannot open shared object|"
            # (0.10+: no platform detected, so DeviceConfig's device type is "")
            r"No CUDA GPUs are available|Found no NVIDIA driver|Device string must not be empty)"
        ),
        lambda m: {"reason": m.group(1)},
    ),
    # the host, the driver or the cluster refuses before any GPU memory is used: a driver older than
    # the container's CUDA (Error 803/804), a full disk while downloading weights, too small a
    # /dev/shm, a Ray cluster that cannot place the workers
    Extractor(
        "environment_error",
        (
            "Error 804",
            "Error 803",
            "Error 802",
            "Error 805",
            "Insufficient nvidia.com/",
            "forward compatibility was attempted",
            "free disk space",
            "No space left on device",
            "Disk quota exceeded",
            "/dev/shm",
            "shm-size",
            "placement group",
            "No available node types can fulfill",
            "unable to mmap",
            "OOM killer",
            "Out of memory: Killed process",
            "invoked oom-killer",
            "node running low on memory",
            "memory usage threshold",
            "ray-oom-prevention",
            "connectFullMesh failed",
            "ioctl failed",
            "port is already allocated",
            "failed programming external connectivity",
            "Illegal device id",
            "NCCL WARN Cuda failure",
            "NCCL WARN NET/",
            "TCP client failed to connect",
            "Bus error",
            "SIGBUS received at time",
            "ptxas fatal",
            "PTX codegen error",
            "CUDA error (",
            "no kernel image is available",
            "reason=driver error:",
            "opp_kernel package",
            "Memory access fault by GPU",
            "unsupported toolchain",
            "invalid device ordinal",
            "CUDAContext.cpp",
            "error sending request for url",
        ),
        _F(
            r"(?i)(Error 80[2-5]: [^.]*|forward compatibility was attempted on non supported HW|"
            # the scheduler cannot place the pod: no node offers the GPU resource it requests (a
            # MIG node offers nvidia.com/mig-… instead, a full cluster none)
            r"FailedScheduling .{0,200}?Insufficient nvidia\.com/[\w.-]+|"
            r"Not enough free disk space|No space left on device|Disk quota exceeded|"
            r"exceeds memory available in /dev/shm|--shm-size|"
            r"Waiting for creating a placement group|No available node types can fulfill resource request|"
            # the host (or the container) out of RAM: a checkpoint shard that cannot be mapped
            # (errno 12), the kernel's OOM killer named by Ray or dmesg
            r"unable to mmap \d+ bytes from file .{0,300}?Cannot allocate memory|"
            r"killed by SIGKILL by OOM killer|OOM killer due to high memory usage|Out of memory: Killed process \d+|"
            r"invoked oom-killer|"
            # Ray's memory monitor killing workers on a node low on RAM
            r"node running low on memory|exceeds the memory usage threshold|ray-oom-prevention|"
            # Gloo (the CPU group every distributed start-up creates) cannot reach a peer: the host
            # network interface, not the GPU
            r"Gloo connectFullMesh failed|"
            # a model hub's download refused by the network (NIM's Rust client, reqwest's wording)
            r"error sending request for url \(\S+\)|"
            # a TPU host's VFIO mapping refused (a driver limit, not HBM)
            r"RESOURCE_EXHAUSTED: ioctl failed|"
            # docker could not publish the port: another container (an old server) holds it
            r"Bind for [\d.:]+ failed|port is already allocated|"
            # HAMi's vGPU layer (libvgpu) refusing a device or a memory limit it enforces
            r"HAMI-core ERROR \([^)]*\)\]: Illegal device id[^.]*|"
            # NCCL's own warning that a CUDA call it made failed (a vGPU without UVM, a container
            # without IPC): the communicator cannot start, whatever the memory
            r"NCCL WARN Cuda failure '(?!out of memory)[^']*'|"
            # NCCL's network transport (InfiniBand/RoCE verbs, sockets) failing between the nodes: a
            # work completion with an error status, a connection it cannot make
            r"NCCL WARN NET/(?:IB|Socket)[^\n]{0,200}?"
            r"(?:status=IBV_WC_(?!SUCCESS)\w+|CQE with error|Connect to \S+ failed)|"
            # torch's rendezvous (TCPStore) that cannot reach the address the ranks meet at (a host
            # IP that is not this machine's, a firewall): it retries until its timeout
            r"TCP client failed to connect/validate to host \S+|"
            # a worker killed by SIGBUS: a page of a memory-mapped file it could not back, in a
            # container almost always a /dev/shm too small for NCCL's or Ray's segments
            r"Fatal Python error: Bus error|SIGBUS received at time|"
            # the image's compiler does not know this GPU (Triton's bundled ptxas and a new
            # architecture such as sm_121a): the toolchain, not memory
            r"ptxas fatal\s*:[^\n]{0,160}|Internal Triton PTX codegen error|"
            # a kernel's own CUDA check failing at launch ("CUDA error (…/flash_fwd_launch_template.h:188):
            # invalid argument"): a kernel built for another GPU generation, not memory
            r"CUDA error \([^)\n]{1,200}\): (?!out of memory)[a-z][^\n]{0,120}|"
            # torch or a kernel built without this GPU's architecture (a title quotes it often)
            r"no kernel image is available for execution on the device|"
            # a PTX built by a newer CUDA than the driver can JIT: the driver is too old for the image
            r"the provided PTX was compiled with an unsupported toolchain|"
            # a device index the process cannot see (CUDA/HIP_VISIBLE_DEVICES or Ray's placement
            # exposing fewer devices than the ranks use): torch's lazy init asserting on it too
            r"invalid device ordinal|INTERNAL ASSERT FAILED at \S*CUDAContext\.cpp\S*|"
            # ROCm's runtime reporting a GPU page fault (HSA): the driver, the firmware or a kernel
            # built for another GPU, not a shortage of memory
            r"Memory access fault by GPU node-\d+ [^\n]{0,120}?Reason: [^.\n]{1,80}|"
            # Ascend's operator package (CANN's opp kernels) missing or not matching the runtime
            r"call aclnn\w+ failed, detail:\w+: .{0,160}?opp_kernel package is installed!?|"
            # Ascend's runtime that cannot read the device through its driver (halMemGetInfo)
            r"rtMemGetInfo\w* execution failed, reason=driver error:[\w ]+|reason=driver error:no valid device)"
        ),
        _environment_error,
    ),
    # vLLM 0.2's paged-attention kernel kept a whole sequence's logits in shared memory: a
    # length whose required shared memory exceeds the GPU's is refused after the KV cache is sized
    Extractor(
        "kernel_length_limit",
        ("required shared memory",),
        _F(
            r"max_model_len=(\d+) with block_size=\d+ .*?\(required shared memory (\d+(?:\.\d+)?) > "
            r"available shared memory (\d+)\)"
        ),
        _kernel_length_limit,
    ),
    # the length the reporter needs, said around the log ("I need 32k context", "I don't want to go
    # under 32k", "lowering to 30608 is not an option"): a shorter --max-model-len is no fix for them
    Extractor(
        "length_needed",
        ("need", "go under", "go below", "not an option"),
        _F(
            r"(?i)\b(?:i|we) (?:really )?need (?:the (?:full )?|a |at least )?(\d{1,4})\s?k\b|"
            r"\b(?:don'?t|do not|can'?t|cannot) (?:want to )?go (?:under|below) (\d{1,4})\s?k\b|"
            r"\b(lower(?:ing)? (?:it |the length )?to \d+ is not an option)"
        ),
        lambda m: {"tokens": int(m.group(1) or m.group(2)) * 1024} if (m.group(1) or m.group(2)) else {"keep": True},
    ),
    # the free memory a reporter says the card had ("I have more than 70GB gpu free")
    Extractor(
        "reported_free",
        ("free",),
        _F(
            r"(?i)\b(?:i|we) (?:have|had|got|see|saw) (?:more than |over |about |~)?(\d{1,3}(?:\.\d+)?)\s?GB?i?B? "
            r"(?:of )?(?:gpu |vram |gpu memory |memory )?free\b"
        ),
        lambda m: {"free_gib": float(m.group(1))},
    ),
    # a GPU shared by design with tenants this server cannot stop: Slurm's shard GRES, GKE's
    # time-sharing, NVIDIA's time-slicing or MPS, HAMi's vGPU, or the reporter saying the other
    # tenant stays
    Extractor(
        "shared_gpu",
        (
            "gres=shard",
            "gres/shard",
            "gpu-sharing-strategy",
            "time-sharing",
            "time-slicing",
            "timeSlicing",
            "gpu.shared",
            "CUDA_MPS_",
            "cuda-mps",
            "CUDA_DEVICE_MEMORY_LIMIT",
            "has to stay",
            "must stay",
            "needs to stay",
            "can't touch",
            "cannot touch",
            "can't stop",
            "cannot stop",
            "can't kill",
            "cannot kill",
            "not to touch",
            "not to stop",
            "not to kill",
            "not allowed to",
            "not supposed to",
            "keep running",
            "stays on",
        ),
        _F(
            r"(?i)(--gres[= ]shard\S*|gres/shard\S*|gpu-sharing-strategy\S*\s*[:=]?\s*\S+|\btime-(?:sharing|slicing)\b|"
            r"timeSlicing|nvidia\.com/gpu\.shared|CUDA_MPS_\w+|nvidia-cuda-mps\S*|CUDA_DEVICE_MEMORY_LIMIT\S*|"
            r"\b(?:(?:has|needs) to|must) stay\b|\b(?:(?:has|needs) to|must) keep running\b|"
            r"\bstays on (?:this|the|that|each) (?:GPU|card)\b|"
            r"\b(?:(?:told|asked) )?not (?:to|allowed to|supposed to) (?:touch|stop|kill)\b|"
            r"\bcan(?:'|no)t (?:touch|stop|kill) "
            r"(?:it|them|that|the (?:other|tei|embedding|training|trainer|job|container|service))\b)"
        ),
        lambda m: {"how": m.group(1)},
    ),
    # a device whose GPU memory is the host's RAM: the fraction takes from what the OS needs
    Extractor(
        "unified_memory",
        (
            *(
                "Jetson",
                "Orin",
                "GB10",
                "DGX Spark",
                "Thor",
                "Strix Halo",
                "gfx1151",
                "nified memory",
                "nified CPU/GPU",
            ),
            *("Metal memory", "vllm-metal", "VLLM_METAL", "metal_limit"),  # vllm-metal on Apple silicon
        ),
        _F(
            r"(?i)\b(Jetson|Orin|GB10|DGX Spark|Jetson Thor|Strix Halo|gfx1151|unified (?:CPU/GPU )?memory|"
            r"Metal(?= memory)|vllm[-_]metal|metal_limit)\b"
        ),
        lambda m: {"device": m.group(1)},
    ),
    # the vendor whose tools read this accelerator's processes: a plugin's package, a runtime's
    # name, a card's (a platform line, where printed, outranks these)
    Extractor(
        "accelerator",
        (
            *("ascend", "Ascend", "torch_npu", "NPU", "npu-smi", "CANN"),
            *("habana", "Habana", "Gaudi", "HPU", "hl-smi"),
            *("ROCm", "rocm", "HIP", "hipError", "amdsmi", "amd-smi", "Instinct", "gfx9", "gfx1"),
            *("XPU", "xpu", "intel_extension_for_pytorch", "Intel(R) Data Center GPU", "Intel(R) Arc"),
            *("TPU", "libtpu", "torch_xla", "tpu_inference"),
        ),
        _F(
            r"(vllm[-_]ascend|torch_npu|\bAscend\b|\bNPU\b|npu-smi|\bCANN\b)|"
            r"(habana|Habana|\bGaudi|\bHPU\b|hl-smi)|"
            r"(\bROCm\b|\brocm\b|\bHIP\b|hipError|amdsmi|amd-smi|\bInstinct\b|\bgfx(?:9|1[012])\d\w*)|"
            r"(\bXPU\b|\bxpu\b|intel_extension_for_pytorch|Intel\(R\) (?:Data Center GPU|Arc))|"
            r"(\bTPU\b|libtpu|torch_xla|tpu_inference)"
        ),
        _accelerator,
    ),
    # §2 banner / version / args
    Extractor(
        "engine_banner",
        ("engine",),
        _F(r"Initializing an? (?:(V[01]) )?LLM engine(?: \(v([\w.+-]+)\))? with config: (.*)"),
        _banner,
    ),
    Extractor("version", ("version",), _F(r"vLLM API server version ([\w.+-]+)"), _version),
    Extractor(
        "version",
        ("version",),
        _F(r"vLLM server version ([\w.+-]+), serving model (\S+)"),
        _server_version,
    ),
    # the 0.15+ ASCII logo: "▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.20.0"
    Extractor("version", ("version",), _F(r"^(?:[\s▄█▀▐▌]*)version\s+(\d+\.\d+[\w.+-]*)\s*$"), _version),
    Extractor("version", ("Launching vLLM",), _F(r"Launching vLLM \(v([\w.+-]+)\)"), _version),
    # a native crash: a C++ assertion ("Allocation.cpp:47: … Assertion `…' failed."), a segfault
    Extractor(
        "native_abort",
        # (glibc's assert prints "file:line: function: Assertion `expr' failed.", the line often cut
        # after the C++ signature)
        ("' failed", ".cpp:", "Segmentation fault", "core dumped", "Fatal Python error"),
        _F(
            r"\.(?:cpp|cc|cu|h|hpp):\d+: .*Assertion [`'].*' failed|(?:^|\s)/\S+\.(?:cpp|cc|cu):\d+: \S.*\w::\w+\("
            r"|Segmentation fault|\(core dumped\)|Fatal Python error"
        ),
        lambda m: {},
    ),
    # the release stated beside the log, not printed by the server: collect_env's "vLLM Version",
    # a pinned "vllm==0.11.0", the image tag "vllm/vllm-openai:v0.10.2" (below the server's own)
    Extractor(
        "stated_version",
        ("vLLM Version", "vllm==", "vllm-openai:v"),
        _F(r"(?:^\s*vLLM Version\s*:\s*|\bvllm==|vllm/vllm-openai:v)(\d+\.\d+\.\d+[\w.+-]*)"),
        _version,
    ),
    # a ticket's environment list: "**vLLM**: 0.2.4 (pip)", "vLLM version: 0.6.3.post1", "- vllm: 0.8.5"
    Extractor(
        "stated_version",
        ("vLLM**:", "vLLM:", "vllm:", "vLLM version:", "vllm version:", "vLLM Version**:"),
        _F(r"(?i)^[\s>#-]*\**vllm(?: version)?\**\s*:\s*\**\s*v?(\d+\.\d+\.\d+[\w.+]*)"),
        _version,
    ),
    # an environment line of a report that opens with the release: "vLLM 0.3.0, torch 2.1.2, CUDA 12.1"
    Extractor(
        "stated_version",
        ("vLLM ", "vllm "),
        # (or a sentence of the report that opens with it, or runs "with / on / using / running" it)
        _F(
            r"(?i)(?:^[\s>*-]*|[.!?]\s+|\b(?:with|on|using|running)\s+)vllm\s+v?(\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?)"
            r"(?:\s*(?:[,;(]|$)|\s+(?:in|on|with|from|via|and|inside|under)\b|\.(?!\w))"
        ),
        _version,
    ),
    # the installed package's own folder in a frame's path: "…/vllm-0.2.7+cu123-py3.10-linux-x86_64.egg/vllm/…"
    Extractor(
        "stated_version",
        (".egg/vllm/", ".dist-info"),
        _F(r"(?<![\w-])vllm-(\d+\.\d+\.\d+[\w.+]*?)(?:-py\d[\w.]*-[\w-]+\.egg/vllm/|\.dist-info\b)"),
        _version,
    ),
    Extractor("logo_model", ("model   ",), _F(r"^(?:[\s▄█▀▐▌]*)model\s{3}(\S+)\s*$"), _logo_model),
    Extractor(
        "command_line",
        (
            "vllm serve",
            "vllm.entrypoints",
            "vllm/vllm-",
            "api_server.py",
            "--gpu-memory-utilization",
            "--max-model-len",
            # a wrapper's own launcher with vLLM's flags ("python3 server_vllm.py --model … --tensor-parallel-size 1")
            "--tensor-parallel-size",
            "--max-num-seqs",
            # an argv printed as a Python list, flags in either spelling (`'--max_model_len', '131072'`)
            "'--max_model_len'",
            "'--gpu_memory_utilization'",
            # vLLM's flags in their underscore spelling, which its parser takes too (`trl vllm-serve
            # --gpu_memory_utilization 0.2`)
            "--gpu_memory_utilization ",
            "--gpu_memory_utilization=",
            "--max_model_len ",
            "--tensor_parallel_size ",
            "'--max-model-len'",
            "'--gpu-memory-utilization'",
        ),
        _F(r"^"),
        _command,
    ),
    # (not a Python signature quoted in a traceback: "lambda *args, **kwargs: self.run(…)")
    Extractor("args", ("args: ",), _F(r"(?<![\w*])(?:non-default )?args: (.*)"), lambda m: {"dump": m.group(1)}),
    # §3 weights
    Extractor(
        "weights_loaded",
        ("took",),
        _F(r"(?:Loading model weights|Model loading) took (\d+(?:\.\d+)?) ?Gi?B"),
        _weights,
    ),
    # §4 profiling
    Extractor(
        "profile_v064",
        ("Memory profiling results",),
        _F(r"Memory profiling results: .*"),
        _profile_v064,
    ),
    Extractor(
        "profile_budget",
        ("total_gpu_memory (",),
        _F(
            r"total_gpu_memory \((\d+(?:\.\d+)?) ?GiB\) x gpu_memory_utilization \((\d+(?:\.\d+)?)\) = (-?\d+(?:\.\d+)?) ?GiB"  # noqa: E501
        ),
        _budget,
    ),
    Extractor(
        "profile_breakdown",
        ("model weights take",),
        _F(
            r"model weights take (-?\d+(?:\.\d+)?) ?GiB; non_torch_memory takes (-?\d+(?:\.\d+)?) ?GiB; PyTorch activation "  # noqa: E501
            # (a paste may cut the line, or break it, before the KV part)
            r"peak memory takes (-?\d+(?:\.\d+)?) ?GiB;(?: the rest of the memory reserved for KV Cache is (-?\d+(?:\.\d+)?) ?GiB)?"  # noqa: E501
        ),
        _breakdown,
    ),
    # the breakdown's last clause on a line of its own (a paste that broke the line before it)
    Extractor(
        "profile_breakdown",
        ("the rest of the memory reserved for KV Cache is",),
        _F(r"^\W*the rest of the memory reserved for KV Cache is (-?\d+(?:\.\d+)?) ?GiB"),
        lambda m: {"kv_cache_gib": float(m.group(1))},
    ),
    Extractor(
        "profile_row",
        tuple(_TABLE_ROWS),
        _F(r"(?:^|\] )(" + "|".join(_TABLE_ROWS) + r")[ \t]+(-?\d+(?:\.\d+)?)[ \t]*(?:GiB|GB)?[ \t]*$"),
        _profile_row,
    ),
    Extractor(
        "profile_summary",
        ("Memory profiling takes",),
        _F(r"Memory profiling takes [\d.]+ seconds\. Total non KV cache memory.*"),
        _profile_debug,
    ),
    Extractor(
        "available_kv_memory",
        ("Available KV cache memory",),
        _F(r"Available KV cache memory: (-?\d+(?:\.\d+)?) ?GiB"),
        _kv_gib,
    ),
    # the CPU backend's own budget (0.2x: "Explicitly set (0.0/11.65) GiB for KV cache on node 0.",
    # VLLM_CPU_KVCACHE_SPACE of the node's total): the KV memory it was given
    Extractor(
        "available_kv_memory",
        ("GiB for KV cache on node",),
        _F(r"Explicitly set \((-?\d+(?:\.\d+)?)/\d+(?:\.\d+)?\) GiB for KV cache on node"),
        _kv_gib,
    ),
    # §5 blocks and tokens
    # tpu-inference's JAX runner: "Init kv-cache | shape=32 * (3168, 256, 16, 128)" (layers × blocks, …)
    Extractor(
        "gpu_blocks",
        ("Init kv-cache | shape=",),
        _F(r"Init kv-cache \| shape=\d+ \* \((\d+), "),
        lambda m: {"device": "TPU", "gpu_blocks": to_int(m.group(1))},
    ),
    Extractor(
        "gpu_blocks",
        ("blocks:",),
        _F(
            # the "#" is lost in some pastes ("GPU blocks: 1952, # CPU blocks: 2048"); vLLM 0.1
            # printed a negative count ("# GPU blocks: -1") where 0.2+ raises the no-blocks error
            r"(?:#\s*|\b)(?!CPU\b)(GPU|CUDA|cuda|TPU|HPU|XPU|NPU|npu|xpu|hpu|rocm|ROCm|\w+) blocks: (-?\d+(?:,\d{3})*)"
            r"(?:, #? ?CPU blocks: (\d+(?:,\d{3})*))?"
        ),
        _blocks,
    ),
    # vllm-gaudi (V1, 0.14+): "Usable num_blocks: 1189, actual allocated num_blocks: 152320 (…)": the
    # blocks the scheduler may use (the allocation pads them per layer group)
    Extractor(
        "gpu_blocks",
        ("Usable num_blocks:",),
        _F(r"Usable num_blocks: (\d+)"),
        lambda m: {"device": "HPU", "gpu_blocks": to_int(m.group(1))},
    ),
    # the CPU backend's executor sizes its KV cache in "CPU blocks" on a line of their own
    # ("# CPU blocks: 4096", cpu_executor.py 0.4.2..0.6.6.post1); beside "# GPU blocks" they are swap
    Extractor(
        "gpu_blocks",
        ("CPU blocks:",),
        _F(r"^\s*#\s*CPU blocks: (\d+(?:,\d{3})*)\s*$"),
        lambda m: {"device": "CPU", "gpu_blocks": to_int(m.group(1))},
    ),
    Extractor(
        "kv_cache_size",
        ("KV cache size:",),
        _F(
            r"((?:GPU|XPU|CPU|TPU|NPU|HPU)(?: \+ host)?) KV cache size: (\d+(?:,\d{3})*) tokens"
            r"(?:, Maximum concurrency for (\d+(?:,\d{3})*) tokens per request: (\d+(?:\.\d+)?)x)?"
        ),
        _kv_size,
    ),
    Extractor(
        "max_concurrency",
        ("Maximum concurrency",),
        _F(r"^(?!.*KV cache size).*Maximum concurrency for (\d+(?:,\d{3})*) tokens per request: (\d+(?:\.\d+)?)x"),
        _concurrency,
    ),
    Extractor(
        "cache_config_info",
        ("cache_config_info",),
        _F(
            r"(?:(\d+) Engines: )?(?:vllm )?cache_config_info with initialization"
            r" after num_gpu_blocks is: (\d+(?:,\d{3})*)"
        ),
        _cache_info,
    ),
    Extractor(
        "blocks_override",
        ("num_gpu_blocks_override",),
        _F(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)"),
        _override,
    ),
    # §6 CUDA graphs
    Extractor(
        "graph_capture_done",
        ("Graph capturing finished",),
        # (a reporter's markdown may bold the figures: "finished in **17 secs**, took 0.48 GiB")
        _F(r"Graph capturing finished in \**(\d+(?:\.\d+)?) secs?\**(?:, took \**(-?\d+(?:\.\d+)?) GiB)?"),
        _graph_done,
    ),
    # V0 0.6+ captures every shape under one progress bar; its last frame at 100% is the capture
    # done (V1 draws one bar per mode, so one bar at 100% says less there)
    Extractor(
        "graph_capture_done",
        ("Capturing CUDA graph shapes: 100%", "Graph capturing fin"),
        # (also the done line cut before its figures: it is printed only after the capture)
        _F(r"Capturing CUDA graph shapes: 100%|Graph capturing fin"),
        _nothing,
    ),
    Extractor(
        "graph_estimate",
        ("Estimated CUDA graph memory",),
        _F(r"Estimated CUDA graph memory: (-?\d+(?:\.\d+)?) GiB total"),  # negative on unified memory (GB10)
        _graph_estimate,
    ),
    Extractor(
        "graph_pool",
        ("CUDA graph pool memory",),
        _F(r"CUDA graph pool memory: (-?\d+(?:\.\d+)?) GiB \(actual\), (-?\d+(?:\.\d+)?) GiB \(estimated\)"),
        _graph_pool,
    ),
    Extractor(
        "graph_util_hint",
        ("--gpu-memory-utilization",),
        _F(
            r"--gpu-memory-utilization[= ](\d+(?:\.\d+)?)\D"
            r"(?:.*?is equivalent to --gpu-memory-utilization=(\d+(?:\.\d+)?))?"
            r".*increase --gpu-memory-utilization (?:from [\d.]+ )?to (\d+(?:\.\d+)?)"
        ),
        lambda m: {
            "gpu_memory_utilization": _g(m, 1),
            "suggested_utilization": _g(m, 3),
            **({"equivalent_utilization": _g(m, 2)} if m.group(2) else {}),
        },
    ),
    # §4.2 / §9.1 free memory at start-up: the failing check and the healthy summary share words
    Extractor(
        "free_memory_error",
        ("on startup is less than",),
        _F(
            # (a reporter's merged range of ranks, "(34.51-34.54 / 139.8 GiB)": the first)
            # (and a reporter's retyped spacing: "(0.75/14.57GiB)", "utilization(0.4,5.83GiB)")
            r"Free memory on device ?(\S*?) ?\((-?\d+(?:\.\d+)?)(?:-\d+(?:\.\d+)?)? ?/ ?(\d+(?:\.\d+)?) ?GiB\) on startup is less than desired GPU memory "  # noqa: E501
            r"utilization ?\((\d+(?:\.\d+)?), ?(\d+(?:\.\d+)?) ?GiB\)"
        ),
        _free_error,
    ),
    # 0.32+: weights another process holds for this engine (shared by IPC) count against its
    # fraction: "Externally held weights on device cuda:0 (75.0/79.19 GiB) exceed the desired GPU
    # memory utilization (0.92, 72.85 GiB). Increase GPU memory utilization or reduce …"
    Extractor(
        "external_weights_error",
        ("Externally held weights",),
        _F(
            r"Externally held weights on device ?(\S*?) ?\((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) exceed the desired "
            r"GPU memory utilization \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) GiB\)"
        ),
        lambda m: {
            "device": m.group(1),
            "external_weights_gib": _g(m, 2),
            "total_gpu_gib": _g(m, 3),
            "gpu_memory_utilization": _g(m, 4),
            "requested_gib": _g(m, 5),
        },
    ),
    # the CPU backend's checks (0.20+): host RAM on a NUMA node, sized by VLLM_CPU_KVCACHE_SPACE or,
    # unset, by the fraction of the node's TOTAL memory ("Available memory on node 0 (149.11/692.65
    # GiB) on kv cache allocation is less than requested memory for kv (206.54/207.8 GiB)")
    Extractor(
        "free_memory_error",
        ("Available memory on node",),
        _F(
            r"Available memory on (node \d+) \((-?\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) on "
            r"(?:startup is less than desired CPU memory utilization \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) GiB\)"
            r"|kv cache allocation is less than requested memory for kv \((\d+(?:\.\d+)?)/)"
        ),
        lambda m: {
            "device": m.group(1),
            "free_gpu_gib_at_startup": _g(m, 2),
            "total_gpu_gib": _g(m, 3),
            **({"gpu_memory_utilization": _g(m, 4)} if m.group(4) else {}),
            "requested_gib": _g(m, 5) if m.group(5) else _g(m, 6),
        },
    ),
    Extractor(
        "platform", ("Available memory on node",), _F(r"Available memory on node \d+ \("), lambda m: {"platform": "cpu"}
    ),
    # the check paraphrased in a ticket or a PR ("Free memory on cuda:0 (38.74/121.63 GiB) < desired
    # utilization (0.35, 42.57 GiB)")
    Extractor(
        "free_memory_error",
        ("< desired",),
        _F(
            r"Free memory on (?:device ?)?(\S*?) ?\((-?\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) < desired (?:GPU memory )?"
            r"utilization \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) GiB\)"
        ),
        _free_error,
    ),
    Extractor(
        "free_memory_error",
        ("on startup is less than the engine",),
        _F(
            r"Free memory on device ?(\S*?) ?\((-?\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) on startup is less than the engine's budget "  # noqa: E501
            r"after excluding external process's weights \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) GiB\)"
        ),
        _free_engine_budget,
    ),
    Extractor(
        "startup_memory_summary",
        # (the "Desired …" sentence may be cut from an excerpt: the free and total figures stand alone)
        ("on startup.",),
        _F(
            r"Free memory on device ?(\S*?) ?\((-?\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) on startup\."
            r"(?: Desired GPU memory utilization is \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) GiB\)\.)?.*"
        ),
        _free_summary,
    ),
    Extractor(
        "kv_cache_memory_bytes",
        ("kv_cache_memory_bytes config",),
        _F(r"Initial free memory (-?\d+(?:\.\d+)?) ?GiB, reserved (-?\d+(?:\.\d+)?) ?GiB memory for KV Cache"),
        _kv_bytes,
    ),
    Extractor(
        "kv_cache_memory_bytes",
        ("startup plan",),
        _F(r"kv_cache_memory_bytes=(\d+) \((\d+(?:\.\d+)?) GiB\)"),
        _startup_plan,
    ),
    Extractor(
        "auto_fit",
        ("Auto-fit max_model_len",),
        _F(r"reduced from (\d+(?:,\d{3})*) to (\d+(?:,\d{3})*)"),
        _auto_fit,
    ),
    Extractor(
        "auto_fit",
        ("Auto-fit max_model_len",),
        _F(r"full model context length (\d+(?:,\d{3})*) fits"),
        lambda m: {"max_model_len": to_int(m.group(1))},
    ),
    # §7 / §8 the errors
    Extractor(
        "no_cache_blocks_error",
        ("No available memory for the cache blocks", "not enough Metal memory for KV cache"),
        # (vllm-metal on Apple silicon: "Paged attention: not enough Metal memory for KV cache.")
        _F(r"No available memory for the cache blocks|not enough Metal memory for KV cache"),
        _nothing,
    ),
    # vllm-metal's budget, on one line or spread over several: "metal_limit=26.80GB, fraction=0.98,
    # usable_metal=26.26GB, model_memory=19.74GB, overhead=2.09GB, kv_budget=-12.05GB, num_blocks=…"
    Extractor(
        "metal_memory",
        ("metal_limit=", "model_memory=", "kv_budget=", "num_blocks=", "max_tokens_cached="),
        _F(r"\b(?:" + _METAL_KEYS + ")="),
        _metal_memory,
    ),
    Extractor(
        "auto_fit_error",
        ("Cannot auto-fit max_model_len",),
        _F(r"Cannot auto-fit max_model_len"),
        _nothing,
    ),
    Extractor(
        "max_len_error",
        ("is larger than the maximum number of tokens",),
        # "max seq len", or as a reporter retyped it ("The model’s max sew len (32768) …")
        _F(
            r"max \w{3} len \((\d+(?:,\d{3})*)\) is larger than the maximum number of tokens that can be stored in KV "
            r"cache \((\d+(?:,\d{3})*)\)"
        ),
        _max_len_v0,
    ),
    # retyped in a ticket without its figure ("… larger than the maxinum number of tokens that can be
    # stored in KV cache, Try increasing …"): the length alone, the error still decisive
    Extractor(
        "max_len_error",
        ("number of tokens that can be stored in KV cache",),
        _F(
            r"(?i)max \w{3} len \((\d+(?:,\d{3})*)\) is larger than the max\w* number of tokens that can be "
            r"stored in KV cache(?! \()"
        ),
        lambda m: {"max_model_len": to_int(m.group(1))},
    ),
    Extractor(
        "max_len_error",
        ("max seq len",),
        _F(
            r"To serve at least one request with the models?'s max seq len \((\d+(?:,\d{3})*)\),?\s*\(?(\d+(?:\.\d+)?) ?Gi?B KV "  # noqa: E501
            # (the line cut before its available figure, at a terminal's width: the need alone)
            r"cache is needed(?:, which is larger than the available KV cache memory \((-?\d+(?:\.\d+)?) ?Gi?B\))?"
        ),
        _max_len_v1,
    ),
    # the V1 check with its middle elided by a reporter ("… max seq len (131072) ... available KV
    # cache memory (0.88 GiB)"): the length, and the budget where it is left
    Extractor(
        "max_len_error",
        ("max seq len",),
        _F(
            r"To serve at least one request with the models?'s max seq len \((\d+(?:,\d{3})*)\)(?!,?\s*\(?\d)"
            r"(?:.*?available KV cache memory \((-?\d+(?:\.\d+)?) ?Gi?B\))?"
        ),
        lambda m: {"max_model_len": to_int(m.group(1))} | ({"kv_cache_gib": _g(m, 2)} if m.group(2) else {}),
    ),
    # the V1 check paraphrased without its first clause ("1.75 GiB KV cache is needed, available 0.13 GiB")
    Extractor(
        "max_len_error",
        ("KV cache is needed",),
        _F(
            r"(?<![\w(.])(\d+(?:\.\d+)?) ?GiB KV cache is needed,? (?:which is larger than the )?"
            r"available(?: KV cache memory)? \(?(-?\d+(?:\.\d+)?) ?GiB"
        ),
        lambda m: {"needed_kv_gib": _g(m, 1), "kv_cache_gib": _g(m, 2)},
    ),
    Extractor(
        "profiling_assert",
        ("Error in memory profiling",),
        _F(
            r"Error in memory profiling\.(?: Initial (free|used) memory (\d+(?:\.\d+)?)(?: ?GiB)?, current(?:ly used)?"
            r"(?: free)? memory (\d+(?:\.\d+)?))?"
        ),
        _profiling_assert,
    ),
    Extractor(
        "mamba_blocks_error",
        ("Mamba cache blocks",),
        _F(r"max_num_seqs \((\d+(?:,\d{3})*)\) exceeds available Mamba cache blocks \((\d+(?:,\d{3})*)\)"),
        _mamba,
    ),
    Extractor(
        "mamba_blocks_capped",
        ("Mamba cache blocks",),
        _F(r"(?i)(?:capping|reducing|lowering|limit(?:ing)?) max_num_seqs.*?Mamba cache blocks \(?(\d+(?:,\d{3})*)"),
        _mamba_cap,
    ),
    Extractor(
        "warmup_oom",
        ("occurred when warming up",),
        _F(r"out of memory occurred when warming up (sampler|pooler[^)]*\)?) with (\d+(?:,\d{3})*) dummy requests"),
        _warmup_oom,
    ),
    # §10 PyTorch OOM, every wording
    Extractor("cuda_oom", ("out of memory",), _F(r"(CUDA|XPU|NPU|HIP) out of memory\."), _cuda_oom),
    # (vLLM's cumem allocator, sleep mode: "Cuda error: out of memory at …/cumem_allocator.cpp: 62")
    # (and the driver API's own refusal, raised by a custom op: "RuntimeError: CUDA driver error: out of memory")
    Extractor("cuda_oom", ("out of memory",), _F(r"(?i)(CUDA|NPU)(?: driver)? error: out of memory"), _cuda_oom),
    # Apple's Metal (MLX under vllm-metal): "[METAL] Command buffer execution failed: Insufficient Memory
    # (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    Extractor(
        "cuda_oom",
        ("kIOGPUCommandBufferCallbackErrorOutOfMemory",),
        _F(r"Insufficient Memory \(\w*:?kIOGPUCommandBufferCallbackErrorOutOfMemory\)"),
        lambda m: {"device": "METAL"},
    ),
    # NCCL's own buffers refused by the allocator ("include/alloc.h:125 NCCL WARN Cuda failure 'out
    # of memory'"): the communicator's memory did not fit beside the KV cache
    Extractor(
        "cuda_oom",
        # (also torch's DistBackendError, which prints NCCL's "Last error:" and the failure on
        # lines of their own: "Cuda failure 'out of memory'")
        ("NCCL WARN Cuda failure 'out of memory'", "Cuda failure 'out of memory'"),
        _F(r"(?:NCCL WARN |Last error:\s*|^\W*)Cuda failure 'out of memory'"),
        lambda m: {"device": "CUDA"},
    ),
    # cuBLAS could not allocate its workspace or handle ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when
    # calling `cublasCreate(handle)`"): the device's memory was spent, an OOM under another name
    Extractor(
        "cuda_oom",
        ("CUBLAS_STATUS_ALLOC_FAILED",),
        _F(r"CUBLAS_STATUS_ALLOC_FAILED"),
        lambda m: {"device": "CUDA", "cublas_alloc": True},
    ),
    # Intel Gaudi's device allocator ("[Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for
    # size::484442112 (462)MB"): the HPU's memory ran out
    Extractor(
        "cuda_oom",
        ("PT_DEVMEM",),
        _F(r"MODULE:PT_DEVMEM\s+Allocation failed for size::?\s*(\d+)"),
        lambda m: {"device": "HPU", "tried_gib": round(int(m.group(1)) / 2**30, 3)},
    ),
    # the devices a launch shows the process ("CUDA_VISIBLE_DEVICES=0,2", `docker run -e …`,
    # `export …`): where a parallel layout asks for more, the variable is what to fix
    Extractor(
        "visible_devices",
        ("CUDA_VISIBLE_DEVICES=",),
        _F(r"(?:^|[\s\"'])CUDA_VISIBLE_DEVICES=[\"']?(\d+(?:\s*,\s*\d+)*)[\"']?(?=[\s;&]|$)"),
        lambda m: {"devices": m.group(1).replace(" ", "")},
    ),
    # docker's `--gpus '"device=1"'` / `--gpus device=1,2`: the host GPUs the container sees, its
    # cuda:0 the first of them (a host nvidia-smi's process on another GPU is not this server's)
    Extractor(
        "docker_gpus",
        ("--gpus",),
        _F(r"--gpus[= ]+['\"]*device=(\d+(?:,\d+)*)"),
        lambda m: {"devices": m.group(1)},
    ),
    # a MIG slice the process sees (`nvidia-smi -L`: "  MIG 3g.40gb     Device  0: (UUID: MIG-…)"):
    # its memory is the slice's, and one process sees one slice (no tensor parallelism across them)
    Extractor(
        "config_value",
        ("MIG ",),
        _F(r"^\s*MIG (\d+g\.\d+gb)\s+Device\s+\d+:"),
        lambda m: {"flags": {"mig_profile": m.group(1)}},
    ),
    # vllm-omni runs each stage of a pipeline as its own engine: a frame or a log source in its
    # package says the memory another "process" holds may be a sibling stage
    Extractor(
        "config_value",
        ("vllm_omni/", "vllm_omni.", "[vllm_omni"),
        _F(r"vllm_omni[./]"),
        lambda m: {"flags": {"omni_pipeline": True}},
    ),
    # PyTorch's caching allocator, failing an allocation, asks NVML about the device; where NVML
    # cannot answer (a MIG slice, Jetson/Tegra) an internal assert replaces the OOM message
    # ("NVML_SUCCESS == r INTERNAL ASSERT FAILED at …/CUDACachingAllocator.cpp":1016, pytorch#112377)
    Extractor(
        "cuda_oom",
        # (and its other NVML asserts on that path: nvmlInit_v2_(), the PCI-bus-id handle lookup)
        ("NVML_SUCCESS == ",),
        _F(r"NVML_SUCCESS == [^\n]{0,160}?INTERNAL ASSERT FAILED at \W*\S*CUDACachingAllocator\.cpp"),
        lambda m: {"device": "CUDA", "nvml_assert": True},
    ),
    # (Triton's own allocation, e.g. an autotuner's scratch buffers on the first request:
    # "RuntimeError: Triton Error [CUDA]: out of memory")
    Extractor("cuda_oom", ("out of memory",), _F(r"Triton Error \[(CUDA|HIP)\]: out of memory"), _cuda_oom),
    # (the exception itself, "torch.OutOfMemoryError: …" or a bare last line; not a sentence that
    # names it, "OutOfMemoryError for 0.6.4.post1 but 0.6.3.post1 is working")
    # (Ray's own "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on
    # memory" is the host's RAM: the environment extractor reads it)
    Extractor(
        "cuda_oom",
        ("OutOfMemoryError",),
        _F(r"(?<!exceptions\.)(NPU|XPU)?\w*OutOfMemoryError(?=:|\s*$|\s*\()"),
        _cuda_oom,
    ),
    # §8.3 / §9.3 related messages
    Extractor(
        "user_max_len_warning",
        ("User-specified max_model_len",),
        _F(r"User-specified max_model_len \((\d+(?:,\d{3})*)\) is greater than the derived max_model_len \(([^)]*)\)"),
        _user_len,
    ),
    Extractor(
        "long_context_warning",
        ("long context length",),
        _F(r"The model has a long context length \((\d+(?:,\d{3})*)\)"),
        _long_ctx,
    ),
    Extractor(
        "batched_tokens_error",
        ("is smaller than max_model_len",),
        _F(r"max_num_batched_tokens \((\d+(?:,\d{3})*)\) is smaller than max_model_len \((\d+(?:,\d{3})*)\)"),
        _batched_error,
    ),
    Extractor(
        "setting",
        ("Setting max_num", "Defaulting max_num"),
        _F(r"(?:Setting|Defaulting) (max_num_batched_tokens|max_num_seqs) to (\d+(?:,\d{3})*)"),
        _setting,
    ),
    # V0 0.6+ multimodal profiling: "The context length (128000) of the model is too short to hold
    # the multi-modal embeddings in the worst case …"
    Extractor(
        "setting",
        ("The context length (",),
        _F(r"The context length \((\d+)\) of the model is too short"),
        lambda m: {"max_model_len": to_int(m.group(1))},
    ),
    Extractor(
        "setting",
        ("Chunked prefill is enabled with",),
        _F(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+(?:,\d{3})*)"),
        _chunked,
    ),
    Extractor("platform", ("detected platform",), _F(r"detected platform (\w+)"), _platform),
    # verl's memory log beside its rollout ("Before building vllm rollout, memory allocated (GB): 41.31,
    # memory reserved (GB): 41.62, device memory used/total (GB): 43.05/79.32"): torch's GiB, the card's total
    Extractor(
        "wrapper_memory",
        ("device memory used/total (GB):",),
        _F(r"device memory used/total \(GB\): (\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)"),
        lambda m: {"total_gpu_gib": float(m.group(2))},
    ),
    # ... and what its trainer held in this process as the rollout was built (FSDP shards, optimizer
    # states): "Before building vllm rollout, memory allocated (GB): 41.31, memory reserved (GB): 42.12"
    Extractor(
        "trainer_memory",
        ("Before building vllm rollout",),
        _F(
            r"Before building vllm rollout, memory allocated \(GB\): (\d+(?:\.\d+)?), "
            r"memory reserved \(GB\): (\d+(?:\.\d+)?)"
        ),
        lambda m: {"trainer_held_gib": round(float(m.group(2)), 2)},
    ),
    # MLA switched off by the environment (a workaround left in a compose file or a launch): an MLA
    # model (DeepSeek-V2/V3, Kimi) then caches full K and V per head, many times the latent's bytes
    Extractor(
        "mla_disabled", ("VLLM_MLA_DISABLE",), _F(r"VLLM_MLA_DISABLE\W{0,3}(?:=|:)\s*[\"']?(?:1|true|True)\b"), _nothing
    ),
    # V0's multiprocessing front end naming its engine's process ("Started engine process with PID 23311")
    Extractor(
        "engine_process",
        ("Started engine process with PID",),
        _F(r"Started engine process with PID (\d+)"),
        lambda m: {"pid": int(m.group(1))},
    ),
    # Windows' WSL2: vLLM's own warning ("Using 'pin_memory=False' as WSL is detected"), the kernel's
    # name (…-microsoft-standard-WSL2), or the reporter saying so
    Extractor("wsl_host", ("WSL",), _F(r"as WSL is detected|microsoft-standard-WSL|\bWSL ?2?\b"), _nothing),
    # start-up phases, used to place an OOM (§6, §3)
    Extractor(
        "phase",
        (
            "Starting to load model",
            "Loading model from scratch",
            "Loading safetensors",
            "Loading weights",
            "Loading pt checkpoint",
        ),
        _F(
            r"Starting to load model|Loading model from scratch|Loading safetensors checkpoint shards|"
            r"Loading pt checkpoint shards|Loading weights"
        ),
        _phase,
    ),
    Extractor(
        "phase",
        ("profile run", "Memory profiling"),
        _F(r"Starting profile run|Memory profiling takes"),
        _phase,
    ),
    # a plug-in's own KV allocation progress (Tenstorrent: "Allocating TT kv caches for each layer")
    Extractor(
        "phase",
        ("kv caches for each layer",),
        _F(r"Allocating \w+ kv caches for each layer"),
        lambda m: {"phase": "kv_cache_allocation"},
    ),
    Extractor(
        "phase",
        ("Captur", "captur", "CUDA graphs can take", "Profiling CUDA graph"),
        _F(
            r"CUDA graphs can take additional|"
            # (vllm-ascend: "Capturing ACL graphs …", "Starting to capture ACL graphs for cases")
            r"Capturing (?:the model for CUDA graphs|cudagraphs|CUDA graph shapes|CUDA graphs|ACL graphs)|"
            r"Starting to capture ACL graphs|"
            r"Profiling CUDA graph memory"
        ),
        _phase,
    ),
    # the end of a start-up
    Extractor(
        "engine_failed",
        ("failed to start", "initialization failed"),
        _F(
            r"EngineCore failed to start|Engine core initialization failed|WorkerProc failed to start|"
            r"Engine process failed to start"
        ),
        _nothing,
    ),
    Extractor(
        "serving",
        (
            "Uvicorn running",
            "Application startup complete",
            "Starting vLLM API server",
            "init engine (profile",
            "Available routes are",
            "Processed prompts:",
            "seconds to wake up",
            "seconds to fall asleep",
            "<vLLM served requests",
            "response_length/mean:",
        ),
        # the engine at work: LLM.generate's progress bar, sleep mode in RL rollouts (OpenRLHF,
        # verl), a verl training step's rollout metrics and the serving metrics line all come only
        # after a start-up that succeeded
        _F(
            r"Uvicorn running on|Application startup complete|Starting vLLM API server|"
            r"init engine \(profile, create kv cache, warmup model\) took|Available routes are|"
            r"Processed prompts:\s+\d+%|It took [\d.]+ seconds to (?:wake up|fall asleep)|<vLLM served requests|"
            r"step:\d+ - .*response_length/mean:"
        ),
        _nothing,
    ),
    # V1's engine waiting on a worker that does not answer, printed once a minute while it waits
    # ("No available shared memory broadcast block found in 60 seconds. This typically happens
    # when some processes are hanging …")
    Extractor(
        "worker_wait",
        ("No available shared memory broadcast block",),
        _F(r"No available shared memory broadcast block found in (\d+(?:\.\d+)?) seconds?"),
        lambda m: {"seconds": float(m.group(1)), "message": "No available shared memory broadcast block found"},
    ),
    # V1's API server polling for its engine core, every 10 s at DEBUG, while the core never says
    # it is ready ("Waiting for 1 local, 0 remote core engine proc(s) to start.")
    Extractor(
        "worker_wait",
        ("core engine proc(s) to start",),
        _F(r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to start"),
        lambda m: {"seconds": 10.0, "message": "Waiting for … core engine proc(s) to start", "silent_only": True},
    ),
    # Ctrl-C: Python ends the traceback with the bare exception name
    Extractor(
        "exception",
        ("KeyboardInterrupt",),
        _F(r"^\s*KeyboardInterrupt\s*$"),
        lambda m: {"type": "KeyboardInterrupt", "message": "interrupted (Ctrl-C or SIGINT)"},
    ),
    # IPython / Jupyter names the exception at the top of its traceback ("LocalEntryNotFoundError
    # <spaces> Traceback (most recent call last)") and its message at the bottom, which a pasted
    # cell often lacks
    Extractor(
        "exception",
        ("Traceback (most recent call last)",),
        _F(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt))\s{2,}Traceback \(most recent call last\)"),
        _ipython_header,
    ),
    # uvicorn reporting a request that raised inside the API server: the server was up and serving;
    # V1's engine dumping the batch it was running when its step raised (0.9.2+, a scheduled batch:
    # start-up's dummy runs never go through the scheduler)
    Extractor(
        "request_error",
        ("Exception in ASGI application", "Dumping input data"),
        _F(r"Exception in ASGI application|Dumping input data"),
        lambda m: dict(_REQUEST_ERRORS[m.group(0)]),
    ),
    # a server that was shut down (so a later start-up in the same log is not competing with it)
    Extractor(
        "shutdown",
        # (0.2x: "[shutdown] EngineCore: trigger received signal=SIGTERM", "… shutdown triggered")
        (
            "Shutting down",
            "Finished server process",
            "Waiting for application shutdown",
            "signal=SIG",
            "shutdown triggered",
        ),
        _F(
            r"Shutting down|Finished server process|Waiting for application shutdown|received signal=SIG(?:TERM|INT)"
            r"|\[shutdown\] .*shutdown triggered"
        ),
        _nothing,
    ),
    # worker wrappers that carry the root cause or the failing step (V0 multiproc / Ray)
    Extractor(
        "exception",
        ("Exception in worker",),
        _F(r"Exception in worker \S+ while processing method (\w+)(?:: (.*?))?(?:, Traceback.*)?\.?$"),
        _worker_exception,
    ),
    Extractor(
        "phase",
        ("while processing method", "Error executing method"),
        _F(r"(?:while processing method|Error executing method) (\w+)"),
        _method_phase,
    ),
    Extractor(
        "exception",
        ("Error executing method",),
        _F(r"(Error executing method (\w+)\.?.*)"),
        lambda m: {"type": "WorkerMethodError", "message": m.group(1), "method": m.group(2)},
    ),
    # Ray V0: "Error executing method capture_model. This might cause deadlock …" (often cut short)
    Extractor("engine_failed", ("Error executing",), _F(r"Error executing metho"), _nothing),
    # an exception logged as its repr, the whole message of a worker's ERROR line
    # ('ValueError("type fp8e4nv not supported in this architecture. …")'); not one a sentence names
    # ("Failed to import from vllm._C with ModuleNotFoundError(…)")
    Extractor(
        "exception",
        ('Error("', "Error('", 'Exception("', "Exception('"),
        _F(r"""^\s*([A-Z]\w*(?:Error|Exception))\((["'])(.+)\2\)\s*$"""),
        lambda m: {"type": m.group(1), "message": m.group(3)},
    ),
    # C++ exceptions surfaced by Ray / NCCL:
    # "Unhandled exception: St13runtime_error. what(): NCCL Error 5: invalid usage"
    Extractor(
        "exception", ("what():",), _F(r"what\(\):\s*(.*)"), lambda m: {"type": "CppException", "message": m.group(1)}
    ),
    # V1's own note of the resolved length ("Using max model len 131072", config.py)
    Extractor(
        "config_value",
        ("Using max model len",),
        _F(r"Using max model len (\d+)"),
        lambda m: {"flags": {"max_model_len": int(m.group(1))}},
    ),
    # DEBUG companions of the start-up check (0.9.1+): what was free before this instance and what
    # it asked for ("Initial free memory: 139.12 GiB, free memory: 81.52 GiB, requested GPU memory:
    # 69.86 GiB"; 0.10.1+ "Initial free memory: 139.12 GiB; Requested memory: 0.50 (util), 69.86 GiB")
    Extractor(
        "startup_memory",
        ("Initial free memory:",),
        _F(
            r"Initial free memory: (\d+(?:\.\d+)?) ?GiB(?:, free memory: [\d.]+ ?GiB, requested GPU memory: "
            r"(\d+(?:\.\d+)?) ?GiB|; Requested memory: (\d+(?:\.\d+)?) \(util\), (\d+(?:\.\d+)?) ?GiB)"
        ),
        lambda m: {
            "free_gpu_gib_at_startup": float(m.group(1)),
            "requested_gib": float(m.group(2) or m.group(4)),
            **({"gpu_memory_utilization": float(m.group(3))} if m.group(3) else {}),
        },
    ),
    # a compiler/linker failure while torch.compile or Triton builds a kernel ("/usr/bin/ld: cannot
    # find -lcuda"): the environment, printed as plain text before vLLM's own traceback
    Extractor(
        "exception",
        ("cannot find -l",),
        _F(r"\bld: (cannot find -l\S+.*)"),
        lambda m: {"type": "LinkerError", "message": m.group(1)},
    ),
    # the free-memory check quoted without its figures (issue titles, wrappers)
    Extractor(
        "free_memory_error",
        ("on startup is less than desired",),
        # (a title cut after the fraction: "… (46.95/79.18 GiB) on startup is less than desired GPU
        # memory utilization (0.6,"; lower-cased in some titles)
        _F(
            r"(?i)(?:free memory on (?:device ?)?\S*? ?\((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) )?"
            r"on startup is less than desired GPU memory utilization(?: \((\d+(?:\.\d+)?)[,)])?"
        ),
        lambda m: {
            **({"free_gpu_gib_at_startup": _g(m, 1), "total_gpu_gib": _g(m, 2)} if m.group(1) else {}),
            **({"gpu_memory_utilization": float(m.group(3))} if m.group(3) else {}),
        },
    ),
    # the check's ValueError cut before its verb ("ValueError: Free memory on device (3.1"): no
    # other ValueError starts so (the healthy summary is an INFO line)
    Extractor(
        "free_memory_error",
        ("ValueError: Free memory on device",),
        _F(r"ValueError: Free memory on device(?!.*on startup is less than)"),
        lambda m: {},
    ),
    # engine arguments pasted as JSON, a wrapper's dict or Python keywords, every one on the line:
    # lm-eval "Initializing vllm model, with arguments: {..., 'gpu_memory_utilization': 0.8}",
    # "llm = LLM(model=..., gpu_memory_utilization=0.1, max_model_len=4096)"
    Extractor(
        "config_value",
        (*_KEYWORD_SETTINGS, "LLM(model", "'pretrained'"),
        _F(_KEYWORD + "|" + _MODEL_KEYWORD),
        _keyword_settings,
    ),
    # the engine's settings as the frameworks that embed vLLM spell them: ms-swift, OpenRLHF and TRL
    # (`--vllm_gpu_memory_utilization 0.6`, `--vllm_max_model_len 16384`), verl's Hydra overrides
    # (`actor_rollout_ref.rollout.gpu_memory_utilization=0.6`, `rollout.tensor_model_parallel_size=2`)
    Extractor(
        "wrapper_setting",
        # (not "vllm_" alone: module paths and config names hold it on most lines of a log)
        ("--vllm_", "--vllm-", "rollout."),
        _F(_PREFIXED_SETTING),
        _prefixed_settings,
    ),
    # Unsloth's fast_inference picks the fraction itself and says so ("Unsloth: vLLM loading
    # unsloth/Qwen2.5-VL-3B-Instruct with actual GPU utilization = 78.61%")
    Extractor(
        "wrapper_setting",
        ("with actual GPU utilization =",),
        _F(r"with actual GPU utilization = (\d+(?:\.\d+)?)%"),
        lambda m: {"flags": {"gpu_memory_utilization": round(float(m.group(1)) / 100, 4)}},
    ),
    # vLLM runs an architecture it does not implement through the Transformers backend: "Qwen3MoeForCausalLM
    # has no vLLM implementation, falling back to Transformers implementation", "Using Transformers backend."
    Extractor(
        "transformers_fallback",
        ("falling back to Transformers", "Using Transformers backend"),
        _F(r"falling back to Transformers implementation|Using Transformers backend"),
        lambda m: {},
    ),
    # Unsloth's banner names the card's total as torch reports it, in GiB though it says GB
    # ("Tesla T4. Num GPUs = 1. Max memory: 14.563 GB. Platform: Linux."; "with VRAM = 14.56 GB")
    Extractor(
        "wrapper_card",
        ("Max memory: ", "with VRAM = "),
        _F(
            r"(?:Num GPUs = \d+\. Max memory: |Your GPU has CUDA compute capability [\d.]+ with VRAM = )"
            r"(\d+(?:\.\d+)?) GB"
        ),
        lambda m: {"total_gpu_gib": round(float(m.group(1)), 2)},
    ),
    # Unsloth measures the free memory before it starts vLLM and shortens the length (and the
    # fraction) to what it saw free: "Unsloth: Your GPU cannot handle sequence lengths of 256 due to
    # limited GPU memory."
    Extractor(
        "wrapper_little_free",
        ("due to limited GPU memory",),
        _F(r"Your GPU cannot handle sequence lengths of (\d+) due to limited GPU memory"),
        lambda m: {"tokens": int(m.group(1))},
    ),
    # an exception quoted after other words (a ticket title: "vllm 跨主机启动失败 RuntimeError: NCCL error: …")
    Extractor(
        "exception",
        ("Error: ", "Exception: "),
        _F(
            r"^(?!\s*[`'\">]*(?:\w+ )?(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception):)"
            # (after a space, or inside backticks/quotes: "Error msg: `ValueError: …`")
            r".*?[\s`'\"(]((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.+?)[`'\"]?$"
        ),
        _exception,
    ),
    # the settings as serving templates spell them: environment variables (RunPod's worker-vllm,
    # compose `environment:`, `docker run -e`: "GPU_MEMORY_UTILIZATION=0.95", "MODEL_NAME=…") and a
    # Helm chart's camelCase values (vLLM production-stack: "gpuMemoryUtilization: 0.85",
    # "modelURL: …"); the engine's own banner, where printed, outranks them
    Extractor(
        "config_value",
        (*_TEMPLATE_SETTINGS,),
        _F(
            r"^\s*(?:-\s+|-e\s+|--env\s+|export\s+|ENV\s+)?[\"']?("
            + "|".join(_TEMPLATE_SETTINGS)
            + r")[\"']?\s*[=:]\s*"
            r"[\"']?([\w./:-]+?)[\"']?\s*(?:#.*)?$"
        ),
        _template_setting,
    ),
    # a chart's or a config file's model id under its own key ("model:\n  name: meta-llama/…",
    # "modelName: Qwen/…", "model_id: …"): an org/name pair only, never an image ("vllm/vllm-openai")
    Extractor(
        "config_value",
        ("name:", "Name:", "_id:", "Id:", "hf_model:"),
        _F(
            r"^\s*-?\s*(?:name|modelName|model_name|model_id|modelId|hf_model|hfModel)\s*:\s*[\"']?"
            r"((?!vllm/)[A-Za-z0-9][\w.-]*/[\w.-]+)[\"']?\s*(?:#.*)?$"
        ),
        lambda m: {"flags": {"model": m.group(1)}},
    ),
    # the positional model of a compose `command:` / k8s `args:` list: "- meta-llama/Llama-3.1-8B-Instruct"
    Extractor(
        "config_value",
        ("- ",),
        _F(r"^\s*-\s+[\"']?((?!vllm/)[A-Za-z][\w.-]*/[\w.-]*\d[\w.-]*)[\"']?\s*$"),
        lambda m: {"flags": {"model": m.group(1)}},
    ),
    # a flag quoted in prose or a ticket: "under `--gpu-memory-utilization 0.3`" (the weakest source)
    Extractor(
        "config_value",
        ("--gpu-memory-utilization ", "--gpu-memory-utilization=", '--gpu-memory-utilization",', "--max-model-len"),
        # (a JSON array of the argv, as jsonpath prints a container's args: "--max-model-len","32768")
        _F(_FLAG_PAIR),
        # (every flag on the line, the first value of each: an argv names both flags, and the
        # CUDA-graph hint names the fraction set before the one it is "equivalent to")
        lambda m: {"flags": _flag_pairs(m.string)},
    ),
    Extractor(
        "gpu_name",
        # every match names a card, so the names are the needles ("GPU " alone is on most vLLM lines)
        (
            "A100",
            "H100",
            "H200",
            "H20",
            "H800",
            "A800",
            "A10",
            "A6000",
            "A40",
            "L40",
            "L20",
            "L4",
            "V100",
            "T4",
            "B200",
            "GB10",
            "RTX",
            "MI300",
            "3090",
            "4090",
            "5090",
        ),
        _F(_GPU_NAME),
        _gpu_name,
    ),
    # 0.2–0.5's cache engine allocates the CPU swap through the same helper as the GPU cache: the
    # code line says which ("self.cpu_cache = self._allocate_kv_cache(self.num_cpu_blocks, "cpu")")
    Extractor(
        "frame",
        ("num_cpu_blocks",),
        _F(r"^\s*(?:self\.)?cpu_cache\s*=\s*self\._allocate_kv_cache\(\s*self\.num_cpu_blocks"),
        lambda m: {"file": "<code>", "function": "allocate_cpu_cache"},
    ),
    # a code line inside a traceback names the step even when the frame is a wrapper
    # ("    cuda_graph_memory_bytes = self.model_runner.capture_model()")
    Extractor(
        "frame",
        tuple(f"{name}(" for name in _CODE_LINE_STEPS),
        # (indented as Python prints it, or with the indent lost behind a log shipper's prefix)
        _F(
            r"^(?:\s+.*?|\s*(?:[\w.\[\]]+\s*=\s*)?self\.[\w.]*?)\b("
            + "|".join(map(re.escape, _CODE_LINE_STEPS))
            + r")\("
        ),
        lambda m: {"file": "<code>", "function": m.group(1)},
    ),
    # argparse refusing the command line: "vllm serve: error: argument --tool-call-parser: invalid
    # choice: 'glm45' (choose from …)", "api_server.py: error: unrecognized arguments: --x"
    Extractor(
        "exception",
        (": error: argument", ": error: unrecognized arguments", ": error: the following arguments"),
        _F(r"^[\w./ -]*?: error: ((?:argument|unrecognized arguments|the following arguments are required).*)"),
        lambda m: {"type": "UsageError", "message": m.group(1)},
    ),
    # uvicorn's own level format: "ERROR:    [Errno 98] error while attempting to bind on address …"
    Extractor("exception", ("[Errno",), _F(r"^ERROR:\s+\[Errno (\d+)\] (.*)"), _uvicorn_error),
    # vLLM's CUDACHECK in its own kernels (the custom all-reduce): "Failed: Cuda error
    # /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'"
    Extractor(
        "exception",
        ("Failed: ",),
        _F(r"Failed: (?:Cuda error )?(\S+\.cuh?:\d+ '[^']+')"),
        lambda m: {"type": "CudaError", "message": m.group(1)},
    ),
    # an AttributeError's text logged without its type (V0's engine logs str(e)):
    # "'ColumnParallelLinear' object has no attribute 'input_scale'"
    Extractor(
        "exception",
        ("object has no attribute",),
        _F(r"^('\w+' object has no attribute '\w+')"),
        lambda m: {"type": "AttributeError", "message": m.group(1)},
    ),
    # torch's CUDA error text on its own line, without the "RuntimeError: " before it (a log
    # shipper's ERROR record, a paste): "CUDA error: no kernel image is available for execution …"
    Extractor(
        "exception",
        ("CUDA error: ", "HIP error: "),
        _F(r"^((?:CUDA|HIP) error: .+)$"),
        _message_as("RuntimeError"),
    ),
    # torch's shape check printed bare (V0's MQ engine logs str(e) above the traceback):
    # "shape '[7447, -1, 128]' is invalid for input of size 137191424"
    Extractor(
        "exception",
        ("is invalid for input of size",),
        _F(r"^(shape '\[[\d, -]*\]' is invalid for input of size \d+)"),
        _message_as("RuntimeError"),
    ),
    # torch_npu's C++ error printed raw by a rank, not raised on a line of its own ("[rank0]:[E119 …]
    # operator():…compiler_depend.ts:161 NPU function error: call aclnnMoeDistributeDispatchV3 failed,
    # error code is 561000"): the Ascend stack refusing, whatever memory words follow (HCCL's
    # "Memory resources are exhausted" for a transport's queue pair)
    Extractor(
        "exception",
        ("NPU function error: ",),
        _F(r"^(?!.*(?:Error|Exception): .*NPU function error).*?(NPU function error: .+)$"),
        _message_as("NPUError"),
    ),
    # the Hub refusing a gated model, its message printed by a script without the exception type
    # ("❌ … failed: You are trying to access a gated repo." / "Cannot access gated repo for url …")
    Extractor(
        "exception",
        ("access a gated repo", "Cannot access gated repo"),
        _F(
            r"(?<!Error: )(?<!Exception: )"
            r"((?:You are trying to access a gated repo|Cannot access gated repo for url)\b.*)$"
        ),
        _message_as("GatedRepoError"),
    ),
    # pydantic's ValidationError (vLLM 0.10+ config classes) puts the reason on the next, indented
    # line: "  Value error, Model architectures [...] failed to be inspected. … [type=value_error, …]"
    Extractor(
        "exception",
        ("Value error, ",),
        _F(r"^\s*Value error, (.+?)(?:\s*\[type=value_error\b.*)?$"),
        _message_as("ValueError"),
    ),
    # vllm-ascend and the RunPod worker's own lines
    Extractor(
        "available_kv_memory", ("total memory:",), _F(r"Available memory: (-?\d+), total memory: (\d+)"), _ascend_memory
    ),
    Extractor("args", ("vLLM config: {",), _F(r"vLLM config: (\{.*\})"), _config_dict),
    # `free -g` / `free -h` pasted beside the log: "Mem:  30Gi  5.8Gi  17Gi  412Mi  7.5Gi  24Gi"
    Extractor("host_ram", ("Mem:",), _F(r"^\s*Mem:((?:\s+\d+(?:[.,]\d+)?(?:B|[KMGT]i)?){6})\s*$"), _host_ram),
    # TPU (XLA / PJRT): "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate
    # 1.96G. That was not possible. There are 3.46G free." / "Attempting to reserve 6.14G at the
    # bottom of memory" / "Ran out of memory in memory space hbm"
    Extractor(
        "cuda_oom",
        (
            "RESOURCE_EXHAUSTED",
            "Ran out of memory in memory space",
            "That was not possible",
            "Ran out of memory on HBM",
        ),
        _F(
            r"RESOURCE_EXHAUSTED:.*?(?:allocate|reserve) (\d+(?:\.\d+)?)([GM])\b(?! at the bottom)"
            r"|Ran out of memory in memory space (\w+)"
            r"|RESOURCE_EXHAUSTED: Error allocating device buffer"
            # the TPU runtime loading a compiled program: "RuntimeProgramAllocationFailure: Error
            # loading program 'jit__forward': Attempting to allocate 1.13G. That was not possible." /
            # "Attempting to reserve 384.11M at the bottom of memory. That was not possible."
            r"|Attempting to (?:allocate|reserve) (\d+(?:\.\d+)?)([GM])(?: at the bottom of memory)?\. "
            r"That was not possible|RESOURCE_EXHAUSTED: \w+: (RuntimeProgramAllocationFailure)"
            # a compiled computation whose temporaries do not fit: "Ran out of memory on HBM, the total
            # memory required for HLO temporaries (16.23G) exceeds available HBM (15.75G)" (the sum
            # of what the computation needs beside what is held, not one allocation)
            r"|Ran out of memory on HBM, the total memory required for [\w ]+ \((\d+(?:\.\d+)?)G\) exceeds "
            r"available HBM \((\d+(?:\.\d+)?)G\)"
        ),
        _tpu_oom,
    ),
    # TPU (tpu-inference): the HBM in use of the first chip after the model is in, "Init model |
    # hbm=[(8.97, 15.75)]GiB" (also before qwix quantizes the weights it loaded)
    Extractor(
        "weights_loaded",
        ("Init model | hbm=", "quantization of params: hbm="),
        _F(
            r"(?:Init model \||Memory usage before applying quantization of params:) "
            r"hbm=\[\((\d+(?:\.\d+)?), (\d+(?:\.\d+)?)\)"
        ),
        lambda m: {"weights_gib": float(m.group(1)), "total_gpu_gib": float(m.group(2))},
    ),
    # TPU (tpu-inference): "Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.96GiB |
    # total_hbm_used_gb=8.97GiB | total_hbm_avail_gb=5.99GiB": what the KV cache is given
    Extractor(
        "available_kv_memory",
        ("total_hbm_avail_gb=",),
        _F(r"total_hbm_limit_gb=(\d+(?:\.\d+)?)GiB\b.*?total_hbm_avail_gb=(-?\d+(?:\.\d+)?)GiB"),
        lambda m: {"kv_cache_gib": float(m.group(2)), "total_gpu_gib": float(m.group(1))},
    ),
    # Gaudi (vllm-fork): "Loading model weights took in total 15.05 GiB of device memory (15.05 GiB/30.15 GiB used)"
    Extractor(
        "weights_loaded",
        ("Loading model weights took in total", "Pre-loading model weights on hpu"),
        _F(_GAUDI_WEIGHTS),
        lambda m: {"weights_gib": float(m.group(1)), "total_gpu_gib": float(m.group(2))},
    ),
    # vllm-gaudi (V1): "Free device memory: 82.7 GiB, 62.03 GiB usable (gpu_memory_utilization=0.75), 24.81 GiB
    # reserved for HPUGraphs (…), 32 MiB reserved for KV cache dummy block 37.18 GiB reserved for usable KV
    # cache": what the KV cache is sized from (the cache engine's allocation after it pads a little)
    Extractor(
        "available_kv_memory",
        ("reserved for usable KV cache",),
        _F(r"(\d+(?:\.\d+)?) GiB reserved for usable KV cache"),
        lambda m: {"kv_cache_gib": float(m.group(1))},
    ),
    # Gaudi (vllm-fork): "Initializing cache engine took 49.75 GiB of device memory (65.4 GiB/94.62 GiB used)"
    Extractor(
        "available_kv_memory",
        ("Initializing cache engine took",),
        _F(
            r"Initializing cache engine took (\d+(?:\.\d+)?) GiB of device memory "
            r"\((?:\d+(?:\.\d+)?) GiB/(\d+(?:\.\d+)?) GiB used\)"
        ),
        lambda m: {"kv_cache_gib": float(m.group(1)), "total_gpu_gib": float(m.group(2))},
    ),
    # Gaudi's graph runtime: "FATAL ERROR :: MODULE:PT_LAZY Error, …" (the software stack, not memory)
    Extractor(
        "exception",
        ("FATAL ERROR :: MODULE:",),
        _F(r"FATAL ERROR :: MODULE:(\S+) (.*)"),
        lambda m: {"type": f"HabanaError({m.group(1)})", "message": m.group(2)},
    ),
    # Tenstorrent's allocator: "Out of Memory: Not enough space to allocate 71999488 B DRAM buffer
    # across 12 banks, …" (device DRAM, in bytes)
    Extractor(
        "cuda_oom",
        ("Not enough space to allocate",),
        # (DRAM only: an L1 buffer is the on-chip SRAM, which no memory setting of vLLM sizes)
        _F(r"Out of Memory: Not enough space to allocate (\d+) B (DRAM) buffer"),
        lambda m: {"device": "TT", "tried_gib": round(int(m.group(1)) / 2**30, 3)},
    ),
    # Ascend's aclnn parameter check, printed bare after the op that failed ("AclNN_Parameter_Error(EZ1001):
    # Tensor scale not implemented for DT_FLOAT16, …"): the dtype or shape given, not memory
    Extractor(
        "exception",
        ("AclNN_",),
        _F(r"^\W*(AclNN_\w+_Error)\((\w+)\):?\s*(.*)$"),
        lambda m: {"type": m.group(1), "message": f"{m.group(2)}: {m.group(3)}".rstrip(": ")},
    ),
    # vllm-ascend's graph capture out of NPU streams, logged as records rather than raised on a line:
    # "ACLgraph has insufficient available streams to capture …", "Create capture stream failed, …"
    Extractor(
        "exception",
        ("ACLgraph has insufficient", "Create capture stream failed"),
        _F(r"^\W*((?:ACLgraph has insufficient available streams|Create capture stream failed).*)$"),
        _message_as("RuntimeError"),
    ),
    # vLLM's dtype check logged as a record of its own by a wrapper (NIM), not raised on a line
    # of its own: "ERROR … Bfloat16 is only supported on GPUs with compute capability of at least 8.0. …"
    Extractor(
        "exception",
        ("Bfloat16 is only supported",),
        _F(r"(?<!: )(?<!:)(Bfloat16 is only supported on GPUs with compute capability.*)$"),
        _message_as("ValueError"),
    ),
    # a torch OOM message cut off by the paste: "RuntimeError: CUDA out of"
    Extractor("cuda_oom", ("CUDA out of", "HIP out of"), _F(r"(CUDA|HIP) out of(?: m[a-z]*)?\s*$"), _cuda_oom),
    # torch's OOM message quoted from its second sentence on ("Tried to allocate 136.00 MiB. GPU 0
    # has a total capacity of 22.36 GiB of which …"): nothing else prints those words
    Extractor(
        "cuda_oom",
        ("Tried to allocate",),
        _F(r"()Tried to allocate [\d.]+ ?[KMGT]i?B\.? ?(?:\(GPU \d+;|GPU \d+ has a total capac)"),
        _cuda_oom,
    ),
    # whether CUDA-graph memory is profiled into the budget, as the log says (0.18+)
    Extractor(
        "config_value",
        ("CUDA graph memory profiling is",),
        _F(r"CUDA graph memory profiling is (enabled|disabled)"),
        lambda m: {"flags": {"graph_profiling_enabled": m.group(1) == "enabled"}},
    ),
    # 0.18–0.19 wording of the CUDA-graph profiling hint
    Extractor(
        "graph_util_hint",
        # (0.20+, profiling switched off: "… and increasing --gpu-memory-utilization from 0.9200 to 0.9366")
        ("increase --gpu-memory-utilization from", "increasing --gpu-memory-utilization from"),
        _F(r"increas(?:e|ing) --gpu-memory-utilization from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)"),
        _graph_util_hint,
    ),
    # Python tracebacks: frames and the exception line
    Extractor("frame", ('File "',), _F(r'File "([^"]+)", line \d+, in (\S+)'), _frame),
    # a frame whose head was cut in the paste ("vllm-0.2.7….egg/vllm/…/activation.py", line 35, in forward)
    Extractor("frame", ('.py", line ',), _F(r'^\s*([^\s"]+\.py)", line \d+, in (\S+)'), _frame),
    # rich-style boxed tracebacks, borders peeled or not: "│ /path/tokenizer.py:36 in get_tokenizer   │"
    Extractor("frame", (".py:",), _F(r"^\s*(?:│\s*)?(\S+\.py):\d+ in (\w+)"), _frame),
    # IPython/Jupyter: "File ~/.local/…/utils.py:785, in wait_for_engine_startup(" and
    # "File [~/…/cache_engine.py:64](http://…), in CacheEngine._allocate_kv_cache(self, …)"
    Extractor("frame", ("File ",), _F(r"File \[?~?([^\s\]]+\.py):\d+\]?(?:\([^)]*\))?, in ([\w.]+)"), _frame),
    # IPython 7 and Colab: "/opt/conda/…/gpu_model_runner.py in _dummy_sampler_run(self, hidden_states)"
    Extractor("frame", (".py in ",), _F(r"^\s*(?:<ipython-input-[\w-]+>|(\S+\.py)) in ([\w.<>]+)\("), _ipython7_frame),
    Extractor(
        "traceback",
        ("Traceback (most recent call last)",),
        _F(r"Traceback \(most recent call last\)"),
        _nothing,
    ),
    Extractor(
        "exception",
        ("Error", "Exception", "Interrupt", ".errors."),
        # a leading backtick, quote or ">" is left by markdown pastes
        # (also a bare `Exception: …`, and a class a library's errors module names without the
        # suffix: "triton.runtime.errors.OutOfResources: out of resource: shared memory")
        _F(
            r"^[\s`'\">]*(?:\w+ )?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)|Exception"
            r"|(?:[a-z_]\w*\.)+errors\.[A-Z]\w*):\s*(.*)$"
        ),
        _exception,
    ),
    # a traceback's last line naming the exception without a message (`raise NotImplementedError`)
    Extractor(
        "exception",
        ("Error", "Exception"),
        # (flush left, as a traceback ends: an indented name is a line of some listing)
        _F(r"^[`'\">]*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\s*$"),
        lambda m: {"type": m.group(1), "message": ""},
    ),
)

# Event kinds whose extractor may fire on the same line as another (an OOM inside an exception).
MULTI = frozenset({"exception", "phase", "warmup_oom", "frame", "engine_failed", "metal_memory"})
