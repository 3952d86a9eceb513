"""The bots' agent-side HTTP client: keep-alive HTTP/1.1 with JSON bodies, and nothing else.

The load generator must cost little next to the broker it measures. A general client
(httpx) spends several hundred microseconds of CPU per request on this machine, which
would show up in the bots' start -> first question figure and use the cores the broker
needs; this one writes the request in one piece and reads the reply with two stream
reads, on connections it keeps open for the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import urlsplit

import orjson

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024


class HTTPError(Exception):
    """The request failed in transport (connect, reset, timeout, a malformed reply)."""


class ConnectError(HTTPError):
    pass


class ReadError(HTTPError):
    pass


class TimeoutError_(HTTPError):  # noqa: N801 - reported by class name, like httpx's errors
    pass


TimeoutError_.__name__ = "TimeoutError"


class _Stale(Exception):
    """A kept-alive connection the server had closed before it read our request."""


class _Connection:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.reused = False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class AgentHTTP:
    """Requests to one base URL (``http://host:port``), over at most ``max_idle`` idle
    keep-alive connections (a request with none idle opens another)."""

    def __init__(self, timeout: float, connect_timeout: float = 15.0, max_idle: int = 2) -> None:
        self.timeout, self.connect_timeout, self.max_idle = timeout, connect_timeout, max_idle
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def request(
        self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """(status, body bytes); raises ``HTTPError`` on any transport failure."""
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ConnectError(f"only http:// URLs: {url!r}")
        address = (parts.hostname, parts.port or 80)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        payload = b"" if body is None else orjson.dumps(body)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(payload)}"]
        if body is not None:
            lines.append("Content-Type: application/json")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
        while True:
            connection = await self._connection(address)
            try:
                return await self._exchange(connection, address, request, f"{method} {target}")
            except _Stale:
                # The server closed this idle connection (uvicorn does after a few seconds)
                # and never saw the request: sending it again on a new one is safe.
                continue

    async def _exchange(
        self, connection: _Connection, address: tuple[str, int], request: bytes, what: str
    ) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(self.timeout):
                connection.writer.write(request)
                status, reply, keep = await _read_response(connection.reader, connection.reused)
        except _Stale:
            connection.close()
            raise
        except TimeoutError:
            connection.close()
            raise TimeoutError_(f"{what}: no reply within {self.timeout:g} s") from None
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            connection.close()
            raise ReadError(f"{what}: {exc!r}") from None
        idle = self._idle.setdefault(address, [])
        if keep and len(idle) < self.max_idle:
            connection.reused = True
            idle.append(connection)
        else:
            connection.close()
        return status, reply

    async def _connection(self, address: tuple[str, int]) -> _Connection:
        idle = self._idle.get(address)
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(*address, limit=MAX_HEAD)
        except (OSError, TimeoutError) as exc:
            raise ConnectError(f"{address[0]}:{address[1]}: {exc!r}") from None
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


async def _read_response(reader: asyncio.StreamReader, reused: bool) -> tuple[int, bytes, bool]:
    """(status, body, keep-alive) of one HTTP/1.1 response."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
        if reused and not getattr(exc, "partial", b""):
            raise _Stale() from None
        raise
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1 status line: {status_line[:80]!r}")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    keep = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, await _read_chunked(reader), keep
    length = headers.get("content-length")
    if length is None:
        return status, await reader.read(MAX_BODY), False  # until the server closes
    size = int(length)
    if not 0 <= size <= MAX_BODY:
        raise ValueError(f"Content-Length {size}")
    return status, await reader.readexactly(size), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_BODY:
            raise ValueError("chunked body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
