"""The default engine: a process pool on this machine (`--jobs N`), or this process (`--jobs 1`).

Each worker receives the rules once, when it starts (the pool's initializer), not with every
task. Batches are submitted while at most `WINDOW` per worker are in flight, and records are
yielded as batches complete, so memory stays flat however many files there are. Workers ignore
SIGINT: ^C reaches the parent, which stops submitting and cancels what has not started."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.context import BaseContext

from kvdoctor.diagnosis.rules import Rule
from kvdoctor.fleet.engines import Job, batches
from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.targets import Target
from kvdoctor.fleet.worker import Settings, scan_batch, scan_file

WINDOW = 4  # batches in flight per worker: enough that none waits for the parent

_rules: Sequence[Rule] = ()
_settings = Settings()


def _start_worker(rules: Sequence[Rule], settings: Settings) -> None:
    global _rules, _settings
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _rules, _settings = rules, settings


def _work(batch: Sequence[Target]) -> list[FileRecord]:
    return scan_batch(batch, _rules, _settings)


def run(targets: Iterable[Target], job: Job) -> Generator[FileRecord, None, None]:
    if job.jobs <= 1:
        for target in targets:
            yield scan_file(target, job.rules, job.settings)
        return
    pool = ProcessPoolExecutor(
        max_workers=job.jobs, mp_context=_context(), initializer=_start_worker, initargs=(job.rules, job.settings)
    )
    pending: set[Future[list[FileRecord]]] = set()
    finished = False
    try:
        for batch in batches(targets):
            pending.add(pool.submit(_work, batch))
            if len(pending) >= job.jobs * WINDOW:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from _records(done)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from _records(done)
        finished = True
    finally:
        # interrupted or closed early: what has not started is cancelled, and nobody waits for the rest
        pool.shutdown(wait=finished, cancel_futures=True)


def _context() -> BaseContext:
    """fork where there is one: a worker starts in ~5 ms with kvdoctor already imported, and, unlike
    spawn or forkserver (Python 3.14's default), it does not re-run the caller's main module, which
    a script or notebook calling the API would not have guarded with `if __name__ == "__main__"`."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _records(done: Iterable[Future[list[FileRecord]]]) -> Iterator[FileRecord]:
    for future in done:
        yield from future.result()
