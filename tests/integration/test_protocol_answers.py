"""docs/protocol.md, "Client protocol": answer validation (each error code), ``step`` and
``stale_step``, and drafts (persisted, shown to every client, last write wins)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.clients import barrier, frames_since, person
from tests.helpers.protocol import Agent, Deployment, pending
from tests.helpers.samples import multi, single

ABC = ("a", "b", "c")

# (question, selectedOptionIds, other, expected error code)
REFUSED: dict[str, tuple[dict[str, Any], list[str], str | None, str]] = {
    "single with two options": (single("s", ABC), ["a", "b"], None, "invalid_answer"),
    "single with nothing": (single("s", ABC), [], None, "invalid_answer"),
    "single with option and other": (single("s", ABC), ["a"], "also", "invalid_answer"),
    "single with blank other only": (single("s", ABC), [], "   ", "invalid_answer"),
    "duplicate option ids": (multi("m", ABC), ["a", "a"], None, "invalid_answer"),
    "unknown option (single)": (single("s", ABC), ["z"], None, "unknown_option"),
    "unknown option (multi)": (multi("m", ABC), ["a", "z"], None, "unknown_option"),
    "other not allowed (single)": (single("s", ABC, allowOther=False), [], "mine", "other_not_allowed"),
    "other not allowed (multi)": (multi("m", ABC, allowOther=False), ["a"], "mine", "other_not_allowed"),
    "below min": (multi("m", ABC, minSelections=2), ["a"], None, "below_min_selections"),
    "below min, empty": (multi("m", ABC, minSelections=1), [], None, "below_min_selections"),
    "above max": (multi("m", ABC, maxSelections=2), ["a", "b", "c"], None, "above_max_selections"),
    "above max counting other": (multi("m", ABC, maxSelections=2), ["a", "b"], "extra", "above_max_selections"),
    "other too long (single)": (single("s", ABC), [], "x" * 2001, "text_too_long"),
    "other too long (multi)": (multi("m", ABC), ["a"], "x" * 2001, "text_too_long"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
async def test_refused_answers_change_nothing(
    deployment: Deployment, agent: Agent, sid: str, case: tuple[dict[str, Any], list[str], str | None, str]
) -> None:
    question, selected, other, code = case
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(question))["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, selected, other, ref="r-1")
        err = await p.wait_for("error")
        assert err["code"] == code, err
        assert err["ref"] == "r-1"
        await barrier(p)
        # The same step still takes a valid answer: the refused one changed nothing.
        valid = ["a", "b"] if question.get("minSelections") == 2 else ["a"]
        await p.answer(q, valid)
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["answers"] == [{"questionId": question["id"], "selectedOptionIds": valid}]


ACCEPTED: dict[str, tuple[dict[str, Any], list[str], str | None, dict[str, Any]]] = {
    "single option": (single("s", ABC), ["b"], None, {"selectedOptionIds": ["b"]}),
    "single other only, trimmed": (single("s", ABC), [], "  mine ", {"selectedOptionIds": [], "other": "mine"}),
    "multi empty with min 0": (multi("m", ABC), [], None, {"selectedOptionIds": []}),
    "multi declared order": (multi("m", ABC), ["c", "a"], None, {"selectedOptionIds": ["a", "c"]}),
    "multi other counts toward min": (
        multi("m", ABC, minSelections=2),
        ["b"],
        "more",
        {"selectedOptionIds": ["b"], "other": "more"},
    ),
    "multi at max": (multi("m", ABC, maxSelections=2), ["a", "c"], None, {"selectedOptionIds": ["a", "c"]}),
    "multi all options plus other": (
        multi("m", ABC, minSelections=4, maxSelections=4),
        ["a", "b", "c"],
        "d",
        {"selectedOptionIds": ["a", "b", "c"], "other": "d"},
    ),
    "other of 2000 characters": (single("s", ABC), [], "y" * 2000, {"selectedOptionIds": [], "other": "y" * 2000}),
}


@pytest.mark.parametrize("case", list(ACCEPTED.values()), ids=list(ACCEPTED))
async def test_accepted_answers_are_recorded_normalized(
    deployment: Deployment,
    agent: Agent,
    sid: str,
    case: tuple[dict[str, Any], list[str], str | None, dict[str, Any]],
) -> None:
    question, selected, other, expected = case
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(question))["questionnaireId"]
        await p.answer(await p.wait_for("question"), selected, other)
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["answers"] == [{"questionId": question["id"], **expected}]


async def test_answer_naming_another_question_is_invalid(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single("first"), single("second"))
        q = await p.wait_for("question")
        await p.send(
            {
                "type": "answer",
                "questionnaireId": q["questionnaireId"],
                "step": q["step"],
                "questionId": "second",
                "selectedOptionIds": ["staging"],
            }
        )
        assert (await p.wait_for("error"))["code"] == "invalid_answer"


# --- step / stale_step ----------------------------------------------------------------------


@pytest.mark.parametrize("delta", [-1, 1, 10])
async def test_wrong_step_is_stale_step_then_a_fresh_question(
    deployment: Deployment, agent: Agent, sid: str, delta: int
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single("first"), single("second")))["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, ["staging"])
        q = await p.wait_for("question", where=lambda f: f["index"] == 1)
        assert q["step"] == 1
        await p.answer({**q, "step": q["step"] + delta}, ["production"], ref="stale")
        err = await p.wait_for("error")
        assert err["code"] == "stale_step" and err["ref"] == "stale"
        fresh = await p.wait_for("question", "suspended", "idle")
        assert fresh == q, "after stale_step the broker sends the current question again"
        await p.answer(fresh, ["production"])
        await p.wait_for("closed")
    assert [a["selectedOptionIds"] for a in (await agent.outcome(qid)).details["answers"]] == [
        ["staging"],
        ["production"],
    ]


async def test_command_for_another_questionnaire_is_stale_step(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single())
        q = await p.wait_for("question")
        for frame in (
            {
                "type": "answer",
                "questionnaireId": "not-this-one",
                "step": q["step"],
                "questionId": "target",
                "selectedOptionIds": ["staging"],
            },
            {"type": "draft", "questionnaireId": "not-this-one", "step": q["step"], "selectedOptionIds": []},
            {"type": "clarify", "questionnaireId": "not-this-one", "step": q["step"], "request": "why?"},
            {"type": "cancel", "questionnaireId": "not-this-one", "step": q["step"]},
        ):
            await p.send(frame)
            assert (await p.wait_for("error"))["code"] == "stale_step"
            assert await p.wait_for("question", "suspended", "idle") == q


async def test_commands_after_the_end_are_stale_step_then_idle(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single())
        q = await p.wait_for("question")
        await p.answer(q, ["staging"])
        await p.wait_for("closed")
        await p.wait_for("idle")
        await p.answer(q, ["production"])
        assert (await p.wait_for("error"))["code"] == "stale_step"
        assert await p.wait_for("question", "suspended", "idle") == {"type": "idle"}


async def test_draft_does_not_advance_the_step(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(multi())
        q = await p.wait_for("question")
        await p.draft(q, ["unit"])
        updated = await p.wait_for("question", where=lambda f: f["draft"] is not None)
        assert updated["step"] == q["step"]
        assert pending(await agent.get(q["questionnaireId"]))["step"] == q["step"]


# --- drafts -----------------------------------------------------------------------------------


async def test_draft_is_persisted_and_shown_to_every_client(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        qid = (await agent.start_pending(single("first"), multi("checks")))["questionnaireId"]
        q = await a.wait_for("question")
        await b.wait_for("question")
        await a.answer(q, ["staging"])
        q = await a.wait_for("question", where=lambda f: f["index"] == 1)
        await b.wait_for("question", where=lambda f: f["index"] == 1)
        await a.draft(q, ["lint", "unit"], other="draft text")
        want = {"selectedOptionIds": ["unit", "lint"], "other": "draft text"}
        for client in (a, b):
            shown = await client.wait_for("question", where=lambda f: f["draft"] is not None)
            assert shown["draft"] == want
            assert shown["step"] == q["step"]
        # Last write wins, from any client.
        await b.draft(q, ["e2e"])
        for client in (a, b):
            shown = await client.wait_for("question", where=lambda f: f["draft"] == {"selectedOptionIds": ["e2e"]})
            assert shown["step"] == q["step"]
        # A newcomer sees it too.
        async with person(deployment.client_ws_url, sid) as c:
            current = await c.wait_for("question")
            assert current["draft"] == {"selectedOptionIds": ["e2e"]}
            assert current["index"] == 1
        # Committing the answer clears the draft.
        await a.answer(q, ["e2e", "lint"])
        await a.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["draftAnswer"] is None
    assert result.details["answers"][1] == {"questionId": "checks", "selectedOptionIds": ["e2e", "lint"]}


async def test_draft_shows_in_details_while_pending(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(multi()))["questionnaireId"]
        q = await p.wait_for("question")
        await p.draft(q, ["e2e"])
        await p.wait_for("question", where=lambda f: f["draft"] is not None)
        result = (await agent.delete(qid)).json()
    assert result["details"]["draftAnswer"] == {"selectedOptionIds": ["e2e"]}


@pytest.mark.parametrize(
    "selected,other,code",
    [(["zzz"], None, "unknown_option"), (["a"], "x" * 2001, "text_too_long")],
    ids=["unknown option", "other too long"],
)
async def test_invalid_draft_is_refused(
    deployment: Deployment, agent: Agent, sid: str, selected: list[str], other: str | None, code: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(multi("m", ABC))
        q = await p.wait_for("question")
        mark = len(p.received)
        await p.draft(q, selected, other)
        assert (await p.wait_for("error"))["code"] == code
        await barrier(p)
        assert not [f for f in frames_since(p, mark, "question") if f["draft"] is not None]


async def test_draft_other_not_allowed(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(multi("m", ABC, allowOther=False))
        q = await p.wait_for("question")
        await p.draft(q, ["a"], other="nope")
        assert (await p.wait_for("error"))["code"] == "other_not_allowed"
