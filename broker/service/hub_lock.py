"""``HubLock``: a session hub's lock, asyncio.Lock's rules at a lower cost when it is free.

Every client frame and every notice takes its session hub's lock (service/fanout.py), and
it is nearly always free. ``async with`` an ``asyncio.Lock`` runs three coroutines even
then (``__aenter__``, ``acquire``, ``__aexit__``); here a free lock costs two, and only a
caller that has to wait runs a third. Waiting is asyncio.Lock's own: first come, first
served, and a waiter cancelled after it was woken passes its turn on.

Cheaper still: the fan-out's usual work for a frame or a notice never waits, and when the
lock is ``free()`` nothing else can run between taking and releasing it, so
``Fanout`` does that work at once without taking it (``followed_at_once``, ``on_notice``).
"""

from __future__ import annotations

import asyncio
import collections


class HubLock:
    """``async with lock:`` holds it; ``locked()`` says whether someone does."""

    __slots__ = ("_locked", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        self._waiters: collections.deque[asyncio.Future[None]] | None = None

    def locked(self) -> bool:
        return self._locked

    def free(self) -> bool:
        """Nobody holds it and nobody waits for it: ``async with`` would take it at once."""
        return not self._locked and not self._waiters

    async def __aenter__(self) -> None:
        if self._locked or self._waiters:
            await self._wait_turn()
        self._locked = True

    async def __aexit__(self, *exc_info: object) -> None:
        self._locked = False
        self._wake_first()

    async def _wait_turn(self) -> None:
        if self._waiters is None:
            self._waiters = collections.deque()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        except asyncio.CancelledError:
            if not self._locked:
                self._wake_first()  # it was woken and is gone: the next one's turn
            raise

    def _wake_first(self) -> None:
        if self._waiters:
            first = self._waiters[0]
            if not first.done():
                first.set_result(None)
