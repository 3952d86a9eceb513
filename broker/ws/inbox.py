"""The inbox websocket, ``/v1/inbox/ws``: the live list of what waits in the sessions a
client token covers (docs/protocol.md, "The inbox").

It is the session socket's twin: the same handshake (subprotocols, Origin), the same first
frame (a ``hello`` with a client token, within the hello timeout), the same limits (rate,
frame size, a slow reader disconnected) and close codes, on the same protocol class
(broker/ws/transport.py). What differs is what it serves: after the hello, an
``inbox`` frame with every open questionnaire of the sessions the token covers, then a
frame for every change (broker/service/inbox.py); the only frame it takes after the hello
is ``ping``, and any other is refused by its type alone, before its fields are read (an
``answer`` told what its fields lack, or a ``draft`` that its text looks like a secret,
would suggest it could be sent here). A token of any scope will do: a pattern (``alice:*``), ``*``, or one session.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final

from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.frames import Codec
from broker.core.status import CloseCode, CloseReason
from broker.service import Broker, Encoded
from broker.ws.session import ClientConnection

if TYPE_CHECKING:
    from broker.ws.transport import ClientSocket

INBOX_PATH: Final = "/v1/inbox/ws"
ONLY_PINGS: Final = "the inbox socket takes ping frames only; answer on the session's socket /v1/sessions/{sid}/ws"


class InboxConnection(ClientConnection):
    """One inbox socket: a hello, then the inbox's frames out and pings in."""

    __slots__ = ("scope", "ready")

    def __init__(self, socket: ClientSocket, broker: Broker, codec: Codec) -> None:
        # (session_id names the connection in logs: its scope, once the hello said it)
        super().__init__(socket, broker, "", codec)
        self.scope = ""  # the token's sid: a session id, a prefix pattern or *
        self.ready = False  # it has had its inbox frame (broker/service/inbox.py)

    async def _hello(self, payload: str | bytes) -> None:
        broker = self.broker
        claims = await self._verified_hello(payload)
        if claims is None:
            return
        if broker.inbox.sockets(claims.sid) >= broker.config.max_connections_per_session:
            self.close(CloseCode.TRY_AGAIN_LATER, CloseReason.TOO_MANY_INBOXES)
            return
        self.scope = self.session_id = claims.sid
        self.joined = True
        await broker.inbox.watch(self)
        self._hold(claims)

    async def _frame(self, payload: str | bytes) -> None:
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
