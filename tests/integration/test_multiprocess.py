"""Several real broker processes on one real redis-server: any process serves any step.

The agent, the person and the resume each talk to a different process, and a process the
person is connected to is killed with SIGKILL mid-questionnaire.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest

from tests.helpers.clients import ScriptedClient
from tests.helpers.processes import BrokerProcess, broker, redis_server, token

pytestmark = pytest.mark.redis

QUESTIONS = [
    {
        "id": "deploy_target",
        "label": "Target",
        "prompt": "Which environment should this release go to?",
        "type": "single",
        "options": [{"id": "staging"}, {"id": "production"}],
        "allowOther": False,
    },
    {
        "id": "checks",
        "label": "Pre-flight checks",
        "prompt": "Which checks must pass?",
        "type": "multi",
        "options": [{"id": "unit"}, {"id": "e2e"}, {"id": "lint"}],
        "minSelections": 1,
    },
    {
        "id": "notify",
        "prompt": "Who should hear about it?",
        "type": "single",
        "options": [{"id": "team"}, {"id": "nobody"}],
    },
]


@contextlib.contextmanager
def brokers(count: int, **settings: object) -> Iterator[list[BrokerProcess]]:
    with redis_server() as redis, contextlib.ExitStack() as stack:
        # port=None: each process on a free port of its own (settings are QBROKER_* values only)
        yield [stack.enter_context(broker(redis.url, port=None, **settings)) for _ in range(count)]


def agent(process: BrokerProcess, sid: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=process.url, headers={"Authorization": f"Bearer {token(sid, 'agent')}"}, timeout=30
    )


async def _three_processes(a: BrokerProcess, b: BrokerProcess, c: BrokerProcess) -> dict[str, Any]:
    sid = "three-processes"
    async with (
        ScriptedClient.connect(b.ws_url, sid, token(sid, "client")) as person,
        agent(a, sid) as on_a,
        agent(c, sid) as on_c,
    ):
        await person.wait_for("idle")
        start = asyncio.create_task(
            on_a.post(f"/v1/sessions/{sid}/questionnaire?wait=20", json={"action": "start", "questions": QUESTIONS})
        )
        first = await person.wait_for("question")
        await person.answer(first, ["production"])
        second = await person.wait_for("question", where=lambda f: f["index"] == 1)
        await person.clarify(second, "What does e2e cover?", draft={"selectedOptionIds": ["lint", "unit"]})
        await person.wait_for("suspended")

        paused = (await asyncio.wait_for(start, 20)).json()
        assert paused["details"]["status"] == "needs_clarification"
        resume = {
            "action": "resume",
            "questionnaireId": paused["details"]["questionnaireId"],
            "revision": paused["details"]["revision"],
            "clarificationResponse": "The browser suite against staging.",
        }
        resumed = asyncio.create_task(on_c.post(f"/v1/sessions/{sid}/questionnaire?wait=20", json=resume))
        again = await person.wait_for("question", where=lambda f: f["step"] > second["step"])
        assert again["draft"] == {"selectedOptionIds": ["unit", "lint"]}
        assert again["clarifications"][-1]["response"] == "The browser suite against staging."
        await person.answer(again, ["unit", "lint"])
        third = await person.wait_for("question", where=lambda f: f["index"] == 2)
        await person.answer(third, [], other="release channel")
        await person.wait_for("closed")
        result: dict[str, Any] = (await asyncio.wait_for(resumed, 20)).json()
        # Re-attaching on the first process sees the very same outcome.
        reattached = (await on_a.get(f"/v1/sessions/{sid}/questionnaires/{resume['questionnaireId']}?wait=0")).json()
        assert reattached["details"] == result["details"]
        return result


def test_agent_client_and_resume_on_three_different_processes() -> None:
    with brokers(3) as (a, b, c):
        result = asyncio.run(_three_processes(a, b, c))
    assert result["details"]["status"] == "completed"
    assert result["details"]["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["production"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "lint"]},
        {"questionId": "notify", "selectedOptionIds": [], "other": "release channel"},
    ]
    assert result["details"]["clarifications"][0]["response"] == "The browser suite against staging."


async def _killed_mid_questionnaire(a: BrokerProcess, b: BrokerProcess, c: BrokerProcess) -> dict[str, Any]:
    sid = "kill-nine"
    async with agent(a, sid) as on_a:
        person = await ScriptedClient.connect(b.ws_url, sid, token(sid, "client"))
        await person.wait_for("idle")
        start = asyncio.create_task(
            on_a.post(f"/v1/sessions/{sid}/questionnaire?wait=30", json={"action": "start", "questions": QUESTIONS})
        )
        first = await person.wait_for("question")
        await person.answer(first, ["staging"])
        second = await person.wait_for("question", where=lambda f: f["index"] == 1)
        await person.draft(second, ["e2e"])
        await person.wait_for("question", where=lambda f: f["draft"] is not None)

        b.kill()  # SIGKILL: no goodbye, no cleanup
        assert await person.expect_close() is None  # (no close frame: the process is gone)

        # The person's page reconnects, this time through another process.
        async with ScriptedClient.connect(c.ws_url, sid, token(sid, "client")) as back:
            resumed = await back.wait_for("question")
            assert resumed["index"] == 1
            assert resumed["draft"] == {"selectedOptionIds": ["e2e"]}
            assert [p["state"] for p in resumed["progress"]] == ["answered", "current", "pending"]
            await back.answer(resumed, ["e2e", "unit"])
            third = await back.wait_for("question", where=lambda f: f["index"] == 2)
            await back.answer(third, ["team"])
            await back.wait_for("closed")
        response = await asyncio.wait_for(start, 30)
        assert response.status_code == 200
        return cast(dict[str, Any], response.json())


def test_a_killed_process_loses_nothing_the_person_answered() -> None:
    # A long grace so that the killed process's lapsed presence cannot end it early.
    with brokers(3, reconnect_grace=30, heartbeat_interval=1) as (a, b, c):
        result = asyncio.run(_killed_mid_questionnaire(a, b, c))
    assert result["details"]["status"] == "completed"
    assert result["details"]["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["staging"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
        {"questionId": "notify", "selectedOptionIds": ["team"]},
    ]
