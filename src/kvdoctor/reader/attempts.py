"""Stage 3: events -> start-up attempts, each with its flat facts.

A log can hold several start-ups (a supervisor restarting vLLM, CrashLoopBackOff, a second
instance) and several ranks. A new attempt begins when a start marker (engine banner, args dump,
version line, launch command) arrives after the current attempt has made progress.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from kvdoctor._record import field, record
from kvdoctor.reader.dumps import parse_dump, with_plain_entries
from kvdoctor.reader.events import Event
from kvdoctor.reader.facts import FIGURES, Fact, Facts
from kvdoctor.reader.lines import SERVED, Origin
from kvdoctor.reader.versions import Version, clues_in, fmt, narrow, parse_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

START_KINDS = frozenset({"engine_banner", "args", "version", "command_line"})
# the events that are a GPU-memory failure vLLM printed (the non-memory rules stand aside for them)
MEMORY_ERROR_KINDS = frozenset(
    {
        "no_cache_blocks_error",
        "max_len_error",
        "free_memory_error",
        "cuda_oom",
        "warmup_oom",
        "profiling_assert",
        "mamba_blocks_error",
        "auto_fit_error",
        "external_weights_error",
    }
)
FATAL_KINDS = MEMORY_ERROR_KINDS | {"batched_tokens_error", "engine_failed", "exception", "traceback"}
# Figures and outcomes that show a start-up got under way (a later start marker begins a new one).
PROGRESS_KINDS = FATAL_KINDS | {
    "weights_loaded",
    "profile_v064",
    "profile_budget",
    "profile_breakdown",
    "profile_row",
    "profile_summary",
    "available_kv_memory",
    "gpu_blocks",
    "kv_cache_size",
    "graph_capture_done",
    "serving",
    "startup_memory_summary",
}

# Dump keys -> fact names, for the banner, `args:` and `non-default args:` dumps.
_DUMP_KEYS = {
    "model": "model",
    "dtype": "dtype",
    "max_seq_len": "max_model_len",
    "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "quantization": "quantization",
    "enforce_eager": "enforce_eager",
    "omni_pipeline": "omni_pipeline",
    "mig_profile": "mig_profile",
    "graph_profiling_enabled": "graph_profiling_enabled",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "block_size": "block_size",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "kv_cache_memory": "kv_cache_memory_bytes",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
    "swap_space": "swap_space",
    "served_model_name": "served_model_name",
    "device_config": "device",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "chunked_prefill_enabled": "enable_chunked_prefill",
    "cpu_offload_gb": "cpu_offload_gb",
    "disable_hybrid_kv_cache_manager": "disable_hybrid_kv_cache_manager",
    "enable_lora": "enable_lora",
    "max_loras": "max_loras",
    "max_lora_rank": "max_lora_rank",
    "engine": "engine",
}
# Figures where ranks may differ and vLLM keeps the smallest (V0 min over workers, V1 unify).
_MIN_ACROSS_RANKS = frozenset({"kv_cache_gib", "gpu_blocks", "kv_cache_tokens", "max_concurrency"})
# Kinds whose figures are the runtime truth and beat configuration dumps.
# the kinds that carry engine settings, with the rank of each (a lower rank is the stronger source)
_CONFIG_KINDS = {"config_value": 0, "wrapper_setting": 0, "command_line": 0, "args": 1, "engine_banner": 2}


@record(frozen=False)
class Attempt:
    """Mutable only while the builder fills it; handed out frozen-by-convention."""

    index: int
    events: list[Event] = field(default_factory=list)
    # (the first `lent` events are an earlier start-up's, lent to this one: the card it named)
    lent: int = 0

    @property
    def start_line(self) -> int:
        return min((e.line for e in self.events[self.lent :]), default=0)

    @property
    def end_line(self) -> int:
        return max((e.line for e in self.events), default=0)

    def has(self, kind: str) -> bool:
        return any(e.kind == kind for e in self.events)

    def progressed(self, since: int = 0) -> bool:
        # figures quoted bare (no vLLM header, no process prefix) above a log are not a start-up
        # of their own; an error always is
        # (a traceback a WARNING prints is neither)
        return any(
            not _benign(e)
            and (e.kind in FATAL_KINDS or (e.kind in PROGRESS_KINDS and (e.origin.level or e.origin.proc)))
            for e in self.events[since:]
        )

    def failed(self) -> bool:
        return any(e.kind in FATAL_KINDS for e in self.events)

    def ranks(self) -> list[dict[str, Any]]:
        seen: dict[tuple[str | None, int | None], dict[str, Any]] = {}
        for e in self.events:
            key = (e.origin.proc, e.origin.pid)
            if key == (None, None):
                continue
            entry = seen.setdefault(
                key,
                {
                    "proc": e.origin.proc,
                    "pid": e.origin.pid,
                    "rank": e.origin.rank,
                    "first_line": e.line,
                },
            )
            for name in ("weights_gib", "kv_cache_gib", "kv_cache_tokens", "gpu_blocks"):
                if name in e.fields and name not in entry:
                    entry[name] = e.fields[name]
        return list(seen.values())


def _quoted_error_only(attempt: Attempt) -> bool:
    """A ticket title or a blog's summary quoting lines above the log they came from: no start
    marker, and either only errors from at most two lines, or a few bare lines (no vLLM header, no
    process prefix) that merely repeat figures."""
    kinds = {e.kind for e in attempt.events}
    if kinds & START_KINDS:
        return False
    lines = {e.line for e in attempt.events}
    if kinds <= FATAL_KINDS | {"phase"} | _ERROR_FIGURES and len(lines) <= 2:
        return True
    bare = all(e.origin.level is None and e.origin.proc is None for e in attempt.events)
    return bare and len(lines) <= 4


_ERROR_FIGURES = frozenset({"max_len_error", "free_memory_error", "no_cache_blocks_error", "cuda_oom"})


def split_attempts(events: Iterable[Event]) -> Iterator[Attempt]:
    """The start-ups of a log, in order (see the module's docstring), an error quoted above the
    log it came from folded into that log's start-up."""
    attempts = _split(events)
    head = next(attempts, None)
    if head is None:
        return
    second = next(attempts, None) if _error_quoted_above(head) else None
    if second is not None and (
        not any(
            (e.kind in FATAL_KINDS and e.kind != "traceback") or e.kind in ("serving", "worker_wait")
            for e in second.events
        )
        or _quotes_its_error(head, second)
    ):
        # the reporter's error first, then the "detail log" of the same run, which stops before
        # its own failure (round 28, 3963), or whose traceback is cut before the error the quote
        # names: one start-up
        head.events.extend(second.events)
        second = None
    rest = ([second] if second is not None else []) + list(attempts)
    if rest and _annotation_only(rest[-1]):
        # a launch written as a comment below the log ("# ExecStart=… vllm serve …"): the
        # reporter's note on the run above, not a start-up of its own
        (rest[-2] if len(rest) > 1 else head).events.extend(rest.pop().events)
    yield head
    for index, attempt in enumerate(rest, start=1):
        attempt.index = index  # (numbered again after a fold)
        yield attempt


def _annotation_only(attempt: Attempt) -> bool:
    """Only a commented launch command (and what else its line names): a note, not a start-up."""
    noted = {e.line for e in attempt.events if e.kind == "command_line" and e.text.lstrip().startswith("#")}
    return bool(noted) and all(e.line in noted for e in attempt.events)


# a step of a start-up that a process only takes once: seen again from a new pid of a process
# that failed, it is a relaunch pasted without its banner (a server's one engine core or API
# server only: workers share one name, and a sibling rank loads after another rank raised)
_ONE_PER_SERVER = re.compile(r"^(?:EngineCore(?:_DP)?(?:_?\d+)?|APIServer|ApiServer_\d+)$")
_RELAUNCH_STEPS = frozenset(
    {"weights_loaded", "profile_budget", "profile_breakdown", "available_kv_memory", "kv_cache_size"}
)


def _split(events: Iterable[Event]) -> Iterator[Attempt]:
    current = Attempt(0)
    since = 0  # events pasted ahead of their start-up do not count as its progress
    failed: dict[str, set[int]] = {}  # process name -> the pids that raised in this start-up
    for event in events:
        starts = event.kind in START_KINDS and not _quoted_launch(event)
        proc, pid = event.origin.proc, event.origin.pid
        relaunch = (
            event.kind in _RELAUNCH_STEPS
            and proc in failed
            and _ONE_PER_SERVER.match(proc)
            and pid is not None
            and pid not in failed[proc]
            and not any(e.origin.proc == proc and e.origin.pid == pid for e in current.events)
            # (Ray's dedup echo of sibling engines' lines, "… [repeated 3x across cluster]": the
            # same step of this start-up on other actors, not a relaunch)
            and event.origin.repeated is None
            and "across cluster]" not in event.text
        )
        # (vLLM's command line refused after a start-up had already failed: argparse runs before
        # any engine, so this is a relaunch with other flags, its banner never printed)
        relaunch = relaunch or (
            event.kind == "exception"
            and event.fields.get("type") == "UsageError"
            and any(e.kind in FATAL_KINDS and e.fields.get("type") != "UsageError" for e in current.events[since:])
        )
        if relaunch:
            yield current
            current, since, failed = Attempt(current.index + 1), 0, {}
        elif starts and current.progressed(since) and not _quoted_error_only(current):
            if current.index == 0 and not since and _pasted_ahead(current, event):
                since = len(current.events)  # the end of this start-up, pasted above its beginning
                current.events.append(event)
                continue
            since = 0
            yield current
            current, failed = Attempt(current.index + 1), {}
        if event.kind in FATAL_KINDS and proc is not None and pid is not None:
            failed.setdefault(proc, set()).add(pid)
        current.events.append(event)
    if current.events or current.index == 0:
        yield current


def _quoted_launch(event: Event) -> bool:
    """A command line that is a whole vLLM log record: vLLM logs its arguments, never its
    command, except where its launcher names the process holding the port ("port 8001 is used by
    process … launched with command:", the command the next record). A running server, not a
    launch."""
    return event.kind == "command_line" and event.origin.level is not None and event.text.lstrip()[:1] == "/"


def _pasted_ahead(head: Attempt, start: Event) -> bool:
    """Lines above the first start-up that are its own later lines, pasted first: no start of their
    own, and every one of their clocks later than the start-up's first line (a reporter who pasted
    the KV figures, then the launch: round 6, 912)."""
    if any(e.kind in START_KINDS for e in head.events) or not start.origin.stamp:
        return False
    # (bare lines, a reporter's note or prose naming the GPU, carry no clock and do not vote)
    logged = [e for e in head.events if e.origin.level is not None or e.origin.proc is not None]
    stamps = [e.origin.stamp for e in logged if e.origin.stamp]
    return bool(stamps) and len(stamps) == len(logged) and min(stamps) > start.origin.stamp


def _quotes_its_error(head: Attempt, log: Attempt) -> bool:
    """The report above the log names only the errors the log's start-up prints (a ticket's
    "Startup fails with 'No available memory for the cache blocks'" and its environment, then the
    log): one start-up. A report naming another error too tells of another try."""
    quoted = {e.kind for e in head.events if e.kind in MEMORY_ERROR_KINDS}
    printed = {e.kind for e in log.events if e.kind in MEMORY_ERROR_KINDS}
    return bool(quoted) and quoted <= printed and not any(e.kind == "serving" for e in log.events)


def _error_quoted_above(head: Attempt) -> bool:
    """The head is an error quoted bare (no vLLM header, no process prefix) plus, at most, logged
    lines that make no progress (settings, warnings printed before the engine banner)."""
    bare_fatal = [e for e in head.events if e.kind in FATAL_KINDS and e.origin.level is None and e.origin.proc is None]
    logged = [e for e in head.events if e.origin.level is not None or e.origin.proc is not None]
    # (the reporter's launch command may sit between the quote and the log: still no start-up;
    # a command above the error is a launch and the error its own)
    return (
        bool(bare_fatal)
        and not any(
            e.kind in START_KINDS and (e.kind != "command_line" or e in logged or e.line < bare_fatal[0].line)
            for e in head.events
        )
        and all(e.kind not in PROGRESS_KINDS for e in logged)
    )


def newest_first(events: list[Event]) -> bool:
    """Pastes from some log viewers (RunPod, corpus 036) list the newest line first."""
    stamps = [e.origin.stamp for e in events if e.origin.stamp]
    if len(stamps) < 3:
        return False
    down = sum(1 for a, b in zip(stamps, stamps[1:], strict=False) if b < a)
    up = sum(1 for a, b in zip(stamps, stamps[1:], strict=False) if b > a)
    return down > up and down >= 2


class _FactSink:
    """Collects facts with a precedence: runtime figures beat configuration dumps."""

    def __init__(self) -> None:
        self.facts: Facts = {}
        self._rank: dict[str, int] = {}

    def put(
        self,
        name: str,
        value: Any,
        event: Event | None,
        *,
        rank: int = 2,
        source: str = "log",
        derived: bool = False,
        latest: bool = False,
    ) -> None:
        if value is None:
            return
        old = self._rank.get(name)
        if old is not None:
            if rank < old:
                return
            # (a launch command replaces what earlier lines set at its rank: the later launch ran)
            if rank == old and not latest:
                if name in _MIN_ACROSS_RANKS and isinstance(value, (int, float)):
                    if value >= self.facts[name].value:
                        return
                else:
                    return
        self._rank[name] = rank
        self.facts[name] = Fact(
            name,
            value,
            event.line if event else None,
            event.text if event else None,
            derived,
            source,
        )


def _dump_facts(sink: _FactSink, event: Event, values: dict[str, Any], rank: int) -> None:
    for key, name in _DUMP_KEYS.items():
        if key not in values:
            continue
        value = values[key]
        if name == "dtype" and isinstance(value, str):
            value = value.replace("torch.", "")
        if name == "max_model_len" and not isinstance(value, int):
            continue
        sink.put(name, value, event, rank=rank, source="config", latest=event.kind in ("command_line", "config_value"))


# Figures an event carries under its fact name (max_model_len has its own precedence).
_SIMPLE_FIGURES = tuple(n for n in FIGURES if n != "max_model_len") + (
    "trainer_held_gib",
    "check_kv_gib",
    "derived_max_model_len",
    "gpu_blocks_measured",
    "kv_cache_memory_bytes",
    "kv_cache_memory_bytes_reserved",
    "cuda_graph_estimate_gib",
    "budget_gib",
    "consumed_gib",
    "needed_kv_gib",
    "no_length_fits",
    "max_num_batched_tokens",
    "max_num_seqs",
    "mamba_blocks",
    "suggested_utilization",
    "equivalent_utilization",
    "kv_cache_memory_bytes_to_fit",
    "kv_cache_memory_bytes_full",
    "external_weights_gib",
    "host_ram_total_gib",
    "host_ram_available_gib",
    # ("Chunked prefill is enabled with max_num_batched_tokens=…": on, whoever turned it on)
    "enable_chunked_prefill",
)


def _recaptured(sink: _FactSink, event: Event) -> bool:
    """0.21+ captures the graphs once to profile them, before the KV cache is sized, and again for
    real after it: a capture after a KV figure that itself came after the first capture is the one
    the server keeps (V0's speculative decoding captures twice after the KV cache, both kept)."""
    first = sink.facts.get("cuda_graph_gib")
    kv = next((sink.facts[n] for n in ("kv_cache_gib", "kv_cache_tokens", "gpu_blocks") if n in sink.facts), None)
    if first is None or kv is None or first.line is None or kv.line is None:
        return False
    return first.line < kv.line < event.line


def _figure_facts(sink: _FactSink, event: Event) -> None:
    f = event.fields
    kind = event.kind
    simple = _SIMPLE_FIGURES
    if kind == "cuda_oom":
        return  # OOM figures get their own oom_* names (see _oom_facts)
    for name in simple:
        if name in f:
            # (the 0.27+ start-up summary states what the start-up kept: above any one line's figure)
            rank = 4 if kind == "startup_memory_summary" else 3
            sink.put(name, f[name], event, rank=rank, latest=kind == "graph_capture_done" and _recaptured(sink, event))
    if "cuda_graph_estimate_gib" in f:  # 0.18+: the estimate stands in until the actual is logged
        sink.put("cuda_graph_gib", f["cuda_graph_estimate_gib"], event, rank=2)
    if "max_model_len" in f:
        # the failing check's own figure wins over a concurrency line (two pasted runs, val corpus)
        rank = 5 if kind in ("max_len_error", "auto_fit", "batched_tokens_error") else 4
        sink.put("max_model_len", f["max_model_len"], event, rank=rank)
    if kind == "profile_v064":
        for key, name in (
            ("total_gpu_memory", "total_gpu_gib"),
            # (the allocator's whole peak, the weights in it: derive.py takes the weights out)
            ("peak_torch_memory", "torch_peak_gib"),
            ("non_torch_memory", "non_torch_gib"),
            ("kv_cache_size", "kv_cache_gib"),
            ("gpu_memory_utilization", "gpu_memory_utilization"),
            ("initial_memory_usage", "initial_memory_usage_gib"),
        ):
            if key in f:
                sink.put(name, f[key], event, rank=3)


_PHASE_FRAMES = (
    # (FlashInfer's sampling kernels run in the sampler: a frame there is the sampler's step)
    ("sampler_warmup", ("_dummy_sampler_run", "_dummy_pooler_run", "v1/sample/", "flashinfer/sampling.py")),
    # 0.11+: DeepGEMM / FlashInfer kernels are warmed up after the KV cache is allocated
    ("kernel_warmup", ("deep_gemm_warmup", "kernel_warmup", "flashinfer_autotune", "_warmup_kernels")),
    (
        "cuda_graph_capture",
        (
            "capture_model",
            # V0's worker captures graphs in (_)warm_up_model; V1's compile_or_warm_up_model does
            # more than that, so the leading space keeps it out
            " warm_up_model",
            " _warm_up_model",
            "capture_end",
            "_capture_cudagraphs",
            "capture_graph",
            "graph_capture",
            "cuda/graphs.py",
            "_warmup_and_capture",
        ),
    ),
    # the KV check raises "No available memory for the cache blocks" or the max-len error; with
    # the exception text cut, its frames still say the KV cache was being sized, not allocated
    (
        "kv_cache_check",
        (
            "raise_if_cache_size_invalid",
            "check_enough_kv_cache_memory",
            "_initialize_kv_caches",
            "get_kv_cache_config",
        ),
    ),
    (
        "kv_cache_allocation",
        (
            "initialize_kv_cache",
            "_allocate_kv_cache",
            "allocate_kv_cache",
            "_init_cache_engine",
            "initialize_cache",
            "_reshape_kv_cache",
            "CacheEngine",
            "_allocate_kv_cache_tensors",
            "initialize_from_config",
        ),
    ),
    (
        "profile_run",
        (
            "profile_run",
            "determine_num_available_blocks",
            "profile_num_available_blocks",
            "determine_available_memory",
            "_dummy_run",
            "profile_cudagraph_memory",
        ),
    ),
    (
        "weight_loading",
        (
            "load_model",
            "load_weights",
            "create_weights",
            "_load_",
            "weight_loader",
            # ("=": the function's whole name: initialize_model_parallel sets up NCCL, and
            # get_model_architecture inspects the config, neither loads weights)
            "=get_model",
            "=initialize_model",
        ),
    ),
)


def _phase_of_frames(frames: list[Event]) -> str | None:
    found = _frame_of_phase(frames)
    return found[0] if found else None


_CAPTURE_FUNCTIONS = frozenset({"capture_model", "_capture_cudagraphs", "capture_graph", "_warmup_and_capture"})

# (the standard library's ssl.py / socket.py, not a package's: zmq/sugar/socket.py is vLLM's own
# channel between its processes)
_NETWORK_FILE = re.compile(r"/python3[\d.]*/(?:ssl|socket)\.py$|/(?:huggingface_hub|urllib3|requests|httpx|httpcore)/")
# the files that compile (Dynamo tracing a frame and calling its backend, Inductor's codegen,
# vLLM's compilation backend), not those a compiled model runs through on every forward
_COMPILE_FILE = re.compile(
    r"torch/_dynamo/(?:convert_frame|output_graph|repro/after_dynamo)\.py$"
    r"|torch/_inductor/(?:compile_fx|codecache|async_compile|graph)\.py$|vllm/compilation/(?:backends|compiler_interface)\.py$"
)

_DISTRIBUTED_SETUP = frozenset(
    {
        "init_worker_distributed_environment",
        "init_distributed_environment",
        "initialize_model_parallel",
        "init_process_group",
        "new_group",
        "gpu_p2p_access_check",
    }
)

_SAMPLER_OPS = ("logits.sort", "_apply_top_k_top_p")


def _model_forward(frames: list[Event]) -> Event | None:
    """The deepest frame of a model's own forward (vllm/model_executor/models/*.py), or of one of
    its layers (model_executor/layers/: an activation's, a norm's), which runs only in a forward
    pass, never while the weights load."""
    for frame in reversed(frames):
        file, function = frame.fields.get("file", ""), frame.fields.get("function", "")
        if ("model_executor/models/" in file and function == "forward") or (
            "model_executor/layers/" in file and function in _LAYER_FORWARDS
        ):
            return frame
    return None


_LAYER_FORWARDS = frozenset({"forward", "forward_cuda", "forward_native", "forward_hip", "forward_xpu", "forward_oot"})


def _frame_of_phase(frames: list[Event]) -> tuple[str, Event] | None:
    # The deepest frame that names a phase wins (frames are listed outermost first).
    sampler: Event | None = None
    for frame in reversed(frames):
        where = f"{frame.fields.get('file', '')} {frame.fields.get('function', '')}"
        if frame.fields.get("function") in _SAMPLER_OPS or "layers/sampler.py" in where:
            sampler = sampler or frame  # the sampler's own step: an outer frame may name it
            continue
        if "model_executor/models/" in where and where.endswith(" __init__"):
            return "weight_loading", frame  # a model's layers are created (and their weights allocated) in __init__
        function = frame.fields.get("function", "")
        for phase, names in _PHASE_FRAMES:
            if any(n[1:] == function if n[:1] == "=" else n in where for n in names):
                if function == "_dummy_run":
                    # V1 runs the same dummy batch to profile and to capture each graph: a
                    # capture frame further out says which
                    outer = _frame_of_phase(frames[: frames.index(frame)])
                    if outer is not None and outer[0] in _AFTER_KV_STEPS:
                        return outer
                if phase == "kv_cache_check":
                    # the model's own forward below the KV sizing (its middle cut from the paste)
                    # is the profiling pass that sizing starts with, not the check after it
                    inner = _model_forward(frames[frames.index(frame) + 1 :])
                    if inner is not None:
                        return "profile_run", inner
                return phase, frame
    # no step named, but the model's own forward ran: before the KV cache exists the only
    # start-up step that runs it is the profiling pass (a vision encoder's dummy images)
    forward = _model_forward(frames)
    if forward is not None:
        return "profile_run", forward
    if sampler is not None:
        # V0's sampler runs at start-up only inside the profiling pass (V1's warm-up has frames
        # under v1/sample/, which name it above)
        return "profile_run", sampler
    return None


# the steps before any weights: the CUDA context and device (torch's lazy init, set_device), the
# distributed groups, NCCL's communicators, the custom all-reduce's IPC buffers
_DEVICE_SETUP = frozenset(
    {
        "init_device",
        "set_device",
        "_lazy_init",
        "init_worker_distributed_environment",
        "init_distributed_environment",
        "initialize_model_parallel",
        "ensure_model_parallel_initialized",
        "ncclCommInitRank",
    }
)


def _device_setup_oom(sink: _FactSink, oom: Event, frames: list[Event]) -> None:
    """An OOM raised while the device or the communicators were set up, before any weights: the
    memory was taken before this server allocated anything of its own."""
    setup = next(
        (
            f
            for f in reversed(frames)
            if f.fields.get("function") in _DEVICE_SETUP or "custom_all_reduce" in f.fields.get("file", "")
        ),
        None,
    )
    if setup is not None:
        sink.put("oom_in_device_setup", setup.fields.get("function"), setup, rank=2)
    elif "Cuda failure 'out of memory'" in oom.text:
        # NCCL's own CUDA call failing with no weights loaded yet: its communicator's set-up
        sink.put("oom_in_device_setup", "NCCL communicator", oom, rank=1)


_PROFILE_FUNCTIONS = frozenset({"profile_run", "determine_available_memory", "determine_num_available_blocks"})

# the start-up steps that run the model after the KV cache is sized
_AFTER_KV_STEPS = frozenset({"cuda_graph_capture", "sampler_warmup", "kernel_warmup"})


def _oom_facts(sink: _FactSink, attempt: Attempt) -> None:
    frames: list[Event] = []
    last_phase: str | None = None
    oom_event: Event | None = None
    framed = False
    after_weights = False  # last_phase is the profiling pass only because the weights were loaded
    loaded: Event | None = None  # ... by this "Model loading took" line
    sized = False  # the KV cache was sized before the step last_phase names
    kv_sized = False
    checking = False  # V1 printed the KV memory it found and nothing of the cache it made yet
    weights_seen = False
    for event in attempt.events:
        weights_seen = weights_seen or event.kind == "weights_loaded"
        if event.kind in _KV_SIZE_PRINTED:
            kv_sized = True
        if event.kind in ("available_kv_memory", "kv_cache_size", "gpu_blocks", "phase", "graph_capture_done"):
            checking = event.kind == "available_kv_memory"
        if event.kind == "frame":
            frames.append(event)
        elif event.kind == "phase":
            last_phase, after_weights, sized = event.fields["phase"], False, kv_sized
            frames = []
        elif event.kind == "weights_loaded" and last_phase in (None, "weight_loading"):
            # "Model loading took …": the weights are in; until a later step says so, what runs
            # next is the profiling pass (V0 allocates a Mamba model's state cache there)
            last_phase, after_weights, loaded = "profile_run", True, event
        elif (after_weights or last_phase == "profile_run") and (
            event.kind in _KV_SIZE_PRINTED or event.kind == "graph_capture_done"
        ):
            # (the KV cache sized, or graphs captured: the profiling pass is over, whether the
            # weights' line or the profiler's own ("Memory profiling takes …") began it; the step
            # after it unnamed)
            last_phase, after_weights = None, False
        elif event.kind == "exception" and "OutOfMemory" not in event.fields.get("type", ""):
            # (a wrapper, "Engine core initialization failed", ends no traceback of its own cause:
            # the frames above it are the cut traceback of the failure)
            # (nor NCCL's "unhandled cuda error", whose "Last error: Cuda failure 'out of memory'" may
            # follow on lines of its own: the frames above are that OOM's)
            keep = "out of memory" in event.text or _is_wrapper(event) or "unhandled cuda error" in event.text
            frames = frames if keep else []
        elif event.kind in ("cuda_oom", "warmup_oom"):
            phase = last_phase
            if (
                after_weights
                and loaded is not None
                and _other_process(loaded, event)
                and not _holds_past(event, loaded)
            ):
                # one rank's weights are in, another's OOM is its own loading (V0 tensor parallel)
                # (not where the OOMing rank holds GiBs past those weights: its own were in too,
                # its line hidden by Ray's "[repeated Nx across cluster]")
                phase = "weight_loading"
            _one_oom(sink, event, frames, phase)
            # (where no frame of the attempt names a step: an NCCL failure's own exception line can
            # clear the frames above it before its "Cuda failure 'out of memory'" line is read)
            if phase is None and not weights_seen and _phase_of_frames(_frames(attempt)) is None:
                _device_setup_oom(sink, event, frames)
            oom_event = event
            framed = bool(frames)
            frames = []
    oom = sink.facts.get("oom_phase")
    if oom_event is not None and not framed and oom_event.kind == "cuda_oom" and frames:
        # the OOM line printed before its own frames (a log shipper's order): the frames after
        # it, from the same process, name the step
        # (an OOM quoted above the log has no origin: every frame after it is the log's own)
        # (the same process is its name and pid: the header's clock and source differ per line)
        own = [f for f in frames if _same_process(f.origin, oom_event.origin) or oom_event.origin == Origin()]
        found = _frame_of_phase(own) if own else None
        if found is not None and (oom is None or oom.value != found[0]):
            sink.put("oom_phase", found[0], found[1], rank=4)
            oom = sink.facts.get("oom_phase")
    if (
        oom is not None
        and oom.value == "unknown"
        and last_phase in (None, "weight_loading")
        and not any(attempt.has(k) for k in ("weights_loaded", *_KV_SIZE_PRINTED))
        # a Triton kernel's own allocation (an autotuner's scratch) runs a model, not a load
        and not (oom_event is not None and "Triton Error" in oom_event.text)
    ):
        # nothing after the weights was reached: the first big allocation of a start-up is the
        # likelier step, but no line says so (a guess the rules mark as such, issue 10)
        sink.put("oom_phase_inferred", "weight_loading", oom_event, rank=1, source="derived", derived=True)
    if oom is not None and oom.value == "unknown" and last_phase:
        # the failing step is named just after the OOM (V0 "Exception in worker … method load_model")
        sink.put("oom_phase", last_phase, oom_event, rank=2)
    if "oom_phase" not in sink.facts and frames:
        # a traceback cut before its exception line (corpus 045): keep where it stopped
        found = _frame_of_phase(frames)
        if found:
            phase, frame = found
            if phase == "profile_run" and sized and last_phase in _AFTER_KV_STEPS:
                # the model's forward under a step begun after the KV cache was sized (the
                # capture's or the warm-up's progress line above the frames) is that step's
                phase = last_phase
                sink.put("traceback_phase_from_step", True, frame, rank=1, source="derived", derived=True)
            sink.put("traceback_phase", phase, frame, rank=1)
            sink.put("traceback_function", frame.fields.get("function"), frame, rank=1)
        else:
            # or the distributed set-up it was inside (Gloo/NCCL groups, the P2P check's barrier):
            # no memory is used there yet
            setup = next((f for f in frames if f.fields.get("function") in _DISTRIBUTED_SETUP), None)
            if setup is not None:
                sink.put("traceback_distributed_setup", setup.fields.get("function"), setup, rank=1)
            elif checking and not any(e.kind == "exception" and not _is_wrapper(e) for e in attempt.events):
                # V1 checks the KV cache it found against one request right after "Available KV
                # cache memory" and reports its size ("GPU KV cache size") next: frames cut
                # between the two stopped in that check
                sink.put("traceback_phase", "kv_cache_check", frames[-1], rank=1)
                sink.put("traceback_phase_from_step", True, frames[-1], rank=1, source="derived", derived=True)
    reached = _furthest_phase(attempt)
    if reached:
        sink.put("last_phase", reached, None, rank=1)


def _same_process(a: Origin, b: Origin) -> bool:
    return (a.proc, a.pid, a.rank, a.container) == (b.proc, b.pid, b.rank, b.container)


def _frames(attempt: Attempt) -> list[Event]:
    return [e for e in attempt.events if e.kind == "frame"]


def _holds_past(oom: Event, loaded: Event) -> bool:
    """The OOMing process held two GiB more than a rank's weights (same TP, same shard size), and
    its line does not name the loading step itself ("while processing method load_model")."""
    if "load_model" in oom.text:
        return False
    held = oom.fields.get("this_process_gib") or oom.fields.get("allocated_gib")
    weights = loaded.fields.get("weights_gib")
    return isinstance(held, (int, float)) and isinstance(weights, (int, float)) and held >= weights + 2


def _other_process(a: Event, b: Event) -> bool:
    """The two lines name different processes (pids, or process names where no pid is shown)."""
    if a.origin.pid is not None and b.origin.pid is not None:
        return a.origin.pid != b.origin.pid
    return a.origin.proc != b.origin.proc


def _furthest_phase(attempt: Attempt) -> str | None:
    """The step the start-up reached: the newest phase marker by the header's clock where lines
    carry one (Ray and multi-process logs interleave: a worker's "Memory profiling takes …" can be
    printed after another worker's "Capturing cudagraphs"), else the last one printed."""
    best: tuple[str, int] | None = None
    phase: str | None = None
    clock = ""
    for event in attempt.events:
        clock = event.origin.stamp or clock
        if event.kind == "phase":
            key = (clock, event.line)
            if best is None or key >= best:
                best, phase = key, event.fields["phase"]
    return phase


def _one_oom(sink: _FactSink, event: Event, frames: list[Event], last_phase: str | None) -> None:
    f = event.fields
    phase: str | None
    if event.kind == "warmup_oom":
        phase = "sampler_warmup"
        sink.put("warmup_dummy_requests", f.get("dummy_requests"), event, rank=3)
        # (an embedding model warms up its pooler: no sampler logits, the same dummy batch)
        sink.put("warmup_of", "pooler" if str(f.get("what", "")).startswith("pooler") else "sampler", event, rank=3)
    elif f.get("phase"):
        phase = str(f["phase"])  # the message itself names the step (the TPU's program loading)
    elif "create" in event.text and "weights" in event.text:
        phase = "weight_loading"  # "Failed to create unquantized linear weights: CUDA out of memory"
    elif "Error in model execution" in event.text and not frames and last_phase in (None, "weight_loading"):
        # V0's model runner wraps a forward pass that failed; at start-up, before any later step
        # is logged, that forward is the profiling pass
        phase = "profile_run"
    else:
        phase = _phase_of_frames(frames) or last_phase
        if phase is None and f.get("private_pools_gib", 0) > 0:
            # "allocated in private pools (e.g., CUDA Graphs)": graphs exist, so it is capture or
            # later; a guess that any explicit phase (the sampler warm-up message) overrides
            sink.put("oom_phase", "cuda_graph_capture", event, rank=2)
        if phase == "cuda_graph_profile":
            # 0.18+ profiles the graphs' memory by capturing them before the KV cache is sized
            sink.put("oom_in_graph_profile", True, event, rank=2)
            phase = "profile_run"
    if any(f.fields.get("function") in ("allocate_cpu_cache", "_allocate_cpu_cache") for f in frames):
        # V0's CPU swap space: pinned host memory (cudaHostAlloc), refused as "CUDA error: out of
        # memory" when the host or the container has no RAM to pin
        sink.put("oom_cpu_swap", True, event, rank=2)
    if phase == "sampler_warmup" and any(f.fields.get("function") in _PROFILE_FUNCTIONS for f in frames):
        # V1 runs the sampler's dummy batch inside the profiling pass too, before any KV cache
        sink.put("sampler_in_profile", True, event, rank=2)
    if any(f.fields.get("function") == "profile_cudagraph_memory" for f in frames):
        sink.put("oom_in_graph_profile", True, event, rank=2)  # the same profile, named by its frame
    sink.put("oom_phase", phase or "unknown", event, rank=3 if phase else 1)
    if "cumem_allocator" in event.text:
        # vLLM's CuMemAllocator: sleep mode, which RL frameworks use to share the GPU with a trainer
        sink.put("oom_cumem_allocator", True, event, rank=2)
    if f.get("nvml_assert"):
        # the allocator's OOM path could not read NVML (a MIG slice, Jetson): an OOM in disguise
        sink.put("oom_reported_as", "`NVML_SUCCESS == … INTERNAL ASSERT FAILED`", event, rank=2)
    if f.get("device"):
        sink.put("oom_device", str(f["device"]).upper(), event, rank=2)  # CUDA, HIP, XPU, NPU, TPU
    for key, name in (
        ("tried_gib", "oom_tried_gib"),
        ("total_gpu_gib", "oom_total_gib"),
        ("free_gib", "oom_free_gib"),
        ("this_process_gib", "oom_this_process_gib"),
        ("process_gib", "oom_other_process_gib"),
        ("allocated_gib", "oom_allocated_gib"),
        ("private_pools_gib", "oom_private_pools_gib"),
        ("allowed_gib", "oom_allowed_gib"),
        ("reserved_unallocated_gib", "oom_reserved_unallocated_gib"),
    ):
        if key == "this_process_gib" and f.get(key) == 0 and f.get("allocated_gib", 0) > 0:
            # ("this process has 0 bytes memory in use" beside GiBs allocated by PyTorch: NVML
            # cannot see the process from inside a container; its use is unknown, not zero)
            continue
        if key in f:
            sink.put(name, round(f[key], 3), event, rank=3)
    if "processes" in f:
        sink.put("oom_other_pids", [p["pid"] for p in f["processes"]], event, rank=3)
    if "gpu_index" in f:
        sink.put("oom_gpu_index", f["gpu_index"], event, rank=3)  # ("GPU 2 has a total capacity …": cuda:2)
    if "process_gib" not in f and {"total_gpu_gib", "this_process_gib", "free_gib"} <= f.keys():
        # torch <= 2.0 names no other process: what neither this process reserved nor is free is
        # held by someone else ("44.56 GiB total capacity; … 565 MiB free; 27.93 GiB reserved"),
        # less this process's own CUDA context and NCCL/cuBLAS buffers, which PyTorch's reserved
        # pool leaves out (0.5-2 GiB): only more than that is another process's
        others = f["total_gpu_gib"] - f["this_process_gib"] - f["free_gib"]
        if others >= max(2.5, 0.08 * f["total_gpu_gib"]):
            sink.put("oom_other_process_gib", round(others, 3), event, rank=2, source="derived", derived=True)
    if "total_gpu_gib" in f:
        sink.put("total_gpu_gib", f["total_gpu_gib"], event, rank=1)


def _version_facts(sink: _FactSink, attempt: Attempt) -> None:
    low: Version = (0, 1, 0)
    high: Version | None = None
    why: list[str] = []
    for event in attempt.events:
        if "version" in event.fields and event.kind in ("version", "engine_banner"):
            sink.put("vllm_version", event.fields["version"], event, rank=3)
        elif event.kind == "stated_version":
            sink.put("vllm_version", event.fields["version"], event, rank=1)
        for clue in clues_in(event.text, event.origin.proc, event.origin.src):
            new = narrow(low, high, clue)
            if new != (low, high):
                low, high = new
                why.append(clue.why)
    if why:
        sink.put("vllm_version_min", fmt(low), None, rank=1, source="derived", derived=True)
        if high is not None:
            sink.put("vllm_version_max", fmt(high), None, rank=1, source="derived", derived=True)
        sink.put("vllm_version_clues", why, None, rank=1, source="derived", derived=True)
    version = sink.facts.get("vllm_version")
    if version is not None and parse_version(str(version.value)) is None:
        del sink.facts["vllm_version"]


_V1_MARKERS = ("v1/", "EngineCore", "Worker_", "VllmWorker rank", "core.py:", "Worker ", "worker_v1.py")
# matched against " proc src file": a leading space keeps gpu_model_runner.py from passing as model_runner.py
_V0_MARKERS = ("vllm/worker/", "VllmWorkerProcess", "llm_engine.py", " model_runner.py:", " worker.py:")


def _omni_fact(sink: _FactSink, attempt: Attempt) -> None:
    """vllm-omni's stage engines log as "(StageEngineCoreProc_stage2_replica0 pid=N)": the other
    processes on the card may be sibling stages of this launch."""
    if "omni_pipeline" in sink.facts:
        return
    for event in attempt.events:
        if (event.origin.proc or "").startswith("StageEngineCoreProc"):
            sink.put("omni_pipeline", True, event, rank=1)
            return


def _engine_fact(sink: _FactSink, attempt: Attempt) -> None:
    if "engine" in sink.facts:  # VLLM_USE_V1 in the launch command
        return
    for event in attempt.events:
        if event.kind == "engine_banner" and event.fields.get("engine"):
            sink.put("engine", event.fields["engine"], event, rank=3)
            return
    v1 = v0 = 0
    for event in attempt.events:
        where = f"{event.origin.proc or ''} {(event.origin.src or '').lstrip('[')} {event.fields.get('file', '')}"
        v1 += any(m in where for m in _V1_MARKERS) or event.kind in (
            "available_kv_memory",
            "kv_cache_size",
        )
        v1 += event.kind == "max_len_error" and "To serve at least one request" in event.text
        v1 += event.kind == "free_memory_error"
        v0 += any(m in where for m in _V0_MARKERS) or event.kind in (
            "profile_breakdown",
            "profile_row",
            "profile_v064",
        )
        v0 += event.kind == "max_len_error" and "stored in KV cache" in event.text
        v0 += event.kind == "gpu_blocks" and "CPU blocks" in event.text
    if v1 or v0:
        sink.put("engine", "v1" if v1 > v0 else "v0", None, rank=1, source="derived", derived=True)


def _benign(event: Event) -> bool:
    """An exception named inside an INFO/WARNING message ("… falling back; ImportError: …") is a
    message, not the failure: vLLM logs a failing traceback at ERROR (or prints it raw)."""
    # (and the traceback a WARNING prints with it: "WARNING … [config.py:1154] Traceback …")
    return event.kind in ("exception", "traceback", "frame") and event.origin.level in _MESSAGE_LEVELS


_MESSAGE_LEVELS = frozenset({"INFO", "WARNING", "WARN", "DEBUG"})


def _recovered(attempt: Attempt) -> set[int]:
    """A warning the run may get past (NCCL's failed CUDA call, torch's rendezvous retrying) that
    the start-up did get past: a step of the start-up came after it, so it stopped nothing."""
    out: set[int] = set()
    # a compose stack's other services (an embedder, a web UI) print their own errors beside vLLM's:
    # a container that printed none of vLLM's own lines is not this start-up
    vllm_services = {e.origin.container for e in attempt.events if e.kind in _VLLM_OWN and _service(e.origin.container)}
    for i, event in enumerate(attempt.events):
        if (
            vllm_services
            and _service(event.origin.container)
            and event.origin.container not in vllm_services
            and (event.kind in FATAL_KINDS or event.kind in ("frame", "exception", "traceback"))
        ):
            out.add(id(event))
        elif event.kind == "cuda_oom" and _AUTOTUNE.search(event.text):
            # an autotuner's OOM for one candidate kernel (FlashInfer's "Skipping tactic …",
            # Inductor's "Ignoring this choice"): it tries the next one, nothing stops
            out.add(id(event))
        elif event.kind == "environment_error" and event.fields.get("soft"):
            later = attempt.events[i + 1 :]
            if any(e.kind in PROGRESS_KINDS and e.kind not in FATAL_KINDS | {"environment_error"} for e in later):
                out.add(id(event))
        elif event.kind == "cuda_oom" and _cited(event) and _sized_after(attempt.events[i + 1 :], event.origin.proc):
            out.add(id(event))
    return out


_AUTOTUNE = re.compile(
    r"(?i)\[Autotuner\]|Skipping tactic|Ignoring this choice|error during autotuning|autotun\w* failed for"
    r"|_inductor/select_algorithm\.py"
    # (torch's compile logger tags its lines with the compile id, "[0/0] …": Inductor's autotuner
    # logs a candidate's OOM that way, then "Ignoring this choice")
    r"|^\[\d+/\d+\] "
)


# an OOM message in quotes, or on a comment line ("# … fails with \"CUDA Error: out of memory\""):
# a title or a note cited beside the log, not a line the run printed
_CITED_OOM = re.compile(r"""^\s*#|["'“][^"'”]{0,80}out of memory""", re.IGNORECASE)


def _cited(event: Event) -> bool:
    return bool(_CITED_OOM.search(event.text))


def _sized_after(later: list[Event], proc: str | None) -> bool:
    """A cited OOM that the same process (or, unprefixed, the start-up) got past: it went on to
    size a KV cache and nothing failed after that (a title quoted above the log of a start-up that
    went well). Another rank's figures say nothing of this one's OOM."""
    sized = next(
        (j for j, e in enumerate(later) if (proc is None or e.origin.proc == proc) and _kv_sized(e)),
        None,
    )
    return sized is not None and not any(e.kind in FATAL_KINDS for e in later[sized:])


def _kv_sized(event: Event) -> bool:
    """A line of `_KV_SIZE_PRINTED` that sized a KV cache (blocks or GiB above zero)."""
    if event.kind not in _KV_SIZE_PRINTED:
        return False
    figure = event.fields.get("gpu_blocks", event.fields.get("kv_cache_gib"))
    return event.kind == "kv_cache_size" or (figure or 0) > 0


# pytest's failure lines: the "E   " prefix of an assertion's report, the short summary's "FAILED"
_REPACK_FUNCTIONS = frozenset(
    {"process_weights_after_loading", "gptq_marlin_repack", "awq_marlin_repack", "transform_w_q", "repack_weights"}
)
_PYTEST_FAILURE = re.compile(r"^(?:E {2,}\S|FAILED \S+::\S+ - )")


def _outcome_facts(sink: _FactSink, attempt: Attempt, recovered: set[int]) -> None:
    # a traceback printed at ERROR level by vLLM is a failure even when its exception line was cut
    # a traceback's frames mean a failure even when its header and exception line were cut
    # (unless the server reached serving after them, see `started`)
    outside = _trainer_oom(attempt)
    if outside:
        # vLLM sized its KV cache, then an OOM whose traceback never enters vLLM: the trainer (or
        # the script) sharing the card ran out, not vLLM's start-up (RL frameworks, issue 10)
        frame = [e for e in outside if e.kind == "frame"][0]  # the outermost: the script that ran out
        sink.put("trainer_oom_file", frame.fields.get("file"), frame, rank=3)
    skipped = {id(e) for e in outside} | recovered
    fatal = [
        e
        for e in attempt.events
        if (e.kind in FATAL_KINDS or e.kind == "frame") and not _benign(e) and id(e) not in skipped
    ]
    started = _started(sink, attempt, fatal)
    if "failed_while_serving" not in sink.facts or started:
        # (also where no frame shows the engine stepping: an excerpt that keeps the server's word,
        # the requests served and the OOM line, its traceback cut; and where the engine's step
        # dumped its batch first: the OOM it then raised is the running batch's, not a phase's)
        _oom_while_serving(sink, attempt, fatal, skipped)
        started = started or "oom_while_serving" in sink.facts
    sink.put("started", started, None, rank=1, source="derived", derived=True)
    # the server's own line that it serves or served (not a ticket's prose quoting one)
    said = next((e for e in attempt.events if e.kind == "serving" and _logged(e)), None)
    if started and said is not None:
        sink.put("server_said_serving", True, said, rank=1, source="derived", derived=True)
        # a native crash after it (a C++ assertion, a segfault): the running server's, not the
        # start-up's, but the log does not end well
        crash = next((e for e in attempt.events if e.kind == "native_abort" and e.line > said.line), None)
        if crash is not None:
            sink.put("crash_after_start", crash.text[:160], crash, rank=1, source="derived", derived=True)
    if not started and not fatal:
        _stall_facts(sink, attempt)
    if fatal and not started:
        _exiting_server_fact(sink, attempt, fatal)
    sink.put("failed", bool(fatal), None, rank=1, source="derived", derived=True)
    reached = sink.facts.get("last_phase")
    if not started and not fatal and reached is not None:
        # the log stops inside a step with nothing failed: where it stopped, never a failure of it
        sink.put("incomplete_at", reached.value, None, rank=1, source="derived", derived=True)
    frames = _frames(attempt)
    if frames:
        # the deepest frame in vLLM itself says more than torch's or contextlib's wrappers
        own = [e for e in frames if "vllm" in e.fields.get("file", "")] or frames
        sink.put("failing_file", own[-1].fields["file"], own[-1], rank=3)
        sink.put("failing_function", own[-1].fields["function"], own[-1], rank=3)
        # a worker's traceback ran through the graph capture (the engine's own may name only the
        # KV set-up that called it): an error there is the capture's
        capture = next((e for e in frames if e.fields.get("function") in _CAPTURE_FUNCTIONS), None)
        if capture is not None:
            sink.put("capture_frame", capture.fields["function"], capture, rank=1)
        # a frame inside torch.compile (Dynamo, Inductor, vLLM's compilation backend): where a
        # traceback cut before its error was compiling the model, a step eager mode skips
        at = next(
            (i for i in range(len(frames) - 1, -1, -1) if _COMPILE_FILE.search(frames[i].fields.get("file", ""))), None
        )
        # (not where the model's own code runs below it: an error raised there fails eager mode too)
        if at is not None and not any("/vllm/" in e.fields.get("file", "") for e in frames[at + 1 :]):
            sink.put("compile_frame", frames[at].fields["file"], frames[at], rank=1)
        # a frame reading from the network (a hub download, an HTTPS read): where an interrupted
        # or stalled start-up was waiting
        net = next((e for e in reversed(frames) if _NETWORK_FILE.search(e.fields.get("file", ""))), None)
        if net is not None:
            sink.put("network_frame", net.fields["file"], net, rank=1)
        # the traceback runs through an RL trainer that colocates its rollout engine with the
        # training process: the memory "another process" holds is the trainer's, by design
        rl = next(((e, m) for e in frames if (m := _RL_FRAMEWORK.search(e.fields.get("file", "")))), None)
        if rl is not None:
            sink.put("rl_colocated", rl[1].group(1), rl[0], rank=2)
        # the quantized weights re-laid for their kernel right after loading (Marlin's repack): a
        # transient copy beside weights already in, not the checkpoint's size
        repack = next((e for e in frames if e.fields.get("function") in _REPACK_FUNCTIONS), None)
        if repack is not None:
            sink.put("weights_repack", repack.fields["function"], repack, rank=1)
    # a test suite's report ("FAILED tests/x.py::test_y - ValueError: …", pytest's own frames): the
    # engine starts inside a test session, where earlier tests' engines may still hold the card
    suite = next(
        (
            e
            for e in attempt.events
            if _PYTEST_FAILURE.match(e.text) or (e.kind == "frame" and "/_pytest/" in e.fields.get("file", ""))
        ),
        None,
    )
    if suite is not None:
        sink.put("test_suite", True, suite, rank=1)
    # verl's own memory log around its rollout: the engine shares the GPU with verl's trainer
    verl = next((e for e in attempt.events if e.kind in ("wrapper_memory", "trainer_memory")), None)
    if verl is not None:
        sink.put("rl_colocated", "verl", verl, rank=1)
    kv_by_rank = [r["kv_cache_gib"] for r in attempt.ranks() if isinstance(r.get("kv_cache_gib"), (int, float))]
    if len(kv_by_rank) > 1:
        # ranks on different GPUs that disagree by GiBs: one GPU is shared with another process
        sink.put(
            "kv_cache_gib_rank_spread",
            round(max(kv_by_rank) - min(kv_by_rank), 2),
            None,
            rank=1,
            source="derived",
            derived=True,
        )
    # (an exception a WARNING or INFO message names is not the failure while one is raised)
    every = [e for e in attempt.events if e.kind == "exception"]
    exceptions = [e for e in every if not _benign(e)] or every
    if exceptions:
        # the root cause is usually the first exception; wrappers ("Engine core initialization
        # failed") come after it
        root = next((e for e in exceptions if not _is_wrapper(e)), exceptions[0])
        sink.put("error_type", root.fields["type"], root, rank=3)
        sink.put("error_message", root.fields["message"][:2000], root, rank=3)
        if _is_wrapper(root):  # only wrappers: the cause's own text is not in the log
            sink.put("error_is_wrapper", True, root, rank=3)
        # a chained traceback whose later exception says the repository does not exist (the hub
        # answers a mistyped id with 401 before it says "Repository Not Found"): the model id
        # typed, not the network or the token
        missing = next((e for e in exceptions if _NO_REPO.search(f"{e.fields['type']}: {e.fields['message']}")), None)
        if missing is not None:
            sink.put("hub_repo_not_found", True, missing, rank=1)
    for event in attempt.events:  # seen.<kind>: the first event of each kind, as evidence
        if id(event) in skipped:
            continue
        if f"seen.{event.kind}" not in sink.facts:
            sink.put(f"seen.{event.kind}", True, event, rank=3)
    # one definition of "vLLM printed a GPU-memory failure", for the rules that must stand aside then
    memory = next((e for e in attempt.events if e.kind in MEMORY_ERROR_KINDS and id(e) not in skipped), None)
    sink.put("memory_error_seen", memory is not None, memory, rank=1, source="derived", derived=True)
    for event in attempt.events:
        if event.kind == "platform":
            sink.put("platform", event.fields["platform"], event, rank=3)
        if event.kind == "profiling_assert":
            sink.put("profiling_measure", event.fields.get("measure"), event, rank=3)
            sink.put("profiling_initial_gib", event.fields.get("initial_gib"), event, rank=3)
            sink.put("profiling_current_gib", event.fields.get("current_gib"), event, rank=3)


def _logged(event: Event) -> bool:
    """A line a program printed (a log header, a process or container prefix, or vLLM's own
    access-log and stats lines), not prose or a comment quoting one."""
    origin = event.origin
    return event.text == SERVED or origin.level is not None or origin.proc is not None or origin.container is not None


def _oom_while_serving(sink: _FactSink, attempt: Attempt, fatal: list[Event], skipped: set[int]) -> None:
    """The API server said it serves, requests were served (access-log or stats lines), then an
    allocation ran out: a runtime OOM, not the start-up's; what failed after it is set aside too."""
    api = [e for e in attempt.events if e.kind == "serving" and e.text != SERVED and "init engine" not in e.text]
    if not api:
        return
    oom = next((e for e in fatal if e.kind in MEMORY_ERROR_KINDS and e.line > api[0].line), None)
    if oom is None:
        return
    up = max(e.line for e in api if e.line < oom.line)
    late = [e for e in fatal if e.line > up]
    # (nothing failed between the server's word and the OOM but the OOM's own traceback)
    served = any(e.kind == "serving" and e.text == SERVED and up < e.line < oom.line for e in attempt.events)
    if served:
        sink.put("oom_while_serving", oom.text[:160], oom, rank=2, source="derived", derived=True)
        skipped.update(id(e) for e in late)


_KV_SIZED = ("gpu_blocks", "kv_cache_size", "available_kv_memory", "startup_memory_summary", "serving")


def _started(sink: _FactSink, attempt: Attempt, fatal: list[Event]) -> bool:
    """The start-up finished: the server said it serves and nothing failed after that, or what
    failed was a request, the engine's step on a scheduled batch, or the teardown (which say so
    in `failed_while_serving`)."""
    # the engine at work counts only before any failure: serving lines after one belong to another
    # instance sharing the log (a start-up inside a long serving log)
    first_fatal = min((e.line for e in fatal), default=None)
    own = _vllm_container(attempt)
    serving = [
        e
        for e in attempt.events
        if e.kind == "serving"
        and (e.text != SERVED or first_fatal is None or e.line < first_fatal)
        # (another service of a compose stack serving is not this server: "asr-1 | … startup complete")
        and (own is None or not _service(e.origin.container) or e.origin.container == own)
    ]
    # serving, unless something fatal came after it (uvicorn's "Application startup complete"
    # precedes the port bind, corpus val-other 006); what fails after the server was told to shut
    # down (SIGTERM, then "EngineDeadError" as the engine is torn down) is the teardown's, and a
    # request that raised after start-up is a request-time error
    stop = next(
        (
            e
            for e in attempt.events
            if e.kind in ("shutdown", "request_error") and serving and e.line > serving[-1].line
        ),
        None,
    )
    if serving and all(e.text == SERVED for e in serving) and _refused_first(attempt, serving[0]):
        # only another server's access log, after this launch was refused (docker could not bind
        # the port an old container holds): that server is not this start-up
        return False
    if serving and not any(e.line > serving[-1].line and (stop is None or e.line < stop.line) for e in fatal):
        if stop is not None and stop.kind == "request_error" and any(e.line > stop.line for e in fatal):
            sink.put("failed_while_serving", stop.fields["during"], stop, rank=2)
        return True
    after = [e for e in fatal if serving and e.line > serving[-1].line]
    frames_after = [e for e in after if e.kind == "frame"]
    if (
        any(_user_frame(e.fields.get("file", "")) for e in frames_after)
        and not any("/vllm" in e.fields.get("file", "") for e in frames_after)
        # (not vLLM's own wrapper of another engine's failure, nor memory under any name)
        and not any(e.kind in MEMORY_ERROR_KINDS or e.kind == "engine_failed" for e in after)
        and not any(
            e.kind == "exception" and (_is_wrapper(e) or _OOM_WORDS.search(e.fields.get("message", ""))) for e in after
        )
    ):
        # the engine had started, then the program around it raised, in its own code only (an RL
        # framework's asyncio teardown, a script's bug): not vLLM's start-up, nor its memory
        sink.put("failed_while_serving", "the calling program, outside vLLM", frames_after[0], rank=2)
        return True
    if (
        after
        and all(e.kind == "exception" and _PYTEST_FAILURE.match(e.text) for e in after)
        and not any(_is_wrapper(e) or _OOM_WORDS.search(e.fields.get("message", "")) for e in after)
    ):
        # pytest's report of a test run against the server once it served ("E   AssertionError: …",
        # "FAILED tests/x.py::test_y - …"): the test's verdict on a reply, not the start-up's
        sink.put("failed_while_serving", "a test run against the server", after[0], rank=2)
        return True
    dump = next((e for e in attempt.events if e.kind == "request_error" and e.fields["scheduled"]), None)
    if dump is not None and not any(e.line < dump.line for e in fatal if e.kind != "frame"):
        # the engine's step raised on a batch the scheduler built: start-up was over
        sink.put("failed_while_serving", dump.fields["during"], dump, rank=2)
        return True
    # the API server's own word that it serves (not the engine's "init engine … took", printed
    # before the server builds its handlers)
    api_up = [e for e in serving if "init engine" not in e.text]
    # (a frame of the server's start-up in the same traceback as the handler's: one after the last
    # traceback header above it)
    headers = [e.line for e in attempt.events if e.kind == "traceback"]

    def server_starting(frame: Event) -> bool:
        top = max((h for h in headers if h < frame.line), default=-1)
        return any(
            f.kind == "frame" and top < f.line < frame.line and f.fields.get("function") in _SERVER_STARTUP
            for f in fatal
        )

    at_work = [
        e
        for e in fatal
        if e.kind == "frame"
        # (or in the OpenAI server's request handlers, serving_chat.py & co: a request's own error)
        and (
            e.fields.get("function") in _BUSY_LOOP
            # (the OpenAI server's handlers and the chat template and parsers they call run at
            # start-up too, built and loaded by init_app_state: a request's only where the server
            # said it serves first and no frame is its start-up's)
            or (
                (
                    "/entrypoints/openai/serving_" in e.fields.get("file", "")
                    or bool(_REQUEST_HELPER.search(e.fields.get("file", "")))
                )
                # (a cause printed above the traceback it caused has a header of its own: the
                # server must have said it serves before a handler's frame is a request's)
                and bool(api_up)
                and e.line > api_up[0].line
                and not server_starting(e)
            )
        )
    ]
    if at_work and _sized_kv(attempt):
        # the traceback runs through the engine's step loop: start-up was over and the engine was
        # serving a request when it failed (a request-time error, round 9)
        sink.put("failed_while_serving", at_work[0].fields["function"], at_work[0], rank=3)
        return True
    # the OpenAI handlers' own ERROR lines after the server said it serves, and nothing else
    # failed after it ("… [serving_chat.py:…] ValueError: This model's maximum context length is …")
    later = [e for e in fatal if api_up and e.line > api_up[0].line]
    if later and _sized_kv(attempt) and all(_handler_logged(e) for e in later):
        sink.put("failed_while_serving", "a request the OpenAI server refused", later[0], rank=2)
        return True
    return False


_OOM_WORDS = re.compile(r"(?i)out of memory|OutOfMemory")


# words of a reporter telling of another run ("I already tried --gpu-memory-utilization 0.98",
# "Yesterday with --max-model-len 131072 I got …")
_OTHER_TRY = re.compile(r"(?i)\b(?:tried|yesterday|earlier|previously|last (?:time|week)|before that|used to)\b")


_SAME_FAILURE = re.compile(
    r"(?i)\bsame (?:error|failure|thing|result)|\bstill (?:fails|failed|the same|get)|did(?:n'?t| not) help|no luck"
)


# words of a reporter weighing a run not made yet ("Should I just try --gpu-memory-utilization 0.5?",
# "Plan was to set … 0.99 next", "or use --max-model-len 8192?"), wherever the sentence stands
_NOT_YET = re.compile(
    r"(?i)\b(?:should|shall|could|can|would) (?:i|we)\b|\bplan(?:ned)?(?: (?:was|is))? to\b"
    r"|\b(?:i|we)(?:'ll| will| am going to| plan to) (?:try|set|use|bump|raise|lower|switch)"
    r"|\bnext time\b|\bnext[.!]?$|\?[`'\")\s]*$|\bdo (?:i|we) need to\b|\bor (?:just )?(?:use|try|set|go with)\b"
)


def _another_try(event: Event, failed_at: int) -> bool:
    """A reporter's sentence below the failure naming settings of another try, or one anywhere
    weighing a try not made yet: not this run's."""
    if event.origin.level is not None:
        return False
    if event.kind in ("config_value", "wrapper_setting") and _NOT_YET.search(event.text):
        return True
    return event.line > failed_at and _OTHER_TRY.search(event.text) is not None


def _loaded_model(attempt: Attempt) -> str | None:
    """The model the engine itself says it loads (V1's "Starting to load model X..."), once."""
    names = {str(e.fields["model"]) for e in attempt.events if e.kind == "phase" and "model" in e.fields}
    return names.pop() if len(names) == 1 else None


# the model a launch line names: `--model X`, `"--model","X"` (an argv as JSON), `vllm serve X`
_LAUNCH_MODEL = re.compile(r"(?:--model(?:[ =]|\",\s*\")|\bvllm\"?,?\s*\"?serve\"?,?\s+)\"?([\w/.][\w./:-]*)")


def _model_key(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def _names_other_model(event: Event, loaded: str) -> bool:
    """A launch line whose model is not the one this engine loads (compared by its last path
    part: a hub id and the local copy of it agree)."""
    m = _LAUNCH_MODEL.search(event.text)
    return m is not None and not m.group(1).startswith("-") and _model_key(m.group(1)) != _model_key(loaded)


_LISTED_GPU = re.compile(r"^\s*(?:GPU models and configuration:\s*)?GPU (\d+): ")


def card_key(name: str) -> str:
    """A card's model without the words that vary between mentions of one card ("RTX 4090",
    "RTX4090" and "4090"; "V100" and "V100 32GB"; "A100-SXM4-80GB" and "A100 80GB")."""
    # (the memory size apart from the model by a space or dash, then every separator)
    key = re.sub(r"[\s-]+\d{2,3}\s?Gi?B$|[\s-]", "", name, flags=re.I).upper()
    return re.sub(r"NVIDIA|GEFORCE|TESLA|QUADRO|RTX|SXM\d?|PCIE|NVL|HBM3", "", key)


_NO_REPO = re.compile(r"RepositoryNotFound|Repository Not Found|is not a valid model identifier")
# the API server building its app: what fails under these is its start-up, not a request
_SERVER_STARTUP = frozenset({"init_app_state", "build_app", "run_server_worker", "build_async_engine_client"})
# what the OpenAI server's request handlers call per request: the chat template, tool and
# reasoning parsers
_REQUEST_HELPER = re.compile(r"/entrypoints/chat_utils\.py|/(?:tool|reasoning)_parsers?/")
# a frame in the caller's own code: not an installed package, the standard library or frozen code
_LIBRARY_FILE = re.compile(r"(?:site|dist)-packages/|^<|/lib/python3[\d.]*/(?!site-packages)")


def _handler_logged(event: Event) -> bool:
    """An exception the OpenAI server's request handlers logged (its header names serving_*.py)."""
    # (the header's source as peeled: "[serving_chat.py:226", "serving_chat.py:226")
    return event.kind == "exception" and (event.origin.src or "").lstrip("[").startswith("serving_")


def _user_frame(file: str) -> bool:
    # (a compiled module's frame, "uvloop/loop.pyx", is a library's too)
    return file.endswith(".py") and not _LIBRARY_FILE.search(file)


def _vllm_container(attempt: Attempt) -> str | None:
    """The container (compose service, pod) vLLM's own start-up lines come from, where lines name
    one: the service of its weights, KV and banner lines."""
    # (a JSON record's stream, stdout or stderr, names no service: uvicorn writes to stderr)
    seen = [e.origin.container for e in attempt.events if e.kind in _VLLM_OWN and _service(e.origin.container)]
    return max(set(seen), key=seen.count) if seen else None


def _service(container: str | None) -> bool:
    return container is not None and container not in ("stdout", "stderr")


_VLLM_OWN = frozenset(
    {"weights_loaded", "available_kv_memory", "gpu_blocks", "kv_cache_size", "engine_banner", "version"}
)


def _refused_first(attempt: Attempt, first_served: Event) -> bool:
    """The environment refused before any line of a start-up, and what follows is access logs."""
    refused = any(e.kind == "environment_error" and e.line < first_served.line for e in attempt.events)
    progress = any(e.kind in START_KINDS or e.kind in ("weights_loaded", *_KV_SIZE_PRINTED) for e in attempt.events)
    return refused and not progress


def _stall_facts(sink: _FactSink, attempt: Attempt) -> None:
    """The engine waited on a silent worker, minute after minute, and the log ends there: how long
    (from the first wait's start to the last, by the header clock; else the waits added up)."""
    waits = [e for e in attempt.events if e.kind == "worker_wait" and not e.fields.get("silent_only")]
    polls = [e for e in attempt.events if e.fields.get("silent_only")]
    if polls and attempt.events[-1] is polls[-1]:
        # the API server's poll for its engine core counts only as the log's last lines, one after
        # another with nothing between them: a core downloading, loading or compiling prints in
        # between (its progress bars too), and is slow, not stalled
        start = len(polls) - 1
        while start > 0 and polls[start].line - polls[start - 1].line <= 1:
            start -= 1
        waits = waits or polls[start:]
    if not waits:
        return
    first = float(waits[0].fields.get("seconds", 60)) / 60
    span = _minutes_between(waits[0].origin.stamp, waits[-1].origin.stamp)
    minutes = first + span if span is not None else sum(float(e.fields.get("seconds", 60)) for e in waits) / 60
    sink.put("stalled_minutes", round(minutes, 1), waits[-1], rank=1)
    sink.put("stall_message", waits[-1].fields.get("message", ""), waits[-1], rank=1)


def _exiting_server_fact(sink: _FactSink, attempt: Attempt, fatal: list[Event]) -> None:
    """Another server's shutdown lines among this failing one's (another pid): the previous
    server of a restart loop was still letting go of its memory while this one started."""
    failing = {e.origin.pid for e in fatal if e.origin.pid is not None}
    if not failing:
        return
    exiting = next(
        (e for e in attempt.events if e.kind == "shutdown" and e.origin.pid not in (None, *failing)),
        None,
    )
    if exiting is not None:
        sink.put("other_server_exiting", exiting.origin.pid, exiting, rank=2)


def _minutes_between(first: str | None, last: str | None) -> float | None:
    """Minutes from one header stamp ("10-09 11:10:47") to a later one on the same day, or None."""
    if not first or not last or first[:5] != last[:5]:
        return None
    try:
        a = [int(x) for x in first[-8:].split(":")]
        b = [int(x) for x in last[-8:].split(":")]
    except ValueError:
        return None
    if len(a) != 3 or len(b) != 3:
        return None
    return ((b[0] - a[0]) * 3600 + (b[1] - a[1]) * 60 + (b[2] - a[2])) / 60


# RL frameworks whose rollout engine shares the GPU with the trainer (their package in a frame's path)
_RL_FRAMEWORK = re.compile(r"/(verl|openrlhf|trl|nemo_rl|areal|realhf|slime|easyr1|skyrl_train|rllm|prime_rl)/")


def _trainer_oom(attempt: Attempt) -> list[Event]:
    """The events of an out-of-memory traceback that came after vLLM sized its KV cache and whose
    frames are all outside vLLM (the trainer's, in a colocated RL job): its frames, exception and
    OOM lines. Empty when the OOM is vLLM's or nothing shows vLLM got that far."""
    sized = min(
        (
            e.line
            for e in attempt.events
            if e.kind in _KV_SIZED and (e.kind != "available_kv_memory" or e.fields.get("kv_cache_gib", 0) > 0)
        ),
        default=None,
    )
    if sized is None:
        return []
    block: list[Event] = []
    found: list[Event] = []
    for event in attempt.events:
        if event.line < sized:
            continue
        if event.kind == "traceback":
            block = [event]
        elif event.kind in ("frame", "exception"):
            block.append(event)
        elif event.kind in ("cuda_oom", "warmup_oom"):
            block.append(event)
            frames = [e for e in block if e.kind == "frame"]
            if frames and not any("vllm" in e.fields.get("file", "") for e in frames):
                found.extend(block)
            block = []
    oom_lines = {e.line for e in found if e.kind in ("cuda_oom", "warmup_oom")}
    # the exception line that carries the OOM text is the same failure
    return found + [e for e in attempt.events if e.line in oom_lines and e not in found]


_WRAPPER_MESSAGES = (
    "Engine core initialization failed",
    "Worker failed with error",
    "Error executing method",  # Ray / V0 workers: the cause is the worker's own exception
    "Engine process failed",
    "WorkerProc",
    "See root cause",
    "please check the stack",
    # pydantic's headline; its reason is on the next line ("Value error, …")
    "validation error for ",
)


# a wrapper that quotes its cause: "Worker failed with error 'CUDA out of memory …', please check
# the stack trace above for the root cause"
_QUOTED_CAUSE = re.compile(r"failed with error '([^']{12,})'")


def _is_wrapper(event: Event) -> bool:
    message = event.fields.get("message", "")
    if _QUOTED_CAUSE.search(message):
        return False  # it carries the root cause (a Mamba block count, an OOM, a NCCL error …)
    return any(w in message for w in _WRAPPER_MESSAGES)


# the lines that print the KV cache's size
_KV_SIZE_PRINTED = ("gpu_blocks", "available_kv_memory", "kv_cache_size")

# V1's engine-core loop: a frame here means the engine was stepping requests, past start-up
_BUSY_LOOP = frozenset({"run_busy_loop", "_process_engine_step", "step_with_batch_queue"})


def _sized_kv(attempt: Attempt) -> bool:
    return any(attempt.has(k) for k in _KV_SIZE_PRINTED)


# vllm-metal's budget keys -> kvdoctor's figures (its "overhead" is what vLLM calls non-torch)
_METAL_FACTS = {
    "metal_limit": "total_gpu_gib",
    "fraction": "gpu_memory_utilization",
    "model_memory": "weights_gib",
    "overhead": "non_torch_gib",
    "kv_budget": "kv_cache_gib",
    "num_blocks": "gpu_blocks",
    "max_tokens_cached": "kv_cache_tokens",
}


def _metal_reservation(sink: _FactSink, values: dict[str, float]) -> None:
    """vllm-metal subtracts more than the weights and its overhead before the KV budget (a hybrid
    model's linear-attention state for every sequence): what is left unexplained is the profiled
    peak's counterpart, derived and marked so. `values`: every key=value of its budget lines."""
    needed = ("usable_metal", "model_memory", "overhead", "kv_budget")
    if not all(k in values for k in needed):
        return
    rest = values["usable_metal"] - values["model_memory"] - values["overhead"] - values["kv_budget"]
    if rest >= 0.5:
        sink.put("activation_peak_gib", round(rest, 2), None, rank=1, source="derived", derived=True)


def attempt_facts(attempt: Attempt) -> Facts:
    sink = _FactSink()
    metal: dict[str, float] = {}  # vllm-metal's budget, gathered over its lines
    graph_profiled = any(e.kind == "graph_estimate" for e in attempt.events)
    # (a "# CPU blocks" line beside a GPU's blocks is V0's swap space, re-wrapped onto its own line)
    device_blocks = any(e.kind == "gpu_blocks" and e.fields.get("device") != "CPU" for e in attempt.events)
    recovered = _recovered(attempt)
    listing: list[str] = []  # "index: card" of each GPU a host listing names
    loaded = _loaded_model(attempt)
    failed_at = next((e.line for e in attempt.events if e.kind in FATAL_KINDS), None)
    for event in attempt.events:
        if event.kind in _CONFIG_KINDS and loaded and _names_other_model(event, loaded):
            continue  # another server's launch pasted beside this one (a second deployment's args)
        if event.kind in _CONFIG_KINDS and _another_try(event, failed_at if failed_at is not None else 1 << 30):
            tried = (event.fields.get("flags") or {}).get("gpu_memory_utilization")
            if isinstance(tried, float) and _SAME_FAILURE.search(event.text):
                # ("I already tried 0.95: same error"): a raise that was tried and did not help
                sink.put("tried_utilization_failed", tried, event, rank=1)
            continue
        if event.kind in _CONFIG_KINDS:
            rank = _CONFIG_KINDS[event.kind]
            values = event.fields.get("flags")
            if values is None:
                dump = event.fields.get("dump", "")
                values = with_plain_entries(dump, parse_dump(dump))
            _dump_facts(sink, event, values, rank)
        elif event.kind == "visible_devices":
            sink.put("cuda_visible_devices", event.fields["devices"], event, rank=0, source="config", latest=True)
        elif event.kind == "gpu_name":
            # two different cards named for one start-up ("RTX 4090 (GPU 0) + RTX 3080 10GB (GPU 1)"):
            # ranks that disagree may be the cards, not a co-tenant
            names = {card_key(n) for n in event.fields.get("gpu_names", [event.fields["gpu_name"]])}
            if "gpu_name" in sink.facts:
                names.add(card_key(str(sink.facts["gpu_name"].value)))
            if len(names) > 1:
                sink.put("mixed_gpus", ", ".join(sorted(names)), event, rank=1)
            sink.put(
                "gpu_name", event.fields["gpu_name"], event, rank=1 if event.text.lstrip().startswith("GPU ") else 0
            )
            if "gpu_count" in event.fields:
                sink.put("gpu_count", event.fields["gpu_count"], event, rank=0)
            listed = _LISTED_GPU.match(event.text)
            if listed:
                # collect_env's "GPU models and configuration" / `nvidia-smi -L`: one line a GPU
                # this host shows, numbered from 0 (the highest number counts them)
                count = int(listed.group(1)) + 1
                sink.put("gpus_listed", count, event, rank=count)
                listing.append(f"{listed.group(1)}: {event.fields['gpu_name']}")
                sink.put("gpu_listing", list(listing), event, rank=len(listing))
        elif event.kind == "nvidia_smi" and event.fields.get("devices"):
            device = event.fields["devices"][0]
            if device["name"] and device["name"] != "unknown":  # (a CSV query without the name)
                sink.put("gpu_name", device["name"], event, rank=2)
            if device.get("total_gib"):
                sink.put("total_gpu_gib", round(device["total_gib"], 2), event, rank=0)
        elif event.kind == "environment_error" and id(event) not in recovered:
            if event.fields["kind"] == "device visibility" and attempt.has("visible_devices"):
                continue  # the launch's CUDA_VISIBLE_DEVICES says which (the layout rule names it)
            sink.put("environment_reason", event.fields["reason"], event, rank=1)
            sink.put("environment_kind", event.fields["kind"], event, rank=1)
        elif event.kind == "no_gpu":
            sink.put("no_gpu_reason", event.fields["reason"], event, rank=1)
        elif event.kind == "metal_memory":
            metal.update(event.fields)
            for key, name in _METAL_FACTS.items():
                if key in event.fields:
                    sink.put(name, event.fields[key], event, rank=0)
        elif event.kind == "kernel_length_limit":
            sink.put("max_model_len_kernel_limit", event.fields["limit"], event, rank=1)
        elif event.kind == "unified_memory":
            sink.put("unified_memory_device", event.fields["device"], event, rank=1)
        elif event.kind == "accelerator":
            sink.put("accelerator", event.fields["vendor"], event, rank=1)
        elif event.kind == "logo_model" or (event.kind == "version" and "model" in event.fields):
            sink.put("model", event.fields["model"], event, rank=2)
        elif event.kind == "reported_free" and event.origin.level is None:
            sink.put("reported_free_gib", event.fields["free_gib"], event, rank=1)
        elif event.kind == "length_needed" and event.origin.level is None:
            # (the reporter's words, not a line vLLM logged)
            sink.put("length_needed", event.fields.get("tokens", "keep"), event, rank=1)
        elif event.kind == "docker_gpus":
            sink.put("docker_gpu_devices", event.fields["devices"], event, rank=1)
        elif event.kind == "shared_gpu":
            sink.put("gpu_shared_by", event.fields["how"], event, rank=1)
        elif event.kind == "wrapper_card":
            # (a wrapper's reading of the card: any figure vLLM prints of its own wins)
            sink.put("total_gpu_gib", event.fields["total_gpu_gib"], event, rank=0)
        elif event.kind == "transformers_fallback":
            sink.put("transformers_fallback", True, event, rank=1)
        elif event.kind == "wrapper_little_free":
            sink.put("wrapper_saw_little_free", True, event, rank=1)
            sink.put("wrapper_length_cut", event.fields["tokens"], event, rank=1)
        elif event.kind == "phase" and "model" in event.fields:
            sink.put("model", event.fields["model"], event, rank=1)
        elif event.kind == "gpu_blocks" and event.fields.get("device") == "CPU" and device_blocks:
            continue
        elif event.kind == "blocks_override" and event.fields.get("gpu_blocks_measured") == 0 and graph_profiled:
            continue  # 0.18+: the CUDA-graph memory profile runs on a dummy KV cache of 512 blocks
        else:
            _figure_facts(sink, event)
    _metal_reservation(sink, metal)
    _oom_facts(sink, attempt)
    _version_facts(sink, attempt)
    _engine_fact(sink, attempt)
    _omni_fact(sink, attempt)
    _outcome_facts(sink, attempt, recovered)
    return sink.facts
