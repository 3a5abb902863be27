"""`--engine ray`: the same per-file function as Ray tasks, on a cluster or on a Ray started here.

The rules go into the object store once (`ray.put`); each worker process fetches them on its
first task and keeps them, so a task carries only its batch of names. At most `WINDOW` batches
per cluster CPU are in flight. On a cluster the workers open the files themselves: give bucket
URLs (or paths on a volume every node mounts), and install kvdoctor in the workers' image or
runtime environment (docs/scan.md). Ray is imported here only, and only for this engine."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any

from kvdoctor.diagnosis.rules import Rule
from kvdoctor.fleet.engines import EngineError, Job, batches
from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.targets import Target
from kvdoctor.fleet.worker import Settings, scan_batch

WINDOW = 4  # batches in flight per CPU of the cluster
REACH_TIMEOUT_S = 5.0
RAY_EXTRA = "pip install 'kvdoctor[ray]'"

_cached: dict[str, Sequence[Rule]] = {}  # in a Ray worker process: the rules of the object ref seen last


def _work(batch: Sequence[Target], boxed_rules: list[Any], settings: Settings) -> list[FileRecord]:
    import ray

    # the ref is boxed in a list so that Ray passes the ref itself, not 128 KB of rules per task
    ref = boxed_rules[0]
    key = ref.hex()
    if key not in _cached:
        _cached.clear()
        _cached[key] = ray.get(ref)
    return scan_batch(batch, _cached[key], settings)


def _check_reachable(address: str) -> None:
    """Ray retries an unreachable GCS for minutes, printing warnings; a TCP probe says it at once."""
    match = re.fullmatch(r"(?:ray://)?\[?([\w.:-]+?)\]?:(\d+)", address)
    if match is None:  # "auto", "local", a name Ray resolves itself
        return
    try:
        socket.create_connection((match.group(1), int(match.group(2))), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise EngineError(
            f"--engine ray: cannot reach the Ray cluster at {address} ({exc.strerror or exc}); "
            "check --ray-address / RAY_ADDRESS (HOST:6379, or ray://HOST:10001), or drop them to start a local Ray"
        ) from None


def _connect(ray: Any, job: Job) -> bool:
    """Connect or start; True when this call started (and so must stop) Ray."""
    if ray.is_initialized():
        return False
    if job.ray_address:
        _check_reachable(job.ray_address)
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if job.ray_address:
            ray.init(address=job.ray_address, **quiet)
        else:
            ray.init(num_cpus=job.jobs, include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = job.ray_address or "a local Ray"
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EngineError(
            f"--engine ray: cannot connect to {where} ({why}); "
            "check --ray-address / RAY_ADDRESS, or drop them to start a local Ray"
        ) from None
    return True


def run(targets: Iterable[Target], job: Job) -> Generator[FileRecord, None, None]:
    try:
        import ray
    except ImportError:
        raise EngineError(f"--engine ray needs Ray; {RAY_EXTRA}, or use --engine local") from None
    started = _connect(ray, job)
    task = ray.remote(num_cpus=1, max_retries=1)(_work)
    boxed = [ray.put(list(job.rules))]
    resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    window = max(1, int(resources.get("CPU", job.jobs))) * WINDOW
    pending: list[Any] = []
    try:
        for batch in batches(targets):
            pending.append(task.remote(batch, boxed, job.settings))
            if len(pending) >= window:
                done, pending = ray.wait(pending, num_returns=1)
                yield from _records(ray, done)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield from _records(ray, done)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _records(ray: Any, done: Sequence[Any]) -> Iterator[FileRecord]:
    for ref in done:
        yield from ray.get(ref)
