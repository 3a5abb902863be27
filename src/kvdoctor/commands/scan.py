"""`kvdoctor scan PATH…`: diagnose every log in folders, globs or buckets, in parallel, and
summarise the fleet: which failures, on which models, cards and vLLM releases, and what fixes them."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TextIO

from kvdoctor.commands._common import (
    add_lang_argument,
    add_rules_argument,
    error,
    pick_lang,
    rules_or_error,
    text_width,
    use_color,
)
from kvdoctor.exitcodes import EXIT_INTERRUPTED, EXIT_USAGE
from kvdoctor.fleet.engines import ENGINES, EngineError, Job, engine
from kvdoctor.fleet.formats import FORMATS, open_sink
from kvdoctor.fleet.summary import Tally
from kvdoctor.fleet.targets import BucketError, check_urls, expand
from kvdoctor.fleet.worker import Settings


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number of workers, at least 1 (not {text!r})")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="log files, folders (read recursively), globs, .gz; s3:// gs:// … with `pip install 'kvdoctor[buckets]'`",
    )
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of stdout")
    parser.add_argument(
        "--jobs", "-j", type=_jobs, default=None, metavar="N", help="worker processes (default: the cores)"
    )
    parser.add_argument("--engine", choices=tuple(ENGINES), default="local", help="local process pool, or Ray")
    parser.add_argument(
        "--ray-address", metavar="ADDR", help="Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray)"
    )
    parser.add_argument("--fail-on", choices=("error", "warning", "never"), default="error")
    add_lang_argument(parser)
    add_rules_argument(parser)


def _job(args: argparse.Namespace) -> Job | None:
    rules = rules_or_error(args.rules)
    if rules is None:
        return None
    return Job(
        rules=tuple(rules),
        settings=Settings(lang=pick_lang(args.lang), fail_on=args.fail_on),
        jobs=args.jobs or _cores(),
        ray_address=args.ray_address or os.environ.get("RAY_ADDRESS") or None,
    )


@contextlib.contextmanager
def _first_interrupt_stops(stop: threading.Event) -> Iterator[None]:
    """The first ^C ends the scan after the record in hand, so that every file counted in the
    summary was also written out; a second ^C aborts at once (exit 130, no summary)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(signum: int, frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(args: argparse.Namespace) -> int:
    if "-" in args.paths:
        error("scan: reads files, folders and URLs, not stdin; use `kvdoctor diagnose -` for a pipe")
        return EXIT_USAGE
    try:
        check_urls(args.paths)
    except BucketError as exc:
        error(str(exc))
        return EXIT_USAGE
    job = _job(args)
    if job is None:
        return EXIT_USAGE
    if args.output is None:
        return _scan(args, job, sys.stdout)
    try:
        out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below, after the scan
    except OSError as exc:
        error(f"{args.output}: cannot write ({exc.strerror}); check the path")
        return EXIT_USAGE
    with out:
        return _scan(args, job, out)


def _scan(args: argparse.Namespace, job: Job, out: TextIO) -> int:
    color = args.output is None and args.format == "text" and use_color()
    sink = open_sink(args.format, out, color=color, width=(text_width() if args.output is None else None) or 100)
    tally = Tally()
    stop = threading.Event()
    exclude = [args.output] if args.output else []
    records = engine(args.engine)(expand(args.paths, exclude=exclude), job)
    try:
        with _first_interrupt_stops(stop), contextlib.closing(records):  # closing stops the workers
            for record in records:
                tally.add(record)
                sink.add(record)
                if stop.is_set():
                    break
    except KeyboardInterrupt:  # a ^C that came another way (a library's own handler)
        stop.set()
    except EngineError as exc:
        error(str(exc))
        return EXIT_USAGE
    interrupted = stop.is_set()
    summary = tally.summary(interrupted=interrupted)
    sink.finish(summary)
    if summary.unreadable:
        error(
            f"scan: {summary.unreadable} of {summary.files} file(s) could not be diagnosed "
            "(not fully readable, or no vLLM start-up in them); their `error` says why"
        )
    return EXIT_INTERRUPTED if interrupted else summary.exit_code
