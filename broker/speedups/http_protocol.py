"""uvicorn's HTTP protocol (httptools), writing each small response in one piece.

uvicorn writes a response's status line and headers as soon as the app sends
``http.response.start``, and the body as a second write: two system calls and, with
TCP_NODELAY, two packets for every agent call. ``CoalescingHttpProtocol`` gives each
request a view of the transport that holds the head back until the first body write (or the
end of the current event-loop step, whichever comes first), so a JSON answer leaves whole.

``PreparedHeadCycle`` writes the head of a plain response (a status, a Content-Length and
headers it has seen before) without uvicorn's per-header work: uvicorn checks every header's
name and value with a regular expression on every response, the server's own Date and Server
included, a fiftieth of an agent call's work in the broker. A name or value is checked once,
with uvicorn's own expressions, and remembered; any other response (a Connection or
Transfer-Encoding header, no Content-Length, access logging on, a closing connection) goes
through uvicorn's ``send`` unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)


class HeldHead:
    """The transport as one response sees it: a head waits for the bytes after it."""

    __slots__ = ("transport", "loop", "pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.pending: bytes | None = None

    def write(self, data: bytes) -> None:
        if self.pending is None and data.startswith(b"HTTP/"):
            self.pending = data
            self.loop.call_soon(self.flush)  # a head with no body in this step still leaves
            return
        if self.pending is not None:
            data, self.pending = self.pending + data, None
        self.transport.write(data)

    def flush(self) -> None:
        if self.pending is not None:
            data, self.pending = self.pending, None
            self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class CoalescingHttpProtocol(HttpToolsProtocol):
    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new request (not an upgrade)
            cycle.transport = HeldHead(self.transport, self.loop)  # type: ignore[assignment]
            if type(cycle) is RequestResponseCycle:
                cycle.__class__ = PreparedHeadCycle  # (its task has not started: it sends through this class)


# Header lines (b"name: value\r\n") that passed uvicorn's checks, by (name, value); a few
# constant headers in practice, bounded against a caller that varies its values.
_CHECKED: dict[tuple[bytes, bytes], bytes] = {}
_CHECKED_MAX: Final = 256
_CONTENT_LENGTH: Final = b"content-length"
_DIGITS: Final = frozenset(b"0123456789")


class PreparedHeadCycle(RequestResponseCycle):
    """uvicorn's request-response cycle, writing a plain response's head from checked parts."""

    prepared = False  # the head was written here: so is a body that completes it

    async def send(self, message: Any) -> None:
        if self.response_started:
            if not self.prepared or not self._end_plain(message):
                await super().send(message)
        elif message["type"] != "http.response.start" or not self._start_plain(message):
            await super().send(message)

    def _end_plain(self, message: Any) -> bool:
        """Write the whole body of a prepared head at once, as uvicorn would; False: uvicorn's turn."""
        if (
            message["type"] != "http.response.body"
            or message.get("more_body", False)
            or self.response_complete
            or self.flow.write_paused
            or self.disconnected
            or self.scope["method"] == "HEAD"
        ):
            return False
        body = message.get("body", b"")
        if len(body) != self.expected_content_length:
            return False  # uvicorn says what is wrong
        self.transport.write(body)
        self.expected_content_length = 0
        self.response_complete = True
        self.message_event.set()
        self.on_response()
        return True

    def _start_plain(self, message: Any) -> bool:
        """Write the head as uvicorn would, when the response is plain; False: uvicorn's turn."""
        if self.flow.write_paused or self.disconnected or self.access_log or not self.keep_alive:
            return False
        status = message["status"]
        status_line = STATUS_LINE.get(status) if type(status) is int else None
        defaults = _lines(self.default_headers)
        if status_line is None or defaults is None:
            return False
        content = [status_line, defaults]
        length: int | None = None
        for name, value in message.get("headers", ()):
            if name == _CONTENT_LENGTH:
                if length is not None or not value or not _DIGITS.issuperset(value):
                    return False
                length = int(value)
                content.append(b"content-length: %s\r\n" % value)
                continue
            line = _CHECKED.get((name, value))
            if line is None:
                line = _checked(name, value)
                if line is None:
                    return False
            content.append(line)
        if length is None:
            return False
        content.append(b"\r\n")
        self.response_started = True
        self.waiting_for_100_continue = False
        self.expected_content_length = length
        self.chunked_encoding = False
        self.prepared = True
        self.transport.write(b"".join(content))
        return True


_defaults_seen: list[tuple[bytes, bytes]] | None = None
_defaults_lines = b""


def _lines(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The server's default headers as header lines, checked once per list (uvicorn makes a
    new one when the Date changes); None when one would need uvicorn's own handling."""
    global _defaults_seen, _defaults_lines
    if headers is _defaults_seen:
        return _defaults_lines
    content = []
    for name, value in headers:
        line = _line(name, value)
        if line is None:
            return None
        content.append(line)
    _defaults_seen, _defaults_lines = headers, b"".join(content)
    return _defaults_lines


def _checked(name: bytes, value: bytes) -> bytes | None:
    """The header line of a name and value uvicorn would write as they are (remembered)."""
    line = _line(name, value)
    if line is not None and len(_CHECKED) < _CHECKED_MAX:
        _CHECKED[(name, value)] = line
    return line


def _line(name: bytes, value: bytes) -> bytes | None:
    """``name: value`` as uvicorn writes it, when it passes uvicorn's checks and needs none of
    its special handling (Content-Length, Transfer-Encoding, Connection); else None."""
    if type(name) is not bytes or type(value) is not bytes:
        return None
    if HEADER_RE.search(name) or HEADER_VALUE_RE.search(value):
        return None  # uvicorn raises: let it
    name = name.lower()
    if name in (_CONTENT_LENGTH, b"transfer-encoding", b"connection"):
        return None
    return b"%s: %s\r\n" % (name, value)
