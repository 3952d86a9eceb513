"""Run a coroutine at once, up to its first real wait: a task only when it has to wait.

Python 3.12's ``asyncio.eager_task_factory`` does this for every task; 3.11 has no such
thing. On the memory store what a client frame sets off finishes without ever
waiting (the store answers at once, an uncontended lock is taken at once), and a task for
it costs an object and a loop turn before the work even starts: a tenth of an answer's time
in the broker.

On Redis every command waits, but starting at once still saves a loop turn: the frame is
parsed, checked and its write sent before the callback returns, and a task takes over only
for the reply.

The part that runs at once has no current task (``asyncio.current_task()`` is the caller's,
None in a protocol callback), so ``asyncio.timeout`` cannot be used there: run eagerly only
code that does not need one (``Store.eager_safe`` says a store's calls qualify).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


def eagerly(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run ``coroutine`` now until it finishes (None) or waits (a task that goes on with
    it). An exception it raises before waiting propagates to the caller."""
    try:
        waiting_on = coroutine.send(None)
    except StopIteration:
        return None
    return asyncio.ensure_future(_Continuation(coroutine, waiting_on))


class _Continuation(Coroutine[Any, Any, None]):
    """A started coroutine, as a task's coroutine: the task's first step gets what the
    coroutine waits on (a future, or None for a bare yield); every later step, and a
    cancellation even before the first, goes to the coroutine itself."""

    __slots__ = ("_coroutine", "_waiting_on")

    def __init__(self, coroutine: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self._coroutine = coroutine
        self._waiting_on: Any = waiting_on

    def send(self, value: Any) -> Any:
        waiting_on = self._waiting_on
        if waiting_on is not _STARTED:
            self._waiting_on = _STARTED
            return waiting_on
        return self._coroutine.send(value)

    def throw(self, *exc: Any) -> Any:
        self._waiting_on = _STARTED
        return self._coroutine.throw(*exc)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("a continuation is run by its task, not awaited")


_STARTED: Any = object()  # what a continuation waits on once its task runs it
