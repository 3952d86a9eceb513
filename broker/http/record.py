"""The record of a session, over HTTP: who changed each questionnaire, and the session's history.

    GET /v1/sessions/{sid}/questionnaires/{id}/events   -> {"events": [...]}
    GET /v1/sessions/{sid}/questionnaires?status=&limit=&before=   -> {"items": [...], "next": ...}

Both are read-only and answer an agent token or a client token whose scope covers the
session, presented as ``Authorization: Bearer`` (a client's token travels in its hello on
the websocket; here, where there is no hello, in the header). Off the hot path: plain ASGI
like the agent API (broker/http/agent_api.py, whose error shape they share: messages start with
``history:`` or ``events:``), routed by broker/app.py.
Events and history hold ids, steps, times and who: never an answer or a text.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final

import orjson
from starlette.types import Receive, Scope, Send

from broker.core.errors import BrokerError
from broker.core.history import STATUSES, Summary
from broker.core.wire import SESSION_ID_RULE
from broker.http.kit import RateLimited, bearer_token, error_body, header, only, parse_query, respond, take_read
from broker.service import Broker
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims, valid_session_id

log = logging.getLogger("qbroker.http")

_ALLOW: Final = "GET, HEAD"
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 200
# A page filtered by status looks at no more questionnaires than this; when it stops short,
# ``next`` says where the next page goes on (a page may then hold fewer than ``limit``).
MAX_SCAN: Final = 1000
_SCAN_BATCH: Final = 100
_LIST_PARAMS: Final = frozenset({"status", "limit", "before"})


class HistoryAPI:
    """The ASGI endpoint of ``/v1/sessions/{sid}/questionnaires`` and ``.../{qid}/events``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.limits = broker.read_limits  # per token, shared with the inbox's

    async def __call__(self, scope: Scope, receive: Receive, send: Send, sid: str, qid: str | None = None) -> None:
        method: str = scope["method"]
        word = "history" if qid is None else "events"  # (what every error message starts with)
        extra: list[tuple[bytes, bytes]] = []
        try:
            if method not in ("GET", "HEAD"):
                extra.append((b"allow", _ALLOW.encode()))
                raise BrokerError("method_not_allowed", f"{method} is not allowed on this path; use GET")
            claims = await self._authorize(scope, sid)
            take_read(self.limits, claims, scope["headers"])
            query = parse_query(scope["query_string"])
            if qid is None:
                status, body = 200, orjson.dumps(await self._list(sid, query))
            else:
                _only(query, frozenset())
                status, body = 200, orjson.dumps(await self._events(sid, qid))
        except BrokerError as exc:
            self.broker.metrics.errors.labels(exc.code).inc()
            status = 405 if exc.code == "method_not_allowed" else exc.http_status
            body = error_body(exc.code, f"{word}: {exc.message}")
            if isinstance(exc, RateLimited):
                extra += exc.headers
        except StoreUnavailable:
            log.warning("store unavailable", extra={"path": scope["path"]})
            self.broker.metrics.errors.labels("store_unavailable").inc()
            body = error_body("store_unavailable", f"{word}: the state store is unavailable; retry shortly")
            status = 503
        except Exception:  # a bug: a JSON 500, logged
            log.exception("history call failed", extra={"path": scope["path"], "method": method})
            status, body = 500, error_body("internal_error", f"{word}: the broker failed on this call; see its log")
        await respond(send, status, body, extra, head=method == "HEAD")

    async def _authorize(self, scope: Scope, session_id: str) -> Claims:
        """An agent or client token, covering the path's session."""
        token = bearer_token(header(scope["headers"], b"authorization"))
        if token is None:
            raise BrokerError("unauthorized", "missing 'Authorization: Bearer <agent or client token>'")
        claims = await self.broker.tokens.verify(token, role=None)
        if claims.role not in ("agent", "client"):
            raise BrokerError("unauthorized", f"{claims.role} tokens cannot be used here: use an agent or client token")
        if not valid_session_id(session_id):
            raise BrokerError("invalid_arguments", f"the session id must be {SESSION_ID_RULE}")
        if not claims.allows(session_id):
            raise BrokerError("forbidden", f"this token is not valid for session {session_id}")
        return claims

    async def _events(self, session_id: str, questionnaire_id: str) -> dict[str, Any]:
        events = await self.broker.store.events(session_id, questionnaire_id)
        if events is None:
            raise BrokerError("unknown_questionnaire", f"no questionnaire {questionnaire_id} in session {session_id}")
        return {"events": [event.to_wire() for event in events]}

    async def _list(self, session_id: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        _only(query, _LIST_PARAMS)
        given = dict(query)
        status = given.get("status")
        if status is not None and status not in STATUSES:
            raise BrokerError("invalid_arguments", f"status must be one of {', '.join(STATUSES)}")
        limit = _whole(given.get("limit"), "limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise BrokerError("invalid_arguments", f"limit must be 1-{MAX_LIMIT}")
        before = _whole(given["before"], "before", 0) if "before" in given else None
        items, following = await page(self.broker, session_id, status, limit, before)
        return {"items": [item.to_wire() for item in items], "next": None if following is None else str(following)}


async def page(
    broker: Broker, session_id: str, status: str | None, limit: int, before: int | None
) -> tuple[list[Summary], int | None]:
    """Up to ``limit`` summaries (of ``status`` only, when given), newest first, from
    ``before``; and the cursor of the next page (None: there is none)."""
    store, found, cursor, scanned = broker.store, list[Summary](), before, 0
    while True:
        want = limit + 1 - len(found) if status is None else _SCAN_BATCH
        batch = await store.history(session_id, cursor, want)
        for summary in batch:
            scanned += 1
            if status is None or summary.status == status:
                found.append(summary)
                if len(found) > limit:  # one more than the page: there is a next page
                    return found[:limit], found[limit - 1].seq
            cursor = summary.seq
        if len(batch) < want:
            return found, None
        if scanned >= MAX_SCAN:
            return found, cursor


def _only(query: list[tuple[str, str]], allowed: frozenset[str]) -> None:
    """Refuse unknown or repeated parameters: a typo must not silently list everything.
    (The agent API's rule; its words are prefixed with ``history:`` or ``events:`` above.)"""
    only(query, allowed, refuse=partial(BrokerError, "invalid_arguments"))


def _whole(raw: str | None, name: str, default: int) -> int:
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # ("" included)
        raise BrokerError("invalid_arguments", f"{name} must be a whole number, got {raw[:40]!r}")
    return int(raw)
