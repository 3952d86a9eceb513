"""The session hub's lock: held by one at a time, first come first served, a cancelled
waiter's turn passed on, an exception in the block never swallowed, and no wait when free."""

from __future__ import annotations

import asyncio

import pytest

from broker.service.hub_lock import HubLock
from broker.speedups.eager import eagerly


def test_a_free_lock_is_taken_and_given_back_without_waiting() -> None:
    lock = HubLock()
    entered: list[bool] = []

    async def use() -> None:
        async with lock:
            entered.append(lock.locked())

    assert eagerly(use()) is None  # (done at once: no task, nothing waited on)
    assert entered == [True] and not lock.locked()


async def test_holders_take_turns_in_the_order_they_came() -> None:
    lock = HubLock()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with lock:
            order.append(f"{name} in")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append(f"{name} out")

    await asyncio.gather(*(hold(name) for name in "abc"))
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert not lock.locked()


async def test_a_newcomer_waits_behind_a_woken_waiter() -> None:
    lock = HubLock()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with lock:
            order.append(name)
            await asyncio.sleep(0)

    first = asyncio.ensure_future(hold("first"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(hold("second"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # first leaves and wakes second, which has not run yet
    await hold("newcomer")
    await asyncio.gather(first, second)
    assert order == ["first", "second", "newcomer"]


@pytest.mark.parametrize("woken", [False, True])
async def test_a_cancelled_waiter_passes_its_turn_on(woken: bool) -> None:
    lock = HubLock()
    release = asyncio.Event()
    got: list[str] = []

    async def holder() -> None:
        async with lock:
            await release.wait()

    async def waiter(name: str) -> None:
        async with lock:
            got.append(name)

    held = asyncio.ensure_future(holder())
    await asyncio.sleep(0)
    cancelled = asyncio.ensure_future(waiter("cancelled"))
    after = asyncio.ensure_future(waiter("after"))
    await asyncio.sleep(0)
    if woken:
        release.set()
        await asyncio.sleep(0)  # the holder leaves and wakes the first waiter ...
        cancelled.cancel()  # ... which is cancelled before it runs
    else:
        cancelled.cancel()
        await asyncio.sleep(0)
        release.set()
    await asyncio.wait_for(asyncio.gather(held, after), 5)
    assert cancelled.cancelled() and got == ["after"] and not lock.locked()


async def test_an_exception_in_the_block_leaves_it_and_frees_the_lock() -> None:
    lock = HubLock()
    with pytest.raises(ValueError):
        async with lock:
            raise ValueError("out")
    assert not lock.locked()
    async with lock:
        assert lock.locked()


async def test_a_lock_is_free_only_with_no_holder_and_no_one_waiting_for_its_turn() -> None:
    lock = HubLock()
    assert lock.free()
    turns: list[bool] = []

    async def hold() -> None:
        async with lock:
            turns.append(lock.free())
            await asyncio.sleep(0)

    first = asyncio.ensure_future(hold())
    await asyncio.sleep(0)  # the first holds it
    second = asyncio.ensure_future(hold())
    await asyncio.sleep(0)  # the second waits for its turn
    assert not lock.free()
    for _ in range(3):
        await asyncio.sleep(0)
        if first.done() and not second.done():
            # released, the second woken but not yet in: async with would wait behind it
            assert lock.locked() or not lock.free()
    await asyncio.gather(first, second)
    assert turns == [False, False] and lock.free()
