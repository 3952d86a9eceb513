"""The Redis store: any number of broker processes share one Redis, or one Redis Cluster.

- ``store.py``: ``RedisStore``, the ``Store`` on Redis, putting the pieces below together;
- ``keys.py``: the key schema (every key of a session carries its hash tag);
- ``scripts/``: the Lua scripts, one per write or read, each one round trip and atomic;
- ``commands.py``: running them (our own wire, or redis-py), and WAIT/WAITAOF after writes;
- ``connections.py``: the redis-py client, its timeouts, and which failures are a 503;
- ``sentinel.py``: the client of a master that Redis Sentinel knows (and fails over);
- ``notices.py``: a write's notice as it travels, and the states of our own writes;
- ``subscriptions.py``: the sessions this process follows, and what their notices mean;
- ``routing.py``: which notice connection carries a channel (one per cluster primary);
- ``links.py``: a notice connection, its reader task and its reconnecting;
- ``inbox_index.py``: the inbox's index of sessions, its reads and its upkeep (``index_pages.py``:
  the index walked a page at a time); ``push.py``, ``deliveries.py``: push subscriptions and the
  notifications waiting.
"""

from __future__ import annotations

from broker.store.redis.connections import POOL_SIZE, POOL_WAIT
from broker.store.redis.keys import channel_for
from broker.store.redis.sentinel import SentinelTarget
from broker.store.redis.store import RedisStore

__all__ = ["POOL_SIZE", "POOL_WAIT", "RedisStore", "SentinelTarget", "channel_for"]
