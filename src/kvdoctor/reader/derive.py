"""Derived facts: the budget reconstruction and the numbers remedies need.

Every fact made here is marked `derived` and names the facts it came from, so a report can say
"reconstructed" rather than pass an estimate off as something vLLM printed.
"""

from __future__ import annotations

import math
import re

from kvdoctor.reader.facts import Fact, Facts
from kvdoctor.reader.versions import parse_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CEILING = 0.95  # the guide's highest fraction worth recommending


def _v(facts: Facts, name: str) -> Any:
    fact = facts.get(name)
    return None if fact is None else fact.value


def _first(facts: Facts, *names: str, default: float) -> float:
    """The first of `names` that is known (the rules' coalesce)."""
    return next((float(v) for v in (_v(facts, n) for n in names) if v is not None), default)


def _put(facts: Facts, name: str, value: Any, source: str = "derived") -> None:
    if value is None or name in facts:
        return
    if isinstance(value, float):
        value = round(value, 4)
    facts[name] = Fact(name, value, None, None, True, source)


def _version(facts: Facts) -> tuple[int, ...] | None:
    for name in ("vllm_version", "vllm_version_min"):
        value = _v(facts, name)
        if value is not None:
            return parse_version(str(value))
    return None


def graphs_subtracted(facts: Facts) -> bool:
    """CUDA-graph memory counts against the budget by default from 0.20 (kv-math.md); the log's
    own "CUDA graph memory profiling is enabled/disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    =1/0)" line overrides the default (0.18+)."""
    said = _v(facts, "graph_profiling_enabled")
    if said is not None:
        return bool(said)
    version = _version(facts)
    return version is not None and version >= (0, 20)


def default_utilization(facts: Facts) -> float:
    """0.9 until 0.19.1, 0.92 from 0.20.0 (vllm-log-formats.md §12)."""
    version = _version(facts)
    return 0.92 if version is not None and version >= (0, 20) else 0.9


def derive(facts: Facts) -> Facts:
    out = dict(facts)
    reserved = out.get("kv_cache_memory_bytes_reserved")
    if reserved is not None and "kv_cache_memory_bytes" not in out:
        # (the arguments are cut: the reservation line shows the flag was set, to the GiB)
        out["kv_cache_memory_bytes"] = Fact(
            "kv_cache_memory_bytes", reserved.value, reserved.line, reserved.text, True, reserved.source
        )
    if "gpu_memory_utilization" not in out and "kv_cache_memory_bytes" not in out and out:
        _put(out, "gpu_memory_utilization", default_utilization(out), source="default")
        _put(out, "utilization_default", True, source="default")
        args = out.get("seen.args")
        note = "vLLM's default: the log does not show the fraction"
        if args is not None and "non-default args" in (args.text or ""):
            # V1 lists the arguments that differ from the defaults: one without the fraction shows
            # the default in force (not a launcher's value the log leaves out)
            _put(out, "utilization_default_shown", True, source="default")
            note = "vLLM's default: the non-default arguments the log lists leave it out"
        _put(out, "gpu_memory_utilization_note", note, source="default")
    if "seen.warmup_oom" in out or _v(out, "oom_phase") == "sampler_warmup":
        _put(out, "warmup_of", "sampler")  # (where no line names the pooler)
    if "engine" not in out and _version_range(out)[1] <= (0, 7):
        # (no line names the engine, but the release does: V1 first shipped, opt-in, in 0.7)
        _put(out, "engine", "v0")
    _gpu_total(out)
    _host_memory_asked(out)
    if _v(out, "length_needed") == "keep":
        # ("lowering to N is not an option": the length asked for is the one needed)
        needed = out.pop("length_needed")
        if _v(out, "max_model_len") is not None:
            out["length_needed"] = Fact(
                "length_needed", _v(out, "max_model_len"), needed.line, needed.text, True, "log"
            )
    if _v(out, "graph_profiling_enabled") is not None or _version(out) is not None:
        # where the release (or the log's own line) says whether CUDA graphs count in the budget
        _put(out, "graphs_in_budget", graphs_subtracted(out))
    _era_flags(out)
    _default_seqs(out)
    total, util = _v(out, "total_gpu_gib"), _v(out, "gpu_memory_utilization")
    if total is not None and util is not None:
        _put(out, "budget_gib", total * util)
    _v064_terms(out)
    _budget_terms(out)
    _raise_needs(out)
    _other_processes(out)
    _safe_utilization(out)
    _tokens(out)
    _arithmetic(out)
    _raise_bound(out)
    _profile_overhead(out)
    _batch_share(out)
    _smallest_card(out)
    _larger_card(out)
    _batch_follows_length(out)
    _length_at_default(out)
    _cotenant_loading(out)
    _oom_past_weights(out)
    _kv_cache_absent(out)
    needed = _v(out, "needed_kv_gib")
    if isinstance(needed, (int, float)) and needed > 0:
        # one request with an fp8 cache: half the bytes per token of the check's own figure
        _put(out, "needed_kv_gib_fp8", round(needed / 2, 2))
    if out:
        _process_list_command(out)
    return out


# the command that lists the processes holding an accelerator's memory, by vendor
PROCESS_LIST_COMMANDS = {
    "nvidia": "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
    "amd": "amd-smi process",  # ROCm 6+; `rocm-smi --showpids` before it
    "ascend": "npu-smi info",
    "gaudi": "hl-smi",
    "intel": "xpu-smi ps",
    "tpu": "tpu-info",
}
_PLATFORM_VENDOR = {"cuda": "nvidia", "rocm": "amd", "npu": "ascend", "hpu": "gaudi", "xpu": "intel", "tpu": "tpu"}
_OOM_DEVICE_VENDOR = {"cuda": "nvidia", "hip": "amd", "npu": "ascend", "xpu": "intel", "tpu": "tpu", "hpu": "gaudi"}


def _process_list_command(out: Facts) -> None:
    """The tool a remedy names to see who holds the card: the platform vLLM detected, else the
    device an OOM named, else the vendor a line names (a plugin, a runtime, a card), else NVIDIA's.
    The line that decided it is the fact's evidence (none for the default)."""
    vendor, basis = "nvidia", None
    for name, vendors in (("platform", _PLATFORM_VENDOR), ("oom_device", _OOM_DEVICE_VENDOR), ("accelerator", None)):
        fact = out.get(name)
        found = None if fact is None else str(fact.value) if vendors is None else vendors.get(str(fact.value).lower())
        if found:
            vendor, basis = found, fact
            break
    line, text = (basis.line, basis.text) if basis is not None and vendor != "nvidia" else (None, None)
    command = PROCESS_LIST_COMMANDS.get(vendor, PROCESS_LIST_COMMANDS["nvidia"])
    out["process_list_command"] = Fact("process_list_command", command, line, text, True, "derived")


# a communication failure raised by a rank (NCCL/HCCL/Gloo, an NPU collective): peers that were
# still profiling print what they measured when it broke off, a zero included
_COMMUNICATION = re.compile(r"(?i)NPU function error|HCCL|NCCL|gloo|Connection (?:closed|reset) by peer")


def _kv_cache_absent(out: Facts) -> None:
    """The attempt left nothing for the KV cache: vLLM's no-blocks error (or its auto-fit refusal),
    or a printed KV size or block count of zero or less (the line it rests on is its evidence). An
    exact zero printed by a rank beside a communication failure that another rank raised is not the
    verdict: the failure is (a negative figure is a profile that finished short)."""
    said = next((out[n] for n in ("seen.no_cache_blocks_error", "seen.auto_fit_error") if _v(out, n)), None)
    zero = next(
        (out[n] for n in ("gpu_blocks", "kv_cache_gib") if isinstance(_v(out, n), (int, float)) and _v(out, n) <= 0),
        None,
    )
    basis = zero or said  # the figure, where printed: the error line is evidence of its own
    if basis is None:
        return
    # (a profile broken off prints exactly 0; a negative figure is a profile that finished short)
    if said is None and not _v(out, "memory_error_seen") and basis.value == 0:
        raised = f"{_v(out, 'error_type') or ''}: {_v(out, 'error_message') or ''}"
        if _COMMUNICATION.search(raised):
            return
    out["kv_cache_absent"] = Fact("kv_cache_absent", True, basis.line, basis.text, True, "derived")


def _batch_follows_length(out: Facts) -> None:
    """V0 without chunked prefill profiles one batch of max(max_model_len, 2048) tokens unless
    --max-num-batched-tokens is set, and rejects a batch below the length: from 16K tokens on, a shorter
    --max-model-len is what shrinks the profiling peak (0.6+ turns chunked prefill on above 32K).
    Above 32K (`batch_follows_long_length`, the length printed or the model's own, an estimate) it
    still holds where V0 leaves chunked prefill off: said so in the log, before 0.5.3 (which first
    turned it on by itself), or a multimodal or MLA model; not an encoder-decoder model, whose
    profile follows its max_num_seqs."""
    length, batch = _v(out, "max_model_len"), _v(out, "max_num_batched_tokens")
    chunked = _v(out, "enable_chunked_prefill")
    model = str(_v(out, "model") or "")
    if _ENCODER_DECODER.search(model):
        _put(out, "encoder_decoder", True)  # (its profile builds one encoder input per sequence)
    elif _MULTIMODAL.search(model):
        _put(out, "multimodal", True)  # (V0 profiles it with dummy images or audio per sequence)
    if _v(out, "engine") != "v0" or chunked is True:
        return
    if chunked is False and isinstance(length, int) and length > 2048 and batch is None:
        # V0 refuses --max-num-batched-tokens below --max-model-len without chunked prefill: a
        # smaller profiling batch needs --enable-chunked-prefill with it
        _put(out, "batch_floor_length", True)
    # (a batch set above the length is the user's: it, not the length, is the profile's size)
    if isinstance(length, int) and 16384 <= length <= 32768 and (batch is None or batch == length):
        _put(out, "batch_follows_length", True)
    if (
        length is None
        and _v(out, "max_model_len_estimate") is None
        and batch is None
        and chunked is None
        and "profile_run" in (_v(out, "oom_phase"), _v(out, "traceback_phase"))
        and _version_range(out)[1] <= (0, 4, 1)
        and not _ENCODER_DECODER.search(model)
    ):
        # (neither the length nor the model is known, a traceback names the profiling pass, and
        # the release predates chunked prefill (0.4.1): its batch is the length, whatever it is,
        # and a smaller batch V0 refuses)
        _put(out, "batch_follows_length", True)
    longest = length if isinstance(length, int) else _v(out, "max_model_len_estimate")
    if not isinstance(longest, int) or longest <= 32768 or batch is not None or _ENCODER_DECODER.search(model):
        return
    if chunked is False or _version_range(out)[1] <= (0, 5, 3) or _CHUNKED_STAYS_OFF.search(model):
        _put(out, "batch_follows_long_length", True)


_ENCODER_DECODER = re.compile(r"(?i)mllama|llama-3\.2-\d+b-vision|whisper|bart|florence")
# the models V0 (0.5.3+) keeps chunked prefill off for, above 32K too: multimodal ones, and MLA's
_MULTIMODAL_NAMES = (
    r"vision|[-_]vl\b|[-_]vl[-_]|llava|internvl|minicpm-?v|pixtral|"
    r"paligemma|idefics|molmo|qwen2?-?audio|ultravox|glm-?4v|cogvlm|deepseek-vl"
)
_MULTIMODAL = re.compile(r"(?i)" + _MULTIMODAL_NAMES)
_CHUNKED_STAYS_OFF = re.compile(r"(?i)deepseek-(?:v2|v3|r1|coder-v2)|" + _MULTIMODAL_NAMES)


def _smallest_card(out: Facts) -> None:
    """Where the log names no card: the smallest catalog card that holds this attempt's weights per
    GPU (printed, else estimated) with a GiB to spare, the card that explains a failure with the
    fewest other assumptions. An estimate, and named as one."""
    if "total_gpu_gib" in out:
        return
    weights = _v(out, "weights_gib")
    if weights is None:
        weights = _v(out, "weights_gib_estimate")
    if weights is None or weights <= 0:
        return
    from kvdoctor.memory.catalog import gpus

    fitting = [g for g in gpus() if g.total_gib >= weights + 1.0]
    if fitting:
        card = min(fitting, key=lambda g: g.total_gib)
        _put(out, "smallest_card_gib", card.total_gib, source="estimate")
        if weights >= TIGHT_ON_CARD * card.total_gib:
            # (named only where the weights fill it: then that card explains the failure alone)
            _put(out, "smallest_card_name", card.name, source="estimate")


def _larger_card(out: Facts) -> None:
    """Two unlike cards listed for a one-GPU start-up: the largest the catalog knows, where it is
    larger than the card vLLM used (the one the OOM or the log names), with its listed index."""
    listing, total = _v(out, "gpu_listing"), _v(out, "total_gpu_gib")
    if not isinstance(listing, list) or total is None or "mixed_gpus" not in out:
        return
    from kvdoctor.memory.catalog import find_gpu

    best: tuple[float, str, str] | None = None
    for item in listing:
        index, _, name = str(item).partition(": ")
        entry = find_gpu(name)
        if entry is not None and entry.total_gib >= total + 2 and (best is None or entry.total_gib > best[0]):
            best = (entry.total_gib, entry.name, index)
    if best is not None:
        _put(out, "larger_card_gib", best[0], source="estimate")
        _put(out, "larger_card_name", best[1], source="estimate")
        _put(out, "larger_card_index", int(best[2]), source="estimate")


TIGHT_ON_CARD = 0.76  # the weights' share of a card past which weights and a profile leave no KV


def _cotenant_loading(out: Facts) -> None:
    """The start-up check runs before this instance loads anything: weights loaded in the same log
    that match the memory found in use are another stage's or instance's, loading at the same time
    (a multi-stage pipeline: round 4, 418). Known only where both figures are."""
    weights, held = _v(out, "weights_gib"), _v(out, "other_process_gib")
    if weights is not None and held is not None:
        loading = weights >= 1 and abs(weights - held) <= 0.25 * held
        _put(out, "cotenant_loading", loading)
        if loading:  # (the figure a rule quotes: only where it matches what was held)
            _put(out, "cotenant_weights_gib", weights)


def _oom_past_weights(out: Facts) -> None:
    """The OOMing process already held its whole fraction and a GiB more than the weights: its KV
    cache was allocated, so the OOM came after them (Ascend: "55.91 GiB already allocated" at
    0.85 × 60.96). An unknown weight counts as large (below TP 8), so the answer is always known."""
    if "oom_phase" not in out:
        return
    held = _first(out, "oom_this_process_gib", "oom_allocated_gib", default=0.0)
    total = _first(out, "oom_total_gib", default=1e6)
    util = _first(out, "gpu_memory_utilization", default=0.9)
    # (unknown weights on 8 or more GPUs: a model that overflows a card at TP 8 is rarer than an
    # OOM after its KV cache, and sharding it further is not the fix either)
    tp = _first(out, "tensor_parallel_size", default=1)
    weights = _first(out, "weights_gib_estimate", default=0.0 if tp >= 8 else 1000.0)
    _put(out, "oom_past_weights", held >= util * total and weights + 1 < held)
    estimate = _v(out, "weights_gib_estimate")
    if (
        _v(out, "oom_phase") == "unknown"
        and _v(out, "oom_phase_inferred") == "weight_loading"
        and isinstance(estimate, (int, float))
        and held >= estimate + max(2.0, 0.15 * estimate)
        and held < util * total  # (past its whole fraction: the KV cache was in too, `oom_past_weights`)
    ):
        # no line names the step, but the process held GiBs more than the catalog's weights per
        # GPU: the weights were in, and the step that runs next is the profiling pass (a guess)
        basis = out["oom_phase_inferred"]
        out["oom_phase_inferred"] = Fact("oom_phase_inferred", "profile_run", basis.line, basis.text, True, "estimate")
    elif (
        _v(out, "oom_phase") == "unknown"
        and _v(out, "oom_phase_inferred") == "weight_loading"
        and _first(out, "oom_tried_gib", default=0.0) >= _WEIGHT_TENSOR_GIB
    ):
        # one allocation of GiBs: weights load tensor by tensor, and a single tensor that large is
        # an activation or a cache, not a layer's weights; the step stays unknown
        del out["oom_phase_inferred"]


# the largest single allocation kvdoctor takes for a weight tensor (an embedding of 256K × 8192 in
# 16 bits is 4 GiB)
_WEIGHT_TENSOR_GIB = 4.0


# releases whose fraction charges other processes' memory to this instance (kv-math.md): a second
# tenant then leaves this one no KV cache even when the card has room
COTENANT_NOTES = {
    "charged": (
        "this release takes what other processes hold out of this budget, so raise by their share as well, or free them"
    ),
    "checked": (
        "this release charges nothing another process holds to this budget but checks at start-up that the "
        "fraction's share is free, so a raise is safe up to the share shown free"
    ),
    "free": (
        "this release charges nothing another process held before start-up to this budget, so a raise is safe "
        "while the card has the room it plans"
    ),
    "unknown": (
        "a process listed there is the likelier cause: free the card first, since the fraction is of its TOTAL "
        "memory and a raise plans memory that process holds"
    ),
}
_CHARGED = (((0, 2, 5), (0, 3, 1), None), ((0, 6, 4), (0, 6, 5), None), ((0, 7, 0), (0, 9, 1), "v1"))
# V1 profiled 1024 sequences on every GPU from 0.8.0 until vLLM PR #16158 (0.8.4)
_SEQS_1024 = ((0, 8, 0), (0, 8, 4))


def _version_range(out: Facts) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lowest, highest-exclusive) release the log can be: exact, or what its wording implies."""
    exact = parse_version(str(_v(out, "vllm_version"))) if _v(out, "vllm_version") is not None else None
    if exact is not None:
        return exact, exact + (1,)
    low = parse_version(str(_v(out, "vllm_version_min") or "0.1.0")) or (0, 1, 0)
    high_fact = _v(out, "vllm_version_max")
    high = parse_version(str(high_fact)) if high_fact is not None else None
    return low, (high + (1,)) if high is not None else (99,)


def _overlaps(span: tuple[tuple[int, ...], tuple[int, ...]], lo: tuple[int, ...], hi: tuple[int, ...]) -> bool:
    return span[0] < hi and lo < span[1]


def _era_flags(out: Facts) -> None:
    """Whether the release the log can be charges other processes to the budget, and whether V1
    may have profiled 1024 sequences by default: facts the rules can cite instead of guessing."""
    span = _version_range(out)
    engine = _v(out, "engine")
    charged = any(_overlaps(span, lo, hi) and (need is None or engine in (None, need)) for lo, hi, need in _CHARGED)
    _put(out, "others_charged_possible", charged)
    if not charged and (_v(out, "vllm_version") is not None or _v(out, "vllm_version_min") is not None):
        # the release is known well enough to rule the charge out: memory another process held
        # before this start-up is not this instance's budget (V1 0.9.1+ refuses to start then)
        checked = engine == "v1" and span[0] >= (0, 9, 1)
        _put(
            out,
            "others_not_charged_note",
            "this release checks free memory at start-up and charges no memory another process held before it"
            if checked
            else "this release charges no memory another process held before start-up to the fraction",
        )
    # what a co-tenant means for a raise, by what the release does with its memory
    sure = any(lo <= span[0] and span[1] <= hi and (need is None or engine == need) for lo, hi, need in _CHARGED)
    if sure:
        note = COTENANT_NOTES["charged"]
    elif "others_not_charged_note" in out:
        note = COTENANT_NOTES["checked" if engine == "v1" and span[0] >= (0, 9, 1) else "free"]
    else:
        note = COTENANT_NOTES["unknown"]
    _put(out, "cotenant_raise_note", note)
    if engine == "v1" and "max_num_seqs" not in out and _overlaps(span, *_SEQS_1024):
        _put(out, "default_seqs_1024_possible", True)


def _gpu_total(out: Facts) -> None:
    """A named card's total memory from the catalog when the log prints no total (an estimate);
    first, the total the start-up's own request implies (0.10.1+ DEBUG "Requested memory: 0.90
    (util), 71.30 GiB": the fraction of the total, both printed)."""
    requested, util = _v(out, "requested_gib"), _v(out, "gpu_memory_utilization")
    if "total_gpu_gib" not in out and requested and util and not _v(out, "utilization_default"):
        _put(out, "total_gpu_gib", round(requested / util, 2), source="derived")
    mig = _v(out, "mig_profile")
    if mig is not None and "total_gpu_gib" not in out:
        # a MIG slice's memory: its profile's GB less the driver's share (1g.10gb shows 9.50 GiB,
        # 3g.40gb 39.25, 7g.80gb 79.0)
        size = int(str(mig).split(".")[1].removesuffix("gb"))
        _put(
            out,
            "total_gpu_gib",
            round(size - (0.5 if size <= 24 else 0.75 if size <= 48 else 1.0), 2),
            source="estimate",
        )
        _put(out, "total_gpu_gib_basis", f"the MIG slice {mig}", source="estimate")
    graphs, util, equal = (
        _v(out, n) for n in ("cuda_graph_estimate_gib", "gpu_memory_utilization", "equivalent_utilization")
    )
    if "total_gpu_gib" not in out and graphs and util and equal and util - equal >= 0.005:
        # 0.18+ says the fraction set "is equivalent to" one without the graphs' memory: the
        # graphs are that difference of the card (the figures' rounding: a few percent)
        _put(out, "total_gpu_gib", round(graphs / (util - equal), 1), source="estimate")
        _put(out, "total_gpu_gib_basis", "the CUDA-graph line's two fractions", source="estimate")
    name = _v(out, "gpu_name")
    if name is None or "total_gpu_gib" in out:
        return
    from kvdoctor.memory.catalog import find_gpu

    mixed = _v(out, "mixed_gpus")
    if mixed is not None:
        # two cards for one start-up: tensor parallelism shards evenly, so the smallest card is
        # the one every rank must fit
        # (a card the catalog does not know may be the smallest: then no total at all)
        cards = [find_gpu(n.strip()) for n in str(mixed).split(",")]
        if None in cards:
            return
        small = min((e for e in cards if e is not None), key=lambda e: e.total_gib)
        _put(out, "total_gpu_gib", small.total_gib, source="estimate")
        _put(out, "total_gpu_gib_basis", f"the smallest card named, the catalog's {small.name}", source="estimate")
        return
    entry = find_gpu(str(name))
    if entry is not None:
        _put(out, "total_gpu_gib", entry.total_gib, source="estimate")
        _put(out, "total_gpu_gib_basis", f"the catalog's {entry.name}", source="estimate")


def _default_seqs(out: Facts) -> None:
    """The max_num_seqs vLLM profiled with when the log does not say: V1 0.8.0-0.8.3 used 1024 on
    every GPU (reference: vllm PR #16158), later releases 1024 only on 70 GiB+ non-A100 cards."""
    engine, version = _v(out, "engine"), _v(out, "vllm_version")
    if "max_num_seqs" in out or engine not in ("v0", "v1") or version is None:
        return
    from kvdoctor.memory.budget import default_batch, era_for

    total = _v(out, "total_gpu_gib") or 0.0
    _, seqs = default_batch(
        era_for(str(version), str(engine)), total_gib=total, max_model_len=2048, version=str(version)
    )
    _put(out, "max_num_seqs", seqs, source="default")


def _v064_terms(out: Facts) -> None:
    """0.6.4's single profiling line counts this instance's weights in two of its figures:
    `peak_torch_memory` is the allocator's whole peak (weights + activations), and
    `initial_memory_usage` (total − free before the profile run, the weights loaded) holds the
    weights and the CUDA context besides whatever other processes use."""
    weights, peak = _v(out, "weights_gib"), _v(out, "torch_peak_gib")
    if "activation_peak_gib" not in out and weights is not None and peak is not None:
        _put(out, "activation_peak_gib", round(max(peak - weights, 0.0), 2))
    initial = _v(out, "initial_memory_usage_gib")
    if initial is None:
        return
    # this instance's own share of it: the printed weights, else the torch peak (which holds them),
    # else at most its whole budget (a lower bound on the others, then)
    own = weights if weights is not None else peak if peak is not None else _v(out, "budget_gib")
    if own is None:
        return
    # what is left besides this instance's CUDA context: 0.6.4 measures non-torch memory
    # device-wide, so its figure holds the other processes too and is no measure of the context
    # alone (vllm#10451); a context is a GiB at most
    # (with tensor parallelism the instance's own NCCL and all-reduce buffers are there already:
    # 3–4 GiB on an H100 pair, kv-math.md)
    allowance = 1.0 if (_v(out, "tensor_parallel_size") or 1) <= 1 else 4.0
    others = initial - own - min(_v(out, "non_torch_gib") or 0.0, allowance)
    _put(out, "others_before_profile_gib", round(max(others, 0.0), 2))


def _budget_terms(out: Facts) -> None:
    budget = _v(out, "budget_gib")
    weights = _v(out, "weights_gib")
    if budget is None or weights is None:
        return
    used = weights + (_v(out, "activation_peak_gib") or 0.0) + (_v(out, "non_torch_gib") or 0.0)
    if graphs_subtracted(out):
        used += _v(out, "cuda_graph_gib") or _v(out, "cuda_graph_estimate_gib") or 0.0
    _put(out, "non_kv_gib", used)
    if "activation_peak_gib" in out:  # (without the peak it is not what the KV cache got)
        _put(out, "kv_reconstructed_gib", budget - used)
    if budget - used <= 0:
        _put(out, "budget_shortfall_gib", used - budget)


def _host_memory_asked(out: Facts) -> None:
    """The host RAM a launch asks for itself: V0's swap space per GPU (× the TP size), and the
    weights offloaded to the CPU (a zero offload is none: the fact is dropped)."""
    swap, tp = _v(out, "swap_space"), _v(out, "tensor_parallel_size") or 1
    if isinstance(swap, (int, float)) and swap > 0:
        _put(out, "swap_space_host_gib", round(swap * tp, 1))
    offload = out.get("cpu_offload_gb")
    if offload is not None and not (isinstance(offload.value, (int, float)) and offload.value > 0):
        del out["cpu_offload_gb"]
    elif offload is not None:
        # (per GPU, as --swap-space: every rank keeps its own offloaded share in the host's RAM)
        _put(out, "cpu_offload_host_gib", round(float(offload.value) * tp, 1))


def _profile_overhead(out: Facts) -> None:
    """The profile's share where V1 prints the weights and the KV memory but no peak: the rest of
    the budget, less the graphs it counts (an estimate where the card's total is one)."""
    budget, weights, kv = _v(out, "budget_gib"), _v(out, "weights_gib"), _v(out, "kv_cache_gib")
    if budget is None or weights is None or kv is None or "activation_peak_gib" in out or _v(out, "engine") != "v1":
        return
    overhead = budget - weights - kv
    if graphs_subtracted(out):
        overhead -= _v(out, "cuda_graph_gib") or _v(out, "cuda_graph_estimate_gib") or 0.0
    total = out.get("total_gpu_gib")
    if overhead > 0:
        source = "estimate" if total is not None and total.source == "estimate" else "derived"
        _put(out, "profile_overhead_gib", round(overhead, 2), source=source)


def _batch_share(out: Facts) -> None:
    """A batch set above the card's default: where V1 printed the weights and the KV memory, the
    rest of the budget (less the graphs it counts) is the profile's activations and non-torch
    memory, and the default batch keeps the catalog's share of its activations: the GiB that going
    back to the default gives the KV cache (the catalog's own estimate where the log is silent)."""
    ratio, overhead, peak = (
        _v(out, n) for n in ("batch_activation_ratio", "profile_overhead_gib", "activation_peak_gib")
    )
    if ratio is None or (overhead is None and peak is None):
        return
    # (a printed peak is the activations alone; of the budget's rest, half a GiB is the CUDA
    # context and the allocator's own, which no batch changes)
    frees = (peak if peak is not None else overhead - 0.5) * (1 - ratio)
    if frees > (_v(out, "batch_reduction_frees_gib") or 0.0):
        out.pop("batch_reduction_frees_gib", None)  # (the log's own budget beats the catalog's guess)
        _put(out, "batch_reduction_frees_gib", round(frees, 2), source="estimate")


def _raise_needs(out: Facts) -> None:
    """V1 printed a negative KV budget but no total: raising the fraction to the 0.95 ceiling fits
    on any card of at least this many GiB (the shortfall over the fraction's headroom)."""
    kv, util = _v(out, "kv_cache_gib"), _v(out, "gpu_memory_utilization")
    # (a budget printed as 0.0 is clamped, vllm-omni's "profiling fallback": the shortfall is unknown)
    if kv is None or util is None or kv >= 0 or "total_gpu_gib" in out or util >= CEILING:
        return
    _put(out, "min_total_gib_to_fit_by_raising", round((-kv + 0.5) / (CEILING - util), 1))


def _raise_bound(out: Facts) -> None:
    """Where V1 printed the weights and a negative KV budget but no total (after the catalog's
    arithmetic, for one request's KV at the length)."""
    kv, util, weights = _v(out, "kv_cache_gib"), _v(out, "gpu_memory_utilization"), _v(out, "weights_gib")
    if kv is None or util is None or weights is None or kv >= 0 or "total_gpu_gib" in out or util >= CEILING:
        return
    if weights + kv <= 0:
        return
    # the card held the weights, the profile and this negative KV at this fraction: its total is at
    # least (weights + KV) / fraction, and over that bound the fraction that clears the shortfall
    # and leaves one request its KV cache is an upper bound on the one needed (safe to suggest)
    at_least = (weights + kv) / util
    _put(out, "total_gpu_gib_at_least", round(at_least, 2))
    request = _v(out, "one_request_kv_gib_estimate") or 0.5
    bound = math.ceil((util + (-kv + 0.5 + request) / at_least) * 100) / 100
    if bound <= CEILING:
        _put(out, "utilization_to_fit_bound", bound)


def _other_processes(out: Facts) -> None:
    candidates = []
    before = _v(out, "others_before_profile_gib")
    if before is not None:
        candidates.append(before)  # 0.6.4: memory in use before the profile run, not this instance's
    free, total = _v(out, "free_gpu_gib_at_startup"), _v(out, "total_gpu_gib")
    # (0.32+: weights another process holds for this engine are in use, and are this engine's own)
    external = _v(out, "external_weights_gib") or 0.0
    if free is not None and total is not None:
        candidates.append(max(total - free - external, 0.0))
    oom_other = _v(out, "oom_other_process_gib")
    total = _v(out, "oom_total_gib") or float("inf")
    # "Process P has X" names the failing process itself when it runs in a container (its host
    # PID is listed); torch then prints no "this process has" and X is nearly the whole card
    # (and "this process has 0 bytes" is the container case too)
    if oom_other is not None and ((_v(out, "oom_this_process_gib") or 0.0) >= 0.1 or oom_other < 0.8 * total):
        candidates.append(oom_other)
    if candidates:
        _put(out, "other_process_gib", max(candidates))


def _safe_utilization(out: Facts) -> None:
    free, total = _v(out, "free_gpu_gib_at_startup"), _v(out, "total_gpu_gib")
    if free is None or total is None or total <= 0:
        return
    # (the budget counts weights held for this engine elsewhere: a fraction up to them and the
    # free memory passes the check)
    fraction = math.floor(((free + (_v(out, "external_weights_gib") or 0.0)) / total) * 100) / 100 - 0.01
    if fraction < 0.05:
        return  # the card is essentially full: no fraction is worth suggesting
    _put(out, "max_safe_utilization", round(min(fraction, CEILING), 2))


def _tokens(out: Facts) -> None:
    blocks = _v(out, "gpu_blocks")
    block_size = _v(out, "block_size") or 16
    engine = _v(out, "engine")
    if blocks is not None and engine != "v1":
        _put(out, "kv_cache_tokens", max(blocks, 0) * block_size)  # 0.1 printed "# GPU blocks: -1"
    max_len = _v(out, "max_model_len")
    fits = _v(out, "estimated_max_model_len") or _v(out, "max_tokens_in_kv_cache")
    printed = fits is not None  # (vLLM's own figure, for the rank whose check raised)
    needed, available = _v(out, "needed_kv_gib"), _v(out, "kv_cache_gib")
    if fits is None and needed and available and max_len and 0 < available < needed:
        fits = int(max_len * available / needed)  # KV grows linearly with length (0.7–0.9.0 print no estimate)
    if fits is None and _v(out, "kv_cache_tokens") is not None and max_len is not None:
        tokens = _v(out, "kv_cache_tokens")
        fits = tokens if tokens < max_len else None
    checked = _v(out, "check_kv_gib")
    if printed and fits is not None and checked and available and 0 < available < checked - 0.01:
        # another rank (a pipeline stage, a GPU shared with another process) printed less KV memory
        # than the rank whose check raised: the length has to fit the smallest
        fits = int(fits * available / checked)
        _put(out, "kv_smallest_rank_gib", available)
    if fits is not None:
        _put(out, "max_model_len_that_fits", _round_down(int(fits)))
    kv, tokens = _v(out, "kv_cache_gib"), _v(out, "kv_cache_tokens")
    if kv and tokens and kv > 0:
        _put(out, "kv_bytes_per_token", int(round(kv * (1 << 30) / tokens)))


def _length_at_default(out: Facts) -> None:
    """A fraction set below vLLM's default, and a KV cache too short for the length: the tokens the
    cache would hold at the default fraction, on an otherwise empty card (an estimate). The card's
    total where printed, else the least the printed weights and KV cache at this fraction imply."""
    util = _v(out, "gpu_memory_utilization")
    if util is None or "utilization_default" in out or _v(out, "max_model_len") is None:
        return
    default = default_utilization(out)
    if util <= 0 or util >= default - 0.05:
        return
    fits = _first(out, "max_tokens_in_kv_cache", "kv_cache_tokens", "estimated_max_model_len", default=0.0)
    per_token = _v(out, "kv_bytes_per_token")
    total = _v(out, "total_gpu_gib")
    weights, kv = _v(out, "weights_gib"), _v(out, "kv_cache_gib")
    if total is None and weights is not None:
        total = (weights + max(kv or 0.0, 0.0)) / util
    if not fits or not per_token or total is None:
        return
    extra = (default - util) * total * (1 << 30) / per_token
    _put(out, "utilization_default_value", default, source="estimate")
    _put(out, "max_model_len_at_default_utilization", _round_down(int(fits + extra)), source="estimate")


def _round_down(tokens: int) -> int:
    """A --max-model-len users type: a multiple of 256 (or of 16 for small values), not above."""
    step = 256 if tokens >= 2048 else 16
    return max(tokens - tokens % step, step if tokens >= step else tokens)


def _arithmetic(out: Facts) -> None:
    """Model-aware numbers from the arithmetic module (issue 4), when the model is known."""
    if "model" not in out:
        return  # nothing model-aware to add (and `kvdoctor facts` stays quick to start)
    try:
        from kvdoctor.memory.estimate import derive_for_diagnosis  # (not the facade: it pulls in the planner)
    except ImportError:
        return
    plain = {name: fact.value for name, fact in out.items()}
    try:
        extra = derive_for_diagnosis(plain)
    except Exception:  # noqa: BLE001 - an estimate must never break a diagnosis
        return
    for name, value in extra.items():
        if name == "budget_shortfall_gib":
            continue  # derived here from the log's own terms, with its own sign convention
        _put(out, name, value, source="estimate")
