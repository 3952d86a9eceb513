"""The delivery queue: retries with backoff and jitter, giving up, a bounded queue, metrics, one log line."""

from __future__ import annotations

import asyncio
import logging

import pytest

from broker.notify.channel import Channel, FailedDelivery, RetryableDelivery
from broker.notify.config import Route
from broker.notify.dispatch import Dispatcher
from broker.notify.notification import Notification
from broker.runtime.metrics import Metrics

ROUTE = Route(3, "team-a:*", "webhook", options={"url": "https://hooks.example.com/secret-path?key=s3cret"})


def note(number: int = 1) -> Notification:
    return Notification(f"n-{number}", "started", "team-a:1", "q-1", None, 2, None, "http://x/#session=team-a:1", 1.0)


class Script(Channel):
    """Answers each attempt with the next of ``outcomes`` (None: delivered)."""

    kind = "webhook"

    def __init__(self, *outcomes: Exception | None) -> None:
        super().__init__(ROUTE)
        self.outcomes = list(outcomes)
        self.attempts: list[str] = []

    async def deliver(self, note: Notification) -> None:
        self.attempts.append(note.id)
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome


def counted(metrics: Metrics, result: str) -> float:
    return metrics.notifications.labels("webhook", result).value


async def run(dispatcher: Dispatcher, *jobs: tuple[Channel, Notification]) -> None:
    dispatcher.start()
    try:
        for channel, item in jobs:
            dispatcher.submit(channel, item)
        await asyncio.wait_for(dispatcher.drained(), 10)
    finally:
        await dispatcher.stop()


async def test_a_receiver_that_fails_twice_gets_it_on_the_third_attempt() -> None:
    metrics = Metrics()
    channel = Script(RetryableDelivery("HTTP 503"), RetryableDelivery("timed out"), None)
    await run(Dispatcher(metrics, retry_delay=0.01), (channel, note()))
    assert channel.attempts == ["n-1"] * 3
    assert (counted(metrics, "retried"), counted(metrics, "sent"), counted(metrics, "failed")) == (2, 1, 0)


async def test_it_gives_up_after_five_attempts_with_one_log_line_without_the_secret_parts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    channel = Script(*[RetryableDelivery("HTTP 500")] * 9)
    with caplog.at_level(logging.INFO, logger="qbroker.notify"):
        await run(Dispatcher(metrics, retry_delay=0.001), (channel, note()))
    assert len(channel.attempts) == 5
    assert (counted(metrics, "retried"), counted(metrics, "failed")) == (4, 1)
    given_up = [r for r in caplog.records if r.getMessage() == "notification given up"]
    assert len(given_up) == 1
    line = vars(given_up[0])
    assert (line["route"], line["attempts"], line["reason"]) == (3, 5, "HTTP 500")
    assert line["target"] == "https://hooks.example.com"
    assert "secret" not in str(vars(given_up[0]))


async def test_a_4xx_is_given_up_at_once() -> None:
    metrics = Metrics()
    channel = Script(FailedDelivery("HTTP 404"))
    await run(Dispatcher(metrics, retry_delay=0.001), (channel, note()))
    assert len(channel.attempts) == 1 and counted(metrics, "failed") == 1


async def test_a_notification_no_longer_wanted_is_skipped_before_any_attempt() -> None:
    metrics = Metrics()
    channel = Script()

    async def never(_: Notification) -> bool:
        return False

    await run(Dispatcher(metrics, still_wanted=never), (channel, note()))
    assert channel.attempts == [] and counted(metrics, "skipped") == 1


async def test_a_full_queue_drops_and_counts_without_waiting() -> None:
    metrics = Metrics()
    dispatcher = Dispatcher(metrics, queue_size=2)  # not started: nothing leaves the queue
    channel = Script()
    assert [dispatcher.submit(channel, note(n)) for n in range(4)] == [True, True, False, False]
    assert counted(metrics, "dropped") == 2
    assert metrics.notifications_queued.value == 2


async def test_a_waiting_retry_holds_no_worker() -> None:
    """A dead receiver's retries wait aside: another notification goes at once."""
    metrics = Metrics()
    dead = Script(*[RetryableDelivery("cannot connect")] * 9)
    alive = Script()
    dispatcher = Dispatcher(metrics, retry_delay=60, workers=1)
    dispatcher.start()
    try:
        dispatcher.submit(dead, note(1))
        dispatcher.submit(alive, note(2))
        for _ in range(200):
            if alive.attempts:
                break
            await asyncio.sleep(0.01)
        assert alive.attempts == ["n-2"] and dead.attempts == ["n-1"]
        assert metrics.notifications_queued.value == 1  # the dead one, waiting to retry
    finally:
        await dispatcher.stop()


@pytest.mark.parametrize("jitter", [0.0, 0.5, 0.999])
def test_backoff_doubles_with_jitter_to_about_two_minutes_over_five_attempts(jitter: float) -> None:
    dispatcher = Dispatcher(Metrics(), retry_delay=8.0, jitter=lambda: jitter)
    delays = [dispatcher.delay(attempt) for attempt in range(1, 5)]
    assert delays == [8.0 * 2**n * (0.5 + jitter) for n in range(4)]
    assert 60 <= sum(delays) <= 180


def test_a_receiver_s_retry_after_is_honoured() -> None:
    dispatcher = Dispatcher(Metrics(), retry_delay=1.0, jitter=lambda: 0.5)
    assert dispatcher.delay(1, retry_after=30) == 30
    assert dispatcher.delay(1, retry_after=10_000) == 300
