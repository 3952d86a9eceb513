"""The Redis store: any number of broker processes share one Redis (or one cluster slot per session).

Keys of one session, all carrying the ``{sid}`` hash tag so that a session lives on one slot::

    qb:{sid}:q:<id>        hash  v = version, s = msgpack of Questionnaire.to_record()
    qb:{sid}:queue         zset  open questionnaire ids, scored by qb:{sid}:seq (strict FIFO)
    qb:{sid}:seq           counter for the queue scores
    qb:{sid}:idem:<key>    string  Idempotency-Key -> questionnaire id
    qb:{sid}:clients       zset  client id -> heartbeat expiry (Unix seconds)
    qb:{sid}:seen          string  last time the session had a client (Unix seconds)
    qb:{sid}:events        channel  msgpack [sid, id, version] after every write

Every write is one Lua script, so it is one round trip and atomic: compare-and-set checks
the version, maintains the queue, renews the retention TTL and publishes the notice in the
same step. The scripts only touch keys of one session (some build a key name from the
session's own prefix, which keeps them on the session's slot).

A retried script (the reply of the first attempt was lost) is harmless: create rewrites the
same record, and compare-and-set reports success again when it finds its own write.

Notices travel over ONE dedicated connection per store, owned by a reader task that
subscribes sessions as the service asks. When that connection drops the reader reconnects
with backoff, subscribes every session again, waits for Redis to confirm, and only then
calls ``on_reconnect`` so the service re-reads what it may have missed. An idle connection
is probed with PING so a silently dead peer is noticed too.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final

import msgpack
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from broker.machine import Questionnaire
from broker.store.base import (
    Notice,
    NoticeHandler,
    Presence,
    ReconnectHandler,
    Store,
    StoreUnavailable,
)

logger = logging.getLogger(__name__)

# Errors that mean "Redis cannot be reached" (redis-py wraps most socket errors, not all).
_UNREACHABLE: Final = (RedisConnectionError, RedisTimeoutError, OSError)

_IDLE_PROBE: Final = 5.0  # seconds without traffic before the notice connection is PINGed
_CONFIRM_TIMEOUT: Final = 5.0  # seconds for Redis to confirm a subscription
_BACKOFF_MIN: Final = 0.05
_BACKOFF_MAX: Final = 2.0
_PRESENCE_MIN_LIFETIME: Final = 3600.0  # presence keys outlive the longest reconnect grace

# --- scripts --------------------------------------------------------------------------

_CREATE: Final = """
-- KEYS: questionnaire hash, queue, seq[, idempotency key]
-- ARGV: id, version, record, retention ms, publish command, channel, notice, questionnaire key prefix
-- Returns {1} when stored, {0, record} when the idempotency key names a live questionnaire.
if KEYS[4] then
  local known = redis.call('GET', KEYS[4])
  if known then
    local record = redis.call('HGET', ARGV[8] .. known, 's')
    if record then return {0, record} end
  end
  redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[4])
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], 'NX', redis.call('INCR', KEYS[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call(ARGV[5], ARGV[6], ARGV[7])
return {1}
"""

_COMPARE_AND_SET: Final = """
-- KEYS: questionnaire hash, queue, seq
-- ARGV: expected version, new version, record, retention ms, '1' if terminal, id,
--       publish command, channel, notice
local current = redis.call('HMGET', KEYS[1], 'v', 's')
if current[1] ~= ARGV[1] then
  if current[1] == ARGV[2] and current[2] == ARGV[3] then return 1 end  -- a retry finds its own write
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if ARGV[5] == '1' then redis.call('ZREM', KEYS[2], ARGV[6]) end
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call(ARGV[7], ARGV[8], ARGV[9])
return 1
"""

_QUEUE: Final = """
-- KEYS: queue.  ARGV: questionnaire key prefix, '1' to return the head's record instead of the ids.
-- Ids whose questionnaire expired while still open leave the queue on the way.
local live = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local record = redis.call('HGET', ARGV[1] .. id, 's')
  if not record then
    redis.call('ZREM', KEYS[1], id)
  elseif ARGV[2] == '1' then
    return record
  else
    table.insert(live, id)
  end
end
if ARGV[2] == '1' then return false end
return live
"""

_HEARTBEAT: Final = """
-- KEYS: clients, seen.  ARGV: client id, expiry, now, lifetime ms
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
"""

_LEAVE: Final = """
-- KEYS: clients, seen.  ARGV: client id, now, lifetime ms
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
"""

_PRESENCE: Final = """
-- KEYS: clients, seen.  ARGV: now, lifetime ms.  Returns {live clients, last seen or nil}.
-- Lapsed heartbeats are dropped; the session was last seen no earlier than they lapsed.
local lapsed = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  local seen = redis.call('GET', KEYS[2])
  if not seen or tonumber(lapsed[2]) > tonumber(seen) then
    redis.call('SET', KEYS[2], lapsed[2], 'PX', ARGV[2])
  end
end
return {redis.call('ZCARD', KEYS[1]), redis.call('GET', KEYS[2])}
"""


# --- keys -----------------------------------------------------------------------------


def _prefix(session_id: str) -> str:
    return "qb:{" + session_id + "}:"


def _questionnaire_prefix(session_id: str) -> str:
    return _prefix(session_id) + "q:"


def channel_for(session_id: str) -> str:
    """The pub/sub channel of a session's notices."""
    return _prefix(session_id) + "events"


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


@contextmanager
def _reachable(what: str) -> Iterator[None]:
    """Turn 'Redis cannot be reached' into ``StoreUnavailable``."""
    try:
        yield
    except _UNREACHABLE as exc:
        raise StoreUnavailable(f"redis store: {what} failed: {type(exc).__name__}: {exc}") from exc


def _decode_notice(data: Any) -> Notice | None:
    try:
        session_id, questionnaire_id, version = msgpack.unpackb(data, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        return None
    if not (isinstance(session_id, str) and isinstance(questionnaire_id, str) and isinstance(version, int)):
        return None
    return Notice(session_id, questionnaire_id, version)


class RedisStore(Store):
    """``Store`` on Redis (redis-py asyncio).

    ``client`` replaces the client made from ``url`` (it must not decode responses; the store
    then leaves closing it to the caller). ``sharded=True`` publishes and subscribes with
    SPUBLISH/SSUBSCRIBE, the Redis 7 sharded pub/sub that keeps a session's notices on its
    slot; the store still uses one endpoint (a standalone Redis 7 or a cluster-aware proxy),
    since a ``RedisCluster`` client would need one notice connection per shard.
    """

    def __init__(
        self,
        url: str,
        retention: float,
        *,
        client: Redis | None = None,
        sharded: bool = False,
    ) -> None:
        self.retention = retention
        self._owns_client = client is None
        if client is None:
            client = Redis.from_url(
                url,
                # One quick retry: the scripts are safe to repeat, and a broker should answer
                # 503 soon rather than hang while Redis is away.
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
                socket_connect_timeout=2.0,
                socket_timeout=5.0,
                socket_keepalive=True,
            )
        if client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("RedisStore needs a client with decode_responses=False")
        self._client = client
        self._publish = "SPUBLISH" if sharded else "PUBLISH"
        self._subscribe_command = "SSUBSCRIBE" if sharded else "SUBSCRIBE"
        self._unsubscribe_command = "SUNSUBSCRIBE" if sharded else "UNSUBSCRIBE"
        self._confirmations = (b"ssubscribe",) if sharded else (b"subscribe",)
        self._messages = (b"smessage",) if sharded else (b"message",)

        self._create = client.register_script(_CREATE)
        self._compare_and_set = client.register_script(_COMPARE_AND_SET)
        self._queue = client.register_script(_QUEUE)
        self._heartbeat = client.register_script(_HEARTBEAT)
        self._leave = client.register_script(_LEAVE)
        self._presence = client.register_script(_PRESENCE)

        # Notifications: channel -> session id, and subscriptions Redis has yet to confirm.
        self._subscribed: dict[bytes, str] = {}
        self._unconfirmed: dict[bytes, asyncio.Future[None]] = {}
        self._connection: AbstractConnection | None = None
        self._connection_lock = asyncio.Lock()  # subscription commands vs. (re)connecting
        self._reader: asyncio.Task[None] | None = None
        self._on_notice: NoticeHandler | None = None
        self._on_reconnect: ReconnectHandler | None = None

    # --- questionnaires -------------------------------------------------------------

    async def create(self, state: Questionnaire, idempotency_key: str | None = None) -> Questionnaire:
        sid = state.session_id
        keys = [_questionnaire_prefix(sid) + state.id, _prefix(sid) + "queue", _prefix(sid) + "seq"]
        if idempotency_key is not None:
            keys.append(_prefix(sid) + "idem:" + idempotency_key)
        args: list[EncodableT] = [
            state.id,
            state.version,
            self._pack(state),
            _ms(self.retention),
            self._publish,
            channel_for(sid),
            self._notice(state),
            _questionnaire_prefix(sid),
        ]
        with _reachable("create"):
            reply = await self._create(keys=keys, args=args)
        if int(reply[0]) == 1:
            return state
        return self._unpack(reply[1])

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        with _reachable("load"):
            record = await self._client.hget(_questionnaire_prefix(session_id) + questionnaire_id, "s")
        return None if record is None else self._unpack(record)

    async def compare_and_set(self, state: Questionnaire, expected_version: int) -> bool:
        sid = state.session_id
        keys = [_questionnaire_prefix(sid) + state.id, _prefix(sid) + "queue", _prefix(sid) + "seq"]
        args: list[EncodableT] = [
            expected_version,
            state.version,
            self._pack(state),
            _ms(self.retention),
            "1" if state.is_terminal else "0",
            state.id,
            self._publish,
            channel_for(sid),
            self._notice(state),
        ]
        with _reachable("compare_and_set"):
            return int(await self._compare_and_set(keys=keys, args=args)) == 1

    async def queue(self, session_id: str) -> list[str]:
        with _reachable("queue"):
            ids = await self._queue(
                keys=[_prefix(session_id) + "queue"], args=[_questionnaire_prefix(session_id), "0"]
            )
        return [bytes(i).decode() for i in ids]

    async def shown(self, session_id: str) -> Questionnaire | None:
        """One round trip: the script returns the head's record."""
        with _reachable("shown"):
            record = await self._queue(
                keys=[_prefix(session_id) + "queue"], args=[_questionnaire_prefix(session_id), "1"]
            )
        if record is None:
            return None
        state = self._unpack(record)
        return None if state.is_terminal else state

    # --- presence -------------------------------------------------------------------

    async def heartbeat(self, session_id: str, client_id: str, ttl: float, now: float) -> None:
        lifetime = _ms(max(self.retention, ttl, _PRESENCE_MIN_LIFETIME))
        with _reachable("heartbeat"):
            await self._heartbeat(
                keys=self._presence_keys(session_id), args=[client_id, repr(now + ttl), repr(now), lifetime]
            )

    async def leave(self, session_id: str, client_id: str, now: float) -> None:
        lifetime = _ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with _reachable("leave"):
            await self._leave(keys=self._presence_keys(session_id), args=[client_id, repr(now), lifetime])

    async def presence(self, session_id: str, now: float) -> Presence:
        lifetime = _ms(max(self.retention, _PRESENCE_MIN_LIFETIME))
        with _reachable("presence"):
            clients, seen = await self._presence(keys=self._presence_keys(session_id), args=[repr(now), lifetime])
        return Presence(int(clients), None if seen is None else float(seen))

    # --- notifications --------------------------------------------------------------

    async def subscribe(self, session_id: str) -> None:
        """Returns once Redis confirmed the subscription (or at once before ``start``)."""
        channel = channel_for(session_id).encode()
        pending = self._unconfirmed.get(channel)
        if channel in self._subscribed and pending is None:
            return
        self._subscribed[channel] = session_id
        if self._reader is None:
            return  # start() subscribes every registered session
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._unconfirmed[channel] = pending
            await self._send(self._subscribe_command, channel)
        try:
            await asyncio.wait_for(asyncio.shield(pending), _CONFIRM_TIMEOUT)
        except TimeoutError as exc:
            # Stays registered: the reader subscribes it again after reconnecting.
            raise StoreUnavailable(f"redis store: subscription to {session_id!r} not confirmed") from exc

    async def unsubscribe(self, session_id: str) -> None:
        channel = channel_for(session_id).encode()
        if self._subscribed.pop(channel, None) is None:
            return
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        # Should this fail, a new connection only subscribes registered sessions, and late
        # notices of unregistered ones are dropped.
        await self._send(self._unsubscribe_command, channel)

    # --- life cycle -----------------------------------------------------------------

    async def start(self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler) -> None:
        if self._reader is not None:
            raise RuntimeError("RedisStore.start() called twice")
        self._on_notice = on_notice
        self._on_reconnect = on_reconnect
        with _reachable("start"):
            early = await self._connect()
        self._reader = asyncio.create_task(self._read_notices(early), name="qbroker-redis-notices")

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with suppress(asyncio.CancelledError):
                await reader
        await self._disconnect()
        for pending in self._unconfirmed.values():
            pending.cancel()
        self._unconfirmed.clear()
        self._on_notice = None
        self._on_reconnect = None
        if self._owns_client:
            await self._client.aclose()

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    # --- the notice connection --------------------------------------------------------

    async def _connect(self) -> list[Any]:
        """Open the notice connection, subscribe every registered session, await the confirmations.

        Returns the notices that arrived meanwhile: the caller handles them once the lock is
        released (a handler may well subscribe another session).
        """
        loop = asyncio.get_running_loop()
        early: list[Any] = []
        async with self._connection_lock:
            await self._disconnect()
            connection: AbstractConnection = self._client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
                channels = set(self._subscribed)
                if channels:
                    await connection.send_command(self._subscribe_command, *channels)
                deadline = loop.time() + _CONFIRM_TIMEOUT
                while channels:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise RedisTimeoutError("subscriptions were not confirmed in time")
                    reply = await connection.read_response(timeout=remaining, push_request=True)
                    channel = self._confirmed(reply)
                    if channel is not None:
                        channels.discard(channel)
                    elif reply is not None:
                        early.append(reply)
            except BaseException:
                await connection.disconnect(nowait=True)
                raise
            self._connection = connection
        return early

    async def _send(self, *command: EncodableT) -> None:
        """Send ``command`` on the notice connection, if it is up.

        A connection that is down is the reader's to repair: it subscribes every registered
        session again on the next one. A send that fails closes the connection so that the
        reader notices at once (its pending read fails) and starts that repair.
        """
        async with self._connection_lock:
            connection = self._connection
            if connection is None or not connection.is_connected:
                return  # sending would silently open a fresh, unsubscribed socket
            try:
                await connection.send_command(*command, check_health=False)
            except Exception as exc:  # redis-py may also fail with AttributeError mid-disconnect
                logger.info("redis notice connection failed to send (%s); reconnecting", type(exc).__name__)
                with suppress(Exception):
                    await connection.disconnect(nowait=True)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with suppress(*_UNREACHABLE):
                await connection.disconnect(nowait=True)

    async def _read_notices(self, early: list[Any]) -> None:
        delay = _BACKOFF_MIN
        probing = False  # a PING went out and nothing came back yet
        while True:
            try:
                while early:
                    await self._handle(early.pop(0))
                connection = self._connection
                if connection is None:
                    early = await self._connect()
                    delay = _BACKOFF_MIN
                    probing = False
                    logger.info("redis notice connection re-established; re-reading state")
                    while early:
                        await self._handle(early.pop(0))
                    if self._on_reconnect is not None:
                        await self._on_reconnect()
                    continue
                reply = await connection.read_response(timeout=_IDLE_PROBE, push_request=True)
                if reply is not None:
                    probing = False
                    await self._handle(reply)
                elif probing:
                    raise RedisTimeoutError("no answer to PING on the notice connection")
                else:
                    await self._send("PING")
                    probing = True
            except asyncio.CancelledError:
                raise
            except (*_UNREACHABLE, StoreUnavailable) as exc:
                # StoreUnavailable comes from on_reconnect: reconnect again so it runs again.
                logger.warning(
                    "redis notice connection lost (%s); reconnecting in %.2fs", type(exc).__name__, delay
                )
                await self._disconnect()
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)
            except Exception:
                logger.exception("redis notice handler failed")

    def _confirmed(self, reply: Any) -> bytes | None:
        """The channel ``reply`` confirms a subscription to (resolving its waiter), else None."""
        if not isinstance(reply, list) or len(reply) < 2 or reply[0] not in self._confirmations:
            return None
        channel = bytes(reply[1])
        pending = self._unconfirmed.pop(channel, None)
        if pending is not None and not pending.done():
            pending.set_result(None)
        return channel

    async def _handle(self, reply: Any) -> None:
        """Act on one reply of the notice connection (a notice, a confirmation, a PONG)."""
        if self._confirmed(reply) is not None or not isinstance(reply, list) or len(reply) != 3:
            return
        kind, channel, data = reply
        if kind not in self._messages or channel not in self._subscribed:
            return  # a PONG, or a late notice of a session no longer subscribed
        notice = _decode_notice(data)
        if notice is None:
            logger.warning("ignoring a malformed notice on %r", channel)
        elif self._on_notice is not None:
            await self._on_notice(notice)

    # --- helpers ------------------------------------------------------------------------

    @staticmethod
    def _presence_keys(session_id: str) -> list[str]:
        return [_prefix(session_id) + "clients", _prefix(session_id) + "seen"]

    @staticmethod
    def _pack(state: Questionnaire) -> bytes:
        packed: bytes = msgpack.packb(state.to_record(), use_bin_type=True)
        return packed

    @staticmethod
    def _unpack(record: Any) -> Questionnaire:
        return Questionnaire.from_record(msgpack.unpackb(record, raw=False))

    @staticmethod
    def _notice(state: Questionnaire) -> bytes:
        packed: bytes = msgpack.packb([state.session_id, state.id, state.version], use_bin_type=True)
        return packed
