"""The websocket handshake's rules: which paths are sockets of ours, which Origins and
subprotocols are accepted, and which connection an accepted upgrade runs.

``handshake_for(broker)`` is what the server hands the transport (broker/ws/socket.py's
``Handshake``): the transport knows how to upgrade, this module what to upgrade to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from websockets.datastructures import Headers

from broker.core import frames
from broker.runtime.hosts import AllowedHosts
from broker.service import Broker
from broker.tokens.claims import valid_session_id
from broker.ws.inbox import InboxConnection
from broker.ws.session import ClientConnection
from broker.ws.socket import Accept, Handshake, Refuse

SESSION_PATH: Final = "/v1/sessions/{sid}/ws"
INBOX_PATH: Final = "/v1/inbox/ws"
_SESSION_PATH: Final = re.compile(r"/v1/sessions/([^/]*)/ws")


def origin_allowed(headers: Mapping[str, str], allowed: tuple[str, ...]) -> bool:
    """Browsers always send Origin; other clients (TUI, bots) usually do not.

    ``headers``: case-insensitive (websockets' or Starlette's), as the MCP endpoint checks
    its requests' Origin by the same rule.

    The broker's own page (same origin: the Origin's host is the host connected to) is
    always allowed; ``allowed`` (lower-case, without a trailing slash) adds other origins.
    """
    origin = headers.get("origin")
    if origin is None:
        return True
    if urlsplit(origin).netloc.lower() == headers.get("host", "").lower():
        return True
    return "*" in allowed or origin.rstrip("/").lower() in allowed


def _refusal(session_id: str | None, headers: Headers, allowed: tuple[str, ...], hosts: AllowedHosts) -> str | None:
    """Why a handshake is refused before the upgrade (HTTP 403), or None (``session_id``:
    the path's, None for the inbox's path)."""
    if not hosts.allows(headers.get("host")):
        return "host not allowed"
    if session_id is not None and not valid_session_id(session_id):
        return "invalid session id"
    if not origin_allowed(headers, allowed):
        return "origin not allowed"
    return None


def _subprotocol(headers: Headers) -> tuple[bool, str | None]:
    """(acceptable, chosen): a client that offers subprotocols must offer one of ours."""
    offered = [token.strip() for header in headers.get_all("Sec-WebSocket-Protocol") for token in header.split(",")]
    chosen = next((p for p in offered if p in frames.SUBPROTOCOLS), None)
    return (not offered or chosen is not None), chosen


def handshake_for(broker: Broker) -> Handshake:
    """The handshake of ``broker``'s two sockets: the session's and the inbox's."""

    def handshake(path: str, headers: Headers) -> Accept | Refuse | None:
        match = _SESSION_PATH.fullmatch(path)
        inbox = match is None and path == INBOX_PATH
        if match is None and not inbox:
            return None  # not ours: the ASGI app answers (and refuses)
        session_id = "" if match is None else match.group(1)
        acceptable, chosen = _subprotocol(headers)
        refusal = _refusal(None if inbox else session_id, headers, broker.config.allowed_origins, broker.allowed_hosts)
        if refusal is not None:
            # (The Origin is what an operator needs to fix QBROKER_ALLOWED_ORIGINS; cut, as
            # it is the sender's text.)
            origin = (headers.get("origin") or "")[:200]
            host = (headers.get("host") or "")[:200]
            return Refuse({"session": session_id[:128], "reason": refusal, "origin": origin, "host": host})
        if not acceptable or broker.shutting_down.is_set():
            return Refuse()
        codec = frames.codec_for(chosen)
        if inbox:
            return Accept(chosen, lambda socket: InboxConnection(socket, broker, codec))
        return Accept(chosen, lambda socket: ClientConnection(socket, broker, session_id, codec))

    return handshake
