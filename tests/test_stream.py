"""LiveDiagnoser: reports as soon as the failure is known, attempt by attempt."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.live.stream import LiveDiagnoser

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def test_reports_when_the_error_arrives_not_at_close() -> None:
    live = LiveDiagnoser()
    lines = (CORPUS / "027-v1-laptop-4gb-free-memory-322of40.log").read_text().splitlines()
    error_at = next(i for i, line in enumerate(lines) if "Free memory on device" in line)
    seen_at = None
    for i, line in enumerate(lines):
        if live.feed(line) or live.flush():
            seen_at = seen_at if seen_at is not None else i
    assert seen_at is not None and seen_at <= error_at + 1
    assert live.close().verdict == "insufficient_free_memory_at_startup"


def test_a_second_attempt_is_reported_separately() -> None:
    live = LiveDiagnoser()
    reports = []
    log = [
        "INFO 01-01 [api_server.py:1] vLLM API server version 0.10.2",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
        "INFO 01-01 [api_server.py:1] vLLM API server version 0.10.2",
        "INFO 01-01 [gpu_worker.py:1] Available KV cache memory: 6.51 GiB",
        "INFO:     Application startup complete.",
    ]
    for line in log:
        reports += live.feed(line)
    reports += live.flush()
    assert [r.verdict for r in reports] == ["no_cache_blocks", "healthy"]
    assert live.close().exit_code() == 0


EXAMPLE = Path(__file__).parents[1] / "examples" / "second-instance-no-cache-blocks.log"


def test_the_readme_example_gets_one_diagnosis_whose_first_remedy_nothing_forbids() -> None:
    """The error line alone reads as a low fraction; the figures after it show another process.
    With no pause in between, only the decided diagnosis is reported."""
    live = LiveDiagnoser()
    reports = []
    for line in EXAMPLE.read_text().splitlines():
        reports += live.feed(line)
    final = live.close()
    reports.append(final)
    shown = {(r.verdict, r.diagnoses[0].rule) for r in reports}
    assert shown == {("no_cache_blocks", "no-cache-blocks-other-process")}
    assert final.diagnoses[0].remedies[0].action == "free_gpu_memory"


def test_a_report_a_later_line_overturns_says_what_it_supersedes() -> None:
    live = LiveDiagnoser()
    lines = EXAMPLE.read_text().splitlines()
    error_at = next(i for i, line in enumerate(lines) if "No available memory" in line)
    reports = []
    for i, line in enumerate(lines):
        reports += live.feed(line)
        if i == error_at:
            reports += live.flush()  # the stream paused right after the error line
    reports += live.flush()
    first, second = reports
    assert first.diagnoses[0].rule == "no-cache-blocks-utilization-too-low"
    assert second.diagnoses[0].rule == "no-cache-blocks-other-process"
    assert any("supersedes the report for this start-up" in n and "utilization-too-low" in n for n in second.notes)
    first_action = first.diagnoses[0].remedies[0].action
    assert first_action in [a.action for a in second.diagnoses[0].avoid]  # why it is marked superseded
