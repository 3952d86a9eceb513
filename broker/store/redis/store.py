"""The Redis store: any number of broker processes share one Redis, or one Redis Cluster.

A notice is a msgpack array ``[sid, id, version, status, record, seq, head]``: the record
is the written state (nil when larger than ``NOTICE_STATE_LIMIT``), ``seq`` the write's
number in the session, and ``head`` the next head's record after a write that closed a
questionnaire (false: none; nil: not said). The writer packs the first four; the script
appends the rest (it alone knows the number). A notice of only the first three (an older
broker) is understood too, as "look again". A notice holds answers: it is never logged,
and the notice connections do not let redis-py trace what they read.

Notices travel over dedicated pub/sub connections ("links"), each owned by a reader task:

- one Redis: one link, with SUBSCRIBE/PUBLISH, or SSUBSCRIBE/SPUBLISH (``sharded=True``);
- Redis Cluster (``cluster=True``, Redis 7): sharded pub/sub, so a session's notices stay on
  the shard that holds its keys and the cluster's pub/sub traffic spreads with the sessions.
  SSUBSCRIBE must reach the primary that owns the channel's slot, so there is one link per
  primary, and each channel rides the link of its slot's owner.

When a link drops, when Redis answers MOVED, or when Redis unsubscribes a channel on its own
(its slot migrated, or the node lost its primary role in a failover) the link reconnects
with backoff; on a cluster it first re-reads the slot map and moves every channel to the
link of its current owner (new primaries get new links, links of nodes that are no longer
primaries retire). A link subscribes all its channels, waits for Redis to confirm, and only
then calls ``on_reconnect`` so the service re-reads what it may have missed. An idle link
is probed with PING so a silently dead peer is noticed too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from broker.core.machine import Questionnaire
from broker.speedups.redis_wire import NoticeConnection
from broker.store.base import (
    NOTICE_STATE_LIMIT,
    Head,
    Notice,
    NoticeHandler,
    Presence,
    ReconnectHandler,
    Record,
    Store,
    StoreUnavailable,
    Written,
)
from broker.store.records import Records, from_msgpack, to_msgpack
from broker.store.redis.commands import Commands, ms
from broker.store.redis.connections import UNREACHABLE, reachable
from broker.store.redis.keys import channel_for, prefix, presence_keys, questionnaire_prefix, queue_keys
from broker.store.redis.scripts import COMPARE_AND_SET, CREATE, HEARTBEAT, LEAVE, PRESENCE, QUEUE, write_script

logger = logging.getLogger(__name__)

_IDLE_PROBE: Final = 5.0  # seconds without traffic before a notice connection is PINGed
_CONFIRM_TIMEOUT: Final = 5.0  # seconds for Redis to confirm a subscription
_BACKOFF_MIN: Final = 0.05
_BACKOFF_MAX: Final = 2.0
_PRESENCE_MIN_LIFETIME: Final = 3600.0  # presence keys outlive the longest reconnect grace
_STANDALONE: Final = "redis"  # the name of the only link on a single Redis
_PROBE_SESSION: Final = "qbroker-start-probe"  # a session only start() uses (see _try_access)
_OWN_RECORDS: Final = 512  # records of this process's latest writes kept to recognise their notices
_MGET_CHUNK: Final = 1000  # keys per MGET of the reconciliation (one short command each)


def _head_of(state: Questionnaire, seq: int) -> Head:
    """A session's head as a write script names it: the oldest open questionnaire's record."""
    return Head(None if state.is_terminal else state, seq)


def _decode_notice(data: Any, record_of: Callable[[bytes], Record]) -> Notice | None:
    """The notice in a published message, or None when it is not one (never raises);
    ``record_of`` makes a record's bytes a ``Record`` (decoded when a receiver asks)."""
    try:
        fields = from_msgpack(data)
    except (ValueError, TypeError):
        return None
    if not isinstance(fields, list) or len(fields) < 3:
        return None
    session_id, questionnaire_id, version = fields[:3]
    if not (isinstance(session_id, str) and isinstance(questionnaire_id, str) and type(version) is int):
        return None
    if len(fields) < 7:
        return Notice(session_id, questionnaire_id, version)  # an older broker's: "look again"
    status, record, seq, head = fields[3:7]
    if not (
        isinstance(status, str)
        and (record is None or isinstance(record, bytes))
        and type(seq) is int
        and seq >= 0
        and (head is None or head is False or isinstance(head, bytes))
    ):
        return Notice(session_id, questionnaire_id, version)
    next_head: Head | None = None
    if head is False:
        next_head = Head(None, seq)
    elif head is not None:
        try:
            next_head = _head_of(record_of(head).state(), seq)
        except Exception:  # noqa: BLE001 - a malformed record: the receiver reads instead
            next_head = None
    return Notice(
        session_id,
        questionnaire_id,
        version,
        status,
        seq,
        None if record is None else record_of(record),
        next_head,
    )


async def _pass_push(response: Any) -> Any:
    return response


def _quiet_push_trace(connection: AbstractConnection) -> None:
    """redis-py's hiredis parser logs every pub/sub message it reads at debug level (logger
    ``push_response``), payload included; notices carry answers, so this connection's
    parser hands them over without that trace (as redis-py's own PubSub does)."""
    setter = getattr(getattr(connection, "_parser", None), "set_pubsub_push_handler", None)
    if setter is not None:
        setter(_pass_push)


class _Unsubscribed(Exception):
    """Redis dropped a subscription we still want (slot migration, failover)."""


class _Link:
    """One notice connection to one endpoint (the Redis, or one cluster primary).

    ``channels`` are the subscriptions it carries; its reader task owns the connection and
    is the only one to (re)connect it. ``missed`` says notices may have been lost since the
    last connection, so the next one ends with ``on_reconnect``.
    """

    def __init__(self, store: RedisStore, name: str, make_connection: Callable[[], AbstractConnection]) -> None:
        self.store = store
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
                    commands = [(self.store._subscribe_command, channel) for channel in channels]
                    await connection.send_packed_command(connection.pack_commands(commands))
                deadline = loop.time() + _CONFIRM_TIMEOUT
                while channels:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise RedisTimeoutError("subscriptions were not confirmed in time")
                    reply = await connection.read_response(timeout=remaining, push_request=True)
                    channel = self.store._confirmed(reply)
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
        store = self.store
        for command, confirmation in (
            (store._subscribe_command, store._confirmations[0]),
            (store._unsubscribe_command, store._unsubscribe_command.lower().encode()),
        ):
            await connection.send_command(command, channel, check_health=False)
            while True:  # an error reply raises (ResponseError, or AuthenticationError)
                reply = await connection.read_response(timeout=_CONFIRM_TIMEOUT, push_request=True)
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
        await self.send(self.store._unsubscribe_command, channel)

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

    def leaving(self, channel: bytes) -> bool:
        """Whether an unsubscription of ``channel`` is ours (and consume it)."""
        if self._leaving[channel] > 0:
            self._leaving[channel] -= 1
            return True
        return False

    async def _read(self, early: list[Any]) -> None:
        delay = _BACKOFF_MIN
        probing = False  # a PING went out and nothing came back yet
        while not self.retired:
            try:
                while early:
                    await self.store._handle(self, early.pop(0))
                connection = self.connection
                if connection is None:
                    early = await self.connect()
                    delay = _BACKOFF_MIN
                    probing = False
                    while early:
                        await self.store._handle(self, early.pop(0))
                    if self.missed:
                        logger.info("redis notice connection %s re-established; re-reading state", self.name)
                        await self.store._reconnected()
                        self.missed = False
                    continue
                reply = await connection.read_response(timeout=_IDLE_PROBE, push_request=True)
                if reply is not None:
                    probing = False
                    await self.store._handle(self, reply)
                elif probing:
                    raise RedisTimeoutError("no answer to PING on the notice connection")
                else:
                    await self.send("PING")
                    probing = True
            except asyncio.CancelledError:
                raise
            except (*UNREACHABLE, ResponseError, _Unsubscribed, StoreUnavailable) as exc:
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
                await self.store._reroute()
            except Exception:
                logger.exception("redis notice handler failed")
                if self.connection is None:  # it failed while connecting: do not spin
                    self.missed = True
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)


class RedisStore(Store):
    """``Store`` on Redis (redis-py asyncio).

    ``client`` replaces the client made from ``url`` (it must not decode responses; the store
    then leaves closing it to the caller). ``sharded=True`` publishes and subscribes with
    SPUBLISH/SSUBSCRIBE (Redis 7) on the one endpoint. ``cluster=True`` talks to a Redis
    Cluster (``url`` names any node) with redis-py's ``RedisCluster`` and sharded pub/sub,
    one notice connection per primary. ``wait_replicas``/``wait_aof`` see the module doc.
    """

    def __init__(
        self,
        url: str,
        retention: float,
        *,
        client: Redis | RedisCluster | None = None,
        sharded: bool = False,
        cluster: bool = False,
        wait_replicas: int = 0,
        wait_aof: bool = False,
        wait_timeout: float = 2.0,
    ) -> None:
        self.retention = retention
        self._commands = commands = Commands(
            url,
            client=client,
            cluster=cluster,
            wait_replicas=wait_replicas,
            wait_aof=wait_aof,
            wait_timeout=wait_timeout,
        )
        # A client's frame may start at once only where every call goes over the wire: redis-py
        # (a cluster, WAIT, TLS) times its reads with asyncio.timeout, which needs a task.
        self.eager_safe = commands.wire is not None
        self._client = client = commands.client
        self._cluster = isinstance(client, RedisCluster)
        sharded = sharded or self._cluster
        self._publish = "SPUBLISH" if sharded else "PUBLISH"
        self._subscribe_command = "SSUBSCRIBE" if sharded else "SUBSCRIBE"
        self._unsubscribe_command = "SUNSUBSCRIBE" if sharded else "UNSUBSCRIBE"
        self._confirmations = (b"ssubscribe",) if sharded else (b"subscribe",)
        self._messages = (b"smessage",) if sharded else (b"message",)
        self._create = commands.register(write_script(CREATE, self._publish))
        self._compare_and_set = commands.register(write_script(COMPARE_AND_SET, self._publish))
        self._queue = commands.register(QUEUE)
        self._heartbeat = commands.register(HEARTBEAT)
        self._leave = commands.register(LEAVE)
        self._presence = commands.register(PRESENCE)

        # Notifications: channel -> session id, subscriptions Redis has yet to confirm, and
        # the links (notice connections) by endpoint name.
        self._subscribed: dict[bytes, str] = {}
        self._own_records: OrderedDict[bytes, Questionnaire] = OrderedDict()  # see _pack_own
        self._records = Records()
        self._unconfirmed: dict[bytes, asyncio.Future[None]] = {}
        self._links: dict[str, _Link] = {}
        self._route_lock = asyncio.Lock()
        self._started = False
        self._on_notice: NoticeHandler | None = None
        self._on_reconnect: ReconnectHandler | None = None

    # --- questionnaires -------------------------------------------------------------

    async def create(self, state: Questionnaire, idempotency_key: str | None = None) -> Questionnaire:
        sid = state.session_id
        keys = [questionnaire_prefix(sid) + state.id, prefix(sid) + "queue", prefix(sid) + "seq"]
        if idempotency_key is not None:
            keys.append(prefix(sid) + "idem:" + idempotency_key)
        args: list[EncodableT] = [
            state.id,
            state.version,
            self._pack_own(state),
            ms(self.retention),
            self._notice(state),
            NOTICE_STATE_LIMIT,
        ]
        with reachable("create"):
            reply = await self._commands.write(self._create, keys, args, lambda r: int(r[0]) == 1)
        if int(reply[0]) == 1:
            return state
        return self._unpack(reply[1])

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        with reachable("load"):
            record = await self._commands.command("HGET", questionnaire_prefix(session_id) + questionnaire_id, "s")
        return None if record is None else self._unpack(record)

    async def commit(
        self, state: Questionnaire, expected_version: int, *, shown_by_writer: bool = False
    ) -> Written | None:
        # (The notice goes out regardless: other processes' clients and waiters need it.)
        sid = state.session_id
        keys = [questionnaire_prefix(sid) + state.id, prefix(sid) + "queue", prefix(sid) + "seq"]
        args: list[EncodableT] = [
            expected_version,
            state.version,
            self._pack_own(state),
            ms(self.retention),
            "1" if state.is_terminal else "0",
            state.id,
            self._notice(state),
            NOTICE_STATE_LIMIT,
            "1" if state.is_outcome else "0",
        ]
        with reachable("compare_and_set"):
            reply = await self._commands.write(self._compare_and_set, keys, args, lambda r: isinstance(r, list))
        if not isinstance(reply, list):
            return None
        seq = int(reply[0])
        if seq == 0 or len(reply) < 2:
            return Written(seq)
        return Written(seq, self._head(reply[2], seq) if len(reply) > 2 else Head(None, seq))

    async def queue(self, session_id: str) -> list[str]:
        with reachable("queue"):
            ids = await self._commands.run(self._queue, queue_keys(session_id), [questionnaire_prefix(session_id), "0"])
        return [bytes(i).decode() for i in ids]

    async def head(self, session_id: str) -> Head:
        """One round trip: the script returns the head's record and the write counter."""
        with reachable("head"):
            reply = await self._commands.run(
                self._queue, queue_keys(session_id), [questionnaire_prefix(session_id), "1"]
            )
        seq = int(reply[0])
        return self._head(reply[1], seq) if len(reply) > 1 else Head(None, seq)

    async def write_counts(self, session_ids: list[str]) -> list[int]:
        keys = [prefix(sid) + "seq" for sid in session_ids]
        values: list[Any] = []
        with reachable("write_counts"):
            if isinstance(self._client, RedisCluster):
                values = list(await self._client.mget_nonatomic(keys)) if keys else []  # per slot
            else:
                for start in range(0, len(keys), _MGET_CHUNK):
                    values.extend(await self._commands.command("MGET", *keys[start : start + _MGET_CHUNK]))
        return [0 if value is None else int(value) for value in values]

    # --- presence -------------------------------------------------------------------

    async def heartbeat(self, session_id: str, client_id: str, ttl: float, now: float) -> None:
        lifetime = ms(max(self.retention, ttl, _PRESENCE_MIN_LIFETIME))
        with reachable("heartbeat"):
            await self._commands.run(
                self._heartbeat, presence_keys(session_id), [client_id, repr(now + ttl), repr(now), lifetime]
            )

    async def leave(self, session_id: str, client_id: str, now: float) -> None:
        lifetime = ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with reachable("leave"):
            await self._commands.run(self._leave, presence_keys(session_id), [client_id, repr(now), lifetime])

    async def presence(self, session_id: str, now: float) -> Presence:
        lifetime = ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with reachable("presence"):
            clients, seen = await self._commands.run(self._presence, presence_keys(session_id), [repr(now), lifetime])
        return Presence(int(clients), None if seen is None else float(seen))

    # --- notifications --------------------------------------------------------------

    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Returns once Redis confirmed the subscription (or at once before ``start``)."""
        channel = channel_for(session_id, outcomes_only).encode()
        pending = self._unconfirmed.get(channel)
        if channel in self._subscribed and pending is None:
            return
        self._subscribed[channel] = session_id
        if not self._started:
            return  # start() subscribes every registered session
        if pending is None:
            try:
                with reachable("subscribe"):
                    link = self._link(self._route(channel))
            except StoreUnavailable:
                del self._subscribed[channel]  # no link to carry it: the next call tries again
                raise
            pending = asyncio.get_running_loop().create_future()
            self._unconfirmed[channel] = pending
            link.channels.add(channel)
            link.run([])  # a new link connects (subscribing the channel) in its reader
            await link.send(self._subscribe_command, channel)
        try:
            await asyncio.wait_for(asyncio.shield(pending), _CONFIRM_TIMEOUT)
        except TimeoutError as exc:
            # Stays registered: its link subscribes it again after reconnecting.
            raise StoreUnavailable(f"redis store: subscription to {session_id!r} not confirmed") from exc

    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        channel = channel_for(session_id, outcomes_only).encode()
        if self._subscribed.pop(channel, None) is None:
            return
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        # Should this fail, a new connection only subscribes registered sessions, and late
        # notices of unregistered ones are dropped.
        for link in list(self._links.values()):
            if channel in link.channels:
                await link.unsubscribe(channel)

    # --- life cycle -----------------------------------------------------------------

    async def start(self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler) -> None:
        if self._started:
            raise RuntimeError("RedisStore.start() called twice")
        self._on_notice = on_notice
        self._on_reconnect = on_reconnect
        early: dict[str, list[Any]] = {}
        try:
            with reachable("start"):
                if isinstance(self._client, RedisCluster):
                    await self._client.initialize()
                else:
                    self._link(_STANDALONE)
                await self._commands.require_durability()
                for channel in self._subscribed:
                    self._link(self._route(channel)).channels.add(channel)
                for name, link in self._links.items():
                    early[name] = await link.connect()
                if not isinstance(self._client, RedisCluster):
                    await self._try_access()
        except ResponseError as exc:  # NOPERM, a DB index out of range, ...: not worth retrying
            for link in self._links.values():
                await link.disconnect()
            self._links.clear()
            raise StoreUnavailable(f"redis store: start failed: Redis refused: {exc}") from exc
        except BaseException:
            for link in self._links.values():
                await link.disconnect()
            self._links.clear()
            raise
        self._started = True
        for name, link in self._links.items():
            link.run(early[name])

    @property
    def notices_connected(self) -> bool:
        """Every notice connection is up (on a cluster, one per primary)."""
        return self._started and all(link.connection is not None for link in self._links.values())

    async def _try_access(self) -> None:
        """Use what the broker needs once, on a session no one has: a subscription on the
        notice connection and a script on the command connection (its keys included)."""
        await self._links[_STANDALONE].probe(channel_for(_PROBE_SESSION).encode())
        await self.head(_PROBE_SESSION)

    async def close(self) -> None:
        self._started = False
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
        await self._commands.close()

    async def ping(self) -> bool:
        """True when Redis answers; on a cluster, when any primary answers (a shard that is
        down fails its own sessions with 503, not the whole broker)."""
        try:
            if isinstance(self._client, RedisCluster):
                await self._client.initialize()
                answers = await asyncio.gather(
                    *(self._client.ping(target_nodes=node) for node in self._client.get_primaries()),
                    return_exceptions=True,
                )
                return any(answer is True for answer in answers)
            if self._started and not self.notices_connected:
                return False  # notices cannot arrive: clients are refused until it is back
            return bool(await self._client.ping())
        except (RedisError, RedisClusterException, OSError):
            return False

    # --- links: routing -----------------------------------------------------------------

    def _route(self, channel: bytes) -> str:
        """The name of the link that must carry ``channel``: its slot's primary on a cluster."""
        if not isinstance(self._client, RedisCluster):
            return _STANDALONE
        slot = self._client.keyslot(channel)
        return str(self._client.nodes_manager.get_node_from_slot(slot).name)

    def _link(self, name: str) -> _Link:
        link = self._links.get(name)
        if link is None:
            link = self._links[name] = _Link(self, name, self._connection_factory(name))
        return link

    def _connection_factory(self, name: str) -> Callable[[], AbstractConnection]:
        wire = self._commands.wire
        if wire is not None:  # (our own, like the commands': cheaper per notice read)
            return lambda: NoticeConnection(wire)  # type: ignore[return-value]
        if not isinstance(self._client, RedisCluster):
            return self._client.connection_pool.make_connection
        node: ClusterNode | None = self._client.nodes_manager.get_node(node_name=name)
        if node is None:
            raise RedisClusterException(f"unknown cluster node {name}")
        # A connection of our own (not the node's pool), without retries: the link retries.
        kwargs = {**node.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
        connection_class = node.connection_class
        return lambda: connection_class(**kwargs)

    async def _reroute(self) -> None:
        """Cluster: re-read the slot map and move every channel to its primary's link.

        Links that gain channels reconnect (then call ``on_reconnect``); new primaries get new
        links; links of nodes that are no longer primaries retire.
        """
        if not isinstance(self._client, RedisCluster) or not self._started:
            return
        async with self._route_lock:
            try:
                await self._client.nodes_manager.initialize()
                primaries = {node.name for node in self._client.get_primaries()}
                wanted: dict[str, set[bytes]] = {}
                for channel in self._subscribed:
                    wanted.setdefault(self._route(channel), set()).add(channel)
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

    # --- links: replies -----------------------------------------------------------------

    def _confirmed(self, reply: Any) -> bytes | None:
        """The channel ``reply`` confirms a subscription to (resolving its waiter), else None."""
        if not isinstance(reply, list) or len(reply) < 2 or reply[0] not in self._confirmations:
            return None
        channel = bytes(reply[1])
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        return channel

    async def _handle(self, link: _Link, reply: Any) -> None:
        """Act on one reply of a notice connection (a notice, a confirmation, a PONG, a drop)."""
        if self._confirmed(reply) is not None or not isinstance(reply, list) or len(reply) != 3:
            return
        kind, channel, data = reply
        if kind == b"sunsubscribe" and not link.leaving(channel) and channel in link.channels:
            # Redis dropped it on its own: the slot moved or this node is no longer a primary.
            raise _Unsubscribed(f"redis dropped the subscription to {bytes(channel)!r}")
        if kind not in self._messages or channel not in self._subscribed:
            return  # a PONG, or a late notice of a session no longer subscribed
        notice = _decode_notice(data, self._record_of)
        if notice is None:
            logger.warning("ignoring a malformed notice on %r", channel)
        elif self._on_notice is not None:
            await self._on_notice(notice)

    async def _reconnected(self) -> None:
        if self._on_reconnect is not None:
            await self._on_reconnect()

    # --- helpers ------------------------------------------------------------------------

    def _pack_own(self, state: Questionnaire) -> bytes:
        """``state`` packed for a write of ours. When the notice of that write will come back
        to this process (it follows the session's every write, or this one is an outcome and
        it follows the session's outcomes), the state is kept until then: that notice costs
        a lookup rather than a decoding, and takes the state away with it. (Kept any longer,
        a state is freed when it has long left the processor's cache: a miss per object.)"""
        packed = self._records.pack(state)
        subscribed = self._subscribed
        if channel_for(state.session_id).encode() in subscribed or (
            state.is_outcome and channel_for(state.session_id, outcomes_only=True).encode() in subscribed
        ):
            own = self._own_records
            own[packed] = state
            if len(own) > _OWN_RECORDS:
                own.popitem(last=False)  # the oldest: a notice that did not come
        return packed

    def _record_of(self, raw: bytes) -> Record:
        """A notice's record: for a write of ours, the very state it packed (same bytes, so the
        same state), taken out of the kept ones; any other, decoded when asked for."""
        state = self._own_records.pop(raw, None)
        return Record(raw, self._unpack) if state is None else Record.of(state)

    def _unpack(self, record: Any) -> Questionnaire:
        return self._records.unpack(record)

    def _head(self, record: Any, seq: int) -> Head:
        return _head_of(self._records.unpack(record), seq)

    @staticmethod
    def _notice(state: Questionnaire) -> bytes:
        """The notice's first four fields, under the header of the whole 7-field array (the
        script appends the record, the write number and the head)."""
        packed = to_msgpack([state.session_id, state.id, state.version, state.status])
        return b"\x97" + packed[1:]  # fixarray 4 -> fixarray 7
