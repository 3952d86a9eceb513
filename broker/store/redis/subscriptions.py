"""The Redis store's subscriptions: which sessions' notices this process follows, on which
link (routing.py), and what a link's replies mean (the ``LinkOwner`` of links.py).

A subscription counts once Redis confirmed it. One made before ``open`` is only recorded:
``open`` subscribes every recorded channel. A channel stays recorded while its link is down,
and the link subscribes it again when it reconnects.

Two kinds of channel: a session's (its notices), and an inbox index shard's (keys.py: the
notices of creates in its sessions, and presence messages).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from redis.exceptions import RedisClusterException

from broker.store.base import Notice, NoticeHandler, PresenceHandler, ReconnectHandler, StoreUnavailable
from broker.store.records import Records
from broker.store.redis.connections import UNREACHABLE, reachable
from broker.store.redis.keys import channel_bytes
from broker.store.redis.links import CONFIRM_TIMEOUT, Link, PubSub, Unsubscribed
from broker.store.redis.notices import OwnWrites, decode_notice, decode_presence
from broker.store.redis.routing import STANDALONE, Routing

logger = logging.getLogger(__name__)


class Subscriptions:
    """Channels followed (``subscribed``: channel -> session id, "" for an inbox shard's)
    and their links, by endpoint name; ``own_writes`` are the states of writes whose notices
    come back here."""

    def __init__(self, routing: Routing, pubsub: PubSub, records: Records) -> None:
        # Notifications: channel -> session id, subscriptions Redis has yet to confirm, and
        # the links (notice connections) by endpoint name.
        self.subscribed: dict[bytes, str] = {}
        self.inbox_channels: set[bytes] = set()  # (of them) the inbox shards' channels
        self.own_writes = OwnWrites(records, self.subscribed)
        self._unconfirmed: dict[bytes, asyncio.Future[None]] = {}
        self._links: dict[str, Link] = {}
        self._routing = routing
        self._pubsub = pubsub
        self._confirmations = pubsub.confirmations
        self._messages = pubsub.messages
        self._route_lock = asyncio.Lock()
        self.started = False
        self._on_notice: NoticeHandler | None = None
        self._on_reconnect: ReconnectHandler | None = None
        self._on_presence: PresenceHandler | None = None

    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Returns once Redis confirmed the subscription (or at once before ``open``)."""
        await self._subscribe(channel_bytes(session_id, outcomes_only), session_id)

    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        await self._unsubscribe(channel_bytes(session_id, outcomes_only))

    async def subscribe_inbox(self, channel: bytes) -> None:
        """Follow an inbox index shard's channel (returns once Redis confirmed it)."""
        self.inbox_channels.add(channel)
        try:
            await self._subscribe(channel, "")
        except BaseException:
            if channel not in self.subscribed:
                self.inbox_channels.discard(channel)
            raise

    async def unsubscribe_inbox(self, channel: bytes) -> None:
        self.inbox_channels.discard(channel)
        await self._unsubscribe(channel)

    async def _subscribe(self, channel: bytes, session_id: str) -> None:
        pending = self._unconfirmed.get(channel)
        if channel in self.subscribed and pending is None:
            return
        self.subscribed[channel] = session_id
        if not self.started:
            return  # open() subscribes every registered session
        if pending is None:
            try:
                with reachable("subscribe"):
                    link = self._link(self._routing.route(channel))
            except StoreUnavailable:
                del self.subscribed[channel]  # no link to carry it: the next call tries again
                raise
            pending = asyncio.get_running_loop().create_future()
            self._unconfirmed[channel] = pending
            link.channels.add(channel)
            link.run([])  # a new link connects (subscribing the channel) in its reader
            await link.send(self._pubsub.subscribe, channel)
        try:
            await asyncio.wait_for(asyncio.shield(pending), CONFIRM_TIMEOUT)
        except TimeoutError as exc:
            # Stays registered: its link subscribes it again after reconnecting.
            raise StoreUnavailable(f"redis store: subscription to {channel.decode()!r} not confirmed") from exc

    async def _unsubscribe(self, channel: bytes) -> None:
        if self.subscribed.pop(channel, None) is None:
            return
        self.own_writes.forget(channel)
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        # Should this fail, a new connection only subscribes registered sessions, and late
        # notices of unregistered ones are dropped.
        for link in list(self._links.values()):
            if channel in link.channels:
                await link.unsubscribe(channel)

    # --- life cycle -----------------------------------------------------------------

    async def open(
        self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler, on_presence: PresenceHandler | None = None
    ) -> dict[str, list[Any]]:
        """Connect a link to each endpoint, with every registered channel subscribed.

        Returns the notices each link read meanwhile, for ``run``. Should it fail, the caller
        drops the links (``abandon``)."""
        self._on_notice = on_notice
        self._on_reconnect = on_reconnect
        self._on_presence = on_presence
        early: dict[str, list[Any]] = {}
        if self._routing.cluster:
            await self._routing.initialize()
        else:
            self._link(STANDALONE)
        for channel in self.subscribed:
            self._link(self._routing.route(channel)).channels.add(channel)
        for name, link in self._links.items():
            early[name] = await link.connect()
        return early

    async def probe(self, channel: bytes) -> None:
        """A single Redis: subscribe to ``channel`` and leave it again (``Link.probe``)."""
        await self._links[STANDALONE].probe(channel)

    async def abandon(self) -> None:
        """Drop the links of an ``open`` that failed."""
        for link in self._links.values():
            await link.disconnect()
        self._links.clear()

    def run(self, early: dict[str, list[Any]]) -> None:
        """Start every link's reader, on the notices ``open`` returned."""
        self.started = True
        for name, link in self._links.items():
            link.run(early[name])

    @property
    def connected(self) -> bool:
        """Every notice connection is up (on a cluster, one per primary)."""
        return self.started and all(link.connection is not None for link in self._links.values())

    async def close(self) -> None:
        self.started = False
        self.own_writes.forget()
        links = list(self._links.values())
        self._links.clear()
        for link in links:
            link.retired = True
            await link.stop()
        for pending in self._unconfirmed.values():
            pending.cancel()
        self._unconfirmed.clear()
        self._on_notice = None
        self._on_reconnect = None
        self._on_presence = None

    # --- links ----------------------------------------------------------------------

    def _link(self, name: str) -> Link:
        link = self._links.get(name)
        if link is None:
            link = self._links[name] = Link(self, self._pubsub, name, self._routing.connection_factory(name))
        return link

    async def reroute(self) -> None:
        """Cluster: re-read the slot map and move every channel to its primary's link.

        Links that gain channels reconnect (then call ``on_reconnect``); new primaries get new
        links; links of nodes that are no longer primaries retire.
        """
        if not self._routing.cluster or not self.started:
            return
        async with self._route_lock:
            try:
                primaries = await self._routing.primaries()
                wanted: dict[str, set[bytes]] = {}
                for channel in self.subscribed:
                    wanted.setdefault(self._routing.route(channel), set()).add(channel)
            except UNREACHABLE as exc:
                logger.info("redis cluster topology not refreshed (%s); retrying", type(exc).__name__)
                return
            for name, link in list(self._links.items()):
                channels = wanted.pop(name, set())
                gained = channels - link.channels
                link.channels = channels
                if name not in primaries and not channels:
                    logger.info("redis notice connection %s retired (no longer a primary)", name)
                    link.retired = True
                    del self._links[name]
                    await link.stop()
                elif gained:
                    await link.kick()
            for name, channels in wanted.items():
                try:
                    link = self._link(name)
                except RedisClusterException:
                    continue  # not in the node cache (yet): the next refresh places these
                link.channels = channels
                link.missed = True
                link.run([])
            if self._links:
                logger.info("redis notice connections: %s", ", ".join(sorted(self._links)))

    # --- links: replies -------------------------------------------------------------

    def confirmed(self, reply: Any) -> bytes | None:
        """The channel ``reply`` confirms a subscription to (resolving its waiter), else None."""
        if not isinstance(reply, list) or len(reply) < 2 or reply[0] not in self._confirmations:
            return None
        channel = bytes(reply[1])
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        return channel

    def handle(self, link: Link, reply: Any) -> Coroutine[Any, Any, None] | None:
        """Act on one reply of a notice connection (a notice, a confirmation, a PONG, a
        drop): None when done at once, else the work left, to await."""
        if not isinstance(reply, list) or len(reply) != 3 or reply[0] not in self._messages:
            # (Not a message: a confirmation, an unsubscription, a PONG.)
            if self.confirmed(reply) is not None or not isinstance(reply, list) or len(reply) != 3:
                return None
            kind, channel, _ = reply
            if kind == b"sunsubscribe" and not link.leaving(channel) and channel in link.channels:
                # Redis dropped it on its own: the slot moved or this node is no longer a primary.
                raise Unsubscribed(f"redis dropped the subscription to {bytes(channel)!r}")
            return None
        _, channel, data = reply
        if channel not in self.subscribed:
            return None  # a late notice of a session no longer subscribed
        if self.own_writes.seen(channel, data):
            return None  # a write of ours, shown by its writer: nothing new here
        if channel in self.inbox_channels:
            presence = decode_presence(data)
            if presence is not None:
                return None if self._on_presence is None else self._on_presence(*presence)
        notice = decode_notice(data, self.own_writes.record_of)
        if notice is None:
            logger.warning("ignoring a malformed notice on %r", channel)
            return None
        return None if self._on_notice is None else self._on_notice(notice)

    def tell(self, notice: Notice) -> Coroutine[Any, Any, None] | None:
        """Hand ``notice`` to this process's handler, as if it had come from Redis."""
        return None if self._on_notice is None else self._on_notice(notice)

    async def reconnected(self) -> None:
        self.own_writes.forget()  # (their notices may be among those lost)
        if self._on_reconnect is not None:
            await self._on_reconnect()
