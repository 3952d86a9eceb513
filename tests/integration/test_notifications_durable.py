"""Delivery survives the broker that holds it: three brokers on one redis-server, a receiver
that hangs on the first attempt, and the broker making that attempt SIGKILLed. Another
broker takes the delivery over once the visibility timeout (3 s here) has passed, and the
receiver gets it once more, with the same id, and no more."""

from __future__ import annotations

import asyncio
import json

import pytest
from redis import Redis as SyncRedis

from broker.store.redis.deliveries import GROUP
from broker.store.redis.keys import DELIVERIES_KEY
from tests.helpers.notify import notify_deployment
from tests.helpers.protocol import Agent
from tests.helpers.samples import new_sid, single
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.redis

QUIET = 5.0  # longer than the visibility timeout and a retry: nothing more follows


async def test_a_delivery_held_by_a_killed_broker_is_sent_by_another_once() -> None:
    with notify_deployment(brokers=3) as deployment:
        receiver = deployment.http["held"]
        receiver.delay = 10.0  # the first attempt hangs (the broker gives up on it after 2 s)
        sid = new_sid("held:")
        async with Agent(deployment.agent_url, sid) as agent:
            await agent.start_pending(single())
        await eventually(lambda: receiver.about(sid), "the first attempt to arrive", timeout=20)
        with SyncRedis.from_url(deployment.redis.url) as admin:
            (pending,) = admin.xpending_range(DELIVERIES_KEY, GROUP, "-", "+", 10)
        holder_pid = int(pending["consumer"].decode().split(":")[1])
        (holder,) = [b for b in deployment.brokers if b.process is not None and b.process.pid == holder_pid]
        receiver.delay = 0.0
        holder.kill()

        first, again = await eventually(
            lambda: receiver.about(sid) if len(receiver.about(sid)) >= 2 else None,
            "another broker to deliver it",
            timeout=20,
        )
        await asyncio.sleep(QUIET)
        assert len(receiver.about(sid)) == 2  # once more, and no more
        assert json.loads(first.body)["id"] == json.loads(again.body)["id"]
        assert first.headers["Idempotency-Key"] == again.headers["Idempotency-Key"]
        others = [b for b in deployment.brokers if b is not holder]
        assert sum(b.metric("qbroker_notifications_total", kind="webhook", result="sent") for b in others) == 1
        with SyncRedis.from_url(deployment.redis.url) as admin:
            assert admin.xlen(DELIVERIES_KEY) == 0  # finished: nothing left behind
