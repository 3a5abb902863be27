"""Rewrite a `vllm serve` argv so that it applies one remedy (`kvdoctor run` prints the result).

Pure: argv in, argv out. Only remedies that are a single flag change are expressible; the rest
(free the GPU, quantize the checkpoint, fix the environment) return None.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kvdoctor.diagnosis.report import Remedy
from kvdoctor.reader.vllmargs import parse_vllm_argv

# vLLM's default --gpu-memory-utilization: a "lower" remedy is compared against it when the
# command does not set the flag.
DEFAULT_UTILIZATION = 0.9


class Direction(enum.Enum):
    LOWER = "lower"
    RAISE = "raise"
    ANY = "any"


@dataclass(frozen=True)
class FlagSpec:
    flag: str  # canonical spelling, e.g. "--max-model-len"
    fact: str  # the parse_vllm_argv fact it sets
    kind: type  # int, float, str or bool (a flag without a value)
    direction: Direction = Direction.ANY
    fixed: str | None = None  # a value that does not come from the remedy (fp8, -1)
    aliases: tuple[str, ...] = ()


# remedy action id -> the flag it turns. A literal you can grep.
ACTION_FLAGS: dict[str, FlagSpec] = {
    "lower_max_model_len": FlagSpec("--max-model-len", "max_model_len", int, Direction.LOWER),
    "max_model_len_auto": FlagSpec("--max-model-len", "max_model_len", str, fixed="-1"),
    "raise_gpu_memory_utilization": FlagSpec(
        "--gpu-memory-utilization", "gpu_memory_utilization", float, Direction.RAISE
    ),
    "lower_gpu_memory_utilization": FlagSpec(
        "--gpu-memory-utilization", "gpu_memory_utilization", float, Direction.LOWER
    ),
    "reduce_max_num_seqs": FlagSpec("--max-num-seqs", "max_num_seqs", int, Direction.LOWER),
    "reduce_max_num_batched_tokens": FlagSpec(
        "--max-num-batched-tokens", "max_num_batched_tokens", int, Direction.LOWER
    ),
    "increase_tensor_parallel_size": FlagSpec(
        "--tensor-parallel-size", "tensor_parallel_size", int, Direction.RAISE, aliases=("-tp",)
    ),
    "enforce_eager": FlagSpec("--enforce-eager", "enforce_eager", bool),
    "kv_cache_dtype_fp8": FlagSpec("--kv-cache-dtype", "kv_cache_dtype", str, fixed="fp8"),
}


@dataclass(frozen=True)
class Correction:
    action: str
    flag: str
    value: str | None  # None for a flag without a value (--enforce-eager)
    argv: tuple[str, ...]


def flag_value(action: str, value: Any, current: dict[str, Any]) -> tuple[FlagSpec, str | None] | None:
    """The flag and its new text value for a remedy, or None when it is not one flag change
    (unknown action, no value, a value vLLM would reject, or one that turns the wrong way)."""
    spec = ACTION_FLAGS.get(action)
    if spec is None:
        return None
    if spec.kind is bool:
        return (spec, None) if current.get(spec.fact) is not True else None
    if spec.fixed is not None:
        return (spec, spec.fixed) if str(current.get(spec.fact)) != spec.fixed else None
    number = _number(spec, value)
    if number is None or not _turns_right_way(spec, number, current):
        return None
    return spec, (f"{number:g}" if isinstance(number, float) else str(number))


def _number(spec: FlagSpec, value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if spec.kind is float:
        return float(value) if 0.0 < value <= 1.0 else None  # a fraction of total memory
    return int(value) if value >= 1 and float(value).is_integer() else None


def _turns_right_way(spec: FlagSpec, number: float, current: dict[str, Any]) -> bool:
    now = current.get(spec.fact)
    if now is None and spec.fact == "gpu_memory_utilization":
        now = DEFAULT_UTILIZATION
    if not isinstance(now, int | float) or spec.direction is Direction.ANY:
        return True
    if spec.fact == "max_model_len" and now < 0:  # -1/auto: any explicit length is a change
        return True
    return number < now if spec.direction is Direction.LOWER else number > now


def apply_flag(argv: Sequence[str], spec: FlagSpec, value: str | None) -> list[str]:
    """argv with every spelling of the flag removed and the new setting put where the first one
    was (in the user's spelling), or appended when the flag was absent."""
    out: list[str] = []
    placed = False
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, _ = token.partition("=")
        if not _is_spelling(name, spec):
            out.append(token)
            i += 1
            continue
        i += 1 if eq or spec.kind is bool else 2  # drop the flag and its separate value
        if not placed:
            out.extend(_setting(name, bool(eq), spec, value))
            placed = True
    if not placed:
        out.extend(_setting(spec.flag, False, spec, value))
    return out


def _is_spelling(name: str, spec: FlagSpec) -> bool:
    if name in spec.aliases:
        return True
    if not name.startswith("--"):
        return False
    bare = name[2:].replace("_", "-")
    canonical = spec.flag[2:]
    return bare == canonical or (spec.kind is bool and bare == f"no-{canonical}")


def _setting(name: str, inline: bool, spec: FlagSpec, value: str | None) -> list[str]:
    if value is None:
        return [spec.flag if name.startswith("--no") or name in spec.aliases else name]
    if inline:
        return [f"{name}={value}"]
    return [name, value]


def correct_argv(argv: Sequence[str], remedies: Iterable[Remedy]) -> Correction | None:
    """The command line with the primary remedy applied, when it is one flag change that carries
    its value; else None. A later remedy is never promoted: the list is ordered by how well each
    one fits the figures, and the third ("helps only when the shortfall is small") is no fix."""
    current = parse_vllm_argv(list(argv))
    primary = next(iter(remedies), None)
    if primary is None:
        return None
    change = flag_value(primary.action, primary.value, current)
    if change is None:
        return None
    spec, value = change
    return Correction(primary.action, spec.flag, value, tuple(apply_flag(argv, spec, value)))
