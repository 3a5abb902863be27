"""`kvdoctor run [--preflight] [--wait S] [--retry N] -- vllm serve ARGS…`: launch, tee, diagnose live.

The child runs in its own process group: Ctrl-C and SIGTERM/SIGHUP reach kvdoctor, which
forwards them to the whole group (as a terminal would), keeps reading the child's last lines
and exits with the child's code (128 + N when signal N killed it). When a diagnosis has a
remedy that is one flag change, the corrected command line is printed to stderr.

With ``--retry N`` a failed start-up whose first remedy is one sized flag change
(:mod:`kvdoctor.live.retry`) is relaunched with that flag changed, but only after the failed
server's whole process group has exited and (where the GPU can be read) its memory is free again:
a second server started before the first let go of the device fails the same way and makes the
fix look useless.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from kvdoctor._record import replace
from kvdoctor.commands._common import error, pick_lang, rules_or_error
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
    open_sink,
    tee,
)
from kvdoctor.diagnosis.report import Report
from kvdoctor.exitcodes import EXIT_FINDING, EXIT_USAGE
from kvdoctor.live.fixcmd import ACTION_FLAGS, DEFAULT_UTILIZATION, apply_flag, correct_argv
from kvdoctor.live.retry import Retry, plan_retry
from kvdoctor.live.stream import LiveDiagnoser
from kvdoctor.probe import FileProbe, GpuProbe, NvmlProbe, ProbeError, Snapshot
from kvdoctor.reader.vllmargs import parse_vllm_argv

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RETRY_WAIT_S = 120.0  # with --retry and no --wait: how long the failed server may take to let go


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
        "--retry",
        type=int,
        default=0,
        metavar="N",
        help="relaunch up to N times with the first remedy applied when it is one flag change "
        "(after the failed server has exited and released the GPU; --wait bounds the wait, default 120 s)",
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
    if args.retry < 0:
        error("run: --retry must be >= 0; give how many relaunches kvdoctor may make")
        return EXIT_USAGE
    snapshot: Snapshot | None = None
    if args.preflight or args.wait is not None or args.require_gpu or args.probe_file:
        refusal, snapshot = _preflight(args, argv)
        if refusal is not None:
            return refusal
    lang = pick_lang(args.lang)
    rules = rules_or_error(args.rules)
    sink = open_sink(args, lang, "run") if rules is not None else None
    if rules is None or sink is None:
        return EXIT_USAGE
    try:
        return _tries(args, argv, rules, lang, sink, snapshot)
    finally:
        sink.close()


def _tries(
    args: argparse.Namespace, argv: list[str], rules: Any, lang: str, sink: ReportSink, snapshot: Snapshot | None
) -> int:
    """Launch; while --retry allows and the diagnosis names one sized flag change, wait for the
    failed server to let go of the GPU and launch again with it. The exit code is the last child's."""
    tried: list[list[str]] = []
    note: str | None = None
    while True:
        live = LiveDiagnoser(rules=rules, lang=lang, source=shlex.join(argv), probe=snapshot)
        launch = _launch(argv, live, Announcer(_emitter(sink, argv, note)))
        tried.append(argv)
        if launch.final is None or launch.code == 0 or launch.interrupted or args.retry == 0:
            return launch.code
        if len(tried) > args.retry:
            error(f"run: not retrying: {args.retry} relaunch(es) made, as --retry allows")
            return launch.code
        plan = plan_retry(argv, launch.final, tried)
        if isinstance(plan, str):
            error(f"run: not retrying: {plan}")
            return launch.code
        if not _released(args, launch.pgid, plan):
            return launch.code
        note = plan.describe(len(tried), args.retry)
        print(f"kvdoctor: {note}", file=sys.stderr, flush=True)
        argv = plan.argv


@dataclass(frozen=True)
class _Launch:
    code: int  # the child's exit code (128 + N when signal N killed it)
    final: Report | None = None  # None: it never started
    pgid: int = 0
    interrupted: bool = False  # a signal was forwarded: the user stopped it


def _launch(argv: list[str], live: LiveDiagnoser, announce: Announcer) -> _Launch:
    with _Forwarder() as forwarder:  # installed first: a Ctrl-C during start-up is forwarded too
        try:
            child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            error(f"run: cannot start {argv[0]!r} ({exc.strerror or exc}); check it is installed and on PATH")
            return _Launch(EXIT_USAGE)
        assert child.stdout is not None  # stdout=PIPE guarantees it
        forwarder.attach(child.pid)
        with child.stdout:
            final = tee(child.stdout.fileno(), Passthrough.stdout(), live, announce)
        code = child.wait()
    return _Launch(128 - code if code < 0 else code, final, child.pid, forwarder.forwarded)


# ---- between tries -----------------------------------------------------------------------


def _released(args: argparse.Namespace, pgid: int, plan: Retry) -> bool:
    """Wait for every process of the failed server's group to exit, then (where NVML or a
    --probe-file can be read) for its GPUs to be free enough for the relaunch's fraction."""
    budget = RETRY_WAIT_S if args.wait is None else args.wait
    deadline = time.monotonic() + budget
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            error(
                f"run: not retrying: the failed server's processes (group {pgid}) are still running after "
                f"{budget:g} s; stop them, or wait longer with --wait S"
            )
            return False
        time.sleep(min(0.1, args.interval))
    util = float(parse_vllm_argv(plan.argv).get("gpu_memory_utilization", DEFAULT_UTILIZATION))
    try:
        result = wait_until_ready(
            _probe(args),
            util,
            timeout_s=max(0.0, deadline - time.monotonic()),
            interval_s=args.interval,
            on_poll=_waiting,
        )
    except ProbeError as exc:
        error(f"run: retry: cannot read the GPU ({exc}); relaunching without the memory check")
        return True
    if result.readiness is Readiness.NOT_READY:
        print(render_text(result), file=sys.stderr)
        error(
            "run: not retrying: the GPU memory is still held after the failed server exited; "
            "free it, or wait longer with --wait S"
        )
        return False
    return True  # ready, or the GPU cannot be read here (no NVML): the process group is gone


def _group_alive(pgid: int) -> bool:
    _reap()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # the group id now belongs to someone else's processes
    return True


def _reap() -> None:
    """Collect exited orphans of the group re-parented to us (kvdoctor as PID 1 in a container)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class _Forwarder:
    """Sends SIGINT/SIGTERM/SIGHUP we receive to the child's process group (its own, so the
    terminal's Ctrl-C reaches only us); a signal before the child exists waits for it."""

    def __init__(self) -> None:
        self._pgid: int | None = None
        self.forwarded = False  # a signal reached the child: the user stopped it, no retry
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
        self.forwarded = True
        if self._pgid is None:
            self._pending.append(signum)
            return
        try:
            os.killpg(self._pgid, signum)
        except ProcessLookupError:
            pass  # already gone; its exit code will tell


def _emitter(sink: ReportSink, argv: Sequence[str], note: str | None = None) -> Callable[[Report], None]:
    """Each report to the sink (marked with the retry that launched it), then the corrected command."""

    def emit(report: Report) -> None:
        sink(replace(report, notes=(*report.notes, f"kvdoctor run: {note}")) if note else report)
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
