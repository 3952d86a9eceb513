"""How notifications are delivered across a deployment (three brokers on one Redis, local
receivers): one per moment whichever broker sees it, retries after a failing receiver, giving
up on a 4xx with one log line, nothing for a questionnaire that ended meanwhile, a start-up
warning for a target that is down, and answers as fast with a hung receiver as without."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Iterator

import pytest

from tests.helpers.clients import person
from tests.helpers.notify import NTFY_TOKEN, WEBHOOK_SECRET, NotifyDeployment, notify_deployment
from tests.helpers.protocol import Agent
from tests.helpers.receivers import HttpReceiver, Received
from tests.helpers.samples import new_sid, single
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.redis

QUIET = 3.0  # seconds of silence that show nothing more follows (12 idle ticks, 6 first retries)


@pytest.fixture(scope="module")
def deployment() -> Iterator[NotifyDeployment]:
    with notify_deployment(brokers=3) as started:
        yield started


def triggers(receiver: HttpReceiver, sid: str) -> list[str]:
    return [json.loads(r.body)["trigger"] for r in receiver.about(sid)]


async def arrived(receiver: HttpReceiver, sid: str, count: int) -> list[Received]:
    return await eventually(
        lambda: receiver.about(sid) if len(receiver.about(sid)) >= count else None,
        f"{count} notification(s) about {sid}",
        timeout=20,
    )


async def test_each_moment_is_announced_once_though_three_brokers_see_it(deployment: NotifyDeployment) -> None:
    """Started with nobody there; then a person on every broker leaves the question alone
    (each broker looks for idle questions of its own clients); then the person asks, everyone
    leaves, and the agent resumes: one notice of each."""
    sid = new_sid("idle:")
    receiver = deployment.http["idle"]
    async with Agent(deployment.agent_url, sid) as agent:
        qid = str((await agent.start_pending(single()))["questionnaireId"])
        await arrived(receiver, sid, 1)
        async with (
            person(deployment.brokers[0].ws_url, sid) as first,
            person(deployment.brokers[1].ws_url, sid),
            person(deployment.brokers[2].ws_url, sid),
        ):
            question = await first.wait_for("question")
            await arrived(receiver, sid, 2)  # idle: a second after it was shown
            await asyncio.sleep(QUIET)  # every broker has looked a dozen times since
            assert triggers(receiver, sid) == ["started", "idle"]
            await first.clarify(question, "Which staging?")
            await first.wait_for("suspended")
        await eventually(deployment.nobody_connected, "every person to have left")
        assert (await agent.resume(qid, 1, "The new one.", base_url=deployment.brokers[2].url)).status_code == 202
        await arrived(receiver, sid, 3)
        await asyncio.sleep(QUIET)
    assert triggers(receiver, sid) == ["started", "idle", "resumed"]
    ids = [json.loads(r.body)["id"] for r in receiver.about(sid)]
    assert len(set(ids)) == 3


async def test_a_receiver_that_fails_twice_gets_the_same_notification_on_the_third_attempt(
    deployment: NotifyDeployment,
) -> None:
    receiver = deployment.http["flaky"]
    receiver.statuses[:] = [503, 429]
    sid = new_sid("flaky:")
    async with Agent(deployment.agent_url, sid) as agent:
        await agent.start_pending(single())
    first, second, third = await arrived(receiver, sid, 3)
    assert first.body == second.body == third.body
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == third.headers["Idempotency-Key"]
    # backoff: 0.5 s x 1, then x 2, each with jitter of x 0.5-1.5
    assert second.at - first.at >= 0.25 and third.at - second.at >= 0.5
    await asyncio.sleep(QUIET)
    assert len(receiver.about(sid)) == 3  # delivered: no fourth
    assert (
        sum(b.metric("qbroker_notifications_total", kind="webhook", result="retried") for b in deployment.brokers) >= 2
    )


async def test_a_questionnaire_that_ended_meanwhile_is_not_announced_again(deployment: NotifyDeployment) -> None:
    receiver = deployment.http["flaky"]
    receiver.statuses[:] = [503]
    receiver.headers["Retry-After"] = "4"  # time enough to end it before the retry
    sid = new_sid("flaky:")
    broker = deployment.brokers[0]
    skipped_before = broker.metric("qbroker_notifications_total", kind="webhook", result="skipped")
    try:
        async with Agent(deployment.agent_url, sid) as agent:
            qid = str((await agent.start_pending(single()))["questionnaireId"])
            await arrived(receiver, sid, 1)  # the first attempt failed (503): a retry is due
            assert (await agent.delete(qid)).status_code == 200
        await eventually(
            lambda: broker.metric("qbroker_notifications_total", kind="webhook", result="skipped") > skipped_before,
            "the retry to be skipped",
            timeout=20,
        )
    finally:
        receiver.headers.clear()
    assert len(receiver.about(sid)) == 1


async def test_a_4xx_is_given_up_at_once_with_one_log_line_that_keeps_the_target_s_secrets(
    deployment: NotifyDeployment,
) -> None:
    receiver = deployment.http["gone"]  # answers 404
    sid = new_sid("gone:")
    async with Agent(deployment.agent_url, sid) as agent:
        await agent.start_pending(single())
    await arrived(receiver, sid, 1)

    def given_up() -> list[dict[str, object]]:
        lines = [json.loads(line) for line in deployment.brokers[0].log().splitlines() if line.startswith("{")]
        return [e for e in lines if e.get("msg") == "notification given up" and e.get("session") == sid]

    (line,) = await eventually(given_up, "the give-up line")
    await asyncio.sleep(QUIET)
    assert len(receiver.about(sid)) == 1 and len(given_up()) == 1
    assert line["reason"] == "HTTP 404" and line["attempts"] == 1 and line["kind"] == "webhook"
    assert line["target"] == receiver.url  # scheme, host and port: never the path
    assert "secret-path" not in deployment.brokers[0].log()


def test_a_target_that_is_down_at_start_up_is_a_warning_and_the_broker_serves(deployment: NotifyDeployment) -> None:
    for broker in deployment.brokers:
        warnings = [
            json.loads(line)
            for line in broker.log().splitlines()
            if line.startswith("{") and "unreachable at start-up" in line
        ]
        assert [w["sessions"] for w in warnings] == ["down:*"]  # the closed port, and only it
        assert "cannot connect" in str(warnings[0]["msg"]) and warnings[0]["level"] == "warning"


async def test_a_hung_receiver_does_not_slow_starts_or_answers(deployment: NotifyDeployment) -> None:
    """Rounds of start-then-answer in a session whose route hangs (a receiver that accepts and
    never answers: every attempt runs into its 2 s timeout) and in one without a route,
    alternated in the same run: the medians compare within a generous ratio."""
    timings: dict[str, list[tuple[float, float]]] = {"dead": [], "plain": []}
    for _ in range(6):
        for kind in ("dead", "plain"):
            sid = new_sid(f"{kind}:")
            async with Agent(deployment.agent_url, sid) as agent:
                began = time.perf_counter()
                started = await agent.start(single(), wait=0)
                start_seconds = time.perf_counter() - began
                assert started.status_code == 202
                async with person(deployment.client_ws_url, sid) as someone:
                    question = await someone.wait_for("question")
                    began = time.perf_counter()
                    await someone.answer(question, ["staging"])
                    await someone.wait_for("closed")
                    timings[kind].append((start_seconds, time.perf_counter() - began))
    queued = deployment.brokers[0].metric("qbroker_notifications_queued")
    assert queued >= 1  # the hung deliveries are still pending: the dead route was in play
    for index, what in ((0, "start"), (1, "answer")):
        dead = statistics.median(t[index] for t in timings["dead"])
        plain = statistics.median(t[index] for t in timings["plain"])
        assert dead <= 3 * plain + 0.05, f"{what}: {dead:.4f}s with a hung receiver, {plain:.4f}s without"


def test_no_broker_logs_a_target_s_secret_parts(deployment: NotifyDeployment) -> None:
    for broker in deployment.brokers:
        log = broker.log()
        for secret in ("secret-path", "secret-topic", "/services/T0/B0/secret", WEBHOOK_SECRET, NTFY_TOKEN):
            assert secret not in log
