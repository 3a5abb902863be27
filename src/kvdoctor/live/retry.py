"""When `kvdoctor run --retry N` may relaunch a failed start-up, and with which one flag changed.

Pure: the command line and the failed start-up's report in, a :class:`Retry` or the reason to
stop out. The launcher (``kvdoctor.commands.run``) does the waiting and the relaunch.

A retry is only ever the report's *first* remedy, only when it is one flag change that carries a
value kvdoctor's arithmetic computed (or a switch such as ``--enforce-eager``), and never:

- after a failure that is not a memory failure (NCCL, a missing kernel, a bad config: the same
  command fails the same way);
- for a remedy the report lists under "Do NOT";
- to raise ``--gpu-memory-utilization`` while another process holds memory (the fraction is of
  TOTAL memory: that turns the error into an OOM);
- to free memory by stopping anything, or to add GPUs (tensor parallel): not one flag's choice;
- with a command line that already failed in this run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvdoctor.diagnosis.report import Report
from kvdoctor.live.fixcmd import ACTION_FLAGS, DEFAULT_UTILIZATION, Correction, correct_argv
from kvdoctor.reader.vllmargs import parse_vllm_argv

MEMORY_CLASSES = frozenset(
    {"no_cache_blocks", "max_model_len_too_large", "insufficient_free_memory_at_startup", "cuda_oom"}
)
# the remedies a relaunch may apply: each is one flag whose new value the diagnosis sized
RETRYABLE = frozenset(
    {
        "lower_max_model_len",
        "max_model_len_auto",
        "raise_gpu_memory_utilization",
        "lower_gpu_memory_utilization",
        "reduce_max_num_seqs",
        "reduce_max_num_batched_tokens",
        "enforce_eager",
        "kv_cache_dtype_fp8",
    }
)
HELD_GIB = 0.5  # memory another process holds, below which the card counts as empty


@dataclass(frozen=True)
class Retry:
    correction: Correction
    before: str  # the flag's setting before the change, as the user would read it
    after: str

    @property
    def argv(self) -> list[str]:
        return list(self.correction.argv)

    def describe(self, number: int, of: int) -> str:
        """`retry 1/2: --max-model-len 131072 -> 23296 (lower_max_model_len)`."""
        c = self.correction
        change = f"{c.flag} {self.before} -> {self.after}"
        return f"retry {number}/{of}: {change} ({c.action})"


def plan_retry(argv: Sequence[str], report: Report, tried: Sequence[Sequence[str]] = ()) -> Retry | str:
    """The relaunch for this failed start-up, or why there is none (one line, for the user)."""
    top = report.diagnoses[0] if report.diagnoses else None
    if report.verdict == "healthy":
        return "the start-up is healthy"
    if top is None or top.klass not in MEMORY_CLASSES:
        what = top.klass if top is not None else report.verdict
        return f"the failure is not a memory failure ({what}); the same command would fail again"
    first = top.remedies[0] if top.remedies else None
    if first is None:
        return "the diagnosis has no remedy to apply"
    if first.action not in RETRYABLE:
        return f"the first remedy ({first.action}) is not a flag change kvdoctor makes on its own; apply it by hand"
    if first.action in {a.action for a in top.avoid}:
        return f"the first remedy ({first.action}) is also listed under Do NOT"
    if first.action == "raise_gpu_memory_utilization" and _memory_held(report):
        return "another process holds GPU memory: raising --gpu-memory-utilization would plan memory it holds"
    correction = correct_argv(argv, top.remedies)
    if correction is None:
        return f"the first remedy ({first.action}) carries no value for the flag; apply it by hand"
    if [*correction.argv] in [list(t) for t in tried]:
        return "that command already failed in this run"
    spec = ACTION_FLAGS[correction.action]
    current = parse_vllm_argv(list(argv)).get(spec.fact)
    return Retry(correction, _setting(spec.fact, current, spec.kind is bool), correction.value or "on")


def _memory_held(report: Report) -> bool:
    top = report.diagnoses[0]
    if top.cause == "other_process" or top.klass == "insufficient_free_memory_at_startup":
        return True
    facts = report.facts
    held = (facts.get("other_process_gib"), facts.get("oom_other_process_gib"))
    return any(isinstance(v, int | float) and v >= HELD_GIB for v in held)


def _setting(fact: str, value: object, switch: bool) -> str:
    if switch:
        return "on" if value is True else "off"
    if value is None:
        return f"{DEFAULT_UTILIZATION:g} (default)" if fact == "gpu_memory_utilization" else "(default)"
    return f"{value:g}" if isinstance(value, float) else str(value)
