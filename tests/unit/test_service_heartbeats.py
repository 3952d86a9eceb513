"""The heartbeat loop (broker/service/loops.py): every local client beats each tick, a
batch at a time in flight, and one that fails does not hold back the others."""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import pytest

from broker.runtime.config import Config
from broker.runtime.metrics import Metrics
from broker.service import loops
from broker.service.fanout import Fanout
from broker.service.hubs import Connection
from broker.store.base import StoreUnavailable
from broker.store.memory import MemoryStore


class _CountingStore(MemoryStore):
    """Beats recorded, with the most in flight at once; two clients fail."""

    def __init__(self) -> None:
        super().__init__(retention=3600)
        self.beats: list[tuple[str, str]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def heartbeat(self, session_id: str, client_id: str, ttl: float, now: float) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
            if client_id == "down":
                raise StoreUnavailable("redis store: heartbeat failed")
            if client_id == "bug":
                raise RuntimeError("a bug")
            self.beats.append((session_id, client_id))
        finally:
            self.in_flight -= 1


async def test_every_client_beats_a_batch_at_a_time_and_failures_stay_their_own(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(loops, "HEARTBEAT_BATCH", 4)
    store = _CountingStore()
    config = Config(heartbeat_interval=0.01)
    fanout = Fanout(store, Metrics(), lambda: 1000.0)
    clients: dict[str, list[str]] = {f"s-{i}": [f"c-{i}"] for i in range(9)}
    clients["s-0"] += ["down", "bug"]
    for sid, ids in clients.items():
        hub = fanout.hub(sid)
        hub.clients.update(dict.fromkeys(ids, cast(Connection, None)))  # (the loop reads their ids alone)
    background = loops.Background(config, store, lambda: 1000.0, fanout)
    with caplog.at_level(logging.WARNING, logger="qbroker.service"):
        background.start()
        try:
            async with asyncio.timeout(5):
                while len(store.beats) < 9:
                    await asyncio.sleep(0.005)
        finally:
            await background.stop()

    assert set(store.beats[:9]) == {(f"s-{i}", f"c-{i}") for i in range(9)}
    assert 1 < store.most_in_flight <= 4
    assert any("heartbeat failed" in r.message for r in caplog.records)  # the bug, logged
    assert any("heartbeats failed: store unavailable" in r.message for r in caplog.records)
