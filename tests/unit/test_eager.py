"""broker/speedups/eager.py: a coroutine runs at once; a task takes over only when it waits, except on a Resumable."""

from __future__ import annotations

import asyncio

import pytest

from broker.speedups.eager import Resumable, Resuming, eagerly


async def test_a_coroutine_that_never_waits_runs_to_its_end_at_once_with_no_task() -> None:
    ran: list[str] = []

    async def work() -> None:
        ran.append("all of it")

    assert eagerly(work()) is None
    assert ran == ["all of it"]


async def test_a_coroutine_that_waits_runs_up_to_the_wait_at_once_then_in_a_task() -> None:
    ran: list[str] = []
    gate = asyncio.get_running_loop().create_future()

    async def work() -> None:
        ran.append("before")
        ran.append(await gate)
        await asyncio.sleep(0)  # a bare yield, as well as a future
        ran.append("after")

    task = eagerly(work())
    assert ran == ["before"]
    assert isinstance(task, asyncio.Task) and not task.done()
    gate.set_result("woken with the future's value")
    await task
    assert ran == ["before", "woken with the future's value", "after"]


async def test_an_exception_before_the_first_wait_reaches_the_caller() -> None:
    async def work() -> None:
        raise ValueError("at once")

    with pytest.raises(ValueError, match="at once"):
        eagerly(work())


async def test_an_exception_after_a_wait_ends_the_task_with_it() -> None:
    gate = asyncio.get_running_loop().create_future()

    async def work() -> None:
        await gate
        raise ValueError("later")

    task = eagerly(work())
    assert isinstance(task, asyncio.Task)
    gate.set_result(None)
    with pytest.raises(ValueError, match="later"):
        await task


@pytest.mark.parametrize("resumable", [False, True], ids=["a plain future", "a Resumable"])
async def test_an_exception_set_on_the_awaited_future_is_raised_inside_the_coroutine(resumable: bool) -> None:
    gate = Resumable(loop=asyncio.get_running_loop()) if resumable else asyncio.get_running_loop().create_future()
    caught: list[BaseException] = []

    async def work() -> None:
        try:
            await gate
        except KeyError as exc:
            caught.append(exc)

    running = eagerly(work())
    gate.set_exception(KeyError("from the future"))
    if isinstance(gate, Resumable):
        assert isinstance(running, Resuming)
        gate.resume()  # (at once, here)
    else:
        assert isinstance(running, asyncio.Task)
        await running
    assert [type(exc) for exc in caught] == [KeyError]


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    cleaned_up: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(60)  # a wait to be cancelled in (it never runs out)
        finally:
            cleaned_up.append("finally ran")

    task = eagerly(work())
    assert isinstance(task, asyncio.Task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert cleaned_up == ["finally ran"]


async def test_a_coroutine_that_catches_its_cancellation_goes_on_waiting() -> None:
    gate = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(60)  # a wait to be cancelled in (it never runs out)
        except asyncio.CancelledError:
            seen.append("cancelled")
        seen.append(await gate)

    task = eagerly(work())
    assert isinstance(task, asyncio.Task)
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    gate.set_result("then this")
    await task
    assert seen == ["cancelled", "then this"]


async def test_an_uncontended_lock_is_taken_at_once_and_a_contended_one_waits_in_a_task() -> None:
    lock = asyncio.Lock()
    order: list[str] = []

    async def work(name: str) -> None:
        async with lock:
            order.append(f"{name} in")
            await asyncio.sleep(0)
            order.append(f"{name} out")

    first = eagerly(work("first"))
    second = eagerly(work("second"))
    assert order == ["first in"]
    assert isinstance(first, asyncio.Task) and isinstance(second, asyncio.Task)
    await asyncio.gather(first, second)
    assert order == ["first in", "first out", "second in", "second out"]


# --- Resumable: going on in the completer's callback, with no task ---------------------------


def _resumable() -> Resumable:
    return Resumable(loop=asyncio.get_running_loop())


async def test_a_wait_on_a_resumable_goes_on_in_the_completers_call_with_no_task() -> None:
    first, second = _resumable(), _resumable()
    ran: list[object] = []

    async def work() -> None:
        ran.append(await first)
        ran.append(asyncio.current_task())
        ran.append(await second)

    completer = asyncio.current_task()  # (this test's: the coroutine runs inside its calls)
    resuming = eagerly(work())
    assert isinstance(resuming, Resuming) and ran == []
    first.set_result("one")
    first.resume()  # goes on here and now, up to the next wait
    assert ran == ["one", completer]
    second.set_result("two")
    second.resume()
    assert ran == ["one", completer, "two"]
    assert resuming.task is None  # it never needed one


async def test_after_a_resumable_any_other_wait_goes_on_in_a_task() -> None:
    gate = _resumable()
    later = asyncio.get_running_loop().create_future()
    ran: list[object] = []

    async def work() -> None:
        await gate
        ran.append(await later)
        ran.append(asyncio.current_task() is not None)

    resuming = eagerly(work())
    assert isinstance(resuming, Resuming)
    gate.set_result(None)
    gate.resume()
    assert resuming.task is not None and not resuming.task.done()
    later.set_result("woken by the task")
    await resuming.task
    assert ran == ["woken by the task", True]


async def test_an_exception_after_a_resumable_goes_to_the_loops_handler_not_the_completer() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        gate = _resumable()

        async def work() -> None:
            await gate
            raise ValueError("after the reply")

        assert isinstance(eagerly(work()), Resuming)
        gate.set_result(None)
        gate.resume()  # returns: the completer (a socket's read callback) is not hurt
    finally:
        loop.set_exception_handler(None)
    assert [type(context["exception"]) for context in reported] == [ValueError]


async def test_keyboard_interrupt_is_not_swallowed() -> None:
    gate = _resumable()

    async def work() -> None:
        await gate
        raise KeyboardInterrupt

    eagerly(work())
    gate.set_result(None)
    with pytest.raises(KeyboardInterrupt):
        gate.resume()


async def test_a_task_waiting_on_a_resumable_is_woken_as_by_a_plain_future() -> None:
    gate = _resumable()

    async def work() -> object:
        return await gate

    task = asyncio.ensure_future(work())
    await asyncio.sleep(0)
    gate.set_result("plain")
    gate.resume()  # no coroutine of eagerly's waits: nothing happens here
    assert not task.done()
    assert await task == "plain"


async def test_a_coroutine_that_ends_after_a_resumable_leaves_nothing_behind() -> None:
    gate = _resumable()
    ran: list[str] = []

    async def work() -> None:
        await gate
        ran.append("done")

    resuming = eagerly(work())
    assert isinstance(resuming, Resuming)
    gate.set_result(None)
    gate.resume()
    gate.resume()  # a second call finds no waiter
    assert ran == ["done"] and resuming.task is None and gate.waiter is None
