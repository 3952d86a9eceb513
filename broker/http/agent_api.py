"""The agent API over HTTP: start/resume, re-attach, abort. A thin adapter over ``Broker``.

Served as plain ASGI rather than through Starlette's routing: these calls are the broker's
hot HTTP path, and a Starlette ``Request``, its middleware stack and ``JSONResponse`` cost
more CPU than the calls' own work. The route table (broker/http/routes.py) sends the two
agent API paths here.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Final

import orjson
from starlette.types import Receive, Scope, Send

from broker.core.errors import BrokerError, invalid
from broker.core.model import ResumeInput, StartInput, parse_tool_input
from broker.core.plain_start import plain_start
from broker.core.wire import SESSION_ID_RULE
from broker.http.kit import ClientGone, bearer_token, is_number, only, parse_query, read_body
from broker.http.kit import error_body as _error_body
from broker.http.kit import header as _header
from broker.http.kit import respond as _respond
from broker.service import Broker
from broker.service.token_guard import while_token_holds
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims, valid_session_id

log = logging.getLogger("qbroker.http")

# The seed's limits count characters, not bytes: a tool input at every limit (20 questions of
# 50 options, ~875,000 characters) is 0.9 MiB in ASCII but 10.5 MB when each character is an
# emoji that the agent's JSON encoder escapes ("\ud83d\ude00", 12 bytes). No valid input
# written out plainly is refused; the token is checked before the body is read.
MAX_BODY_BYTES = 16 * 1024 * 1024
TOO_LARGE: Final = "questionnaire: the request body is larger than 16 MiB"
MAX_WAIT = 300.0
DEFAULT_WAIT = 30.0
MAX_IDEMPOTENCY_KEY = 200

# The methods each path serves; any other method is a 405 naming them in ``Allow``.
_START_METHODS: Final = frozenset({"POST"})
_ITEM_METHODS: Final = frozenset({"GET", "HEAD", "DELETE"})  # HEAD is a GET without the body
_START_ALLOW: Final = "POST"
_ITEM_ALLOW: Final = "GET, HEAD, DELETE"


class AgentAPI:
    """The ASGI endpoint of ``/v1/sessions/{sid}/questionnaire`` and ``.../questionnaires/{qid}``
    (broker/http/routes.py)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send, sid: str, qid: str | None = None) -> None:
        method: str = scope["method"]
        allowed, allow = (_START_METHODS, _START_ALLOW) if qid is None else (_ITEM_METHODS, _ITEM_ALLOW)
        extra: list[tuple[bytes, bytes]] = []
        try:
            if method not in allowed:
                # Any other method, even one nobody serves: a JSON refusal with the right
                # ``Allow`` (the web client's static files would say "GET, HEAD" in plain text).
                status = 405
                body = _error_body(
                    "method_not_allowed", f"questionnaire: {method} is not allowed on this path; use {allow}"
                )
                extra.append((b"allow", allow.encode()))
            else:
                status, result = await self._handle(scope, receive, method, sid, qid)
                body = orjson.dumps(result)
        except BrokerError as exc:
            self.broker.metrics.errors.labels(exc.code).inc()
            status, body = exc.http_status, _error_body(exc.code, exc.message)
        except StoreUnavailable:
            log.warning("store unavailable", extra={"path": scope["path"]})
            self.broker.metrics.errors.labels("store_unavailable").inc()
            status = 503
            body = _error_body("store_unavailable", "questionnaire: the state store is unavailable; retry shortly")
        except ClientGone:
            return
        except Exception:  # a bug: answer 500 (as Starlette's ServerErrorMiddleware would) and log it
            log.exception("agent API call failed", extra={"path": scope["path"], "method": method})
            status = 500
            body = _error_body("internal_error", "questionnaire: the broker failed on this call; see its log")
        await _respond(send, status, body, extra)

    async def _handle(
        self, scope: Scope, receive: Receive, method: str, sid: str, qid: str | None
    ) -> tuple[int, dict[str, Any]]:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        broker, claims = await self._authorize(_header(headers, b"authorization"), sid)
        sub = claims.sub  # who holds the token, when it says (for the record)
        query = parse_query(scope["query_string"])
        if qid is None:  # POST .../questionnaire: start or resume
            wait = _wait(query, _START_QUERY)
            client_wait = _client_wait(query, broker.config.max_client_wait)
            tool_input = _tool_input(
                await read_body(receive, _header(headers, b"content-length"), MAX_BODY_BYTES, TOO_LARGE)
            )
            reattach = _reattach(query)
            if isinstance(tool_input, StartInput):
                key = _header(headers, b"idempotency-key")
                if key is not None and not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
                    raise invalid(f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
                if reattach:
                    if key is not None:
                        raise invalid("reattach=true and an Idempotency-Key each make a repeated start safe: send one")
                    return await broker.start_or_reattach(
                        sid, tool_input.questions, wait, asked_by=sub, client_wait=client_wait
                    )
                return await broker.start_questionnaire(sid, tool_input.questions, key, wait, client_wait, asked_by=sub)
            assert isinstance(tool_input, ResumeInput)
            if client_wait is not None or reattach:
                raise invalid("clientWait and reattach apply to a start (a new questionnaire), not to a resume")
            return await broker.resume(sid, tool_input, wait, sub=sub)
        if method == "DELETE":
            only(query, _NO_QUERY)
            return await broker.abort(sid, qid, sub=sub)
        wait = _wait(query)
        if wait <= 0:
            return await broker.wait_for_outcome(sid, qid, wait)
        # A long poll ends (401) as soon as its token is revoked or expires: the person's
        # answers must not reach a caller that no longer may have them.
        return await while_token_holds(
            broker.tokens, claims, broker.clock, lambda: broker.wait_for_outcome(sid, qid, wait)
        )

    async def _authorize(self, header: str | None, session_id: str) -> tuple[Broker, Claims]:
        """Check the bearer token against the path's session; its claims."""
        broker = self.broker
        claims = await verify_agent(broker, header)
        check_session(claims, session_id)
        if broker.shutting_down.is_set():
            raise BrokerError("shutting_down", "questionnaire: this broker is shutting down; retry")
        return broker, claims


async def verify_agent(broker: Broker, header: str | None) -> Claims:
    """The claims of the agent token in an ``Authorization`` header; ``unauthorized`` (401)
    when there is none, or it is invalid, expired, revoked or not an agent's. (The MCP
    endpoint checks its requests with this too.)"""
    token = bearer_token(header)
    if token is None:
        raise BrokerError("unauthorized", "questionnaire: missing 'Authorization: Bearer <agent token>'")
    try:
        return await broker.tokens.verify(token, role="agent")
    except BrokerError as exc:
        raise BrokerError("unauthorized", f"questionnaire: {exc.message}") from None


def check_session(claims: Claims, session_id: str) -> None:
    """A malformed session id is ``invalid_arguments`` (400); one the token does not cover,
    ``forbidden`` (403)."""
    if not valid_session_id(session_id):
        raise invalid(f"the session id must be {SESSION_ID_RULE}")
    if not claims.allows(session_id):
        raise BrokerError("forbidden", f"questionnaire: this token is not valid for session {session_id}")


# --- the query string ---------------------------------------------------------------------

_WAIT_ONLY: Final = frozenset({"wait"})
_START_QUERY: Final = frozenset({"wait", "clientWait", "reattach"})
_NO_QUERY: Final = frozenset[str]()


def _wait(query: list[tuple[str, str]], allowed: frozenset[str] = _WAIT_ONLY) -> float:
    """``wait`` (the long poll's seconds), after refusing any parameter not in ``allowed``."""
    if not query:
        return DEFAULT_WAIT
    only(query, allowed)
    raw = _value(query, "wait")
    if raw is None:
        return DEFAULT_WAIT
    return _seconds(raw, "wait", MAX_WAIT)


def _client_wait(query: list[tuple[str, str]], bound: float) -> float | None:
    """``clientWait``: how long a new questionnaire waits for a first client (None: not
    given), from 0 to ``bound`` (QBROKER_MAX_CLIENT_WAIT). Checked by ``_wait`` for company."""
    raw = _value(query, "clientWait")
    return None if raw is None else _seconds(raw, "clientWait", bound)


def _reattach(query: list[tuple[str, str]]) -> bool:
    """``reattach=true``: a start that re-attaches to an identical one still open, as the
    MCP endpoint's starts do (a command run again, such as ``qbroker ask``, asks once)."""
    raw = _value(query, "reattach")
    if raw is None:
        return False
    if raw != "true":
        raise invalid(f"reattach must be true (or absent), got {raw[:40]!r}")
    return True


def _value(query: list[tuple[str, str]], name: str) -> str | None:
    for key, value in query:
        if key == name:
            return value
    return None


def _seconds(raw: str, name: str, bound: float) -> float:
    if not is_number(raw):
        raise invalid(f"{name} must be a number of seconds from 0 to {bound:g}, got {raw[:40]!r}")
    seconds = float(raw)
    if not math.isfinite(seconds) or not 0 <= seconds <= bound:
        raise invalid(f"{name} must be a number of seconds from 0 to {bound:g}, got {raw!r}")
    return seconds


# --- the body -------------------------------------------------------------------------------

_UTF8_BOM: Final = b"\xef\xbb\xbf"


def _tool_input(body: bytes) -> StartInput | ResumeInput:
    # orjson takes UTF-8 only, as RFC 8259 asks of JSON between systems; a UTF-8 byte order
    # mark, which the RFC lets a parser ignore, is ignored as the stdlib parser did.
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM) :]
    plain = plain_start(body)  # the usual start, in one pass; anything else is read below
    if plain is not None:
        return plain
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:  # also: invalid UTF-8, lone surrogates, NaN, nesting over 1024
        raise invalid("the request body must be a JSON object (the tool input)") from None
    try:
        return parse_tool_input(value)
    except RecursionError:  # a value nested ~1000 deep can exhaust the stack in the checks
        raise invalid("the request body is nested too deeply") from None
