"""What the websocket transport and the connections it serves know of each other.

The transport (broker/ws/transport.py) is handed a ``Handshake`` by the server, as
``websockets.asyncio.server.serve(handler, process_request=...)`` is: for each upgrade,
the path and headers in, and out either "not mine" (None: the ASGI app answers), a
``Refuse`` (403) or an ``Accept`` that makes the ``Connection`` to run. The connection
then talks to a ``Socket``, a protocol a unit test can fake; the transport imports no
edge, and the edges import only this of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from websockets.datastructures import Headers


class Socket(Protocol):
    """One accepted websocket, as a connection uses it."""

    loop: asyncio.AbstractEventLoop
    close_sent: bool  # this side began the closing handshake

    @property
    def sending(self) -> bool:
        """Frames can still go out (neither side began closing)."""
        ...

    def write_frame(self, data: bytes, text: bool) -> None: ...

    def write_frames(self, payloads: list[bytes], text: bool) -> None:
        """Several frames in one write."""
        ...

    def close_with(self, code: int, reason: str = "") -> None: ...

    def pause_reading_for_backlog(self, paused: bool) -> None:
        """Stop reading while the received frames wait (TCP pushes back), or read again."""
        ...


class Connection(Protocol):
    """What the transport drives: frames in, the socket drained or lost."""

    writable: bool  # the transport's buffer takes more (False: it asked to pause writing)

    def received(self, payload: str | bytes) -> None: ...

    def drain(self) -> None: ...

    def lost(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Accept:
    """Upgrade, answering with ``subprotocol`` (None: none offered), and run ``connect``'s connection."""

    subprotocol: str | None
    connect: Callable[[Socket], Connection]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer 403. ``why``: the log line's fields (None: refused without a log line)."""

    why: dict[str, str] | None = None


# path (unquoted, no query) and headers -> None (not a websocket path of ours), or the answer
Handshake = Callable[[str, Headers], Accept | Refuse | None]
