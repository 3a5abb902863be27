"""vLLM's start-up check of free memory (V1): the fraction's share of the TOTAL must be free.

Kept apart from the rest of the arithmetic so that `preflight` (on the launch path) and `plan`
share one rule without `preflight` importing the catalog."""

from __future__ import annotations

import math

# the CUDA context and allocator slack vLLM takes before its free-memory check
START_SLACK_GIB = 0.5


def fraction_free(free_gib: float, total_gib: float) -> float:
    """The largest --gpu-memory-utilization the check passes with `free_gib` of `total_gib` free,
    rounded down to two places (0 where nothing is left)."""
    return max(0.0, math.floor((free_gib - START_SLACK_GIB) / (total_gib or 1.0) * 100 + 1e-9) / 100)
