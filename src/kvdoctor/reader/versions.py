"""vLLM version parsing and the era clues a log leaves when it never prints its version."""

from __future__ import annotations

import re

from kvdoctor._record import record

Version = tuple[int, ...]
_NUM = re.compile(r"(\d+)")


def parse_version(text: str) -> Version | None:
    """'0.6.4.post1' -> (0, 6, 4, 1); '0.15.2rc1.dev93' -> (0, 15, 2); None when no digits."""
    text = text.strip().lstrip("v")
    core = re.match(r"\d+(?:\.\d+)*", text)
    if not core:
        return None
    parts = tuple(int(p) for p in core.group(0).split("."))
    post = re.search(r"\.post(\d+)", text)
    if post and len(parts) == 3:
        parts = (*parts, int(post.group(1)))
    return parts


def fmt(version: Version) -> str:
    return ".".join(str(p) for p in version)


@record(slots=True)
class Clue:
    """A wording or prefix that exists only in some releases (vllm-log-formats.md)."""

    needle: str
    low: Version
    high: Version | None  # inclusive upper bound, None = still present
    why: str


# Only clues whose ranges are exact at release granularity in the reference.
CLUES: tuple[Clue, ...] = (
    Clue("Memory profiling results:", (0, 6, 4), (0, 6, 4, 1), "single-line profiling results (§4.1)"),
    Clue(
        "the current vLLM instance can use total_gpu_memory",
        (0, 6, 5),
        (0, 10, 2),
        "V0 profiling block (§4.1)",
    ),
    Clue("# CUDA blocks:", (0, 7, 0), (0, 7, 2), "'# CUDA blocks' (§5.1)"),
    Clue("# cuda blocks:", (0, 7, 3), (0, 11, 0), "'# cuda blocks' (§5.1)"),
    Clue("Available KV cache memory:", (0, 9, 1), None, "'Available KV cache memory' (§4.2)"),
    Clue("GPU KV cache size:", (0, 8, 0), None, "'GPU KV cache size' (§5.2)"),
    Clue("with the models's max seq len", (0, 7, 0), (0, 21, 0), '"models\'s" typo (§8.2)'),
    Clue("with the model's max seq len", (0, 22, 0), None, 'V1 "model\'s" wording (§8.2)'),
    Clue("estimated maximum model length is", (0, 9, 1), None, "estimated length printed (§8.2)"),
    Clue("on startup is less than desired", (0, 9, 1), None, "start-up free-memory check (§9.1)"),
    Clue(
        "Free memory on device cuda:",
        (0, 14, 0),
        None,
        "device token in the free-memory line (§9.1)",
    ),
    Clue("(EngineCore_DP", (0, 10, 2), None, "EngineCore_DP prefix (§1.4)"),
    Clue("(EngineCore pid=", (0, 18, 0), None, "EngineCore prefix without DP (§1.4)"),
    Clue("(Worker_TP", (0, 10, 2), None, "Worker_TP prefix (§1.4)"),
    Clue("(VllmWorker rank=", (0, 6, 5), (0, 10, 0), "VllmWorker rank= prefix (§1.4)"),
    Clue("(VllmWorkerProcess pid=", (0, 4, 2), (0, 10, 2), "V0 worker prefix (§1.4)"),
    Clue(
        "default since v0.21.0",
        (0, 20, 0),
        None,
        "CUDA graph memory profiling on by default (§6.3)",
    ),
    Clue("CUDA graph pool memory:", (0, 18, 0), None, "graph pool line (§6.3)"),
    Clue("Estimated CUDA graph memory:", (0, 18, 0), None, "graph estimate (§6.3)"),
    Clue("GiB for consumed memory", (0, 27, 0), None, "0.27+ start-up summary (§4.2)"),
    Clue("Loading model weights took", (0, 4, 0), (0, 7, 3), "'Loading model weights took' (§3)"),
    Clue("Model loading took", (0, 8, 0), None, "'Model loading took' (§3)"),
    Clue("total capacty of", (0, 2, 2), (0, 4, 0, 1), "torch 2.1 'capacty' typo (§10)"),
)
BRACKETED = Clue("[file:line]", (0, 8, 0), None, "bracketed [file:line] header (§1.1)")
UNBRACKETED = Clue("file:line]", (0, 1, 4), (0, 7, 3), "header without '[' (§1.1)")


def clues_in(text: str, proc: str | None = None, src: str | None = None) -> list[Clue]:
    """Clues in a message, its process prefix and its vLLM header."""
    found = [c for c in CLUES if c.needle in text]
    if proc:
        wrapped = f"({proc} pid="
        found.extend(c for c in CLUES if c.needle.startswith("(") and wrapped.startswith(c.needle))
    if src:
        found.append(BRACKETED if src.startswith("[") else UNBRACKETED)
    return found


def narrow(low: Version, high: Version | None, clue: Clue) -> tuple[Version, Version | None]:
    """Intersect a version range with a clue's; an impossible intersection keeps the old range."""
    new_low = max(low, clue.low)
    new_high = clue.high if high is None else (high if clue.high is None else min(high, clue.high))
    if new_high is not None and new_low > new_high:
        return low, high
    return new_low, new_high
