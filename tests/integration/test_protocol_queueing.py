"""docs/protocol.md: a session shows one questionnaire at a time (the oldest in progress), all
clients of the session get every transition, and of two racing answers exactly one wins."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.helpers.clients import ScriptedClient, barrier, frames_since, person
from tests.helpers.protocol import Agent, Deployment, tool_result
from tests.helpers.samples import multi, new_sid, single


async def test_one_questionnaire_at_a_time_oldest_first(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.wait_for("idle")
        ids = [(await agent.start_pending(single(f"q{n}")))["questionnaireId"] for n in range(3)]
        q = await p.wait_for("question")
        assert q["questionnaireId"] == ids[0]
        await barrier(p)
        shown = {f["questionnaireId"] for f in p.received if f["type"] == "question"}
        assert shown == {ids[0]}, "only the oldest questionnaire is shown"
        # Commands naming a queued one are stale: it is not the one shown.
        await p.send(
            {
                "type": "answer",
                "questionnaireId": ids[1],
                "step": 0,
                "questionId": "q1",
                "selectedOptionIds": ["staging"],
            }
        )
        assert (await p.wait_for("error"))["code"] == "stale_step"
        assert (await p.wait_for("question", "suspended", "idle"))["questionnaireId"] == ids[0]
        # A newcomer sees the same one.
        async with person(deployment.other_ws_url, sid) as late:
            assert (await late.wait_for("question"))["questionnaireId"] == ids[0]
        # Finishing it closes it, then shows the next.
        await p.answer(q, ["staging"])
        closed = await p.wait_for()
        assert closed["type"] == "closed" and closed["questionnaireId"] == ids[0] and closed["status"] == "completed"
        nxt = await p.wait_for()
        assert nxt["type"] == "question" and nxt["questionnaireId"] == ids[1]
        await p.cancel(nxt)
        closed = await p.wait_for()
        assert closed == {
            "type": "closed",
            "questionnaireId": ids[1],
            "status": "cancelled",
            "reason": "user_cancelled",
        }
        last = await p.wait_for()
        assert last["type"] == "question" and last["questionnaireId"] == ids[2]
        tool_result(await agent.delete(ids[2]))
        closed = await p.wait_for()
        assert closed == {"type": "closed", "questionnaireId": ids[2], "status": "cancelled", "reason": "aborted"}
        assert await p.wait_for() == {"type": "idle"}
    statuses = [(await agent.outcome(i)).details.get("cancellationReason", "completed") for i in ids]
    assert statuses == ["completed", "user_cancelled", "aborted"]


async def test_aborting_a_queued_questionnaire_leaves_the_shown_one(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        first = (await agent.start_pending(single()))["questionnaireId"]
        second = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        assert q["questionnaireId"] == first
        tool_result(await agent.delete(second))
        await p.answer(q, ["staging"])
        await p.wait_for("closed")
        assert await p.wait_for("question", "idle") == {"type": "idle"}


def _transitions(client: ScriptedClient) -> list[tuple[Any, ...]]:
    """The state transitions a client saw: question steps, suspensions, closes, idles."""
    seen: list[tuple[Any, ...]] = []
    for f in client.received:
        if f["type"] == "question":
            key: tuple[Any, ...] = ("question", f["questionnaireId"], f["step"], f["revision"], f["index"])
        elif f["type"] == "suspended":
            key = ("suspended", f["questionnaireId"], f["revision"])
        elif f["type"] == "closed":
            key = ("closed", f["questionnaireId"], f["status"], f.get("reason"))
        elif f["type"] == "idle":
            key = ("idle",)
        else:
            continue
        if not seen or seen[-1] != key:
            seen.append(key)
    return seen


async def test_every_client_sees_every_transition(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with (
        person(deployment.client_ws_url, sid, kind="web") as a,
        person(deployment.other_ws_url, sid, kind="tui") as b,
        person(deployment.client_ws_url, sid, kind="bot") as c,
    ):
        clients = (a, b, c)
        for client in clients:
            await client.wait_for("idle")
        qid = (await agent.start_pending(single("one"), multi("two"), single("three")))["questionnaireId"]

        async def everyone(*types: str, **kw: Any) -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(x.wait_for(*types, **kw) for x in clients)))

        q = (await everyone("question"))[0]
        await a.answer(q, ["staging"])  # from the web client
        q = (await everyone("question", where=lambda f: f["index"] == 1))[1]
        await b.clarify(q, "which?")  # from the TUI
        await everyone("suspended")
        await agent.resume(qid, 1, "any")
        q = (await everyone("question", where=lambda f: f["revision"] == 1))[2]
        await c.answer(q, ["unit"])  # from the bot
        q = (await everyone("question", where=lambda f: f["index"] == 2))[0]
        await b.answer(q, ["production"])
        await everyone("closed")
        await everyone("idle")
        await barrier(*clients)
    expected = _transitions(a)
    assert [t[0] for t in expected] == [
        "idle",
        "question",
        "question",
        "suspended",
        "question",
        "question",
        "closed",
        "idle",
    ]
    assert _transitions(b) == expected
    assert _transitions(c) == expected


async def _race(a: ScriptedClient, b: ScriptedClient, q: dict[str, Any], choice_a: str, choice_b: str) -> str:
    """Both clients answer ``q`` at once; returns the winner's choice."""
    marks = (len(a.received), len(b.received))
    await asyncio.gather(a.answer(q, [choice_a]), b.answer(q, [choice_b]))
    await barrier(a, b)  # each client's own answer has been handled when its pong arrives
    errors = [frames_since(a, marks[0], "error"), frames_since(b, marks[1], "error")]
    assert sorted(len(e) for e in errors) == [0, 1], f"exactly one answer must lose: {errors}"
    loser_errors = errors[0] or errors[1]
    assert loser_errors[0]["code"] == "stale_step", loser_errors
    return choice_b if errors[0] else choice_a


async def _shown(client: ScriptedClient, index: int) -> dict[str, Any]:
    """The question at ``index``: already received (a barrier may have read past it) or next."""
    for f in reversed(client.received):
        if f["type"] == "question" and f["index"] == index:
            return f
    return await client.wait_for("question", where=lambda f: f["index"] == index)


async def test_racing_answers_exactly_one_wins(deployment: Deployment, agent: Agent, sid: str) -> None:
    opts = ("a", "b")
    questions = [single(f"q{n}", opts) for n in range(4)]
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        qid = (await agent.start_pending(*questions))["questionnaireId"]
        winners = []
        for index in range(4):
            q = await _shown(a, index)
            await _shown(b, index)
            winners.append(await _race(a, b, q, "a", "b"))
        for client in (a, b):
            assert any(f["type"] == "closed" for f in client.received) or await client.wait_for("closed")
    result = await agent.outcome(qid)
    assert [x["selectedOptionIds"] for x in result.details["answers"]] == [[w] for w in winners]


async def test_racing_answer_and_cancel_exactly_one_wins(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        qid = (await agent.start_pending(single(), single("second")))["questionnaireId"]
        q = await a.wait_for("question")
        await b.wait_for("question")
        marks = (len(a.received), len(b.received))
        await asyncio.gather(a.answer(q, ["staging"]), b.cancel(q))
        await barrier(a, b)
        errors = frames_since(a, marks[0], "error") + frames_since(b, marks[1], "error")
        assert [e["code"] for e in errors] == ["stale_step"], errors
    response = await agent.get(qid)
    if response.status_code == 200:
        assert tool_result(response).details["cancellationReason"] == "user_cancelled"
    else:
        assert response.status_code == 202, response.text
        tool_result(await agent.delete(qid))


async def test_cancel_reaches_every_client_and_the_agent(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        call = asyncio.create_task(agent.start(single("first"), multi("second"), wait=30))
        q = await a.wait_for("question")
        await a.answer(q, ["production"])
        q = await b.wait_for("question", where=lambda f: f["index"] == 1)
        await b.draft(q, ["unit"])
        await a.wait_for("question", where=lambda f: f["draft"] is not None)
        await b.cancel(q)
        for client in (a, b):
            closed = await client.wait_for("closed")
            assert closed["status"] == "cancelled" and closed["reason"] == "user_cancelled"
            await client.wait_for("idle")
        result = tool_result(await asyncio.wait_for(call, 15))
    assert result.marker == "QUESTIONNAIRE_CANCELLED"
    assert result.details["cancellationReason"] == "user_cancelled"
    assert result.details["answers"] == [{"questionId": "first", "selectedOptionIds": ["production"]}]
    assert result.details["currentQuestionIndex"] == 1
    assert (await agent.get(result.questionnaire_id)).json() == result.body


async def test_a_questionnaire_started_right_after_welcome_is_shown_at_once(deployment: Deployment) -> None:
    """Every client gets every ``question``: promptly, not only when some periodic
    re-check comes round. Repeated, alternating processes, because a race between a
    client's join and the first notice shows only now and then."""
    delays: list[float] = []
    for attempt in range(60):
        sid = new_sid()
        url = deployment.client_ws_url if attempt % 2 == 0 else deployment.other_ws_url
        async with Agent(deployment.agent_url, sid) as agent, person(url, sid) as p:
            started = time.monotonic()
            qid = (await agent.start_pending(single()))["questionnaireId"]
            await p.wait_for("question")
            delays.append(round(time.monotonic() - started, 3))
            tool_result(await agent.delete(qid))
        if delays[-1] >= 1.0:
            break
    assert max(delays) < 1.0, f"seconds from start to the client's question, per attempt: {delays}"
