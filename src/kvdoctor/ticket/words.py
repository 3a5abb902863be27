"""What a ticket says was done ("Fix: raised --gpu-memory-utilization to 0.95") as remedy action ids,
so `kvdoctor ticket` can check it against the diagnosis."""

from __future__ import annotations

import re
from typing import Any

from kvdoctor.diagnosis.rules import ACTIONS

# ---- what a ticket says it did -> action ids -------------------------------------------

# knob -> (fact, pattern, action when raised, action when lowered)
_KNOBS: dict[str, tuple[str, re.Pattern[str], str | None, str | None]] = {
    "util": (
        "gpu_memory_utilization",
        re.compile(
            r"gpu[-_ ]?mem(?:ory)?[-_ ]?util\w*|mem(?:ory)?[-_ ]util\w*|memory fraction"
            r"|\butil(?:i[sz]ation)?\b",
            re.I,
        ),
        "raise_gpu_memory_utilization",
        "lower_gpu_memory_utilization",
    ),
    "len": (
        "max_model_len",
        re.compile(r"max[-_ ]?model[-_ ]?len\w*|context (?:length|window|len)|max[-_ ]seq[-_ ]len\w*", re.I),
        "raise_max_model_len",
        "lower_max_model_len",
    ),
    "seqs": (
        "max_num_seqs",
        re.compile(r"max[-_ ]?num[-_ ]?seqs", re.I),
        "raise_max_num_seqs",
        "reduce_max_num_seqs",
    ),
    "batched": (
        "max_num_batched_tokens",
        re.compile(r"max[-_ ]?num[-_ ]?batched[-_ ]?tokens|batched tokens", re.I),
        "raise_max_num_batched_tokens",
        "reduce_max_num_batched_tokens",
    ),
    "tp": (
        "tensor_parallel_size",
        re.compile(r"tensor[-_ ]?parallel(?:[-_ ]?size)?|(?<![\w-])-?-?tp\b", re.I),
        "increase_tensor_parallel_size",
        None,
    ),
}
# actions named without a direction
_DIRECT: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "enforce_eager",
        re.compile(r"enforce[-_ ]?eager|eager mode|disabl\w* (?:the )?cuda ?graphs?", re.I),
    ),
    ("kv_cache_dtype_fp8", re.compile(r"kv[-_ ]?cache[-_ ]?dtype\W+(?:to\s+)?fp8|fp8 kv", re.I)),
    ("use_quantized_checkpoint", re.compile(r"\b(?:awq|gptq|int4|int8|quantiz\w*)\b", re.I)),
    (
        "free_gpu_memory",
        re.compile(
            r"\b(?:kill\w*|stopp?\w*|free\w*|clear\w*|shut\w* down)\b[^.;]*?"
            r"\b(?:process\w*|gpus?|memory|instances?|containers?|jobs?|tenants?)\b",
            re.I,
        ),
    ),
    ("upgrade_vllm", re.compile(r"\bupgrad\w*\b.*\bvllm\b|\bvllm\b.*\bupgrad\w*", re.I)),
)
_RAISE = re.compile(r"\b(?:rais\w*|increas\w*|bump\w*|higher|more|up)\b", re.I)
_LOWER = re.compile(
    r"\b(?:lower\w*|decreas\w*|reduc\w*|drop\w*|shrink\w*|cut|smaller|less"
    r"|shorten\w*)\b",
    re.I,
)
_CLAUSE = re.compile(r"[.;,](?=\s|$)|\band\b|\bthen\b", re.I)
_NUMBER = re.compile(r"^[\s\"'`]*(?:(?:=|:|to|from\s+\S+\s+to)\s*)?[\"'`]?(-?\d+(?:\.\d+)?|auto)(k)?\b", re.I)
ACTION_IDS = (
    *ACTIONS,
    "raise_max_model_len",
    "raise_max_num_seqs",
    "raise_max_num_batched_tokens",
)  # plus the ticket-only ones in OPPOSITE
_IDS = re.compile(r"(?<![\w-])(?:" + "|".join(sorted(ACTION_IDS, key=len, reverse=True)) + r")(?![\w-])")


def stated_actions(text: str, facts: dict[str, Any]) -> tuple[str, ...]:
    """Action ids a free-text remedy names ("raised gpu_memory_utilization to 0.95",
    "--max-model-len 4096"); a bare value is compared with the log's own setting."""
    found: list[str] = []
    for clause in _CLAUSE.split(text):
        ids = _IDS.findall(clause)
        found += ids or _clause_actions(clause, facts)
    return tuple(dict.fromkeys(found))


def _clause_actions(clause: str, facts: dict[str, Any]) -> list[str]:
    found = [action for action, pattern in _DIRECT if pattern.search(clause)]
    up, down = bool(_RAISE.search(clause)), bool(_LOWER.search(clause))
    for fact, pattern, raised, lowered in _KNOBS.values():
        m = pattern.search(clause)
        if m is None or (fact == "max_model_len" and "enforce_eager" in found):
            continue
        value = _NUMBER.match(clause[m.end() :])
        turn = "raise" if up and not down else "lower" if down and not up else None
        if value is not None and (turn is None or value.group(1).lower() in ("auto", "-1")):
            turn = _turn(fact, value, facts)
        action = {"raise": raised, "lower": lowered, "auto": "max_model_len_auto"}.get(turn or "")
        found += [action] if action else []
    return found


def _turn(fact: str, value: re.Match[str], facts: dict[str, Any]) -> str | None:
    text = value.group(1).lower()
    if fact == "max_model_len" and text in ("auto", "-1"):
        return "auto"
    if text == "auto":
        return None
    number = float(text) * (1024 if value.group(2) else 1)
    now = facts.get(fact, 0.9 if fact == "gpu_memory_utilization" else None)
    if not isinstance(now, int | float) or number == now:
        return "raise" if fact == "tensor_parallel_size" and number > 1 else None
    return "raise" if number > now else "lower"
