"""The client websocket: handshake checks, hello/auth, limits, and the command loop.

uvicorn parses HTTP and hands each websocket upgrade to a protocol class. Ours,
``ClientSocket``, extends uvicorn's sans-I/O one (websockets' ``ServerProtocol`` underneath,
which keeps the handshake, keepalive pings and closing handshake) and serves
``/v1/sessions/{sid}/ws`` itself instead of through ASGI: frames arrive as callbacks and
frames to the client are written to the transport at once. Why not the ASGI route:

- an idle client then costs no task, no coroutine stack and no receive queue, which is most
  of the memory a connection costs under ASGI;
- a frame takes no extra hops: no receive queue between parser and handler, no writer task
  between the fan-out and the socket (the answer -> next question latency).

The work a frame sets off (the hello's join, a command) takes the frames in arrival order.
It starts at once, in the read callback, and a task takes over only when it has to wait
(broker/speedups/eager.py): on the memory store never, on Redis from the commit's round trip (where
redis-py carries the commands, a task from the start). A whole data frame that arrives
alone is read without websockets' parser (broker/speedups/ws_frames.py). A client whose socket stops
draining gets its frames queued, up to a bound, and is then disconnected (it reconnects and
gets the current state), so a slow client never holds up the fan-out to others. Every other
websocket path goes to the ASGI app as usual (which refuses it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Coroutine, Iterable
from typing import Any, ClassVar, Final
from urllib.parse import unquote, urlsplit

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.datastructures import Headers
from websockets.http11 import Request
from websockets.protocol import State

from broker.auth import valid_session_id, verify_token
from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.frames import Codec
from broker.core.status import CloseCode
from broker.service import Broker, Encoded
from broker.speedups.eager import Resuming, eagerly
from broker.speedups.ws_frames import readable, server_frame, whole_data_frame
from broker.store.base import StoreUnavailable

log = logging.getLogger("qbroker.ws")

CLIENT_PATH: Final = re.compile(r"/v1/sessions/([^/]*)/ws")
# Frames queued for a client whose socket does not drain; one more and it is disconnected.
OUTBOUND_QUEUE: Final = 256
# Frames received but not yet handled: above this, stop reading the socket until the
# handler catches up (TCP pushes back on the client); the rate limit bounds the rest.
INBOX_HIGH: Final = 16
# Queued in place of the first frame over the rate limit: the frames before it are handled.
_OVER_LIMIT: Final = b"<over the rate limit>"


class TokenBucket:
    """``rate`` frames per second on average, bursts up to ``burst``."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def origin_allowed(headers: Headers, allowed: tuple[str, ...]) -> bool:
    """Browsers always send Origin; other clients (TUI, bots) usually do not.

    The broker's own page (same origin: the Origin's host is the host connected to) is
    always allowed; ``allowed`` (lower-case, without a trailing slash) adds other origins.
    """
    origin = headers.get("origin")
    if origin is None:
        return True
    if urlsplit(origin).netloc.lower() == headers.get("host", "").lower():
        return True
    return "*" in allowed or origin.rstrip("/").lower() in allowed


def _refusal(session_id: str, headers: Headers, allowed: tuple[str, ...]) -> str | None:
    """Why a handshake is refused before the upgrade (HTTP 403), or None."""
    if not valid_session_id(session_id):
        return "invalid session id"
    if not origin_allowed(headers, allowed):
        return "origin not allowed"
    return None


def _subprotocol(headers: Headers) -> tuple[bool, str | None]:
    """(acceptable, chosen): a client that offers subprotocols must offer one of ours."""
    offered = [token.strip() for header in headers.get_all("Sec-WebSocket-Protocol") for token in header.split(",")]
    chosen = next((p for p in offered if p in frames.SUBPROTOCOLS), None)
    return (not offered or chosen is not None), chosen


class _Unused:
    """Stands in for uvicorn's ASGI receive queue and "writable" event on a connection served
    here, which never uses them: each holds a deque of ~800 bytes, per connection."""

    def put_nowait(self, item: object) -> None:
        pass

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass


_UNUSED: Any = _Unused()


# The event loop keeps only weak references to tasks: hold fire-and-forget ones here.
_background: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


class ClientSocket(WebSocketsSansIOProtocol):
    """uvicorn's websocket protocol, serving the client endpoint without ASGI in between.

    ``protocol_for(broker)`` binds the broker; uvicorn makes one instance per upgrade.
    """

    broker: ClassVar[Broker]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connection: ClientConnection | None = None  # (uvicorn's self.client is the peer address)
        self.fast_frames = False  # a whole data frame may be read around websockets' parser
        self.failed = False  # websockets failed the connection: what comes in is dropped

    # --- handshake ---------------------------------------------------------------------

    def handle_connect(self, event: Request) -> None:
        match = CLIENT_PATH.fullmatch(unquote(event.path.partition("?")[0]))
        if match is None:
            super().handle_connect(event)  # not ours: the ASGI app answers (and refuses)
            return
        self.request = event
        self.response = self.conn.accept(event)
        self.handshake_initiated = True
        if self.response.status_code != 101:  # not a valid upgrade: websockets' own answer
            self._respond_and_close()
            return
        session_id, broker = match.group(1), self.broker
        acceptable, chosen = _subprotocol(event.headers)
        refusal = _refusal(session_id, event.headers, broker.config.allowed_origins)
        if refusal is not None:
            # (The Origin is what an operator needs to fix QBROKER_ALLOWED_ORIGINS; cut, as
            # it is the sender's text.)
            log.warning(
                "websocket handshake refused",
                extra={
                    "session": session_id[:128],
                    "reason": refusal,
                    "origin": (event.headers.get("origin") or "")[:200],
                },
            )
            acceptable = False
        if not acceptable or broker.shutting_down.is_set():
            self.response = self.conn.reject(403, "")
            self._respond_and_close()
            return
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in self.default_headers]
        if chosen is not None:
            headers.append(("Sec-WebSocket-Protocol", chosen))
        del self.response.headers["Date"]
        self.response.headers.update(headers)
        self.handshake_complete = True
        self.conn.send_response(self.response)
        self._flush()
        self.start_keepalive()
        self.connection = ClientConnection(self, broker, session_id, frames.codec_for(chosen))
        self.fast_frames = readable(self.conn)
        # Only the ASGI path needs these after the handshake; an idle connection should not
        # carry the request's and response's headers (a few KiB) for hours.
        self.queue = self.writable = _UNUSED
        del self.request, self.response

    def _respond_and_close(self) -> None:
        self.handshake_complete = True
        self.close_sent = True
        self.conn.send_response(self.response)
        self._flush()
        self.transport.close()

    # --- frames in -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        client = self.connection
        if client is not None and self.fast_frames and not self.close_sent:
            whole = whole_data_frame(self.conn, data)
            if whole is not None:
                text, payload = whole
                if not text:
                    client.received(payload)
                    return
                try:
                    message = payload.decode()
                except UnicodeDecodeError:
                    pass  # websockets' path closes with 1007
                else:
                    client.received(message)
                    return
        super().data_received(data)

    def send_receive_event_to_app(self) -> None:
        client = self.connection
        if client is None:
            super().send_receive_event_to_app()
            return
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.close_sent:
            return  # past our close: wait for the peer's reply only
        if self.curr_msg_data_type == "bytes":
            client.received(data)
            return
        try:
            text = data.decode()
        except UnicodeDecodeError:
            self.conn.send_close(1007)  # invalid frame payload data
            self.handle_parser_exception()
            return
        client.received(text)

    def handle_parser_exception(self) -> None:
        """websockets failed the connection (1002, 1007, 1009): send its close frame, then do
        as websockets' own server does: shut the writing side and read on, dropping what the
        client still sends, until it closes (or ``close_timeout``). uvicorn closes at once,
        and a socket closed with unread bytes is reset: a client still sending (a frame over
        the size limit, say) would get a reset, not the close code."""
        if self.connection is None:
            super().handle_parser_exception()
            return
        if self.failed or self.transport.is_closing():
            return  # (called again for every read after the failure)
        self.failed = self.close_sent = True
        self.transport.write(b"".join(self.conn.data_to_send()))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self.close_timer is None:
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)

    # --- frames out ----------------------------------------------------------------------

    def write_frame(self, data: bytes, text: bool) -> None:
        frame = server_frame(self.conn, data, text) if self.fast_frames else None
        if frame is not None:
            self.transport.write(frame)
        else:
            self._send_through_websockets((data,), text)

    def write_frames(self, payloads: list[bytes], text: bool) -> None:
        """Several frames in one write (one system call, and usually one packet)."""
        framed = [server_frame(self.conn, data, text) for data in payloads] if self.fast_frames else [None]
        if None in framed:
            self._send_through_websockets(payloads, text)
        else:
            self.transport.write(b"".join(framed))  # type: ignore[arg-type]  # (no None in it)

    def _send_through_websockets(self, payloads: Iterable[bytes], text: bool) -> None:
        for data in payloads:
            if text:
                self.conn.send_text(data)  # UTF-8 JSON, never decoded to a str and back
            else:
                self.conn.send_binary(data)
        self._flush()

    def _flush(self) -> None:
        self.transport.write(b"".join(self.conn.data_to_send()))

    @property
    def sending(self) -> bool:
        """Frames can still go out. Not once either side began the closing handshake: after
        the client's close frame websockets refuses to send (InvalidState), and uvicorn has
        already asked the transport to close, though the connection is not lost yet."""
        return self.conn.state is State.OPEN and not self.transport.is_closing()

    def close_with(self, code: int, reason: str = "") -> None:
        """Start the closing handshake (as uvicorn does for an ASGI ``websocket.close``)."""
        if self.close_sent or not self.sending:
            return
        self.broker.metrics.closes.labels(str(code)).inc()
        self.conn.send_close(code, reason)
        self._flush()
        self.close_sent = True
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)

    def pause_reading_for_backlog(self, paused: bool) -> None:
        if paused != self.read_paused and not self.close_sent:
            self.read_paused = paused
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    # --- transport events ----------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.connection is not None:
            self.connection.writable = False

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.connection is not None:
            self.connection.drain()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.connection is not None:
            self.connection.lost()


def protocol_for(broker: Broker) -> type[ClientSocket]:
    """The websocket protocol class for uvicorn's ``ws=`` setting, bound to ``broker``."""
    return type("BoundClientSocket", (ClientSocket,), {"broker": broker})


class ClientConnection:
    """One connected client: hello, then commands; what the service knows as a Connection."""

    __slots__ = (
        "socket",
        "broker",
        "session_id",
        "codec",
        "client_id",
        "inbox",
        "backlog",
        "writable",
        "working",
        "worker",
        "bucket",
        "timer",
        "said_hello",
        "over_limit",
        "joined",
        "gone",
    )

    def __init__(self, socket: ClientSocket, broker: Broker, session_id: str, codec: Codec) -> None:
        self.socket = socket
        self.broker = broker
        self.session_id = session_id
        self.codec: Codec = codec
        self.client_id = uuid.uuid4().hex[:16]
        # Lists, not deques: they stay short, and an empty deque costs ~800 bytes per client.
        self.inbox: list[str | bytes] = []
        self.backlog: list[bytes] = []  # frames waiting for the socket to drain
        self.writable = True
        self.working = False  # a worker handles the inbox (at once, or in ``worker``)
        self.worker: asyncio.Task[None] | Resuming | None = None
        self.bucket = TokenBucket(broker.config.rate_limit, broker.config.rate_burst)
        # Until the hello: the hello deadline; after it: the token's expiry (if any).
        self.timer: asyncio.TimerHandle | None = socket.loop.call_later(
            broker.config.hello_timeout, self.close, CloseCode.HELLO_TIMEOUT, "no hello in time"
        )
        self.said_hello = False  # the first frame arrived (it must be the hello)
        self.over_limit = False  # a frame came over the rate limit: the rest are dropped
        self.joined = False  # broker.join was called: broker.leave must follow
        self.gone = False  # the socket is closed

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
        if len(self.inbox) >= INBOX_HIGH:
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
                if len(self.inbox) < INBOX_HIGH // 2:
                    self.socket.pause_reading_for_backlog(False)
                if payload is _OVER_LIMIT:
                    log.warning("rate limit exceeded", extra={"session": self.session_id, "client": self.client_id})
                    self.close(CloseCode.POLICY_VIOLATION, "rate limit exceeded")
                elif self.joined:
                    await self._frame(payload)
                else:
                    await self._hello(payload)
        except StoreUnavailable:
            log.warning("store unavailable; closing client", extra={"session": self.session_id})
            self.close(CloseCode.TRY_AGAIN_LATER, "state store unavailable")
        except Exception:
            log.exception("client connection failed", extra={"session": self.session_id, "client": self.client_id})
            self.close(CloseCode.INTERNAL_ERROR, "internal error")
        finally:
            self.working = False
            self.worker = None
            if self.gone and self.joined:
                await self._leave()

    async def _hello(self, payload: str | bytes) -> None:
        broker = self.broker
        try:
            frame = frames.parse_client_frame(frames.decode(payload, self.codec))
        except BrokerError as exc:
            if exc.frame != "hello":  # not even a hello (undecodable, no type, another type)
                self.close(CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")
            elif exc.field == "token":  # absent or not a string: a token problem
                self.close(CloseCode.BAD_TOKEN, _close_reason(f"missing token: {exc.message}"))
            else:  # a hello with a wrong field is told what is wrong (a close reason holds 123 bytes)
                self.close(CloseCode.PROTOCOL_VIOLATION, _close_reason(exc.message))
            return
        if not isinstance(frame, frames.Hello):
            self.close(CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")
            return
        try:
            claims = verify_token(broker.config.secret or "", frame.token, role="client")
        except BrokerError as exc:
            self.close(CloseCode.BAD_TOKEN, exc.message)
            return
        if not claims.allows(self.session_id):
            self.close(CloseCode.WRONG_SESSION, "token is for another session")
            return
        if broker.local_clients(self.session_id) >= broker.config.max_connections_per_session:
            self.close(CloseCode.TRY_AGAIN_LATER, "too many connections for this session")
            return
        self.joined = True
        await broker.join(self)
        if claims.exp is not None and not self.gone:
            delay = max(0.0, claims.exp - time.time())
            self.timer = self.socket.loop.call_later(delay, self.close, CloseCode.BAD_TOKEN, "token expired")

    async def _frame(self, payload: str | bytes) -> None:
        broker = self.broker
        try:
            frame = frames.parse_client_frame(frames.decode(payload, self.codec))
        except BrokerError as exc:
            broker.metrics.errors.labels(exc.code).inc()
            self.deliver(Encoded(frames.error(exc.code, exc.message, exc.ref)))
            return
        broker.metrics.frame_count[frames.frame_type(frame)].inc()
        if isinstance(frame, frames.Ping):
            self.deliver(Encoded(frames.pong()))
        elif isinstance(frame, frames.Hello):
            self.deliver(Encoded(frames.error("bad_frame", "hello was already received", frame.ref)))
        else:
            await broker.command(self, frame)

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
                self.close(CloseCode.POLICY_VIOLATION, "client too slow")
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
        self.inbox.clear()
        self.backlog.clear()
        if self.joined and not self.working:
            _in_background(self._leave())
        # else: the running worker leaves when it ends (after a join in progress completes)

    async def _leave(self) -> None:
        with contextlib.suppress(Exception):
            await self.broker.leave(self)

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _close_reason(text: str) -> str:
    """``text`` cut to the 123 bytes of UTF-8 a close frame's reason may hold."""
    data = text.encode()
    return text if len(data) <= 123 else data[:120].decode(errors="ignore") + "..."
