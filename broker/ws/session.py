"""The session socket, ``/v1/sessions/{sid}/ws``: a person's client on one session, its
hello joining the session, then its commands (answers, drafts, clarifications, pings).

What every websocket shares (the hello's check, the frames in order, the limits, the end)
is ``WebsocketConnection`` (broker/ws/connection.py); the handshake's rules (origin,
subprotocol, session id) are broker/ws/handshake.py's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine
from typing import Any

from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.frames import Codec
from broker.core.plain_answer import plain_answer
from broker.core.status import CloseCode, CloseReason
from broker.service import Broker, Encoded
from broker.ws.connection import WebsocketConnection
from broker.ws.socket import Socket


class ClientConnection(WebsocketConnection):
    """One client on a session: hello, then commands; what the service knows as a Connection."""

    __slots__ = ("session_id",)

    def __init__(self, socket: Socket, broker: Broker, session_id: str, codec: Codec) -> None:
        super().__init__(socket, broker, codec)
        self.session_id = session_id

    @property
    def name(self) -> str:
        return self.session_id

    async def _hello(self, payload: str | bytes) -> None:
        broker = self.broker
        claims = await self._verified_hello(payload)
        if claims is None:
            return
        if not claims.allows(self.session_id):
            self.close(CloseCode.WRONG_SESSION, CloseReason.WRONG_SESSION)
            return
        if broker.local_clients(self.session_id) >= broker.config.max_connections_per_session:
            self.close(CloseCode.TRY_AGAIN_LATER, CloseReason.TOO_MANY_CONNECTIONS)
            return
        self.joined = True
        await broker.join(self)
        self._hold(claims)

    def _frame(self, payload: str | bytes) -> Coroutine[Any, Any, None] | None:
        broker = self.broker
        # The usual answer in one pass (core/plain_answer.py); any other frame is read here.
        plain = plain_answer(payload) if type(payload) is str and self.codec == "json" else None
        if plain is not None:
            broker.metrics.frame_count["answer"].inc()
            return broker.command(self, plain)
        try:
            frame = frames.parse_client_frame(frames.decode(payload, self.codec))
        except BrokerError as exc:
            broker.metrics.errors.labels(exc.code).inc()
            self.deliver(Encoded(frames.refusal(exc)))
            return None
        broker.metrics.frame_count[frames.frame_type(frame)].inc()
        if isinstance(frame, frames.Ping):
            self.deliver(Encoded(frames.pong()))
        elif isinstance(frame, frames.Hello):
            self.deliver(Encoded(frames.error("bad_frame", "hello was already received", frame.ref)))
        else:
            return broker.command(self, frame)
        return None

    async def _leave(self) -> None:
        with contextlib.suppress(Exception):
            await self.broker.leave(self)
