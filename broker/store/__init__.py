"""Questionnaire stores: ``open_store`` picks memory (embedded) or Redis by configuration."""

from __future__ import annotations

from broker.store.base import Store
from broker.store.memory import MemoryStore


def open_store(
    redis_url: str | None,
    retention: float,
    *,
    cluster: bool = False,
    wait_replicas: int = 0,
    wait_aof: bool = False,
    wait_timeout: float = 2.0,
) -> Store:
    """The memory store without ``redis_url``; else Redis (a Redis Cluster with ``cluster``)."""
    if redis_url is None:
        if cluster or wait_replicas or wait_aof:
            raise ValueError("the Redis settings (cluster, WAIT/WAITAOF) need a Redis URL")
        return MemoryStore(retention)
    from broker.store.redis import RedisStore

    store: Store = RedisStore(
        redis_url,
        retention,
        cluster=cluster,
        wait_replicas=wait_replicas,
        wait_aof=wait_aof,
        wait_timeout=wait_timeout,
    )
    return store
