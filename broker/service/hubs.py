"""A session as one broker process serves it: a hub of its local clients and waiting agent calls.

``SessionHub`` is what this process knows of a session: the clients connected here (each a
``Connection``), how many agent calls wait here for an outcome, and the view the clients
were last shown, as of which of the session's writes. A frame for the clients is an
``Encoded``, serialized at most once per codec however many of them get it. The waiting
agent calls follow rounds of ``Wake`` (``_watch``): a poke sets the current round and
chains the next, so nothing between a waiter's read of the store and its wait slips by.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from broker.core import frames
from broker.core.actors import Actor
from broker.core.frames import Codec
from broker.core.machine import Questionnaire
from broker.core.status import CloseCode, CloseReason
from broker.service.hub_lock import HubLock

log = logging.getLogger("qbroker.service")

# The two subscriptions a hub can hold to its session's notices (SessionHub.subscribed).
EVERY_WRITE: Final = "every write"
OUTCOMES_ONLY: Final = "outcomes only"


class Connection(Protocol):
    """What the service needs from a connected client (implemented by broker.ws.session)."""

    client_id: str
    session_id: str
    codec: Codec
    actor: Actor  # who the client is: its token's holder, and the program its hello named

    def deliver(self, *frames: Encoded) -> None:
        """Queue already-encoded frames for sending (several leave in one write); never blocks."""

    def close(self, code: int, reason: str = "") -> None:
        """Start closing the connection (the client reconnects and is shown the current state)."""


class Encoded:
    """One server frame, serialized at most once per codec however many clients get it."""

    __slots__ = ("frame", "_json", "_msgpack")

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self._json: bytes | None = None
        self._msgpack: bytes | None = None

    def data(self, codec: Codec) -> bytes:
        """The websocket payload: UTF-8 JSON (sent as a text frame) or msgpack."""
        if codec == "json":
            if self._json is None:
                self._json = frames.encode_bytes(self.frame, "json")
            return self._json
        if self._msgpack is None:
            self._msgpack = frames.encode_bytes(self.frame, "msgpack")
        return self._msgpack


class Wake:
    """One round of waiting for the agent calls of a session, set by ``SessionHub.poke``.

    A poke sets the current round and starts the next (``next``), so a waiter that took a
    round before reading the store misses nothing after that read: it follows the chain.

    Not an asyncio.Event: on Python 3.11 its wait() (and asyncio.timeout) look the event
    loop up with a getpid() system call each; a waiter here brings its own loop.
    """

    __slots__ = ("is_set", "outcome", "next", "_waiters")

    def __init__(self) -> None:
        self.is_set = False
        self.outcome: Questionnaire | None = None  # the outcome written; None: read the store again
        self.next: Wake | None = None
        self._waiters: list[asyncio.Future[None]] = []

    def set(self) -> None:
        self.is_set = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def wait(self, loop: asyncio.AbstractEventLoop, until: float) -> bool:
        """Wait until the round is set (True) or the loop's clock reaches ``until`` (False)."""
        if self.is_set:
            return True
        waiter = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_at(until, _time_up, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if not self.is_set:  # timed out or cancelled: no longer one of its waiters
                self._waiters.remove(waiter)
        return self.is_set


def _time_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass
class SessionHub:
    """This process's view of one session: its local clients and waiting agent calls."""

    session_id: str
    clients: dict[str, Connection] = field(default_factory=dict)
    waiters: int = 0
    watchers: int = 0  # 1 while this process's inbox sockets follow the session (service/inbox.py)
    # Clients between hello and joining ``clients``: they keep the hub (and its
    # subscription) alive, so the last client leaving meanwhile cannot orphan it.
    joining: int = 0
    # The state of the questionnaire the local clients were last shown (None: idle). It
    # is a cache: commands start from it and compare-and-set on its version, so the
    # common case costs one store round trip; a lost race re-reads the store.
    shown: Questionnaire | None = None
    # The session's write number ``shown`` is as of (None: not known). Kept exact: a
    # notice of the next write applies without a read, any other re-reads.
    seq: int | None = None
    heard: int = 0  # the highest write number of the notices heard
    counted: int | None = None  # the session's write count at the last reconciliation
    # Subscriptions registered with the store (EVERY_WRITE, OUTCOMES_ONLY), and those it
    # confirmed. Local clients need every write; agent calls alone, only outcomes. One for
    # outcomes stays when the hub gains clients (an outcome's notice then comes twice).
    subscribed: set[str] = field(default_factory=set)
    confirmed: set[str] = field(default_factory=set)
    idle_since: float | None = None  # monotonic time it lost its last client/waiter
    lock: HubLock = field(default_factory=HubLock)
    wake: Wake = field(default_factory=Wake)

    @property
    def shown_id(self) -> str | None:
        return self.shown.id if self.shown is not None else None

    @property
    def interested(self) -> bool:
        return bool(self.clients) or self.waiters > 0 or self.joining > 0 or self.watchers > 0

    def poke(self, outcome: Questionnaire | None = None) -> None:
        """Wake the waiting agent calls: with ``outcome``, the ones waiting for that
        questionnaire get it; without, every one reads the store again."""
        if self.waiters == 0:
            return  # nobody holds the round: no need for a fresh one
        wake = self.wake
        wake.next = self.wake = Wake()
        wake.outcome = outcome
        wake.set()

    def broadcast(self, *frames: dict[str, Any]) -> None:
        encoded = [Encoded(frame) for frame in frames]
        for connection in list(self.clients.values()):
            try:
                connection.deliver(*encoded)
            except Exception:  # deliver must not raise; if it does, the others still get the frames
                log.exception(
                    "delivery to a client failed; closing it",
                    extra={"session": self.session_id, "client": connection.client_id},
                )
                # The hub counts this frame as shown: a client that missed it would stay behind
                # until the next write. Closed, it reconnects and reads the current state.
                with contextlib.suppress(Exception):
                    connection.close(CloseCode.INTERNAL_ERROR, CloseReason.INTERNAL_ERROR)


async def _watch(
    loop: asyncio.AbstractEventLoop, wake: Wake, questionnaire_id: str, version: int, until: float
) -> Questionnaire | None:
    """Follow the pokes from ``wake`` until one brings an outcome of ``questionnaire_id``
    newer than ``version`` (returned), or asks for a fresh look, or ``loop``'s clock
    reaches ``until`` (None for both: read the store)."""
    while await wake.wait(loop, until):
        outcome = wake.outcome
        if outcome is None:
            return None
        if outcome.id == questionnaire_id and outcome.version > version:
            return outcome
        assert wake.next is not None  # a poke sets a round only after chaining the next
        wake = wake.next
    return None
