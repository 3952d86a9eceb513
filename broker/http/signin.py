"""How people sign in: ``GET /v1/signin`` and the page's content security policy.

Where the broker trusts an OpenID Connect provider's tokens (QBROKER_JWKS_URL) and names
that provider's public client (QBROKER_OIDC_CLIENT_ID), the web page and ``qbroker tui``
sign people in there and use the access token as their client token. They learn where from
this endpoint, which needs no token (it says nothing the provider's own discovery document
does not):

    200 {"issuer": ISSUER, "clientId": CLIENT_ID, "scope": "openid ..."}
    404 {"error": {"code": "not_found", ...}}   (no sign-in: links carry tokens)

The page fetches the provider's discovery document and token endpoint, so its policy's
``connect-src`` names the issuer's origin too (``page_html``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import Receive, Scope, Send

from broker.http.kit import error_body, respond
from broker.runtime.config import Config
from broker.service import Broker

SIGNIN_PATH: Final = "/v1/signin"
_CONNECT_SRC: Final = re.compile(r"connect-src 'self'")


async def sign_in_settings(config: Config, scope: Scope, send: Send) -> None:
    """``GET`` (or ``HEAD``) ``SIGNIN_PATH``."""
    head = scope["method"] == "HEAD"
    if scope["method"] not in ("GET", "HEAD"):
        body = error_body("method_not_allowed", f"signin: {scope['method']} is not allowed; use GET")
        await respond(send, 405, body, [(b"allow", b"GET, HEAD")])
        return
    settings = config.sign_in()
    if settings is None:
        body = error_body(
            "not_found", "signin: people do not sign in on this broker (QBROKER_OIDC_CLIENT_ID is not set)"
        )
        await respond(send, 404, body, [(b"cache-control", b"no-store")], head=head)
        return
    await respond(send, 200, orjson.dumps(settings), [(b"cache-control", b"no-store")], head=head)


class SignInAPI:
    """The route table's endpoint for ``SIGNIN_PATH``."""

    def __init__(self, broker: Broker) -> None:
        self.config = broker.config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await sign_in_settings(self.config, scope, send)


def issuer_origin(config: Config) -> str | None:
    """The identity provider's origin when people sign in, else None."""
    settings = config.sign_in()
    if settings is None:
        return None
    parts = urlsplit(settings["issuer"])
    return f"{parts.scheme}://{parts.netloc}"


def page_html(web_dir: Path, config: Config) -> str:
    """The page's index.html; where people sign in, its policy lets it reach the provider."""
    html = (web_dir / "index.html").read_text(encoding="utf-8")
    origin = issuer_origin(config)
    if origin is None:
        return html
    return _CONNECT_SRC.sub(lambda _: f"connect-src 'self' {origin}", html, count=1)


def page_endpoint(web_dir: Path, config: Config) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint for ``/`` and ``/index.html`` (the page, read once)."""
    html = page_html(web_dir, config)

    async def page(request: Request) -> Response:
        return HTMLResponse(html, headers={"cache-control": "no-cache"})

    return page
