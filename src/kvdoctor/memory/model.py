"""Model-level defaults vLLM derives from a config: the default max_model_len."""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def default_max_model_len(cfg: Mapping[str, Any]) -> int | None:
    """vLLM _get_and_verify_max_len: smallest length key, rope scaling, model_max_length."""
    if cfg.get("model_max_length"):
        return int(cfg["model_max_length"])
    found = [int(cfg[k]) for k in _LENGTH_KEYS if isinstance(cfg.get(k), int) and cfg[k] > 0]
    if not found:
        return None
    length = min(found)
    rope = cfg.get("rope_scaling")
    if not isinstance(rope, Mapping) or str(cfg.get("model_type", "")).startswith("gemma3"):
        return length
    kind = str(rope.get("rope_type") or rope.get("type") or "")
    factor = float(rope.get("factor") or 1.0)
    if kind in ("su", "longrope", "llama3", "default", "mrope", ""):
        return length
    if kind == "yarn" and rope.get("original_max_position_embeddings"):
        return int(int(rope["original_max_position_embeddings"]) * factor)
    return int(length * factor)
