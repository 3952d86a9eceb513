"""docs/protocol.md, "Availability": no client -> unavailable/ui_unavailable after the client
wait; every client gone -> the reconnect grace with answers and draft intact, then
unavailable/ui_error. Runs on ``fast_deployment`` (client_wait=1 s, reconnect_grace=2 s);
presence counts across processes (on redis the client is on the other process)."""

from __future__ import annotations

import time

from tests.helpers.clients import person
from tests.helpers.protocol import Agent, Deployment, pending, tool_result
from tests.helpers.samples import multi, single


async def test_no_client_means_ui_unavailable_after_the_client_wait(fast_deployment: Deployment, sid: str) -> None:
    async with Agent(fast_deployment.agent_url, sid) as agent:
        started = time.monotonic()
        result = tool_result(await agent.start(single(), multi(), wait=15))
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 8, elapsed
    assert result.marker == "QUESTIONNAIRE_UNAVAILABLE"
    assert result.details["status"] == "unavailable"
    assert result.details["cancellationReason"] == "ui_unavailable"
    assert result.details["answers"] == []
    async with person(fast_deployment.client_ws_url, sid) as p:
        assert await p.wait_for() == {"type": "idle"}, "an unavailable questionnaire is not shown any more"


async def test_a_client_on_any_process_keeps_it_available(fast_deployment: Deployment, sid: str) -> None:
    async with person(fast_deployment.client_ws_url, sid) as p, Agent(fast_deployment.agent_url, sid) as agent:
        await p.wait_for("idle")
        qid = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        pending(await agent.get(qid, wait=2.5))  # well past client_wait: still with the person
        await p.answer(q, ["staging"])
        assert (await agent.outcome(qid)).status == "completed"


async def test_a_client_arriving_within_the_client_wait_gets_it(fast_deployment: Deployment, sid: str) -> None:
    async with Agent(fast_deployment.agent_url, sid) as agent:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        async with person(fast_deployment.client_ws_url, sid) as p:
            q = await p.wait_for("question")
            assert q["questionnaireId"] == qid
            pending(await agent.get(qid, wait=1.5))
            await p.answer(q, ["production"])
            await p.wait_for("closed")
        assert (await agent.outcome(qid)).details["answers"][0]["selectedOptionIds"] == ["production"]


async def test_reconnect_within_the_grace_continues_exactly_there(fast_deployment: Deployment, sid: str) -> None:
    async with Agent(fast_deployment.agent_url, sid) as agent:
        async with person(fast_deployment.client_ws_url, sid) as p:
            qid = (await agent.start_pending(single("first"), multi("second"), single("third")))["questionnaireId"]
            q = await p.wait_for("question")
            await p.answer(q, ["production"])
            q = await p.wait_for("question", where=lambda f: f["index"] == 1)
            await p.draft(q, ["lint", "unit"], other="mine")
            before = await p.wait_for("question", where=lambda f: f["draft"] is not None)
        # Everyone is gone; a short wait shows it is still pending (inside the 2 s grace).
        started = time.monotonic()
        pending(await agent.get(qid, wait=0.5))
        assert time.monotonic() - started < 2
        async with person(fast_deployment.other_ws_url, sid) as back:
            resumed = await back.wait_for("question")
            assert resumed == before, "the reconnecting client continues exactly where it was"
            await back.answer(resumed, ["e2e"])
            q = await back.wait_for("question", where=lambda f: f["index"] == 2)
            await back.answer(q, ["staging"])
            await back.wait_for("closed")
        done = await agent.outcome(qid)
    assert done.status == "completed"
    assert done.details["answers"] == [
        {"questionId": "first", "selectedOptionIds": ["production"]},
        {"questionId": "second", "selectedOptionIds": ["e2e"]},
        {"questionId": "third", "selectedOptionIds": ["staging"]},
    ]


async def test_after_the_grace_it_is_ui_error_with_answers_kept(fast_deployment: Deployment, sid: str) -> None:
    async with Agent(fast_deployment.agent_url, sid) as agent:
        async with person(fast_deployment.client_ws_url, sid) as p:
            qid = (await agent.start_pending(single("first"), multi("second")))["questionnaireId"]
            await p.answer(await p.wait_for("question"), ["staging"])
            q = await p.wait_for("question", where=lambda f: f["index"] == 1)
            await p.draft(q, ["e2e"])
            await p.wait_for("question", where=lambda f: f["draft"] is not None)
        gone = time.monotonic()
        result = tool_result(await agent.get(qid, wait=15))
        elapsed = time.monotonic() - gone
        assert 1.5 <= elapsed < 9, elapsed
        assert result.marker == "QUESTIONNAIRE_UNAVAILABLE"
        assert result.details["cancellationReason"] == "ui_error"
        assert result.details["answers"] == [{"questionId": "first", "selectedOptionIds": ["staging"]}]
        assert result.details["draftAnswer"] == {"selectedOptionIds": ["e2e"]}
        async with person(fast_deployment.other_ws_url, sid) as late:
            assert await late.wait_for() == {"type": "idle"}
        assert (await agent.get(qid)).json() == result.body
