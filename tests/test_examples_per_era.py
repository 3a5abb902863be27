"""Every era's synthesized start-up (shared/reference/vllm-log-formats.examples.txt, copied into
fixtures): every line that carries a figure or an error becomes an event, and each variant gets
the verdict its heading names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvdoctor.api import diagnose
from kvdoctor.reader.events import extract
from kvdoctor.reader.joiner import join_lines
from kvdoctor.reader.lines import normalise

EXAMPLES = Path(__file__).parent / "fixtures" / "vllm-log-formats.examples.txt"
_FIGURE = re.compile(
    r"\d[\d.,]*\s?(GiB|GB|MiB|Gib)|blocks:|tokens per request|KV cache size|Error:|"
    r"out of memory|max seq len|version \d|with config:|args:",
    re.I,
)


def _lines() -> list[str]:
    # the file writes raw ESC bytes as the four characters "\x1b"
    return EXAMPLES.read_text(encoding="utf-8").replace("\\x1b", "\x1b").splitlines()


def _sections() -> list[tuple[str, str, str]]:
    """(era heading, variant tag, log text) for every [SUCCESS]/[FAIL-x] block."""
    out, era, tag, body = [], "", None, []
    for line in _lines():
        if line.startswith("== ") and re.match(r"== \d", line):
            era = line.split()[1]
        elif line.startswith("[") and not line.startswith("[rank"):
            if tag is not None:
                out.append((era, tag, "\n".join(body)))
            tag, body = line, []
        elif line.startswith("====="):
            if tag is not None:
                out.append((era, tag, "\n".join(body)))
            tag, body = None, []
        elif tag is not None and not line.startswith("#"):
            body.append(line)
    if tag is not None:
        out.append((era, tag, "\n".join(body)))
    return out


def test_every_figure_or_error_line_becomes_an_event() -> None:
    lines = _lines()
    found = {line.number for line in join_lines(normalise(lines)) if extract(line)}
    missed = []
    for number, text in enumerate(lines, 1):
        if text.startswith(("#", "==", "[SUCCESS", "[FAIL", "[TP")) or "…" in text or "[elided" in text:
            continue
        if text.strip().startswith("raise ") or "(same shape)" in text or text.endswith("->"):
            continue
        if _FIGURE.search(text) and number not in found:
            missed.append(f"{number}: {text[:120]}")
    assert missed == []


def _expected(tag: str) -> tuple[str, str | None] | None:
    t = tag.lower()
    if t.startswith("[success"):
        return "healthy", None
    if "profiling" in t and "assert" in t or "sanity" in t:
        return "other", None
    if re.search(r"\boom\b", t):
        phase = (
            "weight_loading"
            if "weights" in t
            else "cuda_graph_capture"
            if "capture" in t
            else "profile_run"
            if "profiling" in t
            else None
        )
        return "cuda_oom", phase
    if "max_model_len" in t:
        return "max_model_len_too_large", None
    if "free-memory check" in t or "another process" in t:
        return "insufficient_free_memory_at_startup", None
    if any(k in t for k in ("no room", "no blocks", "no cache", "available <= 0", "negative", "no memory")):
        return "no_cache_blocks", None
    return None


CASES = [(era, tag, text) for era, tag, text in _sections() if _expected(tag) is not None]


@pytest.mark.parametrize(("era", "tag", "text"), CASES, ids=[f"{e}:{t[:40]}" for e, t, _ in CASES])
def test_variant_verdict(era: str, tag: str, text: str) -> None:
    klass, phase = _expected(tag)  # type: ignore[misc]
    report = diagnose(text)
    assert report.verdict == klass, report.diagnoses[0].rule if report.diagnoses else "no diagnosis"
    # a lone OOM line does not say where it happened; the phase is checked where the log shows
    # it (traceback frames, a phase marker, or CUDA-graph private pools in the OOM text)
    if phase is not None and (len(text.strip().splitlines()) > 1 or "private pools" in text):
        assert report.diagnoses[0].phase == phase
