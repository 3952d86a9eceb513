"""docs/protocol.md, "State": answers, Other texts and clarification texts never appear in
logs. The deployment's brokers run at QBROKER_LOG_LEVEL=debug (tests/helpers/processes.py)."""

from __future__ import annotations

import json

from tests.helpers.clients import person
from tests.helpers.protocol import Agent, Deployment, error, pending
from tests.helpers.samples import multi, single

SECRETS = {
    "other": "SECRET-OTHER-7f3a",
    "multi_other": "SECRET-MULTI-OTHER-19c4",
    "draft": "SECRET-DRAFT-OTHER-2b8e",
    "clarify_draft": "SECRET-CLARIFY-DRAFT-77aa",
    "request": "SECRET-CLARIFICATION-REQUEST-c0de",
    "response": "SECRET-CLARIFICATION-RESPONSE-d00d",
    "refused_other": "SECRET-REFUSED-OTHER-5e5e",
    "too_long": "SECRET-TOO-LONG-OTHER-9a9a",
    "bad_frame": "SECRET-BAD-FRAME-VALUE-4c4c",
    "refused_response": "SECRET-REFUSED-RESPONSE-8f8f",
    "cancelled_other": "SECRET-CANCELLED-RUN-OTHER-3d3d",
    "option": "secret-option-id-6a6a",
}


async def test_no_answer_or_clarification_text_reaches_the_logs(deployment: Deployment, agent: Agent, sid: str) -> None:
    s = SECRETS
    async with person(deployment.client_ws_url, sid) as p, person(deployment.other_ws_url, sid) as watcher:
        qid = (
            await agent.start_pending(
                single("first"),
                single("strict", ("plain", s["option"]), allowOther=False),
                multi("checks"),
            )
        )["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, [], other=s["other"])
        q = await p.wait_for("question", where=lambda f: f["index"] == 1)
        # Refused commands carrying secrets: wrong Other, malformed frame.
        await p.answer(q, [], other=s["refused_other"])
        assert (await p.wait_for("error"))["code"] == "other_not_allowed"
        await p.send(
            {
                "type": "answer",
                "questionnaireId": qid,
                "step": q["step"],
                "questionId": "strict",
                "selectedOptionIds": [s["option"]],
                "secret": s["bad_frame"],
            }
        )
        assert (await p.wait_for("error"))["code"] == "bad_frame"
        await p.answer(q, [s["option"]])
        q = await p.wait_for("question", where=lambda f: f["index"] == 2)
        await p.answer(q, ["unit"], other=s["too_long"] + "x" * 2001)
        assert (await p.wait_for("error"))["code"] == "text_too_long"
        await p.draft(q, ["unit"], other=s["draft"])
        await watcher.wait_for("question", where=lambda f: (f["draft"] or {}).get("other") == s["draft"])
        await p.clarify(q, s["request"], {"selectedOptionIds": ["e2e"], "other": s["clarify_draft"]})
        await p.wait_for("suspended")
        await agent.outcome(qid)
        error(await agent.resume(qid, 1, s["refused_response"] + "r" * 1001), 400, "invalid_arguments")
        pending(await agent.resume(qid, 1, s["response"]))
        q = await p.wait_for("question")
        await p.answer(q, ["e2e"], other=s["multi_other"])
        await p.wait_for("closed")
        result = await agent.outcome(qid)
        assert result.details["answers"][0]["other"] == s["other"]
        # A second questionnaire, cancelled by the person with an Other in its draft.
        qid2 = (await agent.start_pending(multi()))["questionnaireId"]
        q = await p.wait_for("question", where=lambda f: f["questionnaireId"] == qid2)
        await p.draft(q, [], other=s["cancelled_other"])
        await p.wait_for("question", where=lambda f: f["draft"] is not None)
        await p.cancel(q)
        await p.wait_for("closed")
        await agent.outcome(qid2)
    logs = deployment.logs()
    assert logs.strip(), "the brokers wrote no log at all: the check below would prove nothing"
    outcomes = [line for line in logs.splitlines() if "questionnaire outcome" in line and sid in line]
    # (ids and codes only: an operator can follow each questionnaire to its end)
    assert [(_field(line, "status"), _field(line, "reason")) for line in outcomes] == [
        ("needs_clarification", ""),
        ("completed", ""),
        ("cancelled", "user_cancelled"),
    ], outcomes
    leaked = {name: text for name, text in SECRETS.items() if text.lower() in logs.lower()}
    assert not leaked, f"secret texts found in the broker log: {sorted(leaked)}"


def _field(line: str, name: str) -> object:
    return json.loads(line)[name]
