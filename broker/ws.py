"""The client websocket: handshake checks, hello/auth, limits, and the command loop.

One ``ClientConnection`` per socket. Frames to the client go through a bounded outbound
queue drained by a writer task, so a slow client never holds up the fan-out to others
(the task exists only while there is something to send: an idle client costs no task);
one that falls too far behind is disconnected (it reconnects and gets the current state).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Coroutine, MutableMapping
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from broker import frames
from broker.auth import valid_session_id, verify_token
from broker.errors import BrokerError
from broker.frames import Codec
from broker.service import Broker, Encoded
from broker.status import CloseCode
from broker.store.base import StoreUnavailable

log = logging.getLogger("qbroker.ws")

OUTBOUND_QUEUE: Final = 256


class TokenBucket:
    """``rate`` frames per second on average, bursts up to ``burst``."""

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


class ClientConnection:
    def __init__(self, websocket: WebSocket, session_id: str, codec: Codec) -> None:
        self.websocket = websocket
        self.session_id = session_id
        self.codec: Codec = codec
        self.client_id = uuid.uuid4().hex[:16]
        self.outbound: deque[Encoded] = deque()
        self.overflowed = False
        self.writer: asyncio.Task[None] | None = None

    def deliver(self, frame: Encoded) -> None:
        if len(self.outbound) >= OUTBOUND_QUEUE:
            self.overflowed = True
        else:
            self.outbound.append(frame)
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        try:
            while self.outbound and not self.overflowed:
                data = self.outbound.popleft().data(self.codec)
                if isinstance(data, str):
                    await self.websocket.send_text(data)
                else:
                    await self.websocket.send_bytes(data)
            if self.overflowed:
                await _close(self.websocket, CloseCode.POLICY_VIOLATION, "client too slow")
        except Exception:  # noqa: BLE001 - the socket went away; the receive loop notices
            self.outbound.clear()
        finally:
            self.writer = None

    async def stop(self) -> None:
        writer = self.writer
        if writer is not None:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer


# The event loop keeps only weak references to tasks: hold fire-and-forget ones here.
_background: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)


def origin_allowed(websocket: WebSocket, allowed: tuple[str, ...]) -> bool:
    """Browsers always send Origin; other clients (TUI, bots) usually do not.

    With no allow-list the page must come from this very host (same origin).
    """
    origin = websocket.headers.get("origin")
    if origin is None:
        return True
    if allowed:
        return "*" in allowed or origin.rstrip("/") in allowed
    host = websocket.headers.get("host", "")
    return urlsplit(origin).netloc.lower() == host.lower()


async def _close(websocket: WebSocket, code: int, reason: str = "") -> None:
    if websocket.application_state == WebSocketState.DISCONNECTED:
        return
    websocket.app.state.broker.metrics.closes.labels(str(code)).inc()
    with contextlib.suppress(Exception):
        await websocket.close(code, reason)


async def client_socket(websocket: WebSocket) -> None:
    broker: Broker = websocket.app.state.broker
    config = broker.config
    session_id = websocket.path_params["sid"]
    if not valid_session_id(session_id) or not origin_allowed(websocket, config.allowed_origins):
        log.warning("websocket handshake refused", extra={"session": session_id[:128]})
        await websocket.close(CloseCode.POLICY_VIOLATION)  # before accept: HTTP 403
        return
    if broker.shutting_down.is_set():
        await websocket.close(CloseCode.SERVICE_RESTART)
        return
    offered = websocket.scope.get("subprotocols") or []
    chosen = next((p for p in offered if p in frames.SUBPROTOCOLS), None)
    if offered and chosen is None:
        await websocket.close(CloseCode.POLICY_VIOLATION)
        return
    await websocket.accept(subprotocol=chosen)
    codec = frames.codec_for(chosen)

    hello = await _receive_hello(websocket, broker, session_id, codec)
    if hello is None:
        return
    if broker.local_clients(session_id) >= config.max_connections_per_session:
        await _close(websocket, CloseCode.TRY_AGAIN_LATER, "too many connections for this session")
        return
    connection = ClientConnection(websocket, session_id, codec)
    expiry: asyncio.TimerHandle | None = None
    try:
        await broker.join(connection)
        if hello[1] is not None:
            delay = max(0.0, hello[1] - time.time())
            expiry = asyncio.get_running_loop().call_later(
                delay, lambda: _in_background(_close(websocket, CloseCode.BAD_TOKEN, "token expired"))
            )
        await _command_loop(websocket, broker, connection)
    except StoreUnavailable:
        log.warning("store unavailable; closing client", extra={"session": session_id})
        await _close(websocket, CloseCode.TRY_AGAIN_LATER, "state store unavailable")
    except WebSocketDisconnect:
        pass
    finally:
        if expiry is not None:
            expiry.cancel()
        with contextlib.suppress(Exception):
            await broker.leave(connection)
        await connection.stop()


async def _receive_hello(
    websocket: WebSocket, broker: Broker, session_id: str, codec: Codec
) -> tuple[str, float | None] | None:
    """Wait for a valid hello; close with the protocol's code otherwise. -> (kind, token exp)."""
    try:
        message = await asyncio.wait_for(websocket.receive(), broker.config.hello_timeout)
    except TimeoutError:
        await _close(websocket, CloseCode.HELLO_TIMEOUT, "no hello in time")
        return None
    if message["type"] == "websocket.disconnect":
        return None
    try:
        frame = frames.parse_client_frame(frames.decode(_payload(message), codec))
    except BrokerError:
        frame = None
    if not isinstance(frame, frames.Hello):
        await _close(websocket, CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")
        return None
    try:
        claims = verify_token(broker.config.secret or "", frame.token, role="client")
    except BrokerError as exc:
        await _close(websocket, CloseCode.BAD_TOKEN, exc.message)
        return None
    if not claims.allows(session_id):
        await _close(websocket, CloseCode.WRONG_SESSION, "token is for another session")
        return None
    return frame.client_kind, claims.exp


async def _command_loop(websocket: WebSocket, broker: Broker, connection: ClientConnection) -> None:
    config = broker.config
    bucket = TokenBucket(config.rate_limit, config.rate_burst)
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        if not bucket.take():
            log.warning("rate limit exceeded", extra={"session": connection.session_id, "client": connection.client_id})
            await _close(websocket, CloseCode.POLICY_VIOLATION, "rate limit exceeded")
            return
        try:
            frame = frames.parse_client_frame(frames.decode(_payload(message), connection.codec))
        except BrokerError as exc:
            broker.metrics.errors.labels(exc.code).inc()
            connection.deliver(Encoded(frames.error(exc.code, exc.message, exc.ref)))
            continue
        broker.metrics.frame_count[frames.frame_type(frame)].inc()
        if isinstance(frame, frames.Ping):
            connection.deliver(Encoded(frames.pong()))
        elif isinstance(frame, frames.Hello):
            connection.deliver(Encoded(frames.error("bad_frame", "hello was already received", frame.ref)))
        else:
            await broker.command(connection, frame)


def _payload(message: MutableMapping[str, Any]) -> str | bytes:
    text = message.get("text")
    if isinstance(text, str):
        return text
    data = message.get("bytes")
    return data if isinstance(data, bytes) else b""


routes = [WebSocketRoute("/v1/sessions/{sid}/ws", client_socket)]
