"""Questionnaire stores: ``open_store`` picks memory (embedded) or Redis by configuration."""

from __future__ import annotations

from broker.store.base import Store
from broker.store.memory import MemoryStore


def open_store(redis_url: str | None, retention: float) -> Store:
    if redis_url is None:
        return MemoryStore(retention)
    from broker.store.redis import RedisStore

    store: Store = RedisStore(redis_url, retention)
    return store
