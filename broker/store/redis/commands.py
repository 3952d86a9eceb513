"""The Redis store's commands: how they reach Redis, and how a write is made durable.

Durability (docs/deploy.md): ``wait_replicas`` / ``wait_aof`` make every create and
compare-and-set wait, on the connection that wrote, for WAIT (replicas acknowledged) or
WAITAOF (fsynced to the AOF, Redis 7.2+). A write that misses the target within
``wait_timeout`` still stands, but the call raises ``StoreUnavailable``, so the broker never
acknowledges it; a retry finds its own write. Not available on a cluster.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError
from redis.typing import EncodableT

from broker.speedups.redis_wire import RedisWire, pack_evalsha
from broker.store.base import StoreUnavailable
from broker.store.redis.connections import COMMAND_TIMEOUT, CONNECT_TIMEOUT, open_client, socket_options
from broker.store.redis.sentinel import SentinelTarget, close_sentinels, open_master_client

logger = logging.getLogger(__name__)


def ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


class Commands:
    """The store's command connection: our own wire where it can serve, else redis-py's
    ``client`` (made from ``url`` when not given: a URL, or the sentinels to ask for the
    master); ``wait_*``: the module doc."""

    def __init__(
        self,
        url: str | SentinelTarget,
        *,
        client: Redis | RedisCluster | None,
        cluster: bool,
        wait_replicas: int,
        wait_aof: bool,
        wait_timeout: float,
    ) -> None:
        if wait_replicas < 0:
            raise ValueError("wait_replicas must not be negative")
        if (cluster or isinstance(client, RedisCluster)) and (wait_replicas or wait_aof):
            raise ValueError("WAIT/WAITAOF after each write is not supported on a Redis Cluster (see docs/deploy.md)")
        self._owns_client = client is None
        # The hot commands (the scripts, the reads) go over a pipelined connection of our own
        # (redis_wire) where it can stand in for redis-py: one Redis, a plain redis:// URL,
        # no WAIT after writes (that pipeline must run on the connection that wrote).
        self.wire: RedisWire | None = None
        self._sentinel: Sentinel | None = None
        if isinstance(url, SentinelTarget):
            if cluster:
                raise ValueError("a Redis Cluster is not reached through Sentinel")
            if client is None:  # (redis-py asks the sentinels for the master: no wire of our own)
                client, self._sentinel = open_master_client(url, socket_options(unix=False))
        elif client is None:
            if not cluster and not (wait_replicas or wait_aof):
                self.wire = RedisWire.from_url(url, connect_timeout=CONNECT_TIMEOUT, timeout=COMMAND_TIMEOUT)
            client = open_client(url, cluster)
        if isinstance(client, RedisCluster):
            kwargs = client.get_connection_kwargs()
        else:
            kwargs = client.connection_pool.connection_kwargs
        if kwargs.get("decode_responses"):
            raise ValueError("RedisStore needs a client with decode_responses=False")
        self.client = client
        self._wait: tuple[EncodableT, ...] | None = None
        self._wait_replicas = wait_replicas
        if wait_aof:
            self._wait = ("WAITAOF", 1, wait_replicas, ms(wait_timeout))
        elif wait_replicas:
            self._wait = ("WAIT", wait_replicas, ms(wait_timeout))

    def register(self, script: str) -> AsyncScript:
        return self.client.register_script(script)

    async def write(
        self, script: AsyncScript, keys: list[bytes], args: list[bytes], wrote: Callable[[Any], bool]
    ) -> Any:
        """Run a write script (its keys and arguments all bytes: on the wire, packed here, by
        ``pack_evalsha``); with a durability target, WAIT/WAITAOF on the same connection."""
        wire = self.wire
        if wire is not None:
            try:
                return await wire.execute_packed(pack_evalsha(script.sha, keys, args))
            except NoScriptError:
                await self._load(script)
                return await wire.execute_packed(pack_evalsha(script.sha, keys, args))
        if self._wait is None or isinstance(self.client, RedisCluster):  # (refused on a cluster)
            return await self.run(script, keys, args)
        pipe = self.client.pipeline(transaction=False)  # one connection: WAIT counts its writes
        await script(keys=keys, args=args, client=pipe)
        pipe.execute_command(*self._wait)
        reply, acknowledged = await pipe.execute()
        if wrote(reply) and not self._durable(acknowledged):
            command = "WAITAOF" if isinstance(acknowledged, list) else "WAIT"
            logger.warning("redis write not acknowledged by %s in time (got %r)", command, acknowledged)
            raise StoreUnavailable(f"redis store: the write was not acknowledged by {command} in time")
        return reply

    async def run(self, script: AsyncScript, keys: Sequence[EncodableT], args: Sequence[EncodableT]) -> Any:
        """EVALSHA straight through the client, without redis-py's per-call Script wrapper;
        on NOSCRIPT (SCRIPT FLUSH, a restarted or failed-over Redis) load the script, again."""
        wire = self.wire
        try:
            if wire is not None:  # (not through command(): one coroutine less on every write)
                return await wire.execute("EVALSHA", script.sha, len(keys), *keys, *args)
            return await self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            await self._load(script)
            return await self.command("EVALSHA", script.sha, len(keys), *keys, *args)

    async def _load(self, script: AsyncScript) -> None:
        """Load ``script`` into a Redis that does not have it (SCRIPT FLUSH, a restarted or
        failed-over Redis)."""
        if self.wire is None:
            script.sha = await self.client.script_load(script.script)
        else:
            script.sha = bytes(await self.wire.execute("SCRIPT", "LOAD", script.script)).decode()

    async def command(self, *args: Any) -> Any:
        """One command, over the wire where there is one (its reply is the raw reply either way:
        the store sends no command that redis-py's response callbacks would change)."""
        if self.wire is not None:
            return await self.wire.execute(*args)
        return await self.client.execute_command(*args)

    def _durable(self, acknowledged: Any) -> bool:
        if isinstance(acknowledged, list):  # WAITAOF: [fsynced locally, replicas that fsynced]
            return int(acknowledged[0]) >= 1 and int(acknowledged[1]) >= self._wait_replicas
        return int(acknowledged) >= self._wait_replicas

    async def require_durability(self) -> None:
        """Refuse to start where the durability target cannot be had: WAITAOF needs Redis 7.2."""
        if self._wait is None or self._wait[0] != "WAITAOF":
            return
        info = await self.client.info("server")
        version = tuple(int(part) for part in str(info.get("redis_version", "0")).split(".")[:2])
        if version < (7, 2):
            raise StoreUnavailable(
                f"redis store: QBROKER_REDIS_WAIT_AOF needs Redis 7.2 or later (WAITAOF); "
                f"this server is {info.get('redis_version')}"
            )

    async def persistence_off(self) -> bool:
        """Whether the Redis answering has AOF persistence off (revocations, notifications
        waiting for delivery and open questionnaires would not survive its restart). False
        when it cannot tell (INFO refused to this user; a cluster's nodes differ)."""
        if isinstance(self.client, RedisCluster):
            return False
        try:
            info = await self.command("INFO", "persistence")
        except Exception:  # (an ACL without INFO: no warning rather than no start)
            return False
        text = bytes(info).decode(errors="replace") if isinstance(info, (bytes, bytearray)) else str(info)
        return "aof_enabled:0" in text

    async def close(self) -> None:
        if self.wire is not None:
            await self.wire.aclose()
        if self._owns_client:
            await self.client.aclose()
        if self._sentinel is not None:
            await close_sentinels(self._sentinel)
