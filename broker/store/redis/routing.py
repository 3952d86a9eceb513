"""Which notice connection ("link", links.py) carries a channel, and how to open it.

Notices travel over dedicated pub/sub connections, each owned by a reader task:

- one Redis: one link, with SUBSCRIBE/PUBLISH, or SSUBSCRIBE/SPUBLISH (``sharded=True``);
- Redis Cluster (``cluster=True``, Redis 7): sharded pub/sub, so a session's notices stay on
  the shard that holds its keys and the cluster's pub/sub traffic spreads with the sessions.
  SSUBSCRIBE must reach the primary that owns the channel's slot, so there is one link per
  primary, and each channel rides the link of its slot's owner.

When the cluster changes (a slot migrates, a failover), the slot map is read again and every
channel moves to the link of its current owner: new primaries get new links, links of nodes
that are no longer primaries retire (``Subscriptions.reroute``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException

from broker.speedups.redis_wire import NoticeConnection, RedisWire

STANDALONE: Final = "redis"  # the name of the only link on a single Redis


class Routing:
    """Links by endpoint name: the one Redis (``STANDALONE``), or each cluster primary's name."""

    def __init__(self, client: Redis | RedisCluster, wire: RedisWire | None) -> None:
        self._client = client
        self._wire = wire

    @property
    def cluster(self) -> bool:
        return isinstance(self._client, RedisCluster)

    async def initialize(self) -> None:
        """Read the cluster's slot map (a single Redis has none)."""
        if isinstance(self._client, RedisCluster):
            await self._client.initialize()

    async def primaries(self) -> set[str]:
        """Read the cluster's slot map again: the names of its primaries now."""
        if not isinstance(self._client, RedisCluster):
            return {STANDALONE}
        await self._client.nodes_manager.initialize()
        return {node.name for node in self._client.get_primaries()}

    def route(self, channel: bytes) -> str:
        """The name of the link that must carry ``channel``: its slot's primary on a cluster."""
        if not isinstance(self._client, RedisCluster):
            return STANDALONE
        slot = self._client.keyslot(channel)
        return str(self._client.nodes_manager.get_node_from_slot(slot).name)

    def connection_factory(self, name: str) -> Callable[[], AbstractConnection]:
        """How link ``name`` opens a connection (raises ``RedisClusterException`` for a
        cluster node that is not in the slot map)."""
        wire = self._wire
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
