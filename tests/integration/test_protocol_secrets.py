"""docs/protocol.md, "Pasted secrets": a draft, answer or clarify frame whose Other or
clarification text looks like a credential is refused with ``looks_like_secret`` and changes
nothing, unless it carries ``"confirmedNotSecret": true``; the text never reaches the logs.
On one memory broker, and across two brokers on one Redis."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.clients import JSON, MSGPACK, barrier, frames_since, person
from tests.helpers.protocol import Agent, Deployment, pending
from tests.helpers.samples import multi, single

# Fabricated, and assembled here so that no scanner mistakes this file for a leak.
GITHUB_TOKEN = "ghp_" + "Zr4mQ8vNc2Lx7Tb1Wk9Hs3Jd6Fp0Ya5GeR2u"
PASSWORD_LINE = "DB_PASSWORD=" + "Wq7!zR2mK9"


def _command(kind: str, q: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"type": kind, "questionnaireId": q["questionnaireId"], "step": q["step"], **fields}


@pytest.mark.parametrize("subprotocol", [JSON, MSGPACK], ids=["json", "msgpack"])
async def test_an_answer_with_a_token_in_other_is_refused_and_changes_nothing(
    deployment: Deployment, agent: Agent, sid: str, subprotocol: str
) -> None:
    async with person(deployment.client_ws_url, sid, subprotocol=subprotocol) as p:
        qid = (await agent.start_pending(single("db")))["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, [], other=f"use {GITHUB_TOKEN}", ref="r-1")
        err = await p.wait_for("error")
        assert err == {
            "type": "error",
            "code": "looks_like_secret",
            "message": err["message"],
            "ref": "r-1",
            "rule": "github_token",
            "field": "other",
        }
        assert "GitHub token" in err["message"] and GITHUB_TOKEN not in err["message"]
        await barrier(p)
        pending(await agent.get(qid))  # still with the person
        await p.answer(q, [], other="Postgres 16")  # the same step still takes an answer
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["answers"] == [{"questionId": "db", "selectedOptionIds": [], "other": "Postgres 16"}]


async def test_a_confirmed_answer_reaches_the_agent_as_typed(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single("db")))["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, [], other=PASSWORD_LINE, confirmedNotSecret=True)
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["answers"][0]["other"] == PASSWORD_LINE


async def test_a_draft_with_a_secret_is_refused_and_never_shown_to_other_clients(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p, person(deployment.other_ws_url, sid) as watcher:
        await agent.start_pending(multi("checks"))
        q = await p.wait_for("question")
        await watcher.wait_for("question")
        mark = len(watcher.received)
        await p.send(_command("draft", q, selectedOptionIds=["unit"], other=PASSWORD_LINE, ref=3))
        err = await p.wait_for("error")
        assert (err["code"], err["rule"], err["field"], err["ref"]) == (
            "looks_like_secret",
            "secret_assignment",
            "other",
            3,
        )
        await p.draft(q, ["e2e"])  # a later draft goes through, and is the first the watcher sees
        echo = await watcher.wait_for("question", where=lambda f: f["draft"] is not None)
        assert echo["draft"] == {"selectedOptionIds": ["e2e"]}
        assert all(f.get("draft") is None for f in frames_since(watcher, mark, "question")[:-1])
        await p.send(_command("draft", q, selectedOptionIds=[], other=PASSWORD_LINE, confirmedNotSecret=True))
        confirmed = await watcher.wait_for("question", where=lambda f: (f["draft"] or {}).get("other") is not None)
        assert confirmed["draft"]["other"] == PASSWORD_LINE


@pytest.mark.parametrize("where", ["request", "draft.other"])
async def test_a_clarification_with_a_secret_is_refused_and_the_questionnaire_stays_open(
    deployment: Deployment, agent: Agent, sid: str, where: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(multi("checks")))["questionnaireId"]
        q = await p.wait_for("question")
        if where == "request":
            frame = _command("clarify", q, request=f"is this right? {GITHUB_TOKEN}")
        else:
            frame = _command("clarify", q, request="Why?", draft={"selectedOptionIds": [], "other": GITHUB_TOKEN})
        await p.send(frame)
        err = await p.wait_for("error")
        assert (err["code"], err["field"]) == ("looks_like_secret", where)
        await barrier(p)
        pending(await agent.get(qid))
        await p.send({**frame, "confirmedNotSecret": True})
        await p.wait_for("suspended")
    result = await agent.outcome(qid)
    assert result.status == "needs_clarification"


async def test_a_confirmation_that_is_not_a_boolean_is_a_bad_frame(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single("db"))
        q = await p.wait_for("question")
        await p.answer(q, [], other="Postgres", confirmedNotSecret="yes")
        assert (await p.wait_for("error"))["code"] == "bad_frame"


async def test_refused_secrets_never_reach_the_logs(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single("db"))
        q = await p.wait_for("question")
        await p.answer(q, [], other=GITHUB_TOKEN)
        assert (await p.wait_for("error"))["code"] == "looks_like_secret"
        await p.send(_command("clarify", q, request=PASSWORD_LINE))
        assert (await p.wait_for("error"))["code"] == "looks_like_secret"
        await barrier(p)
    logs = deployment.logs()
    assert logs.strip()
    assert GITHUB_TOKEN[4:] not in logs and "Wq7!zR2mK9" not in logs
