"""What every request to the MCP endpoint passes before the MCP SDK sees it.

The endpoint is the agent API in another protocol, so it refuses what the agent API refuses,
in the agent API's words (``{"error": {"code", "message"}}``, the same statuses), on every
request whatever its method:

1. an ``Origin`` that is neither the broker's own nor in ``QBROKER_ALLOWED_ORIGINS``: 403
   (a page of another site must not use the endpoint through a visitor's browser; DNS
   rebinding, which MCP's Streamable HTTP transport asks servers to guard against, is the
   broker's Host check before this gate: broker/runtime/hosts.py);
2. no ``Authorization: Bearer <agent token>``, or a token that is invalid, expired or a
   client's: 401;
3. a session the token does not cover: 403; ``/mcp`` takes its session from the token, so a
   token for more than one session (``*``) must name it in the path,
   ``/v1/sessions/{sid}/mcp``; a malformed session id there: 400;
4. a broker that is shutting down: 503 (a load balancer tries another);
5. a query other than ``?timeout=SECONDS`` and ``?inHost=fallback|race|off``: 400 (as the
   agent API refuses unknown ones);
6. a body over 16 MiB: 413 (read here, after the token, and handed on whole);
7. a ``GET`` (the stateless endpoint has nothing to stream, and a session's requests are
   POSTs): 405 with ``Allow: POST, DELETE``, after the token.

``?timeout=SECONDS`` (in the URL a host is configured with) bounds each tool call, for hosts
that give up on a call after a fixed time: the call then ends first, with a tool error that
says the questionnaire is still open and how to go on waiting (``calls.py``).
``?inHost=`` sets, for the hosts configured with that URL, when the questionnaire is put into
the host's own form (``QBROKER_IN_HOST``'s three words; ``in_host.py``).
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from broker.core.errors import BrokerError, invalid
from broker.core.host_form import IN_HOST_MODES
from broker.http import agent_api, kit
from broker.http.kit import error_body, respond
from broker.service import Broker
from broker.tokens.claims import Claims, valid_session_id
from broker.ws.handshake import origin_allowed

log = logging.getLogger("qbroker.mcp")

MAX_TIMEOUT: Final = 86400
_QUERY: Final = frozenset({"timeout", "inHost"})
# Where the gate leaves who is calling, for the tool (it reads the request's scope), and the
# body it read (for the endpoint's routing of older hosts' sessions).
CALLER_KEY: Final = "qbroker.mcp.caller"
BODY_KEY: Final = "qbroker.mcp.body"


class Caller:
    """Who calls, for which session: what the tool needs of the request."""

    __slots__ = ("claims", "in_host", "session_id", "sub", "timeout")

    def __init__(
        self,
        session_id: str,
        sub: str | None,
        timeout: float | None = None,
        in_host: str | None = None,
        claims: Claims | None = None,
    ) -> None:
        self.session_id = session_id
        self.sub = sub
        self.timeout = timeout  # seconds a tool call may wait (None: as long as it takes)
        self.in_host = in_host  # when to ask in the host's form (None: QBROKER_IN_HOST)
        self.claims = claims  # the token's, checked again before and during every wait


async def admit(broker: Broker, scope: Scope, receive: Receive, send: Send, path_session: str | None) -> Receive | None:
    """Check the request; answer a refusal and return None, or return the ``receive`` to
    hand on (the body already read, so that its size was checked) with the caller in
    ``scope[CALLER_KEY]``."""
    headers = Headers(scope=scope)
    try:
        if not origin_allowed(headers, broker.config.allowed_origins):
            log.info("mcp request refused: origin not allowed", extra={"origin": headers.get("origin", "")[:200]})
            raise BrokerError("forbidden", "questionnaire: this Origin may not use the MCP endpoint")
        caller = await _authorize(broker, headers.get("authorization"), path_session)
        _no_stream(scope["method"])
        if broker.shutting_down.is_set():
            raise BrokerError("shutting_down", "questionnaire: this broker is shutting down; retry")
        caller.timeout, caller.in_host = _query(scope["query_string"])
        body = await kit.read_body(
            receive, headers.get("content-length"), agent_api.MAX_BODY_BYTES, agent_api.TOO_LARGE
        )
    except BrokerError as exc:
        broker.metrics.errors.labels(exc.code).inc()
        await refuse(send, exc)
        return None
    except kit.ClientGone:
        return None
    scope[CALLER_KEY] = caller
    scope[BODY_KEY] = body
    return _replay(body, receive)


async def _authorize(broker: Broker, header: str | None, path_session: str | None) -> Caller:
    claims = await agent_api.verify_agent(broker, header)
    if path_session is not None:
        agent_api.check_session(claims, path_session)
        return Caller(path_session, claims.sub, claims=claims)
    if not valid_session_id(claims.sid):
        # A pattern (alice:*) or * covers more than one session: which one is the caller's?
        raise BrokerError(
            "forbidden",
            f"questionnaire: this token covers more than one session ({claims.sid!r}); name the session in the"
            " path: /v1/sessions/{sid}/mcp",
        )
    return Caller(claims.sid, claims.sub, claims=claims)


def _no_stream(method: str) -> None:
    """A ``GET`` would open a stream that never carries anything (nothing is sent outside a
    call's own stream) and that one token could hold any number of: 405, as the MCP
    specification allows."""
    if method == "GET":
        raise BrokerError("method_not_allowed", "questionnaire: GET is not served here; this endpoint takes POST")


def _query(raw: bytes) -> tuple[float | None, str | None]:
    """``?timeout=SECONDS`` (a plain number from 1 to ``MAX_TIMEOUT``) and ``?inHost=``
    (one of ``IN_HOST_MODES``); each None when not given."""
    query = kit.parse_query(raw)
    if not query:
        return None, None
    kit.only(query, _QUERY)
    given = dict(query)
    timeout = None
    text = given.get("timeout")
    if text is not None:
        if not kit.is_number(text) or not 1 <= float(text) <= MAX_TIMEOUT:
            raise invalid(f"timeout must be a number of seconds from 1 to {MAX_TIMEOUT}, got {text[:40]!r}")
        timeout = float(text)
    in_host = given.get("inHost")
    if in_host is not None and in_host not in IN_HOST_MODES:
        raise invalid(f"inHost must be one of {', '.join(IN_HOST_MODES)}, got {in_host[:40]!r}")
    return timeout, in_host


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then whatever comes next (the
    disconnect the SDK watches for while a call streams)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


async def refuse(send: Send, exc: BrokerError) -> None:
    extra: list[tuple[bytes, bytes]] = []
    if exc.code == "unauthorized":
        # RFC 6750: a 401 names the scheme. No resource_metadata: this endpoint takes the
        # broker's own tokens, not OAuth, so a host has nothing to discover.
        extra.append((b"www-authenticate", b'Bearer realm="qbroker"'))
    if exc.code == "method_not_allowed":
        extra.append((b"allow", b"POST, DELETE"))
    await respond(send, exc.http_status, error_body(exc.code, exc.message), extra)
