"""The inbox websocket, ``/v1/inbox/ws``: the live list of what waits in the sessions a
client token covers (docs/protocol.md, "The inbox").

It is the session socket's twin: the same handshake (subprotocols, Origin), the same first
frame (a ``hello`` with a client token, within the hello timeout), the same limits (rate,
frame size, a slow reader disconnected) and close codes, from the same base
(``WebsocketConnection``, broker/ws/connection.py) on the same transport. What differs is
what it serves: after the hello, an
``inbox`` frame with every open questionnaire of the sessions the token covers, then a
frame for every change (broker/service/inbox.py); the only frame it takes after the hello
is ``ping``, and any other is refused by its type alone, before its fields are read (an
``answer`` told what its fields lack, or a ``draft`` that its text looks like a secret,
would suggest it could be sent here). A token of any scope will do: a pattern (``alice:*``), ``*``, or one session.
"""

from __future__ import annotations

import contextlib
from typing import Final

from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.frames import Codec
from broker.core.status import CloseCode, CloseReason
from broker.service import Broker, Encoded
from broker.ws.connection import WebsocketConnection
from broker.ws.socket import Socket

ONLY_PINGS: Final = "the inbox socket takes ping frames only; answer on the session's socket /v1/sessions/{sid}/ws"


class InboxConnection(WebsocketConnection):
    """One inbox socket: a hello, then the inbox's frames out and pings in."""

    __slots__ = ("scope", "ready")

    def __init__(self, socket: Socket, broker: Broker, codec: Codec) -> None:
        super().__init__(socket, broker, codec)
        self.scope = ""  # the token's sid: a session id, a prefix pattern or *; once the hello said it
        self.ready = False  # it has had its inbox frame (broker/service/inbox.py)

    @property
    def name(self) -> str:
        return self.scope

    async def _hello(self, payload: str | bytes) -> None:
        broker = self.broker
        claims = await self._verified_hello(payload)
        if claims is None:
            return
        if broker.inbox.sockets(claims.sid) >= broker.config.max_connections_per_session:
            self.close(CloseCode.TRY_AGAIN_LATER, CloseReason.TOO_MANY_INBOXES)
            return
        self.scope = claims.sid
        self.joined = True
        await broker.inbox.watch(self)
        self._hold(claims)

    def _frame(self, payload: str | bytes) -> None:
        metrics = self.broker.metrics
        try:
            value = frames.decode(payload, self.codec)
            kind, ref = frames.peek(value)
            if kind is None or kind == "ping":  # (the parser refuses a frame that is no map or has no type)
                frames.parse_client_frame(value)
                self.deliver(Encoded(frames.pong()))
                return
            raise BrokerError("bad_frame", "hello was already received" if kind == "hello" else ONLY_PINGS, ref=ref)
        except BrokerError as exc:
            metrics.errors.labels(exc.code).inc()
            self.deliver(Encoded(frames.error(exc.code, exc.message, exc.ref)))

    async def _leave(self) -> None:
        with contextlib.suppress(Exception):
            await self.broker.inbox.unwatch(self)
