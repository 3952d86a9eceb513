"""The Redis store's notification deliveries: one stream (keys.py: ``DELIVERIES_KEY``) that
every broker reads through one consumer group, one script per call.

A broker takes a delivery (XREADGROUP): it is then pending under that broker's consumer
name until the broker acknowledges and deletes it (delivered or given up). While it holds
it, the broker marks it alive every few seconds (XCLAIM of its own entry resets its idle
time); a delivery left alone for the visibility timeout (its broker stopped or was killed)
is taken over by the next broker that asks (XAUTOCLAIM). Needs Redis 6.2 or later.
"""

from __future__ import annotations

from typing import Final

from broker.store.redis.commands import Commands, ms
from broker.store.redis.connections import reachable
from broker.store.redis.keys import DELIVERIES_KEY
from broker.store.redis.scripts import DELIVERY_ADD, DELIVERY_FINISH, DELIVERY_KEEP, DELIVERY_TAKE

GROUP: Final = "brokers"


class Deliveries:
    def __init__(self, commands: Commands) -> None:
        self._commands = commands
        self._add = commands.register(DELIVERY_ADD)
        self._take = commands.register(DELIVERY_TAKE)
        self._keep = commands.register(DELIVERY_KEEP)
        self._finish = commands.register(DELIVERY_FINISH)

    async def add(self, record: bytes) -> None:
        with reachable("add_delivery"):
            await self._commands.run(self._add, [DELIVERIES_KEY], [GROUP, record])

    async def take(self, consumer: str, count: int, idle: float) -> list[tuple[str, bytes]]:
        with reachable("take_deliveries"):
            flat = await self._commands.run(self._take, [DELIVERIES_KEY], [GROUP, consumer, count, ms(idle)])
        return [(bytes(flat[i]).decode(), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]

    async def keep(self, consumer: str, ids: list[str]) -> None:
        if ids:
            with reachable("keep_deliveries"):
                await self._commands.run(self._keep, [DELIVERIES_KEY], [GROUP, consumer, *ids])

    async def finish(self, delivery_id: str) -> None:
        with reachable("finish_delivery"):
            await self._commands.run(self._finish, [DELIVERIES_KEY], [GROUP, delivery_id])
