"""Stage 1b: physical lines -> logical lines.

Pastes break records apart: shell commands continued with a trailing backslash, and exception
messages re-wrapped over several lines by whoever pasted them (corpus 075, 093, 042). This stage
joins them back, keeping the first line's number, with one line of look-ahead (so it streams).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from kvdoctor.lines import Line

MAX_JOIN = 8
MAX_COMMAND_JOIN = 64
_EXC_START = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Interrupt)|AssertionError)\b:\s")
# A line that starts a new record rather than continuing the message above it.
_NEW_RECORD = re.compile(
    r"^\s*(?:$|Traceback|File \"|During handling|The above exception|\[|\(|\$ |#|\||[│╭╰]|"
    r"[\w.]+(?:Error|Exception|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|\d{4}-\d\d-\d\d|"
    r"\d\d-\d\d |Process \S+:$|\S+:$|[+=-]{3})"
)


def _continues(previous: Line, line: Line, joined: int) -> bool:
    if line.origin.level is not None:
        return False
    if previous.text.endswith("\\"):
        return joined < MAX_COMMAND_JOIN
    if joined >= MAX_JOIN:
        return False
    if not _EXC_START.match(previous.text):
        return False
    if line.origin != previous.origin and line.origin.proc != previous.origin.proc:
        return False
    if line.raw[:1] in (" ", "\t") or _NEW_RECORD.match(line.text):
        return False
    return len(previous.text) < 4000


def _join(previous: Line, line: Line) -> Line:
    left = previous.text[:-1].rstrip() if previous.text.endswith("\\") else previous.text.rstrip()
    return replace(previous, text=f"{left} {line.text.strip()}")


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
