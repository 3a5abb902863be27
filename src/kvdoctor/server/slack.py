"""Slack: `/kvdoctor`, the "Diagnose this log" message shortcut and `@kvdoctor` mentions.

Requests reach Bolt's AsyncApp only after this module has checked them itself: the signature
(HMAC-SHA256 of `v0:timestamp:body`, constant-time compare, 5-minute window), Slack's retries
(any `X-Slack-Retry-Num` is answered 200 and dropped — the only de-duplication that holds across
several instances behind a load balancer), and event ids already seen by this process (an
in-memory TTL cache, a second line of defence for one instance). Every listener acknowledges
first and does the work in a background task, replying through `response_url` (ephemeral, with
a "Share in channel" button) or, for mentions, in the thread. Outbound calls go to Slack only:
the Web API at `SLACK_API_URL`, and `response_url` / file URLs whose host is Slack's.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import re
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kvdoctor.render.slack import (
    SHARE_ACTION,
    message_payload,
    overflow_messages,
    render_blocks,
    share_button,
    slack_text,
    unpack_share,
)

LOG = logging.getLogger("kvdoctor.server.slack")
MAX_SKEW_S = 300
EVENT_TTL_S = 3600.0
MAX_FILES = 3
SHORTCUT_ID = "diagnose_log"
FOLLOW_UPS = 3  # response_url takes 5 posts; keep room for the reply and a share
SLACK_HOSTS = ("slack.com", "slack-gov.com")
USAGE = ("Usage: `/kvdoctor [lang:en|lang:zh] [share] <paste the vLLM log>` — or use the "
         "message shortcut *Diagnose this log* on a message holding a log or a log file.")

DiagnoseFn = Callable[..., Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class SlackConfig:
    signing_secret: str
    bot_token: str
    api_url: str = "https://slack.com/api/"
    lang: str = "en"
    max_file_bytes: int = 5 * 1024 * 1024


@dataclass(frozen=True)
class SlackReply:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[bytes, bytes], ...] = ()
    log: Mapping[str, Any] = {}


def slack_config_from_env(environ: Mapping[str, str], *, max_file_bytes: int) -> SlackConfig | None:
    """None (the Slack route is off) unless both SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN are set."""
    secret, token = environ.get("SLACK_SIGNING_SECRET"), environ.get("SLACK_BOT_TOKEN")
    if not secret or not token:
        return None
    api_url = environ.get("SLACK_API_URL") or "https://slack.com/api/"
    lang = environ.get("KVDOCTOR_SLACK_LANG") or "en"
    return SlackConfig(secret, token, api_url if api_url.endswith("/") else api_url + "/",
                       lang if lang in ("en", "zh") else "en", max_file_bytes)


# ---- checks before Bolt -----------------------------------------------------------------


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signature_problem(secret: str, timestamp: str | None, signature: str | None, body: bytes,
                      now: float) -> str | None:
    """Why a request is not from Slack, or None when it is."""
    if not timestamp or not signature:
        return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
    if not timestamp.isdigit():
        return "X-Slack-Request-Timestamp is not a number"
    if abs(now - int(timestamp)) > MAX_SKEW_S:
        return "request timestamp is more than 5 minutes away from now (replay?)"
    if not hmac.compare_digest(sign(secret, timestamp, body), signature):
        return "signature does not match"
    return None


class SeenEvents:
    """Event ids answered recently by this process (Slack re-sends an event it deems unanswered)."""

    def __init__(self, ttl_s: float = EVENT_TTL_S, max_size: int = 10000) -> None:
        self.ttl_s, self.max_size = ttl_s, max_size
        self._seen: dict[str, float] = {}

    def first_time(self, event_id: str, now: float) -> bool:
        if len(self._seen) >= self.max_size:
            self._seen = {k: t for k, t in self._seen.items() if t > now}
            while len(self._seen) >= self.max_size:  # all fresh: forget the oldest
                self._seen.pop(next(iter(self._seen)))
        expiry = self._seen.get(event_id)
        if expiry is not None and expiry > now:
            return False
        self._seen[event_id] = now + self.ttl_s
        return True


def _event_id(body: bytes, content_type: str) -> str | None:
    if not content_type.startswith("application/json"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    value = data.get("event_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


# ---- the text of a request ------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    log: str
    lang: str | None = None
    share: bool = False
    help: bool = False


_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


def slack_unescape(text: str) -> str:
    """Slack escapes &, < and > in message text; code fences are formatting, not log."""
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text.replace("```", "\n")


def parse_command(text: str) -> Command:
    """Leading options (`lang:zh`, `share`, `help`) then the pasted log."""
    lang, share, help_ = None, False, False
    rest = _MENTION.sub("", text).lstrip()
    while rest:
        token, _, tail = rest.partition(" ") if " " in rest.split("\n", 1)[0] else rest.partition("\n")
        word = token.strip().lower()
        if word in ("lang:en", "lang:zh"):
            lang = word[5:]
        elif word == "share":
            share = True
        elif word in ("help", "-h", "--help"):
            help_ = True
        else:
            break
        rest = tail.lstrip()
    return Command(slack_unescape(rest), lang, share, help_ or not rest.strip())


# ---- the endpoint ------------------------------------------------------------------------


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    return {bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1")
            for k, v in scope.get("headers", ())}


def _reply(status: int, data: Any, *, log: Mapping[str, Any] | None = None,
           headers: tuple[tuple[bytes, bytes], ...] = ()) -> SlackReply:
    return SlackReply(status, json.dumps(data).encode(), headers=headers, log=log or {})


class SlackEndpoint:
    """`POST /slack/events`: checks, then Bolt. Background work is tracked for graceful shutdown."""

    def __init__(self, config: SlackConfig, diagnose: DiagnoseFn, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.config, self.diagnose, self.clock = config, diagnose, clock
        self.seen = SeenEvents()
        self.tasks: set[asyncio.Task[None]] = set()
        self._bolt: Any = None

    async def handle(self, scope: Mapping[str, Any], body: bytes) -> SlackReply:
        headers = _headers(scope)
        problem = signature_problem(self.config.signing_secret,
                                    headers.get("x-slack-request-timestamp"),
                                    headers.get("x-slack-signature"), body, self.clock())
        if problem:
            return _reply(401, {"error": f"kvdoctor: slack: {problem}; check SLACK_SIGNING_SECRET"},
                          log={"slack": "bad_signature"})
        if "x-slack-retry-num" in headers:  # the first delivery was (or is being) handled
            return _reply(200, {}, log={"slack": "retry_ignored"}, headers=((b"x-slack-no-retry", b"1"),))
        event_id = _event_id(body, headers.get("content-type", ""))
        if event_id and not self.seen.first_time(event_id, self.clock()):
            return _reply(200, {}, log={"slack": "duplicate_event"})
        return await self._dispatch(body, headers, bytes(scope.get("query_string", b"")).decode())

    async def _dispatch(self, body: bytes, headers: dict[str, str], query: str) -> SlackReply:
        from slack_bolt.request.async_request import AsyncBoltRequest

        request = AsyncBoltRequest(body=body.decode("utf-8", "replace"), query=query, headers=headers)
        response = await self.bolt.async_dispatch(request)
        content_type = (response.headers.get("content-type") or ["application/json"])[0]
        return SlackReply(response.status, response.body.encode(), content_type=content_type,
                          log={"slack": "dispatched"})

    @property
    def bolt(self) -> Any:
        if self._bolt is None:
            from kvdoctor.server.slack_listeners import build_bolt_app

            self._bolt = build_bolt_app(self)
        return self._bolt

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            LOG.error("slack work failed: %r", task.exception())

    async def drain(self, timeout_s: float) -> None:
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout_s)

    def allowed_url(self, url: str, *, hooks: bool) -> bool:
        """Only Slack (or the configured Web API host, e.g. a test server) ever gets a request."""
        parts = urlsplit(url)
        api = urlsplit(self.config.api_url)
        if parts.scheme == api.scheme and parts.netloc == api.netloc:
            return True
        host = parts.hostname or ""
        prefix = "hooks." if hooks else "files."
        return parts.scheme == "https" and any(host == prefix + h for h in SLACK_HOSTS)


