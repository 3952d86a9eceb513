"""Waiting for a condition with a deadline: what tests do instead of sleeping.

``wait_until`` blocks (threads, subprocesses, synchronous tests); ``eventually`` is its
async twin and takes a plain or an async check. Both poll every ``interval`` seconds, return
the check's first truthy value, and fail with ``what`` after ``timeout`` seconds.
``first_arrival`` waits, without polling, for what a program's reader task collects.

Every deadline in the tests goes through ``scaled`` (these two apply it themselves), one
factor for all of them: ``QBROKER_TEST_TIMEOUT_FACTOR``, else 2 under pytest-xdist (its
workers share the cores, so a condition may take longer to come true), else 1. A deadline
only bounds how long a failing test hangs, so a bigger one never slows a passing test. What
a test measures (a timer that must fire within its tolerance, "nothing arrives within 0.5
s") is not a deadline and stays as written.

(Checks are ``Callable[..., ...]`` so that a lambda may bind a loop variable as a default
argument: ``lambda p=port: ...``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, overload

T = TypeVar("T")

TIMEOUT = 10.0  # seconds a condition may take before the test fails rather than hangs (scaled)
INTERVAL = 0.02  # seconds between two looks


def _factor() -> float:
    explicit = os.environ.get("QBROKER_TEST_TIMEOUT_FACTOR")
    if explicit:
        return float(explicit)
    return 2.0 if os.environ.get("PYTEST_XDIST_WORKER") else 1.0


FACTOR = _factor()


def scaled(seconds: float) -> float:
    """A deadline of ``seconds`` under this run's timeout factor."""
    return seconds * FACTOR


def scaled_ms(milliseconds: float) -> float:
    """The same for the deadlines Playwright takes in milliseconds."""
    return milliseconds * FACTOR


def wait_until(
    predicate: Callable[..., T | None], timeout: float = TIMEOUT, interval: float = INTERVAL, what: str = "condition"
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that."""
    timeout = scaled(timeout)
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
    timeout = scaled(timeout)
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
    timeout = scaled(timeout)
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
