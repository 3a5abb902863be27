"""The Starlette app behind `kvdoctor serve`.

    POST /v1/diagnose   the JSON report of a log (text, JSON, multipart; gzip inflated)
    GET  /healthz       liveness and version
    GET  /openapi.json  the API as OpenAPI 3.1
    GET  /metrics       Prometheus metrics
    GET  /, POST /      the paste page
    POST /slack/events  Slack (Bolt's Starlette adapter), when SLACK_* are set

Handlers keep no state between requests, so instances can run side by side behind a load
balancer. Bodies are limited per route by middleware (limits.py: 413 from the Content-Length
before a byte is read, or as soon as a chunked upload passes the limit); diagnosis runs in a
worker thread under a time limit so the event loop keeps answering health checks and Slack's
3-second acknowledgements.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from kvdoctor._version import __version__
from kvdoctor.server.bodies import (
    GZIP_EXPANSION,
    DiagnoseRequest,
    check_lang,
    from_form,
    inflate,
    read_diagnose_request,
    read_form,
    require_log,
)
from kvdoctor.server.errors import DiagnoseTimeout, HttpError
from kvdoctor.server.limits import BodyLimitMiddleware
from kvdoctor.server.observe import AccessLog, Metrics, ObserveMiddleware, exchange_of, log_json, new_metrics
from kvdoctor.server.openapi import openapi_document
from kvdoctor.server.page import HEADERS as PAGE_HEADERS
from kvdoctor.server.page import preferred_lang, render_page
from kvdoctor.server.slack import SlackEndpoint, slack_config_from_env

MIB = 1024 * 1024
DEFAULT_MAX_BODY = 5 * MIB
DEFAULT_TIMEOUT_S = 30.0
LOG = logging.getLogger("kvdoctor.server")
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ROUTES_HINT = "use POST /v1/diagnose, GET /healthz, GET /openapi.json, GET /metrics or GET /"


@dataclass(frozen=True)
class ServerConfig:
    max_body: int = DEFAULT_MAX_BODY
    timeout_s: float = DEFAULT_TIMEOUT_S
    log_content: bool = False
    threads: int = 8
    slack: Any = None  # kvdoctor.server.slack.SlackConfig, or None: the Slack route is off
    metrics_dir: str | None = None  # PROMETHEUS_MULTIPROC_DIR: metrics summed over worker processes


# ---- configuration --------------------------------------------------------------------


def config_from_env(environ: Mapping[str, str]) -> ServerConfig:
    """KVDOCTOR_MAX_BODY, KVDOCTOR_TIMEOUT_S, KVDOCTOR_LOG_CONTENT, KVDOCTOR_THREADS, SLACK_*,
    PROMETHEUS_MULTIPROC_DIR."""
    max_body = _env_number(environ, "KVDOCTOR_MAX_BODY", DEFAULT_MAX_BODY, int)
    timeout_s = _env_number(environ, "KVDOCTOR_TIMEOUT_S", DEFAULT_TIMEOUT_S, float)
    threads = _env_number(environ, "KVDOCTOR_THREADS", min(32, (os.cpu_count() or 1) + 4), int)
    return ServerConfig(
        max_body=max_body,
        timeout_s=timeout_s,
        threads=threads,
        log_content=environ.get("KVDOCTOR_LOG_CONTENT", "") in ("1", "true", "yes"),
        slack=slack_config_from_env(environ, max_file_bytes=max_body),
        metrics_dir=environ.get("PROMETHEUS_MULTIPROC_DIR") or None,
    )


def _env_number(environ: Mapping[str, str], name: str, default: Any, kind: type) -> Any:
    raw = environ.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number; set it to a positive number") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be positive; set it to a positive number")
    return value


# ---- the app ------------------------------------------------------------------------------


class KvdoctorApp(Starlette):
    """Starlette, plus what the handlers share: the configuration, the diagnosis threads, the
    metrics and the Slack endpoint. Build it with :func:`create_app`."""

    def __init__(self, config: ServerConfig, *, access_log: AccessLog | None = None) -> None:
        self.config = config
        self.executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="diagnose")
        self.metrics: Metrics = new_metrics(multiprocess_dir=config.metrics_dir)
        self.openapi = openapi_document(__version__, max_body=config.max_body)
        self.slack = None if config.slack is None else SlackEndpoint(config.slack, self.diagnose_records)
        routes = self._routes()
        observe = Middleware(
            ObserveMiddleware,
            metrics=self.metrics,
            access_log=access_log or log_json,
            routes=[r.path for r in routes],
            log_content=config.log_content,
        )
        super().__init__(
            routes=routes,
            middleware=[observe],
            exception_handlers={
                HttpError: self._http_error,
                HTTPException: self._starlette_error,
                ClientDisconnect: _gone,
                500: _bug,
            },
            lifespan=self._lifespan,
        )

    def _routes(self) -> list[Route]:
        limit = [Middleware(BodyLimitMiddleware, max_body=self.config.max_body)]
        routes = [
            Route("/v1/diagnose", self.diagnose, methods=["POST"], middleware=limit),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/openapi.json", self.openapi_json, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
            Route("/", self.page, methods=["GET", "POST"], middleware=limit),
        ]
        if self.slack is not None:
            endpoint = functools.partial(self.slack_events, self.slack)
            routes.append(Route("/slack/events", endpoint, methods=["POST"], middleware=limit))
        return routes

    # ---- handlers ----

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    async def openapi_json(self, request: Request) -> Response:
        return JSONResponse(self.openapi)

    async def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=METRICS_TYPE)

    async def diagnose(self, request: Request) -> Response:
        body = await self._body(request)
        parsed = await read_diagnose_request(request, body, max_body=self.config.max_body)
        records = await self._diagnose_request(request, parsed)
        return JSONResponse(records)

    async def page(self, request: Request) -> Response:
        """The form (GET); the form again under the answer (POST)."""
        default = check_lang(request.query_params.get("lang"), preferred_lang(request.headers.get("accept-language")))
        if request.method != "POST":
            return HTMLResponse(render_page(default), headers=PAGE_HEADERS)
        await self._body(request)
        parsed = await from_form(await read_form(request, self.config.max_body), default, "<pasted>")
        shown = parsed.log.decode("utf-8", "replace") if parsed.pasted else ""
        records = await self._diagnose_request(request, parsed)
        return HTMLResponse(render_page(parsed.lang, records=records, log_text=shown), headers=PAGE_HEADERS)

    async def slack_events(self, slack: SlackEndpoint, request: Request) -> Response:
        await self._body(request)
        response, outcome = await slack.handle(request)
        exchange_of(request).extra["slack"] = outcome.value
        self.metrics.slack_events.labels(outcome.value).inc()
        return response

    async def _body(self, request: Request) -> bytes:
        body = await request.body()
        exchange = exchange_of(request)
        exchange.bytes_in, exchange.content = len(body), body
        return body

    async def _diagnose_request(self, request: Request, parsed: DiagnoseRequest) -> dict[str, Any]:
        log = require_log(inflate(parsed.log, self.config.max_body * GZIP_EXPANSION))
        try:
            records = await self.diagnose_records(log, parsed.lang, probe=parsed.probe, name=parsed.name)
        except DiagnoseTimeout:
            raise HttpError(
                504,
                f"request: diagnosis took longer than {self.config.timeout_s:g} s; send fewer lines or raise --timeout",
            ) from None
        exchange_of(request).extra["verdict"] = records["verdict"]
        return records

    async def diagnose_records(
        self, log: bytes, lang: str, *, probe: Any = None, name: str = "<request>"
    ) -> dict[str, Any]:
        """`diagnose(...).as_records()` in a worker thread, under the per-request time limit."""
        from kvdoctor.api import diagnose

        def work() -> dict[str, Any]:
            # Always bytes: a short str would be taken for a path on this server's disk.
            return diagnose(bytes(log), probe=probe, lang=lang, name=name).as_records()

        loop = asyncio.get_running_loop()
        try:
            records = await asyncio.wait_for(loop.run_in_executor(self.executor, work), self.config.timeout_s)
        except asyncio.TimeoutError:
            raise DiagnoseTimeout from None
        self.metrics.diagnoses.labels(records["verdict"]).inc()
        return records

    # ---- errors: one JSON line (an HTML page on the paste page) ----

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HttpError)
        return self._error(request, exc.status, str(exc))

    async def _starlette_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        if status == 404:
            return self._error(request, 404, f"{request.url.path}: no such route; {ROUTES_HINT}")
        if status == 405:
            allowed = sorted((exc.headers or {}).get("Allow", "").replace(" ", "").split(","))
            message = f"method {request.method} not allowed here; use {' or '.join(allowed)}"
            return self._error(request, 405, message, headers={"Allow": ", ".join(allowed)})
        return self._error(request, status, f"request: {exc.detail}; check the request")

    def _error(self, request: Request, status: int, message: str, *, headers: dict[str, str] | None = None) -> Response:
        headers = dict(headers or {})
        if status == 413:  # the client may still be sending: do not read the rest
            headers["Connection"] = "close"
        if request.url.path == "/":
            page = render_page(preferred_lang(request.headers.get("accept-language")), error=f"kvdoctor: {message}")
            return HTMLResponse(page, status_code=status, headers={**PAGE_HEADERS, **headers})
        return JSONResponse({"error": f"kvdoctor: {message}"}, status_code=status, headers=headers)

    # ---- lifespan ----

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        from kvdoctor.diagnosis.rules import rules_for

        # load the rules once, before the first request pays for it (a broken rule file fails the start)
        await asyncio.get_running_loop().run_in_executor(self.executor, rules_for)
        try:
            yield
        finally:
            if self.slack is not None:  # let acknowledged Slack work finish
                await self.slack.drain(self.config.timeout_s + 5)
            self.executor.shutdown(wait=False, cancel_futures=True)


async def _gone(request: Request, exc: Exception) -> Response:
    """The client went away mid-body: nobody reads the answer, the access log shows 499."""
    return Response(status_code=499)


async def _bug(request: Request, exc: Exception) -> Response:
    """A bug answers 500 with one line, never a traceback (Starlette logs it and re-raises)."""
    LOG.error("internal error: %r", exc)
    return JSONResponse({"error": f"kvdoctor: internal error ({type(exc).__name__}); please report it"}, 500)


def create_app(config: ServerConfig | None = None, *, access_log: AccessLog | None = None) -> KvdoctorApp:
    return KvdoctorApp(config or ServerConfig(), access_log=access_log)


def create_app_from_env() -> KvdoctorApp:
    """uvicorn factory (`--workers` needs an import string): configuration from the environment."""
    return create_app(config_from_env(os.environ))
