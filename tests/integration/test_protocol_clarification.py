"""docs/protocol.md, "Revisions" and the clarification round trip: clarify -> suspended ->
NEEDS_CLARIFICATION -> resume -> question; repeated clarifications; stale and racing
resumes; the stored snapshot is authoritative."""

from __future__ import annotations

import asyncio
import re

from tests.helpers.clients import ScriptedClient, person
from tests.helpers.protocol import Agent, Deployment, error, pending, tool_result
from tests.helpers.samples import multi, single


async def _clarify(
    p: ScriptedClient, q: dict[str, object], request: str, draft: dict[str, object] | None = None
) -> None:
    await p.clarify(q, request, draft)


async def test_clarification_round_trip(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        call = asyncio.create_task(agent.start(single("target"), multi("checks"), single("notify"), wait=30))
        q = await a.wait_for("question")
        qid = q["questionnaireId"]
        await a.answer(q, ["staging"])
        q = await a.wait_for("question", where=lambda f: f["index"] == 1)
        await a.draft(q, ["e2e"], other="perf")
        await a.wait_for("question", where=lambda f: f["draft"] is not None)
        await a.clarify(q, "What does e2e cover here?")
        for client in (a, b):
            suspended = await client.wait_for("suspended")
            assert suspended["questionnaireId"] == qid
            assert suspended["revision"] == 1
            assert suspended["request"] == "What does e2e cover here?"
        # The agent's waiting start call returns the clarification.
        result = tool_result(await asyncio.wait_for(call, 15))
        assert result.marker == "QUESTIONNAIRE_NEEDS_CLARIFICATION"
        assert result.revision == 1
        assert "What does e2e cover here?" in result.text
        assert result.resume_call() == {
            "action": "resume",
            "questionnaireId": qid,
            "revision": 1,
            "clarificationResponse": result.resume_call()["clarificationResponse"],  # type: ignore[index]
        }, f"the text must spell out the resume call:\n{result.text}"
        d = result.details
        assert d["status"] == "needs_clarification"
        assert "What does e2e cover here?" in str(d["clarificationRequest"])
        assert d["answers"] == [{"questionId": "target", "selectedOptionIds": ["staging"]}]
        assert d["draftAnswer"] == {"selectedOptionIds": ["e2e"], "other": "perf"}
        assert d["currentQuestionIndex"] == 1
        assert d["clarifications"] == [{"revision": 1, "questionId": "checks", "request": "What does e2e cover here?"}]
        # Answers while suspended are refused; the person still sees the suspension.
        await b.answer(q, ["unit"])
        assert (await b.wait_for("error"))["code"] == "stale_step"
        assert (await b.wait_for("question", "suspended", "idle"))["type"] == "suspended"
        # GET re-attach returns the same outcome while it waits for the agent.
        assert (await agent.get(qid)).json() == result.body
        # Resume: every client is back at the same question, the draft intact.
        resumed = pending(await agent.resume(qid, 1, "It runs the browser suite."))
        assert resumed["questionnaireId"] == qid and resumed["revision"] == 1
        for client in (a, b):
            back = await client.wait_for("question")
            assert back["index"] == 1 and back["question"]["id"] == "checks"
            assert back["revision"] == 1
            assert back["step"] == resumed["step"]
            assert back["draft"] == {"selectedOptionIds": ["e2e"], "other": "perf"}
            assert back["clarifications"] == [
                {
                    "revision": 1,
                    "questionId": "checks",
                    "request": "What does e2e cover here?",
                    "response": "It runs the browser suite.",
                }
            ]
            assert [s["state"] for s in back["progress"]] == ["answered", "current", "pending"]
        # Clarify again, on the next question: a new, higher revision.
        await a.answer(back, ["e2e"])
        q = await a.wait_for("question", where=lambda f: f["index"] == 2)
        await a.clarify(q, "Who is on the team?")
        for client in (a, b):
            suspended = await client.wait_for("suspended")
            assert suspended["revision"] == 2
        second = await agent.outcome(qid)
        assert second.marker == "QUESTIONNAIRE_NEEDS_CLARIFICATION" and second.revision == 2
        # The older revision is stale now; the message names the latest.
        message = error(await agent.resume(qid, 1, "late"), 409, "stale_revision")
        assert re.search(r"\b2\b", message), message
        pending(await agent.resume(qid, 2, "The platform team."))
        q = await a.wait_for("question")
        assert len(q["clarifications"]) == 2 and q["clarifications"][1]["response"] == "The platform team."
        await a.answer(q, ["staging"])
        await a.wait_for("closed")
    done = await agent.outcome(qid)
    assert done.status == "completed" and done.revision == 2
    assert [a["questionId"] for a in done.details["answers"]] == ["target", "checks", "notify"]
    assert [c["revision"] for c in done.details["clarifications"]] == [1, 2]
    assert all("response" in c for c in done.details["clarifications"])


async def test_clarify_frame_can_carry_the_draft(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(multi("checks")))["questionnaireId"]
        q = await p.wait_for("question")
        await _clarify(p, q, "Which is fastest?", {"selectedOptionIds": ["lint", "unit"]})
        await p.wait_for("suspended")
        result = await agent.outcome(qid)
        assert result.details["draftAnswer"] == {"selectedOptionIds": ["unit", "lint"]}
        pending(await agent.resume(qid, 1, "lint"))
        back = await p.wait_for("question")
        assert back["draft"] == {"selectedOptionIds": ["unit", "lint"]}


async def test_clarification_request_limits(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        await p.clarify(q, "x" * 1001)
        assert (await p.wait_for("error"))["code"] == "text_too_long"
        await p.clarify(q, "   ")
        assert (await p.wait_for("error"))["code"] != "stale_step"
        pending(await agent.get(qid))
        await p.clarify(q, "y" * 1000)
        assert len((await p.wait_for("suspended"))["request"]) == 1000


async def test_resume_errors_change_nothing(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        # Not suspended yet (latest revision 0): revision 1 is not the latest, and nothing changes.
        error(await agent.resume(qid, 1, "early"), 409, "stale_revision")
        pending(await agent.get(qid))
        await p.clarify(q, "why?")
        await p.wait_for("suspended")
        clarification = await agent.outcome(qid)
        message = error(await agent.resume(qid, 3, "future"), 409, "stale_revision")
        assert re.search(r"\b1\b", message), message
        error(await agent.resume(qid, 1, "r" * 1001), 400, "invalid_arguments")
        assert (await agent.get(qid)).json() == clarification.body, "a refused resume changes nothing"
        pending(await agent.resume(qid, 1, "because"))
        back = await p.wait_for("question")
        # Resumed already: the same revision again is not awaiting clarification.
        error(await agent.resume(qid, 1, "again"), 409, "not_awaiting_clarification")
        error(await agent.resume(qid, 2, "ahead"), 409, "stale_revision")
        await p.answer(back, ["staging"])
        await p.wait_for("closed")
    error(await agent.resume(qid, 1, "too late"), 409, "not_awaiting_clarification")
    assert (await agent.outcome(qid)).status == "completed"


async def test_concurrent_resumes_exactly_one_wins(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        for revision in (1, 2, 3):
            await p.clarify(q, f"question {revision}")
            await p.wait_for("suspended", where=lambda f, r=revision: f["revision"] == r)
            assert (await agent.outcome(qid)).revision == revision
            urls = deployment.agent_urls
            responses = await asyncio.gather(
                agent.resume(qid, revision, "answer A", base_url=urls[0]),
                agent.resume(qid, revision, "answer B", base_url=urls[-1]),
            )
            statuses = sorted(r.status_code for r in responses)
            assert statuses == [202, 409], [r.text for r in responses]
            error(next(r for r in responses if r.status_code == 409), 409, "not_awaiting_clarification")
            q = await p.wait_for("question", where=lambda f, r=revision: f["revision"] == r)
            assert q["clarifications"][-1]["response"] in ("answer A", "answer B")
        await p.answer(q, ["staging"])
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert [c["revision"] for c in result.details["clarifications"]] == [1, 2, 3]


async def test_cancel_while_suspended(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        qid = (await agent.start_pending(single("first"), single("second")))["questionnaireId"]
        q = await a.wait_for("question")
        await a.answer(q, ["staging"])
        q = await a.wait_for("question", where=lambda f: f["index"] == 1)
        await a.clarify(q, "hm?")
        suspended = await a.wait_for("suspended")
        await b.wait_for("suspended")
        await a.cancel(suspended)
        for client in (a, b):
            closed = await client.wait_for("closed")
            assert closed == {
                "type": "closed",
                "questionnaireId": qid,
                "status": "cancelled",
                "reason": "user_cancelled",
            }
            await client.wait_for("idle")
    result = await agent.outcome(qid)
    assert result.marker == "QUESTIONNAIRE_CANCELLED"
    assert result.details["cancellationReason"] == "user_cancelled"
    assert result.details["answers"] == [{"questionId": "first", "selectedOptionIds": ["staging"]}]
    error(await agent.resume(qid, 1, "late"), 409, "not_awaiting_clarification")


async def test_abort_while_suspended(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.clarify(await p.wait_for("question"), "hm?")
        await p.wait_for("suspended")
        result = tool_result(await agent.delete(qid))
        assert result.details["cancellationReason"] == "aborted"
        closed = await p.wait_for("closed")
        assert closed["reason"] == "aborted"
