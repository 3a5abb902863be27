"""Slack: `/kvdoctor`, the "Diagnose this log" message shortcut and `@kvdoctor` mentions.

Requests go through Bolt's Starlette adapter. Bolt checks the signature first (slack_sdk's
`SignatureVerifier`: HMAC-SHA256 of `v0:timestamp:body`, constant-time, 5-minute window); a
global middleware then answers Slack's retries (any `X-Slack-Retry-Num` is answered 200 and
dropped — the only de-duplication that holds across several instances behind a load balancer)
and event ids this process has already seen (an in-memory TTL cache, a second line of defence
for one instance). Every listener acknowledges first and does the work in a background task,
replying through `response_url` (ephemeral, with a "Share in channel" button) or, for mentions,
in the thread. Outbound calls go to Slack only: the Web API at `SLACK_API_URL`, and
`response_url` / file URLs whose host is Slack's.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

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

if TYPE_CHECKING:  # Bolt is imported on first use: a server without Slack never loads it
    from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler

LOG = logging.getLogger("kvdoctor.server.slack")
EVENT_TTL_S = 3600.0
MAX_FILES = 3
SHORTCUT_ID = "diagnose_log"
FOLLOW_UPS = 3  # response_url takes 5 posts; keep room for the reply and a share
SLACK_HOSTS = ("slack.com", "slack-gov.com")
OUTCOME_KEY = "kvdoctor_outcome"  # Bolt context entry where the middleware notes what it did
USAGE = (
    "Usage: `/kvdoctor [lang:en|lang:zh] [share] <paste the vLLM log>` — or use the "
    "message shortcut *Diagnose this log* on a message holding a log or a log file."
)
BAD_SIGNATURE = (
    "kvdoctor: slack: the request signature does not verify (another signing secret, a changed body, "
    "or a timestamp more than 5 minutes from now); check SLACK_SIGNING_SECRET and the server's clock"
)
NOT_UTF8 = "kvdoctor: slack: the body is not UTF-8, so it is not from Slack; point only Slack at /slack/events"

DiagnoseFn = Callable[..., Awaitable[dict[str, Any]]]


class SlackOutcome(str, enum.Enum):
    """What became of one request to `/slack/events` (the access log's `slack` field, a metric label)."""

    DISPATCHED = "dispatched"
    RETRY_IGNORED = "retry_ignored"
    DUPLICATE_EVENT = "duplicate_event"
    BAD_SIGNATURE = "bad_signature"
    BAD_REQUEST = "bad_request"


@dataclass(frozen=True)
class SlackConfig:
    signing_secret: str
    bot_token: str
    api_url: str = "https://slack.com/api/"
    lang: str = "en"
    max_file_bytes: int = 5 * 1024 * 1024


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


class SlackEndpoint:
    """`POST /slack/events` through Bolt's Starlette adapter. Background work is tracked for
    graceful shutdown."""

    def __init__(self, config: SlackConfig, diagnose: DiagnoseFn, *, clock: Callable[[], float] = time.time) -> None:
        self.config, self.diagnose, self.clock = config, diagnose, clock
        self.seen = SeenEvents()
        self.tasks: set[asyncio.Task[None]] = set()
        self._handler: AsyncSlackRequestHandler | None = None

    async def handle(self, request: Request) -> tuple[Response, SlackOutcome]:
        noted: list[SlackOutcome] = []
        try:
            response = await self.handler.handle(request, {OUTCOME_KEY: noted})
        except UnicodeDecodeError:  # the adapter decodes the body before Bolt sees it
            return JSONResponse({"error": NOT_UTF8}, status_code=400), SlackOutcome.BAD_REQUEST
        if response.status_code == 401:  # Bolt's request verification refused it
            return JSONResponse({"error": BAD_SIGNATURE}, status_code=401), SlackOutcome.BAD_SIGNATURE
        return response, (noted[0] if noted else SlackOutcome.DISPATCHED)

    @property
    def handler(self) -> AsyncSlackRequestHandler:
        if self._handler is None:  # built on first use, inside the running event loop
            from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler

            self._handler = AsyncSlackRequestHandler(build_bolt_app(self))
        return self._handler

    async def answer_once(
        self, req: Any, context: dict[str, Any], body: dict[str, Any], next: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Bolt middleware, after the signature check: each delivery of an event is answered once."""
        from slack_bolt.response import BoltResponse

        noted: list[SlackOutcome] = context.get(OUTCOME_KEY, [])
        if req.headers.get("x-slack-retry-num"):  # the first delivery was (or is being) handled
            noted.append(SlackOutcome.RETRY_IGNORED)
            return BoltResponse(status=200, body={}, headers={"x-slack-no-retry": "1"})
        event_id = body.get("event_id")
        if isinstance(event_id, str) and not self.seen.first_time(event_id, self.clock()):
            noted.append(SlackOutcome.DUPLICATE_EVENT)
            return BoltResponse(status=200, body={})
        return await next()

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
    app = AsyncApp(
        signing_secret=cfg.signing_secret,  # Bolt's request verification is on: it runs first
        token=cfg.bot_token,
        client=client,
        logger=LOG,
        before_authorize=endpoint.answer_once,
    )
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
