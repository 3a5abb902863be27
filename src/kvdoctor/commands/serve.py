"""`kvdoctor serve`: the HTTP API and the Slack backend under uvicorn (extra `server`)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from kvdoctor.commands._common import cache_dir, error
from kvdoctor.exitcodes import EXIT_OK, EXIT_USAGE

NEEDED = ("uvicorn", "starlette", "python_multipart", "prometheus_client", "slack_bolt", "slack_sdk", "aiohttp")
METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"
FACTORY = "kvdoctor.server.app:create_app_from_env"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="port (default: $KVDOCTOR_PORT or 8080)",
    )
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes")
    parser.add_argument(
        "--max-body",
        type=int,
        default=None,
        metavar="BYTES",
        help="refuse larger request bodies with 413 (default: $KVDOCTOR_MAX_BODY or 5 MiB)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="per-request diagnosis time limit (default: $KVDOCTOR_TIMEOUT_S or 30)",
    )
    parser.add_argument(
        "--log-content",
        action="store_true",
        help="include request bodies (log text) in the access log; off by default",
    )


def _missing() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def _export(args: argparse.Namespace) -> None:
    """Flags travel to worker processes through the environment the factory reads."""
    if args.max_body is not None:
        os.environ["KVDOCTOR_MAX_BODY"] = str(args.max_body)
    if args.timeout is not None:
        os.environ["KVDOCTOR_TIMEOUT_S"] = str(args.timeout)
    if args.log_content:
        os.environ["KVDOCTOR_LOG_CONTENT"] = "1"


def _port(args: argparse.Namespace) -> int:
    if args.port is not None:
        return int(args.port)
    raw = os.environ.get("KVDOCTOR_PORT") or "8080"
    if not raw.isdigit():
        raise ValueError(f"KVDOCTOR_PORT={raw!r} is not a port number; set it to e.g. 8080")
    return int(raw)


def log_config() -> dict[str, Any]:
    """One JSON access line per request on stderr (ours); uvicorn's own lines stay plain."""
    plain = {"format": "%(message)s"}
    stderr = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": plain, "server": {"format": "kvdoctor serve: %(message)s"}},
        "handlers": {
            "access": {**stderr, "formatter": "plain"},
            "server": {**stderr, "formatter": "server"},
        },
        "loggers": {
            "kvdoctor.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
            "kvdoctor.server": {"handlers": ["server"], "level": "INFO", "propagate": False},
            "uvicorn": {"handlers": ["server"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
        },
    }


def run(args: argparse.Namespace) -> int:
    missing = _missing()
    if missing:
        error(f"serve: {', '.join(missing)} not installed; pip install 'kvdoctor[server]'")
        return EXIT_USAGE
    if args.workers < 1:
        error("serve: --workers must be at least 1; pass --workers 1 or more")
        return EXIT_USAGE
    _export(args)
    from kvdoctor.server.app import config_from_env

    try:
        port = _port(args)
        config = config_from_env(os.environ)
    except ValueError as exc:
        error(f"serve: {exc}")
        return EXIT_USAGE
    from kvdoctor.diagnosis.rules import RuleLoadError, rules_for

    try:
        rules_for(cache_dir=cache_dir())
    except RuleLoadError as exc:
        print(str(exc), file=sys.stderr)
        error(f"serve: {len(exc.errors)} problem(s) in the rule files; fix them before serving")
        return EXIT_USAGE
    import uvicorn

    slack = "on at /slack/events" if config.slack is not None else "off (no SLACK_* settings)"
    print(f"kvdoctor: serving http://{args.host}:{port} (slack: {slack})", file=sys.stderr)
    try:
        with _shared_metrics(args.workers):
            _serve(uvicorn, args, port, config.timeout_s)
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind; it said why just above
        if exc.code:
            error(f"serve: could not serve on {args.host}:{port}; pick another --port")
            return EXIT_USAGE
    return EXIT_OK


@contextlib.contextmanager
def _shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, /metrics adds up all of them (prometheus-client's multiprocess mode,
    which needs a directory before the workers import it); a directory the user set is kept."""
    if workers < 2 or os.environ.get(METRICS_DIR):
        yield
        return
    path = tempfile.mkdtemp(prefix="kvdoctor-metrics-")
    os.environ[METRICS_DIR] = path
    try:
        yield
    finally:
        del os.environ[METRICS_DIR]
        shutil.rmtree(path, ignore_errors=True)


def _serve(uvicorn: Any, args: argparse.Namespace, port: int, timeout_s: float) -> None:
    uvicorn.run(
        FACTORY,
        factory=True,
        host=args.host,
        port=port,
        workers=args.workers,
        log_config=log_config(),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(timeout_s) + 10,
    )
