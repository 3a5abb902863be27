"""`vllm serve … 2>&1 | kvdoctor watch`: pass the log through untouched, diagnose it as it arrives.

stdout stays the log (byte for byte, flushed as soon as bytes arrive); diagnoses go to stderr
or to ``--report F`` the moment an attempt's outcome is known, not when the stream closes.
:func:`tee` is shared with ``kvdoctor run``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from kvdoctor.commands._common import (
    add_lang_argument,
    add_rules_argument,
    error,
    pick_lang,
    rules_or_error,
    text_width,
    use_color,
)
from kvdoctor.diagnosis.report import Report
from kvdoctor.exitcodes import EXIT_INTERRUPTED, EXIT_USAGE
from kvdoctor.live.stream import LiveDiagnoser
from kvdoctor.render import FORMATS, render

QUIET_S = 0.3  # LiveDiagnoser holds the last line back to join wrapped messages; flush after this
CHUNK = 65536
MAX_LINE = 1 << 20  # a line longer than this (no newline in sight) is diagnosed in pieces
QUEUE_CHUNKS = 256  # back-pressure: at most this many unread chunks are held in memory


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `watch` and `run`."""
    parser.add_argument(
        "--report",
        metavar="F",
        help="write diagnoses to F instead of stderr (F is truncated at start)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="format of each diagnosis; json writes one JSON object per line",
    )
    add_lang_argument(parser)
    add_rules_argument(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_arguments(parser)
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "never"),
        default="error",
        help="exit 1 at EOF when the last attempt's diagnosis is this severe",
    )


# ---- the tee loop ------------------------------------------------------------------------


class LineSplitter:
    """Bytes in arbitrary chunks -> complete lines (without the newline), bounded memory."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def push(self, chunk: bytes) -> list[bytes]:
        self._partial += chunk
        *lines, rest = bytes(self._partial).split(b"\n")
        self._partial = bytearray(rest)
        if len(self._partial) > MAX_LINE:  # a runaway line: diagnose what we have
            lines.append(bytes(self._partial))
            self._partial.clear()
        return lines

    def rest(self) -> list[bytes]:
        tail, self._partial = bytes(self._partial), bytearray()
        return [tail] if tail else []


def _reader(fd: int, chunks: queue.Queue[bytes | None]) -> None:
    # Keep asynchronous signals (Ctrl-C, SIGTERM) on the main thread, where Python runs the
    # handlers `kvdoctor run` installs; this thread only copies bytes.
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        while True:
            data = os.read(fd, CHUNK)
            if not data:
                break
            chunks.put(data)
    except OSError:
        pass  # the writer went away mid-read: treat as EOF
    finally:
        chunks.put(None)


@dataclass
class Passthrough:
    """Writes the log to a stream (bytes as they came; text streams get it decoded); stops, but
    keeps diagnosing, when whoever read our stdout has gone (`… | kvdoctor watch | head`)."""

    stream: IO[Any]
    broken: bool = False

    @classmethod
    def stdout(cls) -> Passthrough:
        sys.stdout.flush()
        return cls(getattr(sys.stdout, "buffer", sys.stdout))

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            if isinstance(self.stream, io.TextIOBase):
                self.stream.write(data.decode("utf-8", "replace"))
            else:
                self.stream.write(data)
            self.stream.flush()
        except BrokenPipeError:
            self.broken = True
            self._silence()

    def _silence(self) -> None:
        try:  # the interpreter's final flush of stdout would raise again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass


@dataclass
class Announcer:
    """Emits each new report once; remembers what was last shown."""

    emit: Callable[[Report], None]
    shown: set[tuple[int, str, str]] = field(default_factory=set)

    def __call__(self, reports: list[Report]) -> None:
        for report in reports:
            key = _key(report)
            if key not in self.shown:
                self.shown.add(key)
                self.emit(report)


def _key(report: Report) -> tuple[int, str, str]:
    index = report.attempts[-1].index if report.attempts else -1
    rule = report.diagnoses[0].rule if report.diagnoses else ""
    return index, report.verdict, rule


def tee(fd: int, out: Passthrough, live: LiveDiagnoser, announce: Announcer) -> Report:
    """Copy fd to `out` as bytes arrive, feed complete lines to `live`, announce its reports;
    return the final report at EOF (announced too if it says something new)."""
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE_CHUNKS)
    threading.Thread(target=_reader, args=(fd, chunks), daemon=True, name="kvdoctor-tee").start()
    splitter = LineSplitter()
    while True:
        try:
            data = chunks.get(timeout=QUIET_S)
        except queue.Empty:  # the stream paused: release the held-back line
            announce(live.flush())
            continue
        if data is None:
            break
        out.write(data)
        for line in splitter.push(data):
            announce(live.feed(line))
    for line in splitter.rest():
        announce(live.feed(line))
    final = live.close()
    announce([final])
    return final


# ---- where diagnoses go ------------------------------------------------------------------


class ReportSink:
    """stderr or a file; one rendered report per call, flushed at once."""

    def __init__(self, path: str | None, fmt: str, lang: str) -> None:
        self.fmt, self.lang = fmt, lang
        self._file: IO[str] = open(path, "w", encoding="utf-8") if path else sys.stderr
        self._color = path is None and fmt == "text" and use_color(sys.stderr)
        self._count = 0

    def __call__(self, report: Report) -> None:
        self.write(self.rendered(report))

    def rendered(self, report: Report) -> str:
        if self.fmt == "json":
            return json.dumps(report.as_records(), ensure_ascii=False) + "\n"
        width = text_width(sys.stderr) if self._file is sys.stderr else None
        text = render(report, self.fmt, lang=self.lang, color=self._color, width=width)
        sep = "" if self._count == 0 else "\n"
        return f"{sep}{text}"

    def write(self, text: str) -> None:
        self._count += 1
        self._file.write(text)
        self._file.flush()

    def close(self) -> None:
        if self._file is not sys.stderr:
            self._file.close()


def open_sink(args: argparse.Namespace, lang: str, where: str) -> ReportSink | None:
    try:
        return ReportSink(args.report, args.format, lang)
    except OSError as exc:
        error(
            f"{where}: cannot write --report {args.report} ({exc.strerror or exc}); "
            "check the directory exists and is writable"
        )
        return None


def run(args: argparse.Namespace) -> int:
    lang = pick_lang(args.lang)
    rules = rules_or_error(args.rules)
    if rules is None:
        return EXIT_USAGE
    sink = open_sink(args, lang, "watch")
    if sink is None:
        return EXIT_USAGE
    live = LiveDiagnoser(rules=rules, lang=lang, source="<stdin>")
    try:
        final = tee(sys.stdin.fileno(), Passthrough.stdout(), live, Announcer(sink))
    except KeyboardInterrupt:
        Announcer(sink)([live.close()])
        return EXIT_INTERRUPTED
    finally:
        sink.close()
    return final.exit_code(args.fail_on)
