"""The load run of ``qbroker bots``: one process's sessions, started together and bounded.

``LoadRun`` builds a ``Session`` (session.py: its bots and its agent loop) per session id,
waits until every bot is connected, then lets the sessions start questionnaires from a
shared ``Budget`` (``count`` of them, for ``duration`` seconds) and gathers the ``Stats``.
Every loop is bounded: the run lasts ``duration`` seconds plus a drain. ``run_load`` runs it
on a fresh event loop, as a load process does.

``Bot``, ``Round`` and ``Session`` are re-exported from here: the load's one import.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable

from clients.bots.bot import Bot
from clients.bots.options import Budget, Options
from clients.bots.round import Round
from clients.bots.session import Session
from clients.bots.stats import Stats

__all__ = ["Bot", "Budget", "LoadRun", "Options", "Round", "Session", "run_load"]

CONNECT_CONCURRENCY = 64  # handshakes in flight per process (keeps the accept backlog sane)


class LoadRun:
    """All sessions of one process."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stats = Stats()
        self.budget = Budget(opts.count, time.monotonic() + opts.duration)
        self.connect_slots = asyncio.Semaphore(CONNECT_CONCURRENCY)
        self.tls = ssl.create_default_context()  # shared: building one per client is costly
        self._sessions: list[asyncio.Task[None]] = []

    def interrupt(self) -> None:
        """Ctrl-C: the first starts no more questionnaires and lets those in flight finish,
        the second stops at once. Either way the figures gathered so far are reported."""
        self.stats.count("interrupts")
        self.budget.left = 0
        if self.stats.counters["interrupts"] > 1:
            for task in self._sessions:
                task.cancel()

    async def run(
        self,
        progress: Callable[[Stats], None] | None = None,
        interval: float = 0.25,
        stop_signal: int | None = None,
        on_interrupt: Callable[[int], None] | None = None,
    ) -> Stats:
        """Run every session; ``stop_signal`` (SIGINT, or the parent's signal to a load process)
        calls ``interrupt``, then ``on_interrupt`` with how many there were."""
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            self.interrupt()
            if on_interrupt is not None:
                on_interrupt(self.stats.counters["interrupts"])

        if stop_signal is not None:
            loop.add_signal_handler(stop_signal, interrupted)
        try:
            return await self._run(progress, interval)
        finally:
            if stop_signal is not None:
                loop.remove_signal_handler(stop_signal)

    async def _run(self, progress: Callable[[Stats], None] | None, interval: float) -> Stats:
        opts = self.opts
        cpu0 = time.process_time()
        sessions = [Session(self, i, sid) for i, sid in enumerate(opts.session_ids)]
        go = asyncio.Event()
        waiting = len(sessions)
        started = time.perf_counter()

        def ready() -> None:
            # The clock starts once every bot is connected: setup is not load.
            nonlocal waiting, started
            waiting -= 1
            if waiting == 0:
                started = time.perf_counter()
                self.budget.deadline = time.monotonic() + opts.duration
                go.set()

        tasks = self._sessions = [asyncio.create_task(s.run_session(ready, go)) for s in sessions]
        reporter = asyncio.create_task(self._report(progress, interval)) if progress else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(go.wait(), opts.connect_timeout + 5.0)
        limit = opts.duration + opts.timeout + 30.0
        done, pending = await asyncio.wait(tasks, timeout=limit)
        for task in pending:
            task.cancel()
            self.stats.error("run_timeout", "a session did not finish within the run's deadline")
        for task in done:
            if task.cancelled():
                continue  # stopped at once (a second Ctrl-C)
            exc = task.exception()
            if exc is not None:
                self.stats.error(f"exception_{type(exc).__name__}", repr(exc))
        if pending:
            await asyncio.wait(pending, timeout=5)
        self.stats.elapsed = time.perf_counter() - started
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            if progress:
                progress(self.stats)
        self.stats.cpu = [time.process_time() - cpu0]
        return self.stats

    async def _report(self, progress: Callable[[Stats], None] | None, interval: float) -> None:
        while progress is not None:
            progress(self.stats)
            await asyncio.sleep(interval)


def run_load(
    opts: Options,
    progress: Callable[[Stats], None] | None = None,
    stop_signal: int | None = None,
    on_interrupt: Callable[[int], None] | None = None,
) -> Stats:
    """Run one process's share of the load on a fresh event loop (uvloop when installed);
    ``stop_signal`` and ``on_interrupt``: see ``LoadRun.run``."""
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(LoadRun(opts).run(progress, stop_signal=stop_signal, on_interrupt=on_interrupt))
