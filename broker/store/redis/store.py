"""``RedisStore``: the ``Store`` on Redis, put together from the pieces of this package
(``__init__.py`` names them): the questionnaires' and presence's calls, and the life cycle."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.typing import EncodableT

from broker.core.machine import Questionnaire
from broker.core.revocations import Revocation
from broker.store.base import (
    NOTICE_STATE_LIMIT,
    Head,
    NoticeHandler,
    Presence,
    ReconnectHandler,
    Store,
    StoreUnavailable,
    Written,
)
from broker.store.records import Records
from broker.store.redis.commands import Commands, ms
from broker.store.redis.connections import reachable
from broker.store.redis.keys import (
    REVOCATIONS_KEYS,
    channel_for,
    claim_key,
    prefix,
    presence_keys,
    questionnaire_prefix,
    queue_keys,
)
from broker.store.redis.links import PubSub
from broker.store.redis.notices import head_of, notice_prefix
from broker.store.redis.routing import Routing
from broker.store.redis.scripts import (
    COMPARE_AND_SET,
    CREATE,
    HEARTBEAT,
    LEAVE,
    PRESENCE,
    QUEUE,
    REVOCATIONS,
    REVOKE,
    write_script,
)
from broker.store.redis.subscriptions import Subscriptions

_PRESENCE_MIN_LIFETIME: Final = 3600.0  # presence keys outlive the longest reconnect grace
_PROBE_SESSION: Final = "qbroker-start-probe"  # a session only start() uses (see _try_access)
_MGET_CHUNK: Final = 1000  # keys per MGET of the reconciliation (one short command each)


class RedisStore(Store):
    """``Store`` on Redis (redis-py asyncio).

    ``client`` replaces the client made from ``url`` (it must not decode responses; the store
    then leaves closing it to the caller). ``sharded=True`` publishes and subscribes with
    SPUBLISH/SSUBSCRIBE (Redis 7) on the one endpoint. ``cluster=True`` talks to a Redis
    Cluster (``url`` names any node) with redis-py's ``RedisCluster`` and sharded pub/sub,
    one notice connection per primary. ``wait_replicas``/``wait_aof``: commands.py.
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
        self._pubsub = pubsub = PubSub.of(sharded)
        self._create = commands.register(write_script(CREATE, pubsub.publish))
        self._compare_and_set = commands.register(write_script(COMPARE_AND_SET, pubsub.publish))
        self._queue = commands.register(QUEUE)
        self._heartbeat = commands.register(HEARTBEAT)
        self._leave = commands.register(LEAVE)
        self._presence = commands.register(PRESENCE)
        self._revoke = commands.register(REVOKE)
        self._revocations = commands.register(REVOCATIONS)

        self._records = records = Records()
        self._subscriptions = subscriptions = Subscriptions(Routing(client, commands.wire), pubsub, records)
        self._own_writes = subscriptions.own_writes

    # --- questionnaires -------------------------------------------------------------

    async def create(self, state: Questionnaire, idempotency_key: str | None = None) -> Questionnaire:
        sid = state.session_id
        keys = [questionnaire_prefix(sid) + state.id, prefix(sid) + "queue", prefix(sid) + "seq"]
        if idempotency_key is not None:
            keys.append(prefix(sid) + "idem:" + idempotency_key)
        args: list[EncodableT] = [
            state.id,
            state.version,
            self._own_writes.pack(state),
            ms(self.retention),
            notice_prefix(state),
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
            self._own_writes.pack(state),
            ms(self.retention),
            "1" if state.is_terminal else "0",
            state.id,
            notice_prefix(state),
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

    # --- claims ---------------------------------------------------------------------

    async def claim(self, session_id: str, name: str, ttl: float) -> bool:
        with reachable("claim"):
            taken = await self._commands.command("SET", claim_key(session_id, name), "1", "NX", "PX", ms(ttl))
        return taken is not None

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

    # --- notifications --------------------------------------------------------------

    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Returns once Redis confirmed the subscription (or at once before ``start``)."""
        await self._subscriptions.subscribe(session_id, outcomes_only)

    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        await self._subscriptions.unsubscribe(session_id, outcomes_only)

    # --- life cycle -----------------------------------------------------------------

    async def start(self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler) -> None:
        subscriptions = self._subscriptions
        if subscriptions.started:
            raise RuntimeError("RedisStore.start() called twice")
        try:
            with reachable("start"):
                await self._commands.require_durability()
                early = await subscriptions.open(on_notice, on_reconnect)
                if not self._cluster:
                    await self._try_access()
        except ResponseError as exc:  # NOPERM, a DB index out of range, ...: not worth retrying
            await subscriptions.abandon()
            raise StoreUnavailable(f"redis store: start failed: Redis refused: {exc}") from exc
        except BaseException:
            await subscriptions.abandon()
            raise
        subscriptions.run(early)

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


def _revocation(field: str, value: str) -> Revocation:
    """A revocation as scripts/revoke.lua keeps it: ``j:<jti>`` or ``s:<sub>`` -> ``"<at> <until>"``."""
    kind, _, name = field.partition(":")
    at, _, until = value.partition(" ")
    return Revocation(name if kind == "j" else None, name if kind == "s" else None, float(at), float(until))
