"""Redis behind Sentinel: the broker asks the sentinels where the master is, and asks again
whenever a connection to it fails, so it follows a failover by itself (docs/deploy.md).

redis-py's ``Sentinel`` does the asking: every new connection of the client made here first
learns the master's address from a sentinel that still considers it up; a connection to a
master that was demoted (``READONLY``) is dropped and made again. While no master is known
(the seconds between the old one's death and the promotion) commands fail as "Redis cannot
be reached" (503 ``store_unavailable``), after a few retries spread over about as long as a
promotion takes.

With ``QBROKER_REDIS_WAIT_REPLICAS=1`` a write is acknowledged only once a replica has it
(commands.py), so the replica that the sentinels promote holds every acknowledged answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

# Retries of a command whose connection failed, and of each connection attempt within one
# (redis-py nests them): a few seconds in all while no master answers, about a promotion's time
# with a short down-after-milliseconds, and still a prompt 503 when it lasts longer.
FAILOVER_RETRIES: Final = 3


@dataclass(frozen=True)
class SentinelTarget:
    """Where the data is: the master that ``sentinels`` know as ``master``; ``password``
    for the master and replicas, ``sentinel_password`` for the sentinels themselves."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    password: str | None = None
    sentinel_password: str | None = None


def open_master_client(target: SentinelTarget, options: dict[str, Any]) -> tuple[Redis, Sentinel]:
    """A client of whatever node is the master now (``options``: connection.py's timeouts),
    and the ``Sentinel`` it asks (its connections to the sentinels are closed separately)."""
    sentinel_options = {key: value for key, value in options.items() if key.startswith("socket_")}
    if target.sentinel_password is not None:
        sentinel_options["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_options)
    retry = Retry(ExponentialBackoff(cap=0.8, base=0.1), FAILOVER_RETRIES)
    client = sentinel.master_for(target.master, password=target.password, retry=retry, **options)
    return client, sentinel


async def close_sentinels(sentinel: Sentinel) -> None:
    for connection in sentinel.sentinels:
        await connection.aclose()
