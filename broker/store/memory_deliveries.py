"""The memory store's notification deliveries: the Redis stream's rules (redis/deliveries.py)
in one process. New deliveries wait in order; one taken is its consumer's until finished,
or until it is left alone for the idle time the next taker gives (then that taker's)."""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class _Held:
    consumer: str
    touched: float  # time.monotonic() when taken or last kept
    record: bytes


class MemoryDeliveries:
    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._waiting: OrderedDict[str, bytes] = OrderedDict()
        self._held: dict[str, _Held] = {}

    def add(self, record: bytes) -> None:
        self._waiting[f"{next(self._numbers)}-0"] = record

    def take(self, consumer: str, count: int, idle: float) -> list[tuple[str, bytes]]:
        now = time.monotonic()
        taken: list[tuple[str, bytes]] = []
        for delivery_id, held in self._held.items():
            if len(taken) >= count:
                break
            if held.consumer != consumer and now - held.touched >= idle:
                held.consumer, held.touched = consumer, now
                taken.append((delivery_id, held.record))
        while self._waiting and len(taken) < count:
            delivery_id, record = self._waiting.popitem(last=False)
            self._held[delivery_id] = _Held(consumer, now, record)
            taken.append((delivery_id, record))
        return taken

    def keep(self, consumer: str, delivery_ids: list[str]) -> None:
        now = time.monotonic()
        for delivery_id in delivery_ids:
            held = self._held.get(delivery_id)
            if held is not None and held.consumer == consumer:
                held.touched = now

    def finish(self, delivery_id: str) -> None:
        self._held.pop(delivery_id, None)
        self._waiting.pop(delivery_id, None)
