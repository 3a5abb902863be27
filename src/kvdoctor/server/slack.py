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
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
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
from kvdoctor.server.errors import DiagnoseTimeout

LOG = logging.getLogger("kvdoctor.server.slack")
MAX_SKEW_S = 300
EVENT_TTL_S = 3600.0
MAX_FILES = 3
SHORTCUT_ID = "diagnose_log"
FOLLOW_UPS = 3  # response_url takes 5 posts; keep room for the reply and a share
SLACK_HOSTS = ("slack.com", "slack-gov.com")
USAGE = (
    "Usage: `/kvdoctor [lang:en|lang:zh] [share] <paste the vLLM log>` — or use the "
    "message shortcut *Diagnose this log* on a message holding a log or a log file."
)

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
    log: Mapping[str, Any] = field(default_factory=dict)


def slack_config_from_env(environ: Mapping[str, str], *, max_file_bytes: int) -> SlackConfig | None:
    """None (Slack route off) unless both SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN are set."""
    secret, token = environ.get("SLACK_SIGNING_SECRET"), environ.get("SLACK_BOT_TOKEN")
    if not secret or not token:
        return None
    api_url = environ.get("SLACK_API_URL") or "https://slack.com/api/"
    lang = environ.get("KVDOCTOR_SLACK_LANG") or "en"
    return SlackConfig(
        secret,
        token,
        api_url if api_url.endswith("/") else api_url + "/",
        lang if lang in ("en", "zh") else "en",
        max_file_bytes,
    )


# ---- checks before Bolt -----------------------------------------------------------------


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signature_problem(secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float) -> str | None:
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
        word, *tail = re.split(r"\s", rest, maxsplit=1)
        word = word.lower()
        if word in ("lang:en", "lang:zh"):
            lang = word[5:]
        elif word == "share":
            share = True
        elif word in ("help", "-h", "--help"):
            help_ = True
        else:
            break
        rest = tail[0].lstrip() if tail else ""
    return Command(slack_unescape(rest), lang, share, help_ or not rest.strip())


# ---- the endpoint ------------------------------------------------------------------------


def _headers(scope: Mapping[str, Any]) -> dict[str, str | Sequence[str]]:
    return {bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1") for k, v in scope.get("headers", ())}


def _one(headers: Mapping[str, str | Sequence[str]], name: str) -> str | None:
    value = headers.get(name)
    return value if isinstance(value, str) or value is None else next(iter(value), None)


def _reply(
    status: int,
    data: Any,
    *,
    log: Mapping[str, Any] | None = None,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> SlackReply:
    return SlackReply(status, json.dumps(data).encode(), headers=headers, log=log or {})


class SlackEndpoint:
    """`POST /slack/events`: checks, then Bolt. Background work is tracked for graceful shutdown."""

    def __init__(self, config: SlackConfig, diagnose: DiagnoseFn, *, clock: Callable[[], float] = time.time) -> None:
        self.config, self.diagnose, self.clock = config, diagnose, clock
        self.seen = SeenEvents()
        self.tasks: set[asyncio.Task[None]] = set()
        self._bolt: Any = None

    async def handle(self, scope: Mapping[str, Any], body: bytes) -> SlackReply:
        headers = _headers(scope)
        problem = signature_problem(
            self.config.signing_secret,
            _one(headers, "x-slack-request-timestamp"),
            _one(headers, "x-slack-signature"),
            body,
            self.clock(),
        )
        if problem:
            return _reply(
                401,
                {"error": f"kvdoctor: slack: {problem}; check SLACK_SIGNING_SECRET"},
                log={"slack": "bad_signature"},
            )
        if "x-slack-retry-num" in headers:  # the first delivery was (or is being) handled
            return _reply(200, {}, log={"slack": "retry_ignored"}, headers=((b"x-slack-no-retry", b"1"),))
        event_id = _event_id(body, _one(headers, "content-type") or "")
        if event_id and not self.seen.first_time(event_id, self.clock()):
            return _reply(200, {}, log={"slack": "duplicate_event"})
        return await self._dispatch(body, headers, bytes(scope.get("query_string", b"")).decode())

    async def _dispatch(self, body: bytes, headers: dict[str, str | Sequence[str]], query: str) -> SlackReply:
        from slack_bolt.request.async_request import AsyncBoltRequest

        request = AsyncBoltRequest(body=body.decode("utf-8", "replace"), query=query, headers=headers)
        response = await self.bolt.async_dispatch(request)
        content_type = (response.headers.get("content-type") or ["application/json"])[0]
        return SlackReply(
            response.status,
            response.body.encode(),
            content_type=content_type,
            log={"slack": "dispatched"},
        )

    @property
    def bolt(self) -> Any:
        if self._bolt is None:  # built on first use, inside the running event loop
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


# ---- Bolt and the listeners ------------------------------------------------------------


def build_bolt_app(endpoint: SlackEndpoint) -> Any:
    from slack_bolt.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    cfg = endpoint.config
    client = AsyncWebClient(token=cfg.bot_token, base_url=cfg.api_url)
    # Bolt checks the signature again (defence in depth); ours ran first and is the tested one.
    app = AsyncApp(signing_secret=cfg.signing_secret, token=cfg.bot_token, client=client, logger=LOG)
    worker = SlackWorker(endpoint, client)

    async def on_command(ack: Any, command: dict[str, Any]) -> None:
        cmd = parse_command(command.get("text") or "")
        if cmd.help:
            await ack(text=USAGE, response_type="ephemeral")
            return
        await ack(text=slack_text(cmd.lang or cfg.lang, "working"), response_type="ephemeral")
        endpoint.spawn(
            worker.answer_url(
                command["response_url"],
                cmd.log.encode("utf-8"),
                cmd.lang or cfg.lang,
                share=cmd.share,
            )
        )

    async def on_shortcut(ack: Any, shortcut: dict[str, Any]) -> None:
        await ack()
        endpoint.spawn(worker.answer_shortcut(shortcut))

    async def on_share(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        endpoint.spawn(worker.share(body, action.get("value") or ""))

    async def on_mention(event: dict[str, Any]) -> None:  # Bolt acknowledges events itself
        endpoint.spawn(worker.answer_mention(event))

    app.command("/kvdoctor")(on_command)
    app.shortcut(SHORTCUT_ID)(on_shortcut)
    app.action(SHARE_ACTION)(on_share)
    app.event("app_mention")(on_mention)
    return app


class SlackWorker:
    """The work done after the acknowledgement: fetch files, diagnose, post the answer."""

    def __init__(self, endpoint: SlackEndpoint, client: Any) -> None:
        self.endpoint, self.client, self.config = endpoint, client, endpoint.config

    async def _records(self, log: bytes, lang: str) -> tuple[dict[str, Any] | None, str]:

        try:
            return await self.endpoint.diagnose(log, lang, name="slack"), ""
        except DiagnoseTimeout:
            return None, "kvdoctor: the diagnosis took too long; paste the last few hundred lines"
        except Exception as exc:  # never leave the user without an answer
            LOG.exception("diagnosis failed")
            return None, f"kvdoctor: internal error ({type(exc).__name__}); please report it"

    async def post_url(self, url: str, payload: dict[str, Any]) -> None:
        from slack_sdk.webhook.async_client import AsyncWebhookClient

        if not self.endpoint.allowed_url(url, hooks=True):
            LOG.warning("response_url host is not Slack's; not posting")
            return
        response = await AsyncWebhookClient(url).send_dict(payload)
        if response.status_code != 200:
            LOG.warning("response_url answered %s", response.status_code)

    async def answer_url(self, url: str, log: bytes, lang: str, *, share: bool = False) -> None:
        records, error = await self._records(log, lang)
        kind = "in_channel" if share else "ephemeral"
        if records is None:
            await self.post_url(url, {"response_type": "ephemeral", "text": error})
            return
        message = render_blocks(records, lang=lang)
        extra = [] if share else share_button(records, lang)
        await self.post_url(url, {"response_type": kind, **message_payload(message, extra)})
        if message.overflow:
            for more in overflow_messages(message.overflow, lang)[:FOLLOW_UPS]:
                await self.post_url(url, {"response_type": kind, **message_payload(more)})

    async def answer_shortcut(self, shortcut: dict[str, Any]) -> None:
        message = shortcut.get("message") or {}
        log = await self.gather_log(message.get("text") or "", message.get("files") or [])
        url = shortcut["response_url"]
        if not log.strip():
            await self.post_url(url, {"response_type": "ephemeral", "text": USAGE})
            return
        await self.answer_url(url, log, self.config.lang)

    async def share(self, body: dict[str, Any], value: str) -> None:
        records = unpack_share(value)
        url = body.get("response_url") or ""
        if records is None:
            await self.post_url(
                url,
                {
                    "response_type": "ephemeral",
                    "text": "kvdoctor: this button is damaged; run the command again",
                },
            )
            return
        lang = records.get("lang", "en")
        message = render_blocks(records, lang=lang)
        who = [
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": slack_text(lang, "shared_by").format(user=(body.get("user") or {}).get("id", "?")),
                    }
                ],
            }
        ]
        await self.post_url(
            url,
            {
                "response_type": "in_channel",
                "replace_original": False,
                **message_payload(message, who),
            },
        )
        await self.post_url(url, {"delete_original": True})

    async def answer_mention(self, event: dict[str, Any]) -> None:
        cmd = parse_command(event.get("text") or "")
        lang = cmd.lang or self.config.lang
        where = {"channel": event["channel"], "thread_ts": event.get("thread_ts") or event["ts"]}
        log = await self.gather_log(cmd.log, event.get("files") or [])
        if not log.strip():
            await self.client.chat_postMessage(**where, text=USAGE)
            return
        records, error = await self._records(log, lang)
        if records is None:
            await self.client.chat_postMessage(**where, text=error)
            return
        message = render_blocks(records, lang=lang)
        await self.client.chat_postMessage(**where, **message_payload(message))
        if message.overflow:
            await self.upload_evidence(where, message.overflow, lang)

    async def upload_evidence(self, where: dict[str, str], overflow: str, lang: str) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            await self.client.files_upload_v2(
                channel=where["channel"],
                thread_ts=where["thread_ts"],
                content=overflow,
                filename="kvdoctor-evidence.txt",
                title=slack_text(lang, "evidence_file"),
            )
        except SlackApiError as exc:  # e.g. files:write not granted: fall back to messages
            LOG.warning("evidence upload failed: %s", exc.response.get("error"))
            for more in overflow_messages(overflow, lang)[:FOLLOW_UPS]:
                await self.client.chat_postMessage(**where, **message_payload(more))

    async def gather_log(self, text: str, files: list[dict[str, Any]]) -> bytes:
        """Attached files/snippets if any (read through the Web API), else the message text."""
        parts = [data for f in files[:MAX_FILES] if (data := await self.fetch_file(f))]
        if parts:
            return b"\n".join(parts)
        return slack_unescape(text).encode("utf-8")

    async def fetch_file(self, file: dict[str, Any]) -> bytes | None:
        import aiohttp

        info = await self.client.files_info(file=file["id"])
        meta = info.get("file") or {}
        url = meta.get("url_private_download") or meta.get("url_private") or ""
        limit = self.config.max_file_bytes
        if int(meta.get("size") or 0) > limit or not self.endpoint.allowed_url(url, hooks=False):
            return None  # too large, or a URL we will not send the bot token to
        headers = {"Authorization": f"Bearer {self.config.bot_token}"}
        async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
            if resp.status != 200:
                return None
            data = bytearray()
            async for chunk in resp.content.iter_chunked(65536):
                data += chunk
                if len(data) > limit:
                    return None
        return bytes(data)
