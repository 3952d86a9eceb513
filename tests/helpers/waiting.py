"""Waiting for a condition with a deadline: what tests do instead of sleeping.

``wait_until`` blocks (threads, subprocesses, synchronous tests); ``eventually`` is its
async twin and takes a plain or an async check. Both poll every ``interval`` seconds, return
the check's first truthy value, and fail with ``what`` after ``timeout`` seconds.
``first_arrival`` waits, without polling, for what a program's reader task collects.

(Checks are ``Callable[..., ...]`` so that a lambda may bind a loop variable as a default
argument: ``lambda p=port: ...``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, overload

T = TypeVar("T")

TIMEOUT = 10.0  # seconds a condition may take before the test fails rather than hangs
INTERVAL = 0.02  # seconds between two looks


def wait_until(
    predicate: Callable[..., T | None], timeout: float = TIMEOUT, interval: float = INTERVAL, what: str = "condition"
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@overload
async def eventually(
    check: Callable[..., Awaitable[T | None]], what: str = ..., *, timeout: float = ..., interval: float = ...
) -> T: ...


@overload
async def eventually(
    check: Callable[..., T | None], what: str = ..., *, timeout: float = ..., interval: float = ...
) -> T: ...


async def eventually(
    check: Callable[..., object], what: str = "condition", *, timeout: float = TIMEOUT, interval: float = INTERVAL
) -> object:
    """Await (or call) ``check`` until it gives something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def first_arrival(
    arrivals: Sequence[T],
    match: Callable[[T], bool],
    arrived: asyncio.Event,
    reader: asyncio.Task[None] | None,
    *,
    program: str,
    what: str,
    timeout: float,
    summary: Callable[[], str],
) -> T:
    """The first of ``arrivals`` (seen so far or to come) that ``match`` accepts.

    ``reader`` is the task that appends to ``arrivals`` and sets ``arrived`` after each; its
    end means nothing more comes. Fails, naming ``program`` and ``what`` with ``summary()``,
    when the reader ends or ``timeout`` seconds pass first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = 0
    while True:
        for item in arrivals[seen:]:
            if match(item):
                return item
        seen = len(arrivals)
        if reader is not None and reader.done():
            raise AssertionError(f"{program} ended without {what}:\n{summary()}")
        arrived.clear()
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(f"no {what} from {program} within {timeout}s:\n{summary()}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), remaining)
