"""``GET /v1/inbox``: the open questionnaires of the sessions a client token covers, a page
at a time (docs/protocol.md, "The inbox").

A person's clients call it (the browser page, the terminal client) with the client token
they would use on the websocket, as ``Authorization: Bearer``; any scope will do: a pattern
(``alice:*``), ``*``, or one session. Errors are the agent API's shape,
``{"error": {"code", "message"}}``, with messages that start with ``inbox:``. The answer is
read from the store on every call (``broker.service.inbox_pages.read_page``: the sessions
it shows and a few more, through the store's index): nothing is cached, so two brokers
answer alike and go on from each other's cursors.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
from starlette.types import Receive, Scope, Send

from broker.core import inbox
from broker.core.errors import BrokerError
from broker.http.kit import RateLimited, bearer_token, error_body, header, respond, take_read
from broker.service import Broker
from broker.service.inbox_pages import read_page
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims

log = logging.getLogger("qbroker.http")

INBOX_HTTP_PATH: Final = "/v1/inbox"
PAGES_AT_ONCE: Final = 4
_ALLOW: Final = "GET, HEAD"
_PARAMETERS: Final = frozenset({"limit", "cursor"})


class InboxAPI:
    """The ASGI endpoint of ``GET /v1/inbox``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.limits = broker.read_limits  # per token, shared with the record's
        # Pages read at once by this process: each reads up to a few hundred sessions, so a
        # flood of them would hold the store and the event loop; more wait their turn.
        self._reading = asyncio.Semaphore(PAGES_AT_ONCE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method: str = scope["method"]
        extra: list[tuple[bytes, bytes]] = [(b"cache-control", b"no-store")]  # (prompts: not for caches)
        try:
            if method not in ("GET", "HEAD"):
                extra.append((b"allow", _ALLOW.encode()))
                raise BrokerError("method_not_allowed", f"inbox: {method} is not allowed on this path; use GET")
            status, body = 200, orjson.dumps(await self._page(scope))
        except BrokerError as exc:
            self.broker.metrics.errors.labels(exc.code).inc()
            status = 405 if exc.code == "method_not_allowed" else exc.http_status
            body = error_body(exc.code, exc.message if exc.message.startswith("inbox:") else f"inbox: {exc.message}")
            if isinstance(exc, RateLimited):
                extra += exc.headers
        except StoreUnavailable:
            log.warning("store unavailable", extra={"path": scope["path"]})
            self.broker.metrics.errors.labels("store_unavailable").inc()
            status = 503
            body = error_body("store_unavailable", "inbox: the state store is unavailable; retry shortly")
        except Exception:  # a bug: answer 500 and log it
            log.exception("inbox call failed", extra={"path": scope["path"]})
            status = 500
            body = error_body("internal_error", "inbox: the broker failed; see its log")
        await respond(send, status, body, extra, head=method == "HEAD")

    async def _page(self, scope: Scope) -> dict[str, Any]:
        broker = self.broker
        claims = await self._authorize(scope)
        take_read(self.limits, claims, scope["headers"])
        query = _query(scope["query_string"])
        limit = inbox.parse_limit(query["limit"]) if "limit" in query else inbox.DEFAULT_LIMIT
        after = inbox.parse_cursor(query["cursor"]) if "cursor" in query else None
        async with self._reading:
            shown, last = await read_page(broker.store, claims.sid, after, limit, broker.clock())
        return {
            "items": [entry.item(clients) for entry, clients in shown],
            "next": None if last is None else inbox.cursor(last),
        }

    async def _authorize(self, scope: Scope) -> Claims:
        token = bearer_token(header(scope["headers"], b"authorization"))
        if token is None:
            raise BrokerError("unauthorized", "inbox: missing 'Authorization: Bearer <client token>'")
        try:
            return await self.broker.tokens.verify(token, role="client")
        except BrokerError as exc:
            raise BrokerError("unauthorized", f"inbox: {exc.message}") from None


def _query(raw: bytes) -> dict[str, str]:
    """The query's parameters: ``limit`` and ``cursor``, each at most once; anything else is
    refused, so a typo (``?limt=5``) is not silently the default."""
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    names = [name for name, _ in pairs]
    unknown = sorted(set(names) - _PARAMETERS)
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise inbox.invalid_request(f"unknown query parameter(s) {shown}; this call takes cursor and limit")
    repeated = sorted(name for name in _PARAMETERS if names.count(name) > 1)
    if repeated:
        raise inbox.invalid_request(f"query parameter {repeated[0]!r} is given more than once")
    return dict(pairs)
