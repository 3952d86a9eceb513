"""How the Redis store connects: the redis-py client it makes, its timeouts and pool, and
which failures mean "Redis cannot be reached" (``StoreUnavailable``, a 503)."""

from __future__ import annotations

from typing import Any, Final

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterError, RedisClusterException
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT
from redis.utils import HIREDIS_AVAILABLE

from broker.store.base import StoreUnavailable

# Connections one broker process keeps to a (non-cluster) Redis, and how long a command
# may wait for a free one before the store counts as unavailable.
POOL_SIZE: Final = 64
POOL_WAIT: Final = 5.0

# Errors that mean "Redis cannot be reached" (redis-py wraps most socket errors, not all;
# a cluster adds CLUSTERDOWN, an uncovered slot and "no startup node answers").
UNREACHABLE: Final = (RedisConnectionError, RedisTimeoutError, OSError, ClusterError, RedisClusterException)

CONNECT_TIMEOUT: Final = 2.0
COMMAND_TIMEOUT: Final = 5.0  # seconds a command may go unanswered before its connection counts as dead


class reachable:  # used as ``with reachable("load"):``, like a function
    """Turn 'Redis cannot be reached' into ``StoreUnavailable``. (A class, not a
    ``@contextmanager``: it wraps every store call, and a generator costs a microsecond.)"""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None and isinstance(exc, UNREACHABLE):
            raise unreachable(self.what, exc) from exc


def unreachable(what: str, exc: BaseException) -> StoreUnavailable:
    """What ``reachable`` raises, for a call too hot for even its three calls (a write:
    ``except UNREACHABLE as exc: raise unreachable(...) from exc``)."""
    return StoreUnavailable(f"redis store: {what} failed: {type(exc).__name__}: {exc}")


def socket_options(unix: bool) -> dict[str, Any]:
    """The timeouts (and keepalive) of every connection to Redis."""
    options: dict[str, Any] = {"socket_connect_timeout": CONNECT_TIMEOUT, "socket_timeout": COMMAND_TIMEOUT}
    if not unix:  # (redis-py's Unix socket connection takes no keepalive)
        options["socket_keepalive"] = True
    return options


def open_client(url: str, cluster: bool) -> Redis | RedisCluster:
    """The redis-py client of ``url``: a Redis Cluster's (``url`` names any node), or one
    Redis's, on a blocking pool of connections that pack commands in C."""
    # One quick retry: the scripts are safe to repeat, and a broker should answer
    # 503 soon rather than hang while Redis is away.
    options = socket_options(url.startswith("unix://"))
    if cluster:
        # A cluster needs a few attempts: MOVED and a failover are retried by redis-py.
        return RedisCluster.from_url(url, retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 3), **options)
    # A blocking pool: under a burst, commands queue for one of the pool's
    # connections (a few ms) instead of failing with "Too many connections".
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=POOL_SIZE,
        timeout=POOL_WAIT,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
        **options,
    )
    if pool.connection_kwargs.get("encoding", "utf-8") == "utf-8":  # hiredis encodes UTF-8
        pool.connection_class = _packing_in_c(pool.connection_class)
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes it


def _packing_in_c(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """``connection_class`` packing its commands with hiredis (C) rather than redis-py's
    asyncio packer (Python, ~8 us for a script call of ~15 arguments), as redis-py's own
    synchronous client does (``HiredisRespSerializer``): same bytes, ~1 us."""
    if not HIREDIS_AVAILABLE:
        return connection_class
    import hiredis  # only with hiredis installed

    python_packing = connection_class.pack_command

    def pack_command(self: AbstractConnection, *args: EncodableT) -> list[bytes]:
        head = args[0]
        if isinstance(head, str):
            args = (*head.encode().split(), *args[1:])  # 'SCRIPT LOAD' is two arguments
        elif isinstance(head, bytes) and b" " in head:
            args = (*head.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]  # type: ignore[arg-type]
        except TypeError:  # a bool, a bytearray or memoryview, an int beyond 64 bits
            return list(python_packing(self, *args))  # converts, or raises DataError

    packed = type(connection_class.__name__, (connection_class,), {"pack_command": pack_command})
    return packed
