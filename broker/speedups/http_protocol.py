"""uvicorn's HTTP protocol (httptools), writing each small response in one piece.

uvicorn writes a response's status line and headers as soon as the app sends
``http.response.start``, and the body as a second write: two system calls and, with
TCP_NODELAY, two packets for every agent call. ``CoalescingHttpProtocol`` gives each
request a view of the transport that holds the head back until the first body write (or the
end of the current event-loop step, whichever comes first), so a JSON answer leaves whole.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


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
