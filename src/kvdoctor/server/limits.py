"""The body limit, as route middleware: 413 before an over-long body is read.

A body whose Content-Length is over the limit fails at its first read, before a byte is
received; a chunked body fails as soon as the bytes received pass the limit. The failure is an
`HttpError(413)` raised inside the endpoint, so the app's exception handlers answer it like
every other error (one JSON line, or the page). Starlette's own `RequestBodyLimitMiddleware`
replaces any answer with a plain-text 413 when Content-Length is too large, which would break
that contract.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvdoctor.server.errors import HttpError


def too_large(limit: int) -> HttpError:
    return HttpError(
        413,
        f"request: body larger than {limit} bytes; send the failing part of the "
        "log (the last few hundred lines) or raise --max-body",
    )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            if declared is not None:
                if not declared.strip().isdigit():
                    raise HttpError(400, "request: Content-Length is not a number; send a valid request")
                if int(declared) > self.max_body:
                    raise too_large(self.max_body)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:  # chunked upload: stop reading at the limit
                    raise too_large(self.max_body)
            return message

        await self.app(scope, limited_receive, send)
