"""The broker's background loops: the reconciliation tick, and the heartbeats of the clients.

A notice can be missed (pub/sub delivers at most once: one published while the notice
connection is down is gone); the reconciliation (``Fanout.reconcile``, and the inbox's,
``InboxFeed.reconcile``) catches up every ``reconcile_interval``. A client counts as
present (for agent calls on any process) only while its heartbeats keep coming, so that
the clients of a process that was killed stop counting; each process beats for its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.runtime.config import Config
from broker.runtime.tasks import stop_tasks
from broker.service.fanout import Fanout
from broker.service.inbox import InboxFeed
from broker.store.base import Store, StoreUnavailable

log = logging.getLogger("qbroker.service")

HEARTBEAT_BATCH = 256  # clients whose heartbeats are in flight at once


def presence_ttl(config: Config) -> float:
    """How long a heartbeat (or a join) keeps a client present: it counts as gone after
    three missed beats."""
    return config.heartbeat_interval * 3


class Background:
    """The reconciliation and heartbeat tasks, from ``start`` to ``stop``."""

    def __init__(
        self, config: Config, store: Store, clock: Callable[[], float], fanout: Fanout, inbox: InboxFeed | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.fanout = fanout
        self.inbox = inbox
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="qbroker-reconcile"))
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name="qbroker-heartbeat"))

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        self._tasks.clear()

    async def _reconcile_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.reconcile_interval)
            try:
                await self.fanout.reconcile()
                if self.inbox is not None:
                    await self.inbox.reconcile()
            except StoreUnavailable:
                log.warning("reconciliation skipped: store unavailable")
            except Exception:  # the loop must survive anything
                log.exception("reconciliation failed")

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            now = self.clock()
            ttl = presence_ttl(self.config)
            hubs = list(self.fanout.hubs.values())
            beats = [(hub.session_id, client_id) for hub in hubs for client_id in hub.clients]
            unavailable = 0  # one line a tick, not one per client (10,000 clients in an outage)
            # A batch at a time, not one after the other: on Redis the beats of a batch share
            # the connection's writes and reads (pipelined), and redis-server's CPU per beat
            # is mostly the round trip's, not the script's.
            for start in range(0, len(beats), HEARTBEAT_BATCH):
                batch = beats[start : start + HEARTBEAT_BATCH]
                results = await asyncio.gather(
                    *(self.store.heartbeat(sid, client_id, ttl, now) for sid, client_id in batch),
                    return_exceptions=True,
                )
                for (sid, client_id), result in zip(batch, results, strict=True):
                    if isinstance(result, StoreUnavailable):
                        unavailable += 1
                    elif isinstance(result, BaseException):  # a bug, logged: the other clients still beat
                        log.error("heartbeat failed", exc_info=result, extra={"session": sid, "client": client_id})
            if self.inbox is not None:
                try:
                    await self.inbox.heartbeat(self.inbox.scopes())
                except StoreUnavailable:
                    unavailable += 1
                except Exception:
                    log.exception("inbox heartbeat failed")
            if unavailable:
                log.warning("heartbeats failed: store unavailable", extra={"clients": unavailable})
