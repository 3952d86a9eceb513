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

A ``Resumable`` future carries that on past a wait: when a coroutine run eagerly waits on one
(a Redis reply, broker/speedups/redis_wire.py), the callback that completes it goes on with
the coroutine there and then, with no task. A task would take two loop turns (its first step,
then its wakeup) before the answer's next question is even built: about a tenth of the
broker's own time for an answer on Redis. At its first wait on anything else (a contended
lock, a sleep, a new connection) the coroutine goes to a task, as above, and stays there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


def eagerly(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None] | Resuming | None:
    """Run ``coroutine`` now until it finishes (None) or waits: on a ``Resumable`` (a
    ``Resuming`` that goes on with it when that is done), or on anything else (a task that
    goes on with it). An exception it raises before waiting propagates to the caller.

    Keep what it returns while the coroutine runs: the event loop holds tasks only weakly."""
    try:
        waiting_on = coroutine.send(None)
    except StopIteration:
        return None
    if type(waiting_on) is Resumable:
        resuming = Resuming(coroutine)
        waiting_on.waiter = resuming
        return resuming
    return asyncio.ensure_future(_Continuation(coroutine, waiting_on))


class Resumable(asyncio.Future[Any]):
    """A future whose completer calls ``resume()`` right after setting its result (or
    exception): a coroutine run by ``eagerly`` that waits on it then goes on at once, in the
    completer's callback. Any other waiter (a task) is woken as by a plain future."""

    waiter: Resuming | None = None  # (a class default: no __init__ of our own to run)

    def resume(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter.step()


class Resuming:
    """A coroutine run by ``eagerly`` while it waits on ``Resumable`` futures: each one's
    completion steps it on; its first other wait hands it to a task (``task``).

    It has no current task, and nothing to cancel it by; an exception it ends with goes to
    the loop's exception handler (as a task's that nobody awaits would, when it is dropped)."""

    __slots__ = ("_coroutine", "task")

    def __init__(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self._coroutine = coroutine
        self.task: asyncio.Task[None] | None = None

    def step(self) -> None:
        try:
            waiting_on = self._coroutine.send(None)
        except StopIteration:
            return
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # it must not escape into the completer's callback
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a coroutine run eagerly failed", "exception": exc}
            )
            return
        if type(waiting_on) is Resumable:
            waiting_on.waiter = self
        else:
            self.task = asyncio.ensure_future(_Continuation(self._coroutine, waiting_on))


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
