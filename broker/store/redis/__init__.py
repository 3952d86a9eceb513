"""The Redis store: any number of broker processes share one Redis, or one Redis Cluster."""

from __future__ import annotations

from broker.store.redis.keys import channel_for
from broker.store.redis.store import RedisStore

__all__ = ["RedisStore", "channel_for"]
