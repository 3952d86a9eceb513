"""No other site may show the broker's page in a frame: ``Content-Security-Policy:
frame-ancestors 'none'`` and, for browsers that predate it, ``X-Frame-Options: DENY``, on
every response of the page app (the page, its modules, styles, the service worker). A page
framed by another site could be overlaid so that a person's clicks answer a question they
do not see (clickjacking)."""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADERS: Final = [(b"content-security-policy", b"frame-ancestors 'none'"), (b"x-frame-options", b"DENY")]


class NoFraming:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)
