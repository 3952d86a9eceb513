"""Questionnaire stores: ``open_store`` picks memory (embedded) or Redis by configuration."""

from __future__ import annotations

from pathlib import Path

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
    sentinels: tuple[tuple[str, int], ...] = (),
    sentinel_master: str = "mymaster",
    password: str | None = None,
    sentinel_password: str | None = None,
    data_dir: Path | None = None,
) -> Store:
    """The memory store without ``redis_url`` or ``sentinels`` (keeping its revocations in
    ``data_dir`` when given); else Redis: a Redis Cluster with ``cluster``, the master
    ``sentinels`` know as ``sentinel_master`` with them (its ``password``;
    ``sentinel_password`` for the sentinels)."""
    if redis_url is None and not sentinels:
        if cluster or wait_replicas or wait_aof:
            raise ValueError("the Redis settings (cluster, WAIT/WAITAOF) need a Redis URL")
        from broker.store.revocations_file import FILE_NAME

        return MemoryStore(retention, None if data_dir is None else data_dir / FILE_NAME)
    from broker.store.redis import RedisStore, SentinelTarget

    if sentinels and redis_url is not None:
        raise ValueError("a Redis URL or sentinels, not both")
    target = (
        redis_url if redis_url is not None else SentinelTarget(sentinels, sentinel_master, password, sentinel_password)
    )
    store: Store = RedisStore(
        target,
        retention,
        cluster=cluster,
        wait_replicas=wait_replicas,
        wait_aof=wait_aof,
        wait_timeout=wait_timeout,
    )
    return store
