"""The notice connections ("links"): one pub/sub connection each, owned by a reader task.

When a link drops, when Redis answers MOVED, or when Redis unsubscribes a channel on its own
(its slot migrated, or the node lost its primary role in a failover) the link reconnects
with backoff; on a cluster its owner first re-reads the slot map and moves every channel to
the link of the primary that now holds its slot (``LinkOwner.reroute``: subscriptions.py,
routing.py). A link subscribes all its channels, waits for Redis to confirm, and only then
calls ``on_reconnect`` (``LinkOwner.reconnected``) so the service re-reads what it may have
missed. An idle link is probed with PING so a silently dead peer is noticed too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any, Final, NamedTuple, Protocol

from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from broker.speedups.redis_wire import Deferred, NoticeConnection
from broker.store.base import StoreUnavailable
from broker.store.redis.connections import UNREACHABLE

logger = logging.getLogger(__name__)

_IDLE_PROBE: Final = 5.0  # seconds without traffic before a notice connection is PINGed
CONFIRM_TIMEOUT: Final = 5.0  # seconds for Redis to confirm a subscription
_BACKOFF_MIN: Final = 0.05
_BACKOFF_MAX: Final = 2.0


class PubSub(NamedTuple):
    """The commands and reply kinds of plain pub/sub, or of sharded pub/sub (Redis 7)."""

    publish: str
    subscribe: str
    unsubscribe: str
    confirmations: tuple[bytes, ...]  # the reply kinds that confirm a subscription
    messages: tuple[bytes, ...]  # the reply kinds that carry a message

    @classmethod
    def of(cls, sharded: bool) -> PubSub:
        if sharded:
            return cls("SPUBLISH", "SSUBSCRIBE", "SUNSUBSCRIBE", (b"ssubscribe",), (b"smessage",))
        return cls("PUBLISH", "SUBSCRIBE", "UNSUBSCRIBE", (b"subscribe",), (b"message",))


class LinkOwner(Protocol):
    """What a link asks of whoever owns it (the store's ``Subscriptions``)."""

    def confirmed(self, reply: Any) -> bytes | None:
        """The channel ``reply`` confirms a subscription to (resolving its waiter), else None."""

    def handle(self, link: Link, reply: Any) -> Coroutine[Any, Any, None] | None:
        """Act on one reply of ``link`` (a notice, a confirmation, a PONG, a drop): None when
        done at once (the usual notice), else the work left, to await; raises
        ``Unsubscribed`` when Redis dropped a channel the link still carries."""

    async def reconnected(self) -> None:
        """A link is back, every channel confirmed, after notices may have been missed."""

    async def reroute(self) -> None:
        """A link failed: on a cluster, re-read which link each channel belongs to."""


async def _pass_push(response: Any) -> Any:
    return response


def _quiet_push_trace(connection: AbstractConnection) -> None:
    """redis-py's hiredis parser logs every pub/sub message it reads at debug level (logger
    ``push_response``), payload included; notices carry answers, so this connection's
    parser hands them over without that trace (as redis-py's own PubSub does)."""
    setter = getattr(getattr(connection, "_parser", None), "set_pubsub_push_handler", None)
    if setter is not None:
        setter(_pass_push)


class Unsubscribed(Exception):
    """Redis dropped a subscription we still want (slot migration, failover)."""


class Link:
    """One notice connection to one endpoint (the Redis, or one cluster primary).

    ``channels`` are the subscriptions it carries; its reader task owns the connection and
    is the only one to (re)connect it. ``missed`` says notices may have been lost since the
    last connection, so the next one ends with ``on_reconnect``.
    """

    def __init__(
        self, owner: LinkOwner, pubsub: PubSub, name: str, make_connection: Callable[[], AbstractConnection]
    ) -> None:
        self._owner = owner
        self._pubsub = pubsub
        self.name = name
        self.channels: set[bytes] = set()
        self.connection: AbstractConnection | None = None
        self.lock = asyncio.Lock()  # subscription commands vs. (re)connecting
        self.task: asyncio.Task[None] | None = None
        self.missed = False
        self.retired = False
        self._make_connection = make_connection
        self._kicked = False  # the connection was closed on purpose: reconnect at once
        self._leaving: Counter[bytes] = Counter()  # unsubscriptions Redis has yet to confirm

    def run(self, early: list[Any]) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self._read(early), name=f"qbroker-redis-notices-{self.name}")

    async def connect(self) -> list[Any]:
        """Open the connection, subscribe every channel, await the confirmations.

        Returns the notices that arrived meanwhile: the caller handles them once the lock is
        released (a handler may well subscribe another session).
        """
        loop = asyncio.get_running_loop()
        early: list[Any] = []
        async with self.lock:
            await self.disconnect()
            self._leaving.clear()
            connection = self._make_connection()
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
                _quiet_push_trace(connection)
                channels = set(self.channels)
                if channels:
                    # One command per channel: on a cluster, SSUBSCRIBE takes channels of one slot.
                    commands = [(self._pubsub.subscribe, channel) for channel in channels]
                    await connection.send_packed_command(connection.pack_commands(commands))
                deadline = loop.time() + CONFIRM_TIMEOUT
                while channels:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise RedisTimeoutError("subscriptions were not confirmed in time")
                    reply = await connection.read_response(timeout=remaining, push_request=True)
                    channel = self._owner.confirmed(reply)
                    if channel is not None:
                        channels.discard(channel)
                    elif reply is not None:
                        early.append(reply)
            except BaseException:
                await connection.disconnect(nowait=True)
                raise
            self.connection = connection
        return early

    async def probe(self, channel: bytes) -> None:
        """Subscribe to ``channel`` and leave it again, before the reader runs: a Redis
        user that may not subscribe (an ACL without channel rights: NOPERM) or a Redis that
        wants a password (NOAUTH) fails the broker's start, not every client after it."""
        connection = self.connection
        assert connection is not None, "probe() follows connect()"
        pubsub = self._pubsub
        for command, confirmation in (
            (pubsub.subscribe, pubsub.confirmations[0]),
            (pubsub.unsubscribe, pubsub.unsubscribe.lower().encode()),
        ):
            await connection.send_command(command, channel, check_health=False)
            while True:  # an error reply raises (ResponseError, or AuthenticationError)
                reply = await connection.read_response(timeout=CONFIRM_TIMEOUT, push_request=True)
                if reply is None:
                    raise RedisTimeoutError(f"{command} was not confirmed in time")
                if isinstance(reply, list) and reply and reply[0] == confirmation:
                    break

    async def send(self, *command: EncodableT) -> None:
        """Send ``command`` on the connection, if it is up.

        A connection that is down is the reader's to repair: it subscribes every channel
        again on the next one. A send that fails closes the connection so that the reader
        notices at once (its pending read fails) and starts that repair.
        """
        async with self.lock:
            connection = self.connection
            if connection is None or not connection.is_connected:
                return  # sending would silently open a fresh, unsubscribed socket
            try:
                await connection.send_command(*command, check_health=False)
            except Exception as exc:  # redis-py may also fail with AttributeError mid-disconnect
                logger.info(
                    "redis notice connection %s failed to send (%s); reconnecting", self.name, type(exc).__name__
                )
                with suppress(Exception):
                    await connection.disconnect(nowait=True)

    async def unsubscribe(self, channel: bytes) -> None:
        self.channels.discard(channel)
        if self.connection is not None:
            self._leaving[channel] += 1
        await self.send(self._pubsub.unsubscribe, channel)

    async def kick(self) -> None:
        """Reconnect (subscribing every channel again) and call ``on_reconnect`` after."""
        self.missed = True
        async with self.lock:
            if self.connection is not None and self.connection.is_connected:
                self._kicked = True
                with suppress(Exception):
                    await self.connection.disconnect(nowait=True)

    async def disconnect(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with suppress(*UNREACHABLE):
                await connection.disconnect(nowait=True)

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        await self.disconnect()

    def _handle(self, reply: Any) -> Coroutine[Any, Any, None] | None:
        return self._owner.handle(self, reply)

    def leaving(self, channel: bytes) -> bool:
        """Whether an unsubscription of ``channel`` is ours (and consume it)."""
        if self._leaving[channel] > 0:
            self._leaving[channel] -= 1
            return True
        return False

    async def _read(self, early: list[Any]) -> None:
        delay = _BACKOFF_MIN
        probing = False  # a PING went out and nothing came back yet
        handled = 0  # notices the connection handled as it read them, when last looked at
        while not self.retired:
            try:
                while early:
                    await _done(self._owner.handle(self, early.pop(0)))
                connection = self.connection
                if connection is None:
                    early = await self.connect()
                    delay = _BACKOFF_MIN
                    probing = False
                    handled = 0
                    while early:
                        await _done(self._owner.handle(self, early.pop(0)))
                    if self.missed:
                        logger.info("redis notice connection %s re-established; re-reading state", self.name)
                        await self._owner.reconnected()
                        self.missed = False
                    continue
                if isinstance(connection, NoticeConnection) and connection.direct is None:
                    # (Set here, every notice read before handled: notices stay in order.)
                    connection.direct = self._handle
                reply = await connection.read_response(timeout=_IDLE_PROBE, push_request=True)
                if type(reply) is Deferred:  # a notice handled as it was read: its work left
                    probing = False
                    await reply.work
                elif reply is not None:
                    probing = False
                    work = self._owner.handle(self, reply)
                    if work is not None:
                        await work
                elif isinstance(connection, NoticeConnection) and connection.handled != handled:
                    handled = connection.handled  # (notices came, handled as they were read)
                    probing = False
                elif probing:
                    raise RedisTimeoutError("no answer to PING on the notice connection")
                else:
                    await self.send("PING")
                    probing = True
            except asyncio.CancelledError:
                raise
            except (*UNREACHABLE, ResponseError, Unsubscribed, StoreUnavailable) as exc:
                # ResponseError: MOVED/ASK/TRYAGAIN (the slot is served elsewhere now), or any
                # other refusal of a subscription; reconnecting (after a re-route) repairs it.
                # StoreUnavailable comes from on_reconnect: reconnect again so it runs again.
                self.missed = True
                await self.disconnect()
                if self._kicked:
                    self._kicked = False
                    continue
                logger.warning(
                    "redis notice connection %s lost (%s: %s); reconnecting in %.2fs",
                    self.name,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)
                await self._owner.reroute()
            except Exception:
                logger.exception("redis notice handler failed")
                if self.connection is None:  # it failed while connecting: do not spin
                    self.missed = True
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)


async def _done(work: Coroutine[Any, Any, None] | None) -> None:
    if work is not None:
        await work
