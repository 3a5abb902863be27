"""What the server tells its operators: one JSON access-log line per request, and Prometheus metrics.

Both come from one ASGI middleware that sits outside the routes, so every answer is counted,
404s and 413s included. Endpoints add what only they know (the verdict, the Slack outcome, the
body) to the request's :class:`Exchange`, found in the ASGI scope under ``EXCHANGE_KEY``.

Metrics live in a registry per app (tests build many apps in one process). With several worker
processes, prometheus-client's multiprocess mode adds them up: ``PROMETHEUS_MULTIPROC_DIR``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

AccessLog = Callable[[dict[str, Any]], None]

EXCHANGE_KEY = "kvdoctor.exchange"
CONTENT_LOG_CHARS = 65536
OTHER_ROUTE = "other"  # unknown paths share one label, so a scanner cannot grow the series
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BYTES_BUCKETS = tuple(float(4**n * 256) for n in range(10))  # 256 B … 64 MiB

ACCESS_LOGGER = logging.getLogger("kvdoctor.access")


@dataclass
class Exchange:
    """What the access log needs about one request; filled while it is answered."""

    method: str
    path: str
    status: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    content: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def exchange_of(request: Request) -> Exchange:
    """The request's exchange; a detached one when the app runs without the middleware."""
    found = request.scope.get(EXCHANGE_KEY)
    return found if isinstance(found, Exchange) else Exchange(request.method, request.url.path)


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    request_bytes: Histogram
    diagnoses: Counter
    slack_events: Counter
    multiprocess_dir: str | None = None

    def render(self) -> bytes:
        """The text exposition format; all workers' figures in multiprocess mode."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(merged)


def new_metrics(*, multiprocess_dir: str | None = None) -> Metrics:
    registry = CollectorRegistry()
    if multiprocess_dir is None:  # per-process figures mean nothing summed over workers
        ProcessCollector(namespace="kvdoctor", registry=registry)
    return Metrics(
        registry=registry,
        requests=Counter(
            "kvdoctor_http_requests",
            "HTTP requests answered, by route, method and status.",
            ["route", "method", "status"],
            registry=registry,
        ),
        latency=Histogram(
            "kvdoctor_http_request_duration_seconds",
            "Time from the request's arrival to the end of its answer.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        request_bytes=Histogram(
            "kvdoctor_http_request_body_bytes",
            "Size of the request bodies read (before gzip is inflated).",
            ["route"],
            buckets=BYTES_BUCKETS,
            registry=registry,
        ),
        diagnoses=Counter(
            "kvdoctor_diagnoses",
            "Diagnoses made (HTTP API, paste page and Slack), by verdict.",
            ["verdict"],
            registry=registry,
        ),
        slack_events=Counter(
            "kvdoctor_slack_events",
            "Requests to /slack/events, by outcome.",
            ["outcome"],
            registry=registry,
        ),
        multiprocess_dir=multiprocess_dir,
    )


class ObserveMiddleware:
    """Times and sizes every HTTP exchange, then writes the access log line and the metrics."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        access_log: AccessLog,
        routes: Collection[str],
        log_content: bool = False,
    ) -> None:
        self.app, self.metrics, self.access_log = app, metrics, access_log
        self.routes, self.log_content = frozenset(routes), log_content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope["method"], scope["path"])
        scope[EXCHANGE_KEY] = exchange
        started = time.perf_counter()

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            elif message["type"] == "http.response.body":
                exchange.bytes_out += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            exchange.status = exchange.status or 500  # Starlette's error middleware answers it
            raise
        finally:
            self._record(exchange, time.perf_counter() - started)

    def _record(self, exchange: Exchange, seconds: float) -> None:
        route = exchange.path if exchange.path in self.routes else OTHER_ROUTE
        self.metrics.requests.labels(route, exchange.method, str(exchange.status)).inc()
        self.metrics.latency.labels(route).observe(seconds)
        if exchange.bytes_in:
            self.metrics.request_bytes.labels(route).observe(exchange.bytes_in)
        record = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": exchange.method,
            "path": exchange.path,
            "status": exchange.status,
            "bytes_in": exchange.bytes_in,
            "bytes": exchange.bytes_out,
            "ms": round(seconds * 1000, 1),
            **exchange.extra,
        }
        if self.log_content and exchange.content is not None:
            record["content"] = exchange.content[:CONTENT_LOG_CHARS].decode("utf-8", "replace")
        self.access_log(record)


def log_json(record: dict[str, Any]) -> None:
    ACCESS_LOGGER.info(json.dumps(record, ensure_ascii=False))
