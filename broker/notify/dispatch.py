"""Delivery off the answer path: a bounded queue, a few workers, retries with backoff and jitter.

``submit`` never waits: it counts the notification in and returns (False, and a ``dropped``
count, when ``queue_size`` are already pending). Workers take one at a time and make one
attempt through its channel. A ``RetryableDelivery`` is tried again after an exponential
backoff with jitter (``retry_delay`` x 1, 2, 4, 8, each x 0.5-1.5: with the default 8 s,
five attempts over about two minutes), never sooner than a receiver's Retry-After; a waiting
retry holds no worker, so a dead receiver slows nobody else. ``FailedDelivery``, or the last
attempt failing, gives up with one log line (ids, the route, the target's scheme and host,
never its path, secret or the notification's text).

``still_wanted`` is asked before every attempt: a questionnaire answered or ended
meanwhile is not announced (``skipped``).

A job may carry a ``ticket`` (its delivery's id in the store: deliveries.py); ``finished``
is called with it once the job is finished (sent, skipped or given up), and ``tickets``
lists those still held (in flight or waiting to retry).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from broker.notify.channel import Channel, FailedDelivery, RetryableDelivery
from broker.notify.notification import Notification
from broker.runtime.metrics import Metrics
from broker.runtime.tasks import stop_tasks

log = logging.getLogger("qbroker.notify")

ATTEMPTS: Final = 5
WORKERS: Final = 8
MAX_RETRY_AFTER: Final = 300.0  # a receiver's Retry-After is honoured up to this

StillWanted = Callable[[Notification], Awaitable[bool]]
Finished = Callable[[str], Awaitable[None]]


@dataclass
class _Job:
    channel: Channel
    note: Notification
    ticket: str | None = None
    attempt: int = 0  # attempts made so far


class Dispatcher:
    """The delivery queue of one broker process (``start`` .. ``stop``)."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        queue_size: int = 1000,
        retry_delay: float = 8.0,
        attempts: int = ATTEMPTS,
        workers: int = WORKERS,
        still_wanted: StillWanted | None = None,
        finished: Finished | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.metrics = metrics
        self.queue_size = queue_size
        self.retry_delay = retry_delay
        self.attempts = attempts
        self.still_wanted = still_wanted
        self.finished = finished
        self._tickets: set[str] = set()
        self._jitter = jitter
        self._workers = workers
        self._ready: asyncio.Queue[_Job] = asyncio.Queue()
        self._retries: set[asyncio.TimerHandle] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._pending = 0  # queued + in flight + waiting to retry: what queue_size bounds
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def room(self) -> int:
        """How many more jobs ``submit`` takes now."""
        return max(self.queue_size - self._pending, 0)

    def tickets(self) -> list[str]:
        """The tickets of the jobs held now."""
        return list(self._tickets)

    def start(self) -> None:
        for number in range(self._workers):
            self._tasks.append(asyncio.create_task(self._work(), name=f"qbroker-notify-{number}"))

    async def stop(self) -> None:
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        await stop_tasks(self._tasks)
        self._tasks.clear()

    async def drained(self) -> None:
        """Return once nothing is pending (for tests and a graceful stop)."""
        await self._idle.wait()

    def submit(self, channel: Channel, note: Notification, ticket: str | None = None) -> bool:
        """Queue ``note`` for ``channel``; False (counted ``dropped``) when the queue is full."""
        if self._pending >= self.queue_size:
            self._count(channel, "dropped")
            log.warning(
                "notification dropped: the delivery queue is full",
                extra={**_ids(channel, note), "queued": self._pending},
            )
            return False
        self._change(+1)
        if ticket is not None:
            self._tickets.add(ticket)
        self._ready.put_nowait(_Job(channel, note, ticket))
        return True

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before attempt ``attempt + 1``, after ``attempt`` failed ones."""
        backoff = self.retry_delay * 2.0 ** (attempt - 1) * (0.5 + self._jitter())
        if retry_after is not None:
            backoff = max(backoff, min(retry_after, MAX_RETRY_AFTER))
        return backoff

    # --- the workers ----------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            job = await self._ready.get()
            try:
                finished = await self._attempt(job)
            except Exception:  # a channel's bug: logged, and the notification given up
                log.exception("notification delivery failed", extra=_ids(job.channel, job.note))
                self._count(job.channel, "failed")
                finished = True
            if finished:
                await self._finish(job)

    async def _finish(self, job: _Job) -> None:
        self._change(-1)
        if job.ticket is not None:
            self._tickets.discard(job.ticket)
            if self.finished is not None:
                try:
                    await self.finished(job.ticket)
                except Exception:  # (the store away: another broker may send it again)
                    log.warning("notification delivery not recorded as finished", extra=_ids(job.channel, job.note))

    async def _attempt(self, job: _Job) -> bool:
        """One attempt; True when the job is finished (sent, skipped or given up), False
        when a retry was scheduled."""
        channel, note = job.channel, job.note
        if self.still_wanted is not None and not await self.still_wanted(note):
            self._count(channel, "skipped")
            log.info("notification skipped: the questionnaire moved on", extra=_ids(channel, note))
            return True
        job.attempt += 1
        try:
            await channel.deliver(note)
        except RetryableDelivery as exc:
            if job.attempt >= self.attempts:
                self._give_up(job, exc.reason)
                return True
            self._count(channel, "retried")
            self._schedule(job, self.delay(job.attempt, exc.retry_after))
            return False
        except FailedDelivery as exc:
            self._give_up(job, exc.reason)
            return True
        self._count(channel, "sent")
        log.info("notification sent", extra={**_ids(channel, note), "attempts": job.attempt})
        return True

    def _schedule(self, job: _Job, delay: float) -> None:
        loop = asyncio.get_running_loop()

        def ready() -> None:
            self._retries.discard(handle)
            self._ready.put_nowait(job)

        handle = loop.call_later(delay, ready)
        self._retries.add(handle)

    def _give_up(self, job: _Job, reason: str) -> None:
        self._count(job.channel, "failed")
        log.warning(
            "notification given up",
            extra={**_ids(job.channel, job.note), "attempts": job.attempt, "reason": reason},
        )

    def _count(self, channel: Channel, result: str) -> None:
        self.metrics.notifications.labels(channel.kind, result).inc()

    def _change(self, by: int) -> None:
        self._pending += by
        self.metrics.notifications_queued.value = self._pending
        if self._pending == 0:
            self._idle.set()
        else:
            self._idle.clear()


def _ids(channel: Channel, note: Notification) -> dict[str, object]:
    """What a log line says of a notification: ids (the link token's ``jti`` too, to revoke
    it), the route, the target's scheme and host."""
    return {
        "route": channel.route.index,
        "kind": channel.kind,
        "target": channel.target,
        "session": note.session_id,
        "questionnaire": note.questionnaire_id,
        "trigger": note.trigger,
        "notification": note.id,
        "link_jti": note.link_jti,
    }
