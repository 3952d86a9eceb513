"""The kit every plain-ASGI HTTP edge shares: reading a request's body and query string, its
bearer token, answering JSON in the API's error shape ``{"error": {"code", "message"}}``, and
the per-token rate limits of the reads.

The edges under ``broker/http/`` are plain ASGI rather than Starlette routes (the agent API
is the broker's hot HTTP path); what they have in common is here, so no edge imports a
peer edge for its helpers.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from typing import Final
from urllib.parse import parse_qsl

import orjson
from starlette.types import Receive, Send

from broker.core.errors import BrokerError, invalid
from broker.runtime.rate_limits import KeyedBuckets
from broker.tokens.claims import Claims

# --- replies --------------------------------------------------------------------------------


async def respond(
    send: Send,
    status: int,
    body: bytes,
    extra: list[tuple[bytes, bytes]],
    *,
    head: bool = False,
    content_type: bytes = b"application/json",
) -> None:
    """Send ``body`` with ``status``; ``head``: its length and type only (a HEAD request's answer)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"%d" % len(body)), (b"content-type", content_type), *extra],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


def error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message}})


# --- the request's head -----------------------------------------------------------------------


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (ASGI names are lower-case), as Starlette reads it."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any case, as
    RFC 7235 has it); None when there is no header, no token, or another scheme. Every HTTP
    endpoint reads its token with this, then refuses a None in its own words."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


# --- the query string -----------------------------------------------------------------------

_NUMBER: Final = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?", re.ASCII)


def parse_query(raw: bytes) -> list[tuple[str, str]]:
    """(name, value) pairs, as Starlette reads them (latin-1, then percent-decoding as UTF-8)."""
    if not raw:
        return []
    text = raw.decode("latin-1")
    if "&" in text or "%" in text or "+" in text:
        return parse_qsl(text, keep_blank_values=True)
    name, _, value = text.partition("=")  # the usual "wait=30": what parse_qsl gives, at a fifth of its cost
    return [(name, value)]


def only(query: list[tuple[str, str]], allowed: frozenset[str], refuse: Callable[[str], BrokerError] = invalid) -> None:
    """Refuse unknown or repeated query parameters, as unknown keys are refused everywhere
    else: a typo such as ``?wiat=5`` must not silently become the default 30 s wait.
    ``refuse`` makes the error of a sentence (the agent API's starts with ``questionnaire:``)."""
    names = [name for name, _ in query]
    unknown = sorted(set(names) - allowed)
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise refuse(f"unknown query parameter(s) {shown}; this call takes {', '.join(sorted(allowed)) or 'none'}")
    repeated = sorted(name for name in allowed if names.count(name) > 1)
    if repeated:
        raise refuse(f"query parameter {repeated[0]!r} is given more than once")


def is_number(text: str) -> bool:
    """A plain number of seconds ("30", "0.5", "1e-3"): float() alone would also take " 5",
    "1_0", "+5" and non-ASCII digits, none of which is a number in the API's documented sense."""
    return _NUMBER.fullmatch(text) is not None and math.isfinite(float(text))


# --- the body -------------------------------------------------------------------------------


class ClientGone(Exception):
    """The caller hung up before its request body arrived: there is nobody to answer."""


async def read_body(receive: Receive, length: str | None, limit: int, too_large: str) -> bytes:
    """The whole body, refused (``payload_too_large``, 413, saying ``too_large``) once it is
    over ``limit`` bytes: by its Content-Length before any is read, else as it arrives."""
    if length is not None and length.isdecimal() and int(length) > limit:
        raise BrokerError("payload_too_large", too_large)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BrokerError("payload_too_large", too_large)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# --- per-token limits -------------------------------------------------------------------------


def limit_key(claims: Claims, token: str) -> str:
    """A token's rate-limit bucket: its jti, or a digest of the token itself where it has
    none (an identity provider's may not); never the token, which would sit in memory as a key."""
    if claims.jti is not None:
        return "j:" + claims.jti
    return "t:" + hashlib.sha256(token.encode()).hexdigest()


class RateLimited(BrokerError):
    """A token over its limit: 429 ``rate_limited``, with ``Retry-After: retry_after``."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__("rate_limited", message)
        self.retry_after = retry_after

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"retry-after", str(self.retry_after).encode())]


def take_read(limits: KeyedBuckets, claims: Claims, scope_headers: list[tuple[bytes, bytes]]) -> None:
    """Count one read of the token in ``scope_headers`` (its claims: ``claims``); raise
    ``RateLimited`` when it is over its limit."""
    token = bearer_token(header(scope_headers, b"authorization")) or ""
    wait = limits.take(limit_key(claims, token))
    if wait:
        raise RateLimited(f"too many requests with this token; retry in {wait} s", wait)
