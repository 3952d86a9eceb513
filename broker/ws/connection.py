"""One accepted websocket, whichever path it came on: its hello, its frames in order, its
frames out, its limits and its end. The session socket (broker/ws/session.py) and the
inbox socket (broker/ws/inbox.py) are the two kinds; the transport (broker/ws/transport.py)
drives them through ``broker/ws/socket.py``'s protocols.

The work a frame sets off (the hello's join, a command) takes the frames in arrival order.
It starts at once, in the read callback, and a task takes over only when it has to wait
(broker/speedups/eager.py): on the memory store never, on Redis from the commit's round
trip. A client whose socket stops draining gets its frames queued, up to a bound, and is
then disconnected (it reconnects and gets the current state), so a slow client never holds
up the fan-out to others.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Final

from broker.core import frames
from broker.core.actors import Actor, ClientInfo
from broker.core.errors import BrokerError
from broker.core.frames import Codec
from broker.core.status import CloseCode, CloseReason
from broker.runtime.rate_limits import TokenBucket
from broker.service import Broker, Encoded
from broker.speedups.eager import Resuming, eagerly
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims
from broker.ws.socket import Socket

log = logging.getLogger("qbroker.ws")

# Frames queued for a client whose socket does not drain; one more and it is disconnected.
OUTBOUND_QUEUE: Final = 256
# Frames received but not yet handled: above this, stop reading the socket until the
# handler catches up (TCP pushes back on the client); the rate limit bounds the rest.
INBOX_HIGH: Final = 16
# Queued in place of the first frame over the rate limit: the frames before it are handled.
_OVER_LIMIT: Final = b"<over the rate limit>"
_NOBODY: Final = Actor(None, "client")  # a connection's actor until its hello names it


# The event loop keeps only weak references to tasks: hold fire-and-forget ones here.
_background: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


class WebsocketConnection:
    """One accepted websocket: its hello, its frames in order, its frames out, its end.

    A subclass says what the hello joins (``_hello``), what a frame after it does
    (``_frame``), how it leaves (``_leave``) and its name in the logs (``name``)."""

    __slots__ = (
        "socket",
        "broker",
        "codec",
        "client_id",
        "actor",
        "inbox",
        "backlog",
        "writable",
        "working",
        "worker",
        "held_back",
        "bucket",
        "timer",
        "said_hello",
        "over_limit",
        "joined",
        "gone",
        "unwatch",
    )

    def __init__(self, socket: Socket, broker: Broker, codec: Codec) -> None:
        self.socket = socket
        self.broker = broker
        self.codec: Codec = codec
        self.client_id = uuid.uuid4().hex[:16]
        self.actor = _NOBODY  # who it is, once its hello says
        # Lists, not deques: they stay short, and an empty deque costs ~800 bytes per client.
        self.inbox: list[str | bytes] = []
        self.backlog: list[bytes] = []  # frames waiting for the socket to drain
        self.writable = True
        self.working = False  # a worker handles the inbox (at once, or in ``worker``)
        self.worker: asyncio.Task[None] | Resuming | None = None
        self.held_back = False  # reading is paused for the inbox's backlog
        self.bucket = TokenBucket(broker.config.rate_limit, broker.config.rate_burst)
        # Until the hello: the hello deadline; after it: the token's expiry (if any).
        self.timer: asyncio.TimerHandle | None = socket.loop.call_later(
            broker.config.hello_timeout, self.close, CloseCode.HELLO_TIMEOUT, CloseReason.HELLO_TIMEOUT
        )
        self.said_hello = False  # the first frame arrived (it must be the hello)
        self.over_limit = False  # a frame came over the rate limit: the rest are dropped
        self.joined = False  # broker.join was called: broker.leave must follow
        self.gone = False  # the socket is closed
        self.unwatch: Callable[[], None] | None = None  # stops the watch on the token's revocation

    @property
    def name(self) -> str:
        """What the logs call it (the session, or the inbox's scope)."""
        raise NotImplementedError

    async def _hello(self, payload: str | bytes) -> None:
        """The first frame: a hello to verify, then join what the connection serves."""
        raise NotImplementedError

    def _frame(self, payload: str | bytes) -> Coroutine[Any, Any, None] | None:
        """A frame after the hello: handled at once (None), or the coroutine that handles it,
        which the worker awaits before the next frame (returned rather than awaited in a
        coroutine of its own: a coroutine fewer on every answer's path)."""
        raise NotImplementedError

    async def _leave(self) -> None:
        """Leave what the hello joined (once the socket is gone)."""
        raise NotImplementedError

    # --- frames in -----------------------------------------------------------------------

    def received(self, payload: str | bytes) -> None:
        if self.gone:
            return
        if not self.said_hello:
            self.said_hello = True
            self._cancel_timer()
        elif self.over_limit:
            return  # the close follows the frames that came within the limit
        elif not self.bucket.take():
            self.over_limit = True
            payload = _OVER_LIMIT
        self.inbox.append(payload)
        if len(self.inbox) >= INBOX_HIGH and not self.held_back:
            self.held_back = True
            self.socket.pause_reading_for_backlog(True)
        if not self.working:
            self.working = True
            work = self._work()
            # None when it finished at once (a task holds on to it otherwise: the loop's
            # references to tasks are weak).
            self.worker = eagerly(work) if self.broker.store.eager_safe else asyncio.ensure_future(work)

    async def _work(self) -> None:
        """Handle the received frames in order; exists only while there are some."""
        try:
            while self.inbox and not self.closing:
                payload = self.inbox.pop(0)
                if self.held_back and len(self.inbox) < INBOX_HIGH // 2:
                    self.held_back = False
                    self.socket.pause_reading_for_backlog(False)
                if payload is _OVER_LIMIT:
                    log.warning("rate limit exceeded", extra={"session": self.name, "client": self.client_id})
                    self.close(CloseCode.POLICY_VIOLATION, CloseReason.RATE_LIMITED)
                elif self.joined:
                    pending = self._frame(payload)
                    if pending is not None:
                        await pending
                else:
                    await self._hello(payload)
        except StoreUnavailable:
            log.warning("store unavailable; closing client", extra={"session": self.name})
            self.close(CloseCode.TRY_AGAIN_LATER, CloseReason.STORE_UNAVAILABLE)
        except Exception:
            log.exception("client connection failed", extra={"session": self.name, "client": self.client_id})
            self.close(CloseCode.INTERNAL_ERROR, CloseReason.INTERNAL_ERROR)
        finally:
            self.working = False
            self.worker = None
            if self.gone and self.joined:
                await self._leave()

    async def _verified_hello(self, payload: str | bytes) -> Claims | None:
        """The claims of the client token the first frame (a hello) carries; None when it is
        no hello or no valid client token (the connection is closing, with the code)."""
        try:
            frame = frames.parse_client_frame(frames.decode(payload, self.codec))
        except BrokerError as exc:
            if exc.frame != "hello":  # not even a hello (undecodable, no type, another type)
                self.close(CloseCode.PROTOCOL_VIOLATION, CloseReason.NOT_A_HELLO)
            elif exc.field == "token":  # absent or not a string: a token problem
                self.close(CloseCode.BAD_TOKEN, _close_reason(f"missing token: {exc.message}"))
            else:  # a hello with a wrong field is told what is wrong (a close reason holds 123 bytes)
                self.close(CloseCode.PROTOCOL_VIOLATION, _close_reason(exc.message))
            return None
        if not isinstance(frame, frames.Hello):
            self.close(CloseCode.PROTOCOL_VIOLATION, CloseReason.NOT_A_HELLO)
            return None
        try:
            claims = await self.broker.tokens.verify(frame.token, role="client")
        except BrokerError as exc:
            self.close(CloseCode.BAD_TOKEN, exc.message)
            return None
        # Who it is, for the record of what it changes: its token's holder, its program.
        self.actor = Actor(claims.sub, "client", ClientInfo(frame.client_kind, frame.client_name))
        return claims

    def _hold(self, claims: Claims) -> None:
        """The connection is in: it lasts until its token expires or is revoked."""
        if self.gone:
            return
        if claims.exp is not None:
            delay = max(0.0, claims.exp - time.time())
            self.timer = self.socket.loop.call_later(delay, self.close, CloseCode.BAD_TOKEN, CloseReason.TOKEN_EXPIRED)
        self.unwatch = self.broker.tokens.watch(claims, self._revoked)

    def _revoked(self) -> None:
        self.close(CloseCode.BAD_TOKEN, CloseReason.TOKEN_REVOKED)

    # --- frames out ----------------------------------------------------------------------

    def deliver(self, *frames: Encoded) -> None:
        """Write ``frames`` now (several in one write), or queue them while the socket does
        not drain; never blocks, never raises. A connection on its way out (either side
        began closing) takes nothing: the fan-out to the session's other clients goes on."""
        if self.closing or not self.socket.sending:
            return
        codec = self.codec
        if self.writable and not self.backlog:
            if len(frames) == 1:
                self.socket.write_frame(frames[0].data(codec), codec == "json")
            else:
                self.socket.write_frames([frame.data(codec) for frame in frames], codec == "json")
            return
        for frame in frames:
            if len(self.backlog) >= OUTBOUND_QUEUE:
                self.backlog.clear()
                self.close(CloseCode.POLICY_VIOLATION, CloseReason.TOO_SLOW)
                return
            self.backlog.append(frame.data(codec))

    def drain(self) -> None:
        """The socket drains again: send what waited, until it is full once more."""
        self.writable = True
        backlog, text = self.backlog, self.codec == "json"
        while backlog and self.writable and not self.closing and self.socket.sending:
            self.socket.write_frame(backlog.pop(0), text)  # may call pause_writing

    # --- the end -------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self.gone or self.socket.close_sent

    def close(self, code: int, reason: str = "") -> None:
        self._cancel_timer()
        self.socket.close_with(code, reason)

    def lost(self) -> None:
        """The socket is closed (by either side): forget the frames, leave the session."""
        if self.gone:
            return
        self.gone = True
        self._cancel_timer()
        if self.unwatch is not None:
            self.unwatch()
            self.unwatch = None
        self.inbox.clear()
        self.backlog.clear()
        if self.joined and not self.working:
            _in_background(self._leave())
        # else: the running worker leaves when it ends (after a join in progress completes)

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _close_reason(text: str) -> str:
    """``text`` cut to the 123 bytes of UTF-8 a close frame's reason may hold."""
    data = text.encode()
    return text if len(data) <= 123 else data[:120].decode(errors="ignore") + "..."
