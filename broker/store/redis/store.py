"""``RedisStore``: the ``Store`` on Redis, put together from the pieces of this package
(``__init__.py`` names them): the questionnaires' and presence's calls, and the life cycle."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, Final, get_args

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.typing import EncodableT

from broker.core import inbox
from broker.core.events import Event
from broker.core.history import Summary
from broker.core.machine import OUTCOMES, TERMINAL, Questionnaire, Status
from broker.core.push import PushSubscription
from broker.core.revocations import Revocation
from broker.store.base import (
    NOTICE_STATE_LIMIT,
    Head,
    Notice,
    NoticeHandler,
    Presence,
    PresenceHandler,
    ReconnectHandler,
    SessionInbox,
    Store,
    StoreUnavailable,
    Written,
)
from broker.store.records import Records, pack_event, unpack_event
from broker.store.redis.commands import Commands, ms
from broker.store.redis.connections import UNREACHABLE, reachable, unreachable
from broker.store.redis.deliveries import Deliveries
from broker.store.redis.inbox_index import InboxIndex
from broker.store.redis.keys import (
    REVOCATIONS_KEYS,
    channel_for,
    claim_key,
    inbox_shard,
    index_key,
    note_key,
    prefix,
    presence_keys,
    questionnaire_key,
    questionnaire_prefix,
    queue_keys,
    write_keys,
)
from broker.store.redis.links import PubSub
from broker.store.redis.notices import created_notice, head_of, notice_prefix, notice_start
from broker.store.redis.push import PushSubscriptions
from broker.store.redis.routing import Routing
from broker.store.redis.scripts import (
    COMPARE_AND_SET,
    CREATE,
    EVENTS,
    HEARTBEAT,
    HISTORY,
    INBOX,
    INDEX,
    LEAVE,
    PRESENCE,
    QUEUE,
    REVOCATIONS,
    REVOKE,
    write_script,
)
from broker.store.redis.sentinel import SentinelTarget
from broker.store.redis.subscriptions import Subscriptions

logger = logging.getLogger(__name__)

_PRESENCE_MIN_LIFETIME: Final = 3600.0  # presence keys outlive the longest reconnect grace
_PROBE_SESSION: Final = "qbroker-start-probe"  # a session only start() uses (see _try_access)
_MGET_CHUNK: Final = 1000  # keys per MGET of the reconciliation (one short command each)


class RedisStore(Store):
    """``Store`` on Redis (redis-py asyncio).

    ``client`` replaces the client made from ``url`` (it must not decode responses; the store
    then leaves closing it to the caller). ``sharded=True`` publishes and subscribes with
    SPUBLISH/SSUBSCRIBE (Redis 7) on the one endpoint. ``cluster=True`` talks to a Redis
    Cluster (``url`` names any node) with redis-py's ``RedisCluster`` and sharded pub/sub,
    one notice connection per primary. ``url`` may instead be the sentinels that know the
    master (sentinel.py). ``wait_replicas``/``wait_aof``: commands.py.
    """

    def __init__(
        self,
        url: str | SentinelTarget,
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
        self._pubsub = pubsub = PubSub.of(sharded)
        # One Redis: a create keeps the inbox's index itself; a cluster's shard is elsewhere.
        self._indexed_by_create = not self._cluster
        # One Redis: a write passes only the questionnaire's hash (write_keys.lua).
        self._one_key = one_key = not self._cluster
        self._create = commands.register(
            write_script(CREATE, pubsub.publish, indexed=self._indexed_by_create, one_key=one_key)
        )
        self._compare_and_set = commands.register(write_script(COMPARE_AND_SET, pubsub.publish, one_key=one_key))
        self._queue = commands.register(QUEUE)
        self._events = commands.register(EVENTS)
        self._history = commands.register(HISTORY)
        self._heartbeat = commands.register(HEARTBEAT)
        self._leave = commands.register(LEAVE)
        self._presence = commands.register(PRESENCE)
        self._revoke = commands.register(REVOKE)
        self._revocations = commands.register(REVOCATIONS)
        self._chores: set[asyncio.Future[None]] = set()  # the index's and presence's, off the caller's path
        self._push = PushSubscriptions(commands)
        self._deliveries = Deliveries(commands)

        self._records = records = Records()
        self._subscriptions = subscriptions = Subscriptions(Routing(client, commands.wire), pubsub, records)
        self._own_writes = subscriptions.own_writes
        self._inbox_index = InboxIndex(
            commands,
            subscriptions,
            publish=pubsub.publish,
            index=commands.register(write_script(INDEX, pubsub.publish)),
            inbox_script=commands.register(INBOX),
            chore=self._chore,
        )

    @property
    def retention(self) -> float:
        return self._retention

    @retention.setter
    def retention(self, seconds: float) -> None:
        self._retention = seconds
        self._retention_ms = b"%d" % ms(seconds)  # (in every write's numbers: formatted once)

    # --- questionnaires -------------------------------------------------------------

    async def create(
        self, state: Questionnaire, idempotency_key: str | None = None, events: Sequence[Event] = ()
    ) -> Questionnaire:
        sid = state.session_id
        keys = self._write_keys(sid, state.id)
        indexed = self._indexed_by_create
        if indexed:
            keys.append(index_key(inbox_shard(sid)).encode())
        if idempotency_key is not None:
            keys.append((prefix(sid) + "idem:" + idempotency_key).encode())
        entry = inbox.entry_of(state)
        record = self._own_writes.pack(state)
        numbers = b"%d %b %d %d" % (state.version, self._retention_ms, NOTICE_STATE_LIMIT, _now_ms())
        args = [numbers, record, notice_prefix(state), b"" if entry is None else inbox.pack(entry)]
        args += [pack_event(event) for event in events]
        try:
            reply = await self._commands.write(self._create, keys, args, _created)
        except UNREACHABLE as exc:
            raise unreachable("create", exc) from exc
        if int(reply[0]) == 1:
            if not indexed:  # after it is stored: whoever hears of it then finds it (see _unindex)
                await self._inbox_index.add(sid, created_notice(state, record, int(reply[1])))
            return state
        stored = self._unpack(reply[1])
        if not indexed and not stored.is_terminal:  # a retry after a failure between the two
            await self._inbox_index.add(sid, b"")
        return stored

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        with reachable("load"):
            record = await self._commands.command("HGET", questionnaire_prefix(session_id) + questionnaire_id, "s")
        return None if record is None else self._unpack(record)

    async def commit(
        self,
        state: Questionnaire,
        expected_version: int,
        *,
        shown_by_writer: bool = False,
        events: Sequence[Event] = (),
    ) -> Written | None:
        # (The notice goes out regardless: other processes' clients and waiters need it.)
        sid = state.session_id
        entry = inbox.entry_of(state)
        flags = _FLAGS.get(state.status, 0)
        moment = 0 if entry is None else inbox.moment_length(entry)
        numbers = b"%d %d %d %b %d %d %d" % (
            expected_version,
            state.version,
            flags,
            self._retention_ms,
            NOTICE_STATE_LIMIT,
            moment,
            _now_ms(),  # (the scripts renew expiries by it: expiry.lua)
        )
        packed_entry = b"" if entry is None else inbox.pack(entry)
        own = self._own_writes
        record, notice_head = own.pack(state, shown_by_writer), notice_prefix(state)
        args = [numbers, record, notice_head, packed_entry]
        for event in events:  # (in the same script: no round trip of its own)
            args.append(pack_event(event))
        keys = self._write_keys(sid, state.id)
        # A write its writer shows: its notice, when it comes back here, is dropped unread,
        # known by its first bytes up to its record (a notice without its record, too large
        # to carry, could be another process's write that won a race against ours: read).
        expected = b""  # (the start of that notice, when it will come back here)
        if shown_by_writer and len(record) <= NOTICE_STATE_LIMIT:
            start = notice_start(notice_head, record)
            if own.expect(sid, start):
                expected = start
        try:
            reply = await self._commands.write(self._compare_and_set, keys, args, _set)
        except BaseException as exc:
            if expected and not own.unexpect(sid, expected):
                self._look_again(state)  # (its notice was dropped here, and the caller fails)
            if isinstance(exc, UNREACHABLE):
                raise unreachable("compare_and_set", exc) from exc
            raise
        if not isinstance(reply, list):
            if expected:
                own.unexpect(sid, expected)
            return None
        seq = int(reply[0])
        if seq == 0 or len(reply) < 2:
            return Written(seq)
        if len(reply) == 2:  # nothing open left in the session: it leaves the inbox's index soon
            self._inbox_index.empty(sid)
            return Written(seq, Head(None, seq))
        return Written(seq, self._head(reply[2], seq))

    def _write_keys(self, session_id: str, questionnaire_id: str) -> list[bytes]:
        """The keys a write script is passed: on one Redis the questionnaire's alone, on a
        cluster every one it touches (scripts/write_keys.lua)."""
        if self._one_key:
            return [questionnaire_key(session_id, questionnaire_id)]
        return write_keys(session_id, questionnaire_id)

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

    async def events(self, session_id: str, questionnaire_id: str) -> list[Event] | None:
        base = prefix(session_id)
        with reachable("events"):
            packed = await self._commands.run(
                self._events, [base + "q:" + questionnaire_id, base + "ev:" + questionnaire_id], []
            )
        if packed is None:
            return None
        count, kept, *listed = packed
        events = _events_of(count, kept)
        if listed:  # (an older broker's, kept apart: in order by their time, as written)
            events = sorted(events + [unpack_event(bytes(event)) for event in listed], key=_at)
        return events

    async def history(self, session_id: str, before: int | None, count: int) -> list[Summary]:
        if count <= 0:
            return []
        base = prefix(session_id)
        top = "+inf" if before is None else f"({before}"
        with reachable("history"):
            found = await self._commands.run(self._history, [base + "history"], [base, top, count])
        summaries = []
        for qid, score, count, kept, *ends in found:
            events = _events_of(count, kept)
            if ends[0] is not None:  # (an older broker's events, kept apart: first and latest by time)
                events = sorted(events + [unpack_event(bytes(event)) for event in ends], key=_at)
            summaries.append(Summary(bytes(qid).decode(), int(score), events[0], events[-1]))
        return summaries

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
            clients = await self._commands.run(
                self._heartbeat, presence_keys(session_id), [client_id, repr(now + ttl), repr(now), lifetime]
            )
        if clients is not None and int(clients) >= 0:  # (None: a script of an older broker's)
            self._chore(self._inbox_index.tell_presence(session_id, int(clients)))

    async def leave(self, session_id: str, client_id: str, now: float) -> None:
        lifetime = ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with reachable("leave"):
            clients = await self._commands.run(self._leave, presence_keys(session_id), [client_id, repr(now), lifetime])
        if clients is not None and int(clients) >= 0:
            self._chore(self._inbox_index.tell_presence(session_id, int(clients)))

    async def presence(self, session_id: str, now: float) -> Presence:
        lifetime = ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with reachable("presence"):
            clients, seen, *lapsed = await self._commands.run(
                self._presence, presence_keys(session_id), [repr(now), lifetime]
            )
        if lapsed and int(lapsed[0]):
            self._chore(self._inbox_index.tell_presence(session_id, int(clients)))
        return Presence(int(clients), None if seen is None else float(seen))

    # --- claims ---------------------------------------------------------------------

    async def claim(self, session_id: str, name: str, ttl: float) -> bool:
        with reachable("claim"):
            taken = await self._commands.command("SET", claim_key(session_id, name), "1", "NX", "PX", ms(ttl))
        return taken is not None

    async def note(self, session_id: str, name: str, value: str | None, ttl: float) -> None:
        with reachable("note"):
            if value is None:
                await self._commands.command("DEL", note_key(session_id, name))
            else:
                await self._commands.command("SET", note_key(session_id, name), value, "PX", ms(ttl))

    async def noted(self, session_id: str, name: str) -> str | None:
        with reachable("noted"):
            value = await self._commands.command("GET", note_key(session_id, name))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    # --- revocations ----------------------------------------------------------------

    async def revoke(self, revocation: Revocation, now: float) -> None:
        args: list[EncodableT] = [revocation.key, repr(revocation.at), repr(revocation.until), repr(now)]
        args.append(uuid.uuid4().hex)  # the new version
        with reachable("revoke"):
            await self._commands.run(self._revoke, REVOCATIONS_KEYS, args)

    async def revocations(self, known: str | None) -> tuple[str, list[Revocation]] | None:
        # ("?" is no version: the list's are "" (none yet) and uuid hex)
        with reachable("revocations"):
            reply = await self._commands.run(self._revocations, REVOCATIONS_KEYS, [known if known is not None else "?"])
        if len(reply) == 1:
            return None
        flat = reply[1]
        kept = [_revocation(bytes(flat[i]).decode(), bytes(flat[i + 1]).decode()) for i in range(0, len(flat), 2)]
        return bytes(reply[0]).decode(), kept

    # --- the inbox (inbox_index.py) --------------------------------------------------

    async def open_sessions(self, prefix: str) -> list[str]:
        return await self._inbox_index.open_sessions(prefix)

    async def inbox_sessions(self, prefix: str, start: str, count: int) -> list[str]:
        return await self._inbox_index.sessions(prefix, start, count)

    async def session_inboxes(self, session_ids: list[str], now: float) -> list[SessionInbox]:
        return await self._inbox_index.session_inboxes(session_ids, now)

    async def watch_inbox(self, prefix: str) -> None:
        await self._inbox_index.watch(prefix)

    async def unwatch_inbox(self, prefix: str) -> None:
        await self._inbox_index.unwatch(prefix)

    async def inbox_heartbeat(self, scopes: list[str], ttl: float, now: float) -> None:
        await self._inbox_index.heartbeat(scopes, ttl, now)

    async def inbox_until(self, session_id: str) -> float | None:
        return await self._inbox_index.until(session_id)

    # --- chores -----------------------------------------------------------------------

    def _look_again(self, state: Questionnaire) -> None:
        """Tell this process to read the session again: a write of ours may have landed
        whose notice it dropped unread, its writer failing before it could show it."""
        work = self._subscriptions.tell(Notice(state.session_id, state.id, state.version))
        if work is not None:
            self._chore(work)

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` beside the caller (it waits for none of it); a failure is a warning."""
        task = asyncio.ensure_future(work)
        self._chores.add(task)
        task.add_done_callback(self._chore_done)

    def _chore_done(self, task: asyncio.Future[None]) -> None:
        self._chores.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if isinstance(exc, StoreUnavailable):
                logger.warning("inbox upkeep failed: %s", exc)
            else:
                logger.error("inbox upkeep failed", exc_info=exc)

    # --- notification deliveries (deliveries.py) -------------------------------------

    async def add_delivery(self, record: bytes) -> None:
        await self._deliveries.add(record)

    async def take_deliveries(self, consumer: str, count: int, idle: float) -> list[tuple[str, bytes]]:
        return await self._deliveries.take(consumer, count, idle)

    async def keep_deliveries(self, consumer: str, delivery_ids: list[str]) -> None:
        await self._deliveries.keep(consumer, delivery_ids)

    async def finish_delivery(self, delivery_id: str) -> None:
        await self._deliveries.finish(delivery_id)

    # --- browser push subscriptions (push.py) -----------------------------------------

    async def add_push_subscription(self, subscription: PushSubscription, limit: int) -> None:
        await self._push.add(subscription, limit)

    async def remove_push_subscription(self, scope: str, endpoint: str) -> bool:
        return await self._push.remove(scope, endpoint)

    async def push_subscriptions(self, session_id: str, now: float) -> list[PushSubscription]:
        return await self._push.covering(session_id, now)

    # --- notifications --------------------------------------------------------------

    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Returns once Redis confirmed the subscription (or at once before ``start``)."""
        await self._subscriptions.subscribe(session_id, outcomes_only)

    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        await self._subscriptions.unsubscribe(session_id, outcomes_only)

    # --- life cycle -----------------------------------------------------------------

    async def start(
        self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler, on_presence: PresenceHandler | None = None
    ) -> None:
        subscriptions = self._subscriptions
        if subscriptions.started:
            raise RuntimeError("RedisStore.start() called twice")
        try:
            with reachable("start"):
                await self._commands.require_durability()
                early = await subscriptions.open(on_notice, on_reconnect, on_presence)
                if not self._cluster:
                    await self._try_access()
        except ResponseError as exc:  # NOPERM, a DB index out of range, ...: not worth retrying
            await subscriptions.abandon()
            raise StoreUnavailable(f"redis store: start failed: Redis refused: {exc}") from exc
        except BaseException:
            await subscriptions.abandon()
            raise
        subscriptions.run(early)
        if await self._commands.persistence_off():
            logger.warning(
                "redis persistence (AOF) is off: revocations, notifications waiting for delivery and"
                " questionnaires are lost if Redis restarts; set appendonly yes (docs/operations.md)"
            )

    @property
    def notices_connected(self) -> bool:
        """Every notice connection is up (on a cluster, one per primary)."""
        return self._subscriptions.connected

    async def _try_access(self) -> None:
        """Use what the broker needs once, on a session no one has: a subscription on the
        notice connection and a script on the command connection (its keys included)."""
        await self._subscriptions.probe(channel_for(_PROBE_SESSION).encode())
        await self.head(_PROBE_SESSION)

    async def close(self) -> None:
        self._inbox_index.close()
        for chore in list(self._chores):
            chore.cancel()
        await self._subscriptions.close()
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
            if self._subscriptions.started and not self.notices_connected:
                return False  # notices cannot arrive: clients are refused until it is back
            return bool(await self._client.ping())
        except (RedisError, RedisClusterException, OSError):
            return False

    # --- helpers ------------------------------------------------------------------------

    def _unpack(self, record: Any) -> Questionnaire:
        return self._records.unpack(record)

    def _head(self, record: Any, seq: int) -> Head:
        return head_of(self._records.unpack(record), seq)


def _at(event: Event) -> float:
    return event.at


_unpack_events: Final = msgspec.msgpack.Decoder(list[Event]).decode


def _events_of(count: Any, packed: Any) -> list[Event]:
    """A questionnaire's events as its hash keeps them: ``count`` of them, packed one after
    the other (records.pack_event), read as the msgpack array they make under its header."""
    n = int(count)
    return _unpack_events(b"\xdd" + n.to_bytes(4, "big") + bytes(packed)) if n else []


def _created(reply: Any) -> bool:
    """Whether a create script's reply says it stored the questionnaire."""
    return int(reply[0]) == 1


def _set(reply: Any) -> bool:
    """Whether a compare-and-set script's reply says it wrote (or found its own write)."""
    return isinstance(reply, list)


# A compare-and-set's flags by the status it writes: 1 when it is terminal, + 2 when it is an
# outcome (compare_and_set.lua).
_FLAGS: Final = {status: (status in TERMINAL) + 2 * (status in OUTCOMES) for status in get_args(Status)}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _revocation(field: str, value: str) -> Revocation:
    """A revocation as scripts/revoke.lua keeps it: ``j:<jti>`` or ``s:<sub>`` -> ``"<at> <until>"``."""
    kind, _, name = field.partition(":")
    at, _, until = value.partition(" ")
    return Revocation(name if kind == "j" else None, name if kind == "s" else None, float(at), float(until))
