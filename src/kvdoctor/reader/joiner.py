"""Stage 1b: physical lines -> logical lines.

Pastes break records apart: shell commands continued with a trailing backslash, and exception
messages re-wrapped over several lines by whoever pasted them (corpus 075, 093, 042). This stage
joins them back, keeping the first line's number, with one line of look-ahead (so it streams).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from kvdoctor._record import replace
from kvdoctor.reader.lines import Line

MAX_JOIN = 8
MAX_COMMAND_JOIN = 64
WRAP_WIDTH = 100  # a physical line at least this long that ends mid-token was cut by a terminal
TERMINAL_WIDTH = 80  # ... or one exactly as long as the classic terminal
_EXC_START = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Interrupt)|AssertionError)\b:\s")
# A line that starts a new record rather than continuing the message above it.
_NEW_RECORD = re.compile(
    r"^\s*(?:$|Traceback|File \"|During handling|The above exception|\[|\(|\$ |#|\||[│╭╰]|`{3}|~{3}|"
    r"[\w.]+(?:Error|Exception|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|\d{4}-\d\d-\d\d|"
    r"\d\d-\d\d |Process \S+:$|\S+:$|[+=-]{3})"
)
# Sentences vLLM prints on one line that pastes and log viewers split (corpus 075; the 0.26+
# start-up summary split after "on startup.").
_KNOWN_CONTINUATION = re.compile(
    r"^\s*(?:Desired GPU memory utilization is|Actual usage (?:is|:)|Replace gpu_memory_utilization|"
    r"Based on the available memory|the estimated maximum model length|Current kv cache memory|"
    # the max-len error re-wrapped before its "(X GiB KV cache is needed" part
    r"\(\d+(?:\.\d+)? GiB KV cache is needed|Try increasing `gpu_memory_utilization`|"
    # the start-up check re-wrapped ("… on startup is less" / "than desired GPU memory utilization …")
    r"(?:is less )?than desired GPU memory utilization|on startup is less than desired)"
)
_WRAP_START = re.compile(r"^[a-z0-9_./)\]},'\"-]")
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")  # a Kubernetes/glog record header (peeled off the text)


def _finished(previous: Line, line: Line) -> bool:
    """The message above ended a sentence and this line starts in lower case: another program's
    line (a wrapper's goodbye), not the rest of the message (a wrapped sentence goes on mid-way,
    and a new sentence starts with a capital)."""
    return previous.text.rstrip()[-1:] in (".", "!", "?") and line.text.lstrip()[:1].islower()


def _terminal_wrap(previous: Line, line: Line) -> bool:
    """The previous physical line was cut at the terminal width in the middle of a token."""
    # (at exactly 80 columns only inside an exception message or an open parenthesis: many a short
    # record is 80 characters long by chance)
    at_80 = len(previous.raw) == TERMINAL_WIDTH and (
        bool(_EXC_START.match(previous.text)) or previous.raw.count("(") > previous.raw.count(")")
    )
    cut = len(previous.raw) >= WRAP_WIDTH or at_80
    return cut and previous.raw[-1:].isalnum() and bool(_WRAP_START.match(line.raw))


def _continues(previous: Line, line: Line, joined: int) -> bool:
    if line.origin.level is not None or _KLOG.match(line.raw):
        return False  # a new vLLM (or Kubernetes) record
    if previous.text.endswith("\\"):
        return joined < MAX_COMMAND_JOIN
    if joined >= MAX_JOIN or not line.text.strip():
        return False
    if line.origin.proc is not None and line.origin.proc != previous.origin.proc:
        return False
    if _KNOWN_CONTINUATION.match(line.text):
        return True
    if _terminal_wrap(previous, line) and not _NEW_RECORD.match(line.text):
        return True
    if not _EXC_START.match(previous.text):
        return False
    if line.raw[:1] in (" ", "\t") or _NEW_RECORD.match(line.text) or _finished(previous, line):
        return False
    return len(previous.text) < 4000


def _join(previous: Line, line: Line) -> Line:
    if previous.text.endswith("\\"):
        return replace(previous, text=f"{previous.text[:-1].rstrip()} {line.text.strip()}", raw=line.raw)
    glue = "" if _terminal_wrap(previous, line) else " "
    return replace(
        previous,
        text=f"{previous.text.rstrip() if glue else previous.text.rstrip()}{glue}{line.text.strip()}",
        raw=line.raw,
    )


def join_lines(lines: Iterable[Line]) -> Iterator[Line]:
    pending: Line | None = None
    joined = 0
    for line in lines:
        if pending is not None and _continues(pending, line, joined):
            pending = _join(pending, line)
            joined += 1
            continue
        if pending is not None:
            yield pending
        pending, joined = line, 0
    if pending is not None:
        yield pending


class Joiner:
    """The push form of :func:`join_lines`, for live streams."""

    def __init__(self) -> None:
        self._pending: Line | None = None
        self._joined = 0

    def push(self, line: Line) -> list[Line]:
        if self._pending is not None and _continues(self._pending, line, self._joined):
            self._pending = _join(self._pending, line)
            self._joined += 1
            return []
        out = [self._pending] if self._pending is not None else []
        self._pending, self._joined = line, 0
        return out

    def flush(self) -> list[Line]:
        out = [self._pending] if self._pending is not None else []
        self._pending, self._joined = None, 0
        return out
