"""`kvdoctor run [--preflight] [--wait S] -- vllm serve ARGS…`: launch, tee, diagnose live.

The child runs in its own process group: Ctrl-C and SIGTERM/SIGHUP reach kvdoctor, which
forwards them to the whole group (as a terminal would), keeps reading the child's last lines
and exits with the child's code (128 + N when signal N killed it). When a diagnosis has a
remedy that is one flag change, the corrected command line is printed to stderr.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from kvdoctor.commands._common import error, pick_lang
from kvdoctor.commands.preflight import (
    PreflightResult,
    Readiness,
    add_wait_arguments,
    render_text,
    wait_until_ready,
)
from kvdoctor.commands.watch import (
    Announcer,
    Passthrough,
    ReportSink,
    add_output_arguments,
    load_rules,
    open_sink,
    tee,
)
from kvdoctor.diagnosis.report import Report
from kvdoctor.exitcodes import EXIT_FINDING, EXIT_USAGE
from kvdoctor.live.fixcmd import ACTION_FLAGS, DEFAULT_UTILIZATION, apply_flag, correct_argv
from kvdoctor.live.stream import LiveDiagnoser
from kvdoctor.probe import FileProbe, GpuProbe, NvmlProbe, ProbeError, Snapshot
from kvdoctor.reader.vllmargs import parse_vllm_argv

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_arguments(parser)
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="check free GPU memory >= utilization × total before launching",
    )
    add_wait_arguments(
        parser,
        wait_default=None,
        wait_help="with preflight (implied): wait up to SECONDS for the GPUs to free",
        probe_file_help="preflight from a saved probe JSON or nvidia-smi text, not NVML",
    )
    parser.add_argument(
        "--require-gpu",
        action="store_true",
        help="implies --preflight; exit 2, not launching, if the GPU is unreadable",
    )
    parser.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the command to run, e.g. -- vllm serve MODEL --max-model-len 8192",
    )


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
    if not argv:
        error("run: no command given; add it after --, e.g. `kvdoctor run -- vllm serve MODEL`")
        return EXIT_USAGE
    if (args.wait is not None and args.wait < 0) or args.interval <= 0:
        error("run: --wait must be >= 0 and --interval > 0; fix the value")
        return EXIT_USAGE
    snapshot: Snapshot | None = None
    if args.preflight or args.wait is not None or args.require_gpu:
        refusal, snapshot = _preflight(args, argv)
        if refusal is not None:
            return refusal
    lang = pick_lang(args.lang)
    rules = load_rules(args.rules)
    sink = open_sink(args, lang, "run") if rules is not None else None
    if rules is None or sink is None:
        return EXIT_USAGE
    try:
        live = LiveDiagnoser(rules=rules, lang=lang, source=shlex.join(argv), probe=snapshot)
        return _launch(argv, live, Announcer(_emitter(sink, argv)))
    finally:
        sink.close()


def _launch(argv: list[str], live: LiveDiagnoser, announce: Announcer) -> int:
    with _Forwarder() as forwarder:  # installed first: a Ctrl-C during start-up is forwarded too
        try:
            child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            error(f"run: cannot start {argv[0]!r} ({exc.strerror or exc}); check it is installed and on PATH")
            return EXIT_USAGE
        assert child.stdout is not None  # stdout=PIPE guarantees it
        forwarder.attach(child.pid)
        with child.stdout:
            tee(child.stdout.fileno(), Passthrough.stdout(), live, announce)
        code = child.wait()
    return 128 - code if code < 0 else code


class _Forwarder:
    """Sends SIGINT/SIGTERM/SIGHUP we receive to the child's process group (its own, so the
    terminal's Ctrl-C reaches only us); a signal before the child exists waits for it."""

    def __init__(self) -> None:
        self._pgid: int | None = None
        self._pending: list[int] = []
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Forwarder:
        self._previous = {sig: signal.signal(sig, self._forward) for sig in FORWARDED}
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def attach(self, pgid: int) -> None:
        self._pgid = pgid
        for signum in self._pending:
            self._forward(signum, None)

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        if self._pgid is None:
            self._pending.append(signum)
            return
        try:
            os.killpg(self._pgid, signum)
        except ProcessLookupError:
            pass  # already gone; its exit code will tell


def _emitter(sink: ReportSink, argv: Sequence[str]) -> Callable[[Report], None]:
    def emit(report: Report) -> None:
        sink(report)
        if report.diagnoses:
            correction = correct_argv(argv, report.diagnoses[0].remedies)
            if correction is not None:
                _suggest(correction.action, correction.argv)

    return emit


def _suggest(why: str, argv: Sequence[str]) -> None:
    print(f"kvdoctor: corrected command ({why}):\n  {shlex.join(argv)}", file=sys.stderr, flush=True)


# ---- preflight ---------------------------------------------------------------------------


def _preflight(args: argparse.Namespace, argv: list[str]) -> tuple[int | None, Snapshot | None]:
    """(exit code when not launching, else None; the snapshot to diagnose with, if any)."""
    util = float(parse_vllm_argv(argv).get("gpu_memory_utilization", DEFAULT_UTILIZATION))
    try:
        result = wait_until_ready(
            _probe(args),
            util,
            timeout_s=args.wait or 0.0,
            interval_s=args.interval,
            on_poll=_waiting,
        )
    except ProbeError as exc:
        error(f"run: preflight: {exc}")
        return EXIT_USAGE, None
    if result.readiness is Readiness.UNAVAILABLE:
        if args.require_gpu:
            error(
                f"run: preflight: GPU unavailable ({result.reason}); not launching because of "
                "--require-gpu; drop it to launch without the check"
            )
            return EXIT_USAGE, None
        error(f"run: preflight: GPU unavailable ({result.reason}); launching without the check")
        return None, None
    if result.readiness is Readiness.NOT_READY:
        return _not_ready(result, argv, args.wait), None
    error(f"run: preflight: ready: {result.reason}")
    return None, result.snapshot


def _not_ready(result: PreflightResult, argv: list[str], waited: float | None) -> int:
    print(render_text(result), file=sys.stderr)
    if result.max_util_now is not None and result.max_util_now > 0:
        spec = ACTION_FLAGS["lower_gpu_memory_utilization"]
        _suggest("lower_gpu_memory_utilization", apply_flag(argv, spec, f"{result.max_util_now:g}"))
    hint = "wait longer with --wait S" if waited else "pass --wait S to wait for it"
    error(f"run: preflight: not launching, the GPU is not free enough; free it, {hint}, or drop --preflight")
    return EXIT_FINDING


def _probe(args: argparse.Namespace) -> GpuProbe:
    if args.probe_file:
        return FileProbe(Path(args.probe_file))
    return NvmlProbe(os.environ.get("CUDA_VISIBLE_DEVICES"))


def _waiting(result: PreflightResult) -> None:
    print(f"kvdoctor: run: preflight: waiting: {result.reason}", file=sys.stderr, flush=True)
