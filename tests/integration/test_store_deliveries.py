"""The store contract for notification deliveries (``Store.add_delivery`` and the rest): the
memory store and a real redis-server keep them alike. (Not fakeredis: its XREADGROUP inside a
script answers in another shape than Redis's.) Each test names its own consumers and records."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from broker.store.base import Store
from tests.integration import test_store_contract as contract

listener, real_redis = contract.listener, contract.real_redis


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, listener: contract.Listener) -> AsyncIterator[Store]:
    async for opened in contract.store.__wrapped__(request, listener):  # type: ignore[attr-defined]
        yield opened


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def take_all(store: Store, consumer: str, idle: float = 60.0) -> dict[bytes, str]:
    return {record: delivery_id for delivery_id, record in await store.take_deliveries(consumer, 100, idle)}


async def test_a_delivery_is_taken_by_one_consumer_only(store: Store) -> None:
    record = unique("one").encode()
    await store.add_delivery(record)
    first, second = unique("a"), unique("b")
    assert record in await take_all(store, first)
    assert record not in await take_all(store, second)


async def test_a_delivery_left_alone_is_taken_over_and_a_kept_one_is_not(store: Store) -> None:
    left, kept = unique("left").encode(), unique("kept").encode()
    await store.add_delivery(left)
    await store.add_delivery(kept)
    stopped, alive, other = unique("stopped"), unique("alive"), unique("other")
    taken = await take_all(store, stopped)
    await store.keep_deliveries(alive, [taken[kept]])  # (not alive's: changes nothing)
    assert set(await take_all(store, other, idle=0.3)).isdisjoint({left, kept})
    await asyncio.sleep(0.4)
    # "stopped" keeps only one of its two alive; the other is left alone long enough
    await store.keep_deliveries(stopped, [taken[kept]])
    over = await take_all(store, other, idle=0.3)
    assert left in over and kept not in over
    assert over[left] == taken[left]  # the same delivery, under its id


async def test_a_finished_delivery_is_gone(store: Store) -> None:
    record = unique("done").encode()
    await store.add_delivery(record)
    first = unique("first")
    taken = await take_all(store, first)
    await store.finish_delivery(taken[record])
    await asyncio.sleep(0.2)
    assert record not in await take_all(store, unique("later"), idle=0.1)
