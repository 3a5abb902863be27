"""Where the per-file function runs: the registry of engines and what they share.

An engine takes the targets (a lazy iterator), the rules loaded once by the caller and the
settings, and yields one `FileRecord` per target as results arrive, in any order. It keeps a
bounded number of batches in flight, so a scan of a million files holds a few thousand names at
once, never the whole list; an engine's generator, closed early (^C), stops its workers."""

from __future__ import annotations

import importlib
import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from kvdoctor.diagnosis.rules import Rule
from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.targets import Target
from kvdoctor.fleet.worker import Settings

# name -> module whose `run` is the engine. A literal you can grep; `ray` is imported only for "ray".
ENGINES: dict[str, str] = {
    "local": "kvdoctor.fleet.engine_local",
    "ray": "kvdoctor.fleet.engine_ray",
}

BATCH = 8  # files per task: amortises the hand-off (~0.1 ms local, ~1 ms Ray) over ~2 ms of work each
BATCH_BYTES = 1 << 20  # ... unless they are big: a file of 1 MiB or more goes alone, so big ones spread


class EngineError(Exception):
    """The engine cannot run here (Ray missing, unreachable cluster); one line with the fix."""


@dataclass(frozen=True)
class Job:
    rules: tuple[Rule, ...]
    settings: Settings
    jobs: int  # worker processes (local) or CPUs of a Ray started here
    ray_address: str | None = None  # None: start a local Ray (unless one is already initialised)


class Engine(Protocol):
    def __call__(self, targets: Iterable[Target], job: Job) -> Generator[FileRecord, None, None]: ...


def engine(name: str) -> Engine:
    run: Engine = importlib.import_module(ENGINES[name]).run
    return run


def batches(targets: Iterable[Target], size: int = BATCH, max_bytes: int = BATCH_BYTES) -> Iterator[Sequence[Target]]:
    batch: list[Target] = []
    weight = 0
    for target in targets:
        batch.append(target)
        weight += _size(target)
        if len(batch) >= size or weight >= max_bytes:
            yield tuple(batch)
            batch, weight = [], 0
    if batch:
        yield tuple(batch)


def _size(target: Target) -> int:
    """A local file's size (one stat); 0 for a URL or a file that is gone (its worker says why)."""
    if target.is_url or target.error is not None:
        return 0
    try:
        return os.stat(target.location).st_size
    except OSError:
        return 0
