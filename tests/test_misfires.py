"""Hand-built logs on which a new reading once misfired (a review of round 27-29's readings): each
holds the answer a user should see, so the reading cannot widen again unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.api import diagnose

HERE = Path(__file__).parent / "fixtures" / "misfires"

CASES = {
    # docker's json-file log: vLLM on stdout, uvicorn on stderr; the stream names no service
    "docker_json_stop.log": ("healthy", "healthy", None),
    # vLLM's own ZeroMQ socket is not the network; `KeyboardInterrupt: terminated` is a SIGTERM
    "zmq_sigterm.log": ("other", "other-interrupted", "collect_more_log"),
    # HAMi prints routine ERROR lines: only its refusal of a device is the environment
    "hami_incomplete.log": ("healthy", "healthy", None),
    # rank 0's weights are in; rank 1's OOM is its own weight loading
    "v0_tp2_rank1_load_oom.log": ("cuda_oom", "cuda-oom-weight-loading", "increase_tensor_parallel_size"),
    # a bare error above a start-up that then stalls is not that start-up's failure
    "fold_stall2.log": ("other", "start-up-stalled", "collect_more_log"),
    # a misspelt vLLM argument is a setting, not the environment
    "kwarg.log": ("other", "other-non-memory-failure", "fix_config"),
    # a Tenstorrent L1 (on-chip SRAM) buffer is not the card's memory
    "tt_l1.log": ("other", "other-unrecognised-failure", "collect_more_log"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_reading_does_not_misfire(name: str) -> None:
    report = diagnose(HERE / name)
    top = report.diagnoses[0]
    first = top.remedies[0].action if top.remedies else None
    assert (report.verdict, top.rule, first) == CASES[name]
