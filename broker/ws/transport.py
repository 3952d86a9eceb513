"""The websocket protocol class uvicorn runs for every upgrade: uvicorn's sans-I/O one,
serving the client endpoint itself instead of through ASGI.

uvicorn parses HTTP and hands each websocket upgrade to a protocol class. ``ClientSocket``
extends uvicorn's ``WebSocketsSansIOProtocol`` (websockets' ``ServerProtocol`` underneath,
which keeps the handshake, keepalive pings and closing handshake) and serves
``/v1/sessions/{sid}/ws`` (and the inbox's ``/v1/inbox/ws``, broker/ws/inbox.py) itself:
frames arrive as callbacks and frames to the client are written to the transport at once.
What it buys:

- an idle client costs no task, no coroutine stack and no receive queue, which is most of
  the memory a connection costs under ASGI (RSS per idle client: bench/run.py);
- a frame takes no extra hops: no receive queue between parser and handler, no writer task
  between the fan-out and the socket (the answer -> next question latency).

It overrides uvicorn's methods and reads its attributes (``close_sent``, ``read_paused``,
``close_timer``, ``frames``, ``curr_msg_data_type``, ...): tests/unit/test_upstream_internals.py
names each one. A whole data frame that arrives alone is read without websockets' parser
(``frame_codec``). Every other
websocket path goes to the ASGI app as usual (which refuses it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request
from websockets.protocol import State

from broker.core.status import CloseCode
from broker.runtime.metrics import Metrics
from broker.ws.frame_codec import readable, server_frame, whole_data_frame
from broker.ws.socket import Connection, Handshake, Refuse

log = logging.getLogger("qbroker.ws")


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


@dataclass(frozen=True, slots=True)
class Serving:
    """What a bound ``ClientSocket`` class serves: the handshake, and where closes are counted."""

    handshake: Handshake
    metrics: Metrics


class ClientSocket(WebSocketsSansIOProtocol):
    """uvicorn's websocket protocol, serving the broker's sockets without ASGI in between.

    ``protocol_for(handshake, metrics)`` binds what decides each upgrade; uvicorn makes one
    instance per upgrade. It is the ``Socket`` its connection talks to (broker/ws/socket.py).
    """

    serving: ClassVar[Serving]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connection: Connection | None = None  # (uvicorn's self.client is the peer address)
        self.fast_frames = False  # a whole data frame may be read around websockets' parser
        self.failed = False  # websockets failed the connection: what comes in is dropped

    # --- handshake ---------------------------------------------------------------------

    def handle_connect(self, event: Request) -> None:
        answer = self.serving.handshake(unquote(event.path.partition("?")[0]), event.headers)
        if answer is None:
            super().handle_connect(event)  # not ours: the ASGI app answers (and refuses)
            return
        self.request = event
        self.response = self.conn.accept(event)
        self.handshake_initiated = True
        if self.response.status_code != 101:  # not a valid upgrade: websockets' own answer
            self._respond_and_close()
            return
        if isinstance(answer, Refuse):
            if answer.why is not None:
                log.warning("websocket handshake refused", extra=answer.why)
            self.response = self.conn.reject(403, "")
            self._respond_and_close()
            return
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in self.default_headers]
        if answer.subprotocol is not None:
            headers.append(("Sec-WebSocket-Protocol", answer.subprotocol))
        del self.response.headers["Date"]
        self.response.headers.update(headers)
        self.handshake_complete = True
        self.conn.send_response(self.response)
        self._flush()
        self.start_keepalive()
        self.connection = answer.connect(self)
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
            self.conn.send_close(CloseCode.INVALID_PAYLOAD)
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
        self.serving.metrics.closes.labels(str(code)).inc()
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


def protocol_for(handshake: Handshake, metrics: Metrics) -> type[ClientSocket]:
    """The websocket protocol class for uvicorn's ``ws=`` setting: ``handshake`` decides each
    upgrade (broker/ws/handshake.py's ``handshake_for(broker)``)."""
    return type("BoundClientSocket", (ClientSocket,), {"serving": Serving(handshake, metrics)})
