"""JSON replies of the broker's plain-ASGI endpoints (the agent API, the operator endpoints):
one response in two sends, and the API's error shape ``{"error": {"code", "message"}}``."""

from __future__ import annotations

import orjson
from starlette.types import Send


async def respond(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]], *, head: bool = False
) -> None:
    """Send ``body`` with ``status``; ``head``: its length and type only (a HEAD request's answer)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


def error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message}})


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (ASGI names are lower-case), as Starlette reads it."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None
