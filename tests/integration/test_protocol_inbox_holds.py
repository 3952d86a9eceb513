"""docs/protocol.md, "When nobody is there": an inbox socket covering a session holds its
questionnaires as a client would, on memory and across two brokers on Redis (the inbox on
the second, the agent on the first).

Timers are short: a client wait of 1 s, a reconnect grace of 2 s, and heartbeats every
second (an inbox socket then counts for 3 s after its last one).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from tests.helpers.inbox import InboxClient
from tests.helpers.processes import need, redis_server, token
from tests.helpers.protocol import DEPLOYMENT_KINDS, Agent, Deployment, start_deployment
from tests.helpers.samples import new_sid, single

CLIENT_WAIT, GRACE, HEARTBEAT = 1.0, 2.0, 1.0
HELD_FOR = 4 * CLIENT_WAIT  # long past the client wait: only the inbox can be holding it


@pytest.fixture(scope="module", params=DEPLOYMENT_KINDS)
def held(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    settings = {"client_wait": CLIENT_WAIT, "reconnect_grace": GRACE, "heartbeat_interval": HEARTBEAT}
    if request.param == "redis":
        need(shutil.which("redis-server") is not None, "redis-server is not installed")
        with redis_server() as server, start_deployment("redis", server.url, **settings) as started:
            yield started
    else:
        with start_deployment("memory", None, **settings) as started:
            yield started


async def test_a_questionnaire_waits_while_an_inbox_covering_its_session_is_open(held: Deployment) -> None:
    prefix = new_sid("held") + ":"
    sid = prefix + "build"
    async with (
        InboxClient.connect_inbox(held.client_ws_url, token(prefix + "*", "client")),
        Agent(held.agent_url, sid) as agent,
    ):
        qid = str((await agent.start_pending(single()))["questionnaireId"])
        began = time.monotonic()
        while time.monotonic() - began < HELD_FOR:
            assert (await agent.get(qid, wait=0.5)).status_code == 202
    # The inbox is gone: after its last heartbeat lapses and the grace, nobody holds it.
    async with Agent(held.agent_url, sid) as agent:
        outcome = await agent.outcome(qid, wait=3 * HEARTBEAT + GRACE + 5)
    assert (outcome.details["status"], outcome.details["cancellationReason"]) == ("unavailable", "ui_unavailable")


async def test_an_inbox_of_other_sessions_holds_nothing(held: Deployment) -> None:
    prefix = new_sid("held") + ":"
    async with (
        InboxClient.connect_inbox(held.client_ws_url, token(prefix + "other*", "client")),
        Agent(held.agent_url, prefix + "build") as agent,
    ):
        began = time.monotonic()
        outcome = await agent.outcome(str((await agent.start_pending(single()))["questionnaireId"]), wait=10)
        elapsed = time.monotonic() - began
    assert (outcome.details["status"], outcome.details["cancellationReason"]) == ("unavailable", "ui_unavailable")
    assert elapsed < CLIENT_WAIT + 3
