"""The ASGI app behind `kvdoctor serve`: `POST /v1/diagnose`, `GET /healthz`, `POST /slack/events`.

Hand-written routing (three routes do not need a framework). Handlers keep no state between
requests, so instances can run side by side behind a load balancer. Bodies are size-checked
before they are read (Content-Length) and while they stream in (chunked uploads); diagnosis runs
in a worker thread under a time limit so the event loop keeps answering health checks and Slack's
3-second acknowledgements.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import logging
import os
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from kvdoctor._version import __version__
from kvdoctor.server.errors import DiagnoseTimeout, HttpError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AccessLog = Callable[[dict[str, Any]], None]

MIB = 1024 * 1024
DEFAULT_MAX_BODY = 5 * MIB
DEFAULT_TIMEOUT_S = 30.0
GZIP_EXPANSION = 8  # a gzip body may inflate to this many times the body limit, no more
LANGS = ("en", "zh")
CONTENT_LOG_CHARS = 65536

ACCESS_LOGGER = logging.getLogger("kvdoctor.access")


@dataclass(frozen=True)
class ServerConfig:
    max_body: int = DEFAULT_MAX_BODY
    timeout_s: float = DEFAULT_TIMEOUT_S
    log_content: bool = False
    threads: int = 8
    slack: Any = None  # kvdoctor.server.slack.SlackConfig, or None: the Slack route is off


@dataclass(frozen=True)
class DiagnoseRequest:
    log: bytes
    lang: str = "en"
    probe: Any = None  # kvdoctor.probe.Snapshot
    name: str = "<request>"


@dataclass
class _Exchange:
    """What the access log needs about one request; filled while it is answered."""

    method: str
    path: str
    status: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    content: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---- configuration --------------------------------------------------------------------


def config_from_env(environ: Mapping[str, str]) -> ServerConfig:
    """KVDOCTOR_MAX_BODY, KVDOCTOR_TIMEOUT_S, KVDOCTOR_LOG_CONTENT, KVDOCTOR_THREADS, SLACK_*."""
    from kvdoctor.server.slack import slack_config_from_env

    max_body = _env_number(environ, "KVDOCTOR_MAX_BODY", DEFAULT_MAX_BODY, int)
    timeout_s = _env_number(environ, "KVDOCTOR_TIMEOUT_S", DEFAULT_TIMEOUT_S, float)
    threads = _env_number(environ, "KVDOCTOR_THREADS", min(32, (os.cpu_count() or 1) + 4), int)
    return ServerConfig(
        max_body=max_body,
        timeout_s=timeout_s,
        threads=threads,
        log_content=environ.get("KVDOCTOR_LOG_CONTENT", "") in ("1", "true", "yes"),
        slack=slack_config_from_env(environ, max_file_bytes=max_body),
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


# ---- reading requests -----------------------------------------------------------------


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it is known to exceed `limit`."""
    declared = header(scope, b"content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise HttpError(400, "request: Content-Length is not a number; send a valid request")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HttpError(499, "request: client went away")
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:  # chunked upload: stop reading at the limit
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(limit: int) -> HttpError:
    return HttpError(
        413,
        f"request: body larger than {limit} bytes; send the failing part of the "
        "log (the last few hundred lines) or raise --max-body",
    )


def inflate(body: bytes, limit: int) -> bytes:
    """Gunzip a gzip body with a cap, so a small bomb cannot tie up a worker thread."""
    if body[:2] != b"\x1f\x8b":
        return body
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as stream:
            while chunk := stream.read(65536):
                out.write(chunk)
                if out.tell() > limit:
                    raise HttpError(413, f"request: gzip body inflates past {limit} bytes; send fewer lines")
    except (OSError, EOFError, zlib.error):
        raise HttpError(
            400,
            "request: body starts like gzip but is not valid gzip; send plain text or a complete .gz",
        ) from None
    return out.getvalue()


def _lang(value: Any, default: str) -> str:
    if value in (None, ""):
        return default
    if value not in LANGS:
        raise HttpError(400, f"request: lang {value!r} is not supported; use one of {', '.join(LANGS)}")
    return str(value)


def _probe_from(value: Any) -> Any:
    from kvdoctor.probe import ProbeError, parse_snapshot_text, snapshot_from_dict

    if value is None:
        return None
    try:
        if isinstance(value, dict):
            return snapshot_from_dict(value)
        if isinstance(value, str | bytes):
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return parse_snapshot_text(text, where="probe")
    except ProbeError as exc:
        raise HttpError(400, f"request: probe: {exc}; send what `kvdoctor probe --format json` writes") from None
    raise HttpError(400, "request: probe must be an object; send what `kvdoctor probe --format json` writes")


def parse_diagnose_request(content_type: str, body: bytes, query: str) -> DiagnoseRequest:
    """Raw text, JSON `{"log", "probe", "lang"}`, or multipart (a file part, `lang`, `probe`)."""
    params = parse_qs(query)
    lang = _lang(params["lang"][0] if params.get("lang") else None, "en")
    name = (params.get("name") or ["<request>"])[0][:200]
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/json":
        return _from_json(body, lang, name)
    if kind == "multipart/form-data":
        return _from_multipart(content_type, body, lang, name)
    return DiagnoseRequest(body, lang, None, name)


def _from_json(body: bytes, lang: str, name: str) -> DiagnoseRequest:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, f'request: body is not valid JSON ({exc}); send {{"log": "...", "lang": "en"}}') from None
    if not isinstance(data, dict) or not isinstance(data.get("log"), str):
        raise HttpError(400, 'request: JSON body needs a "log" string; send {"log": "..."}')
    return DiagnoseRequest(
        data["log"].encode("utf-8", "replace"),
        _lang(data.get("lang"), lang),
        _probe_from(data.get("probe")),
        str(data.get("name") or name)[:200],
    )


def _from_multipart(content_type: str, body: bytes, lang: str, name: str) -> DiagnoseRequest:
    from python_multipart.exceptions import FormParserError
    from python_multipart.multipart import create_form_parser

    fields: dict[str, bytes] = {}
    files: list[tuple[str, str, bytes]] = []

    def on_field(f: Any) -> None:
        fields[f.field_name.decode("latin-1")] = f.value or b""

    def on_file(f: Any) -> None:
        f.file_object.seek(0)
        files.append(
            (
                f.field_name.decode("latin-1"),
                (f.file_name or b"").decode("utf-8", "replace"),
                f.file_object.read(),
            )
        )

    config = {"MAX_MEMORY_FILE_SIZE": len(body) + 1, "MAX_BODY_SIZE": len(body) + 1}
    try:
        parser = create_form_parser({"Content-Type": content_type.encode("latin-1")}, on_field, on_file, config)
        parser.write(body)
        parser.finalize()
    except (FormParserError, ValueError) as exc:
        raise HttpError(
            400,
            f"request: malformed multipart body ({exc}); send the log as a file part (curl -F file=@vllm.log)",
        ) from None
    probe_raw = fields.get("probe") or next((d for n, _, d in files if n == "probe"), None)
    logs = [(fname, data) for n, fname, data in files if n != "probe"]
    if logs:
        log, name = logs[0][1], logs[0][0] or name
    elif "log" in fields:
        log = fields["log"]
    else:
        raise HttpError(400, "request: multipart body has no file part; send curl -F file=@vllm.log")
    lang = _lang(fields["lang"].decode("latin-1") if "lang" in fields else None, lang)
    return DiagnoseRequest(log, lang, _probe_from(probe_raw), name[:200])


# ---- answering --------------------------------------------------------------------------


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


async def send_response(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: str = "application/json",
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    base = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": base + list(headers)})
    await send({"type": "http.response.body", "body": body})


def _error_body(err: HttpError) -> bytes:
    return json_bytes({"error": f"kvdoctor: {err}"})


class KvdoctorApp:
    """The ASGI application. Build it with :func:`create_app`."""

    def __init__(self, config: ServerConfig, *, access_log: AccessLog | None = None) -> None:
        self.config = config
        self.executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="diagnose")
        self.access_log = access_log or _log_json
        self.slack = None
        if config.slack is not None:
            from kvdoctor.server.slack import SlackEndpoint

            self.slack = SlackEndpoint(config.slack, self.diagnose_records)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        exchange = _Exchange(scope["method"], scope["path"])
        started = time.perf_counter()

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            elif message["type"] == "http.response.body":
                exchange.bytes_out += len(message.get("body", b""))
            await send(message)

        try:
            await self._route(scope, receive, counting_send, exchange)
        except HttpError as err:
            close = ((b"connection", b"close"),) if err.status == 413 else ()
            await send_response(counting_send, err.status, _error_body(err), headers=close)
        except Exception as exc:  # a bug: answer 500, never a traceback to the client
            logging.getLogger("kvdoctor.server").exception("internal error")
            bug = HttpError(500, f"internal error ({type(exc).__name__}); please report it")
            await send_response(counting_send, 500, _error_body(bug))
        finally:
            self._log(exchange, started)

    def _log(self, exchange: _Exchange, started: float) -> None:
        record = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": exchange.method,
            "path": exchange.path,
            "status": exchange.status,
            "bytes_in": exchange.bytes_in,
            "bytes": exchange.bytes_out,
            "ms": round((time.perf_counter() - started) * 1000, 1),
            **exchange.extra,
        }
        if self.config.log_content and exchange.content is not None:
            record["content"] = exchange.content[:CONTENT_LOG_CHARS].decode("utf-8", "replace")
        self.access_log(record)

    async def _route(self, scope: Scope, receive: Receive, send: Send, exchange: _Exchange) -> None:
        method, path = scope["method"], scope["path"]
        if path == "/healthz":
            _require(method, "GET", "HEAD")
            await send_response(send, 200, json_bytes({"status": "ok", "version": __version__}))
        elif path == "/v1/diagnose":
            _require(method, "POST")
            await self._diagnose(scope, receive, send, exchange)
        elif path == "/slack/events" and self.slack is not None:
            _require(method, "POST")
            body = await self._body(scope, receive, exchange)
            reply = await self.slack.handle(scope, body)
            exchange.extra.update(reply.log)
            await send_response(
                send,
                reply.status,
                reply.body,
                content_type=reply.content_type,
                headers=reply.headers,
            )
        else:
            raise HttpError(404, f"{path}: no such route; use POST /v1/diagnose or GET /healthz")

    async def _body(self, scope: Scope, receive: Receive, exchange: _Exchange) -> bytes:
        body = await read_body(scope, receive, self.config.max_body)
        exchange.bytes_in = len(body)
        exchange.content = body
        return body

    async def _diagnose(self, scope: Scope, receive: Receive, send: Send, exchange: _Exchange) -> None:
        body = await self._body(scope, receive, exchange)
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        request = parse_diagnose_request(header(scope, b"content-type") or "", body, query)
        log = inflate(request.log, self.config.max_body * GZIP_EXPANSION)
        try:
            records = await self.diagnose_records(log, request.lang, probe=request.probe, name=request.name)
        except DiagnoseTimeout:
            raise HttpError(
                504,
                f"request: diagnosis took longer than {self.config.timeout_s:g} s; send fewer lines or raise --timeout",
            ) from None
        exchange.extra["verdict"] = records["verdict"]
        await send_response(send, 200, json_bytes(records))

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
            return await asyncio.wait_for(loop.run_in_executor(self.executor, work), self.config.timeout_s)
        except asyncio.TimeoutError:
            raise DiagnoseTimeout from None

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                from kvdoctor.diagnosis.rules import RuleLoadError, rules_for

                try:  # load the rules once, before the first request pays for it
                    await asyncio.get_running_loop().run_in_executor(self.executor, rules_for)
                except RuleLoadError as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.slack is not None:  # let acknowledged Slack work finish
                    await self.slack.drain(self.config.timeout_s + 5)
                self.executor.shutdown(wait=False, cancel_futures=True)
                await send({"type": "lifespan.shutdown.complete"})
                return


def _require(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise HttpError(405, f"method {method} not allowed here; use {' or '.join(allowed)}")


def _log_json(record: dict[str, Any]) -> None:
    ACCESS_LOGGER.info(json.dumps(record, ensure_ascii=False))


def create_app(config: ServerConfig | None = None, *, access_log: AccessLog | None = None) -> KvdoctorApp:
    return KvdoctorApp(config or ServerConfig(), access_log=access_log)


def create_app_from_env() -> KvdoctorApp:
    """uvicorn factory (`--workers` needs an import string): configuration from the environment."""
    return create_app(config_from_env(os.environ))
