"""docs/protocol.md, "Agent API": start/resume/GET/DELETE, statuses, result shapes, wait,
Idempotency-Key, dropped connections, normalization and validation of the tool input."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.helpers.clients import frames_since, person
from tests.helpers.processes import token
from tests.helpers.protocol import Agent, Deployment, error, pending, tool_result
from tests.helpers.samples import multi, new_sid, resume_body, single, start_body

# --- 202 / 200 shapes -------------------------------------------------------------------


async def test_start_with_wait_zero_answers_202_pending(deployment: Deployment, agent: Agent) -> None:
    started = time.monotonic()
    body = pending(await agent.start(single(), wait=0))
    assert time.monotonic() - started < 3
    assert body["revision"] == 0
    assert body["step"] == 0


async def test_completed_result_shape_text_and_details(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.wait_for("idle")
        call = asyncio.create_task(
            agent.start(
                single("target", allowOther=False),
                multi("checks", options=("unit", "e2e", "lint"), minSelections=1),
                wait=30,
            )
        )
        q = await p.wait_for("question")
        await p.answer(q, ["production"])
        q = await p.wait_for("question", where=lambda f: f["index"] == 1)
        started = time.monotonic()
        # Declared order is unit, e2e, lint: the result lists them so, whatever the click order.
        await p.answer(q, ["lint", "unit"], other="  also fuzzing  ")
        closed = await p.wait_for("closed")
        result = tool_result(await asyncio.wait_for(call, 15))
        assert time.monotonic() - started < 5, "the waiting call must return as soon as there is an outcome"
    assert closed["questionnaireId"] == result.questionnaire_id
    assert closed["status"] == "completed" and closed.get("reason") is None, closed
    assert result.marker == "QUESTIONNAIRE_COMPLETED"
    assert result.revision == 0
    assert "target: optionIds=[production]" in result.lines
    assert 'checks: optionIds=[unit, lint] other="also fuzzing"' in result.lines
    d = result.details
    assert d["status"] == "completed"
    assert d["answers"] == [
        {"questionId": "target", "selectedOptionIds": ["production"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "lint"], "other": "also fuzzing"},
    ]
    assert d["draftAnswer"] is None
    assert d["clarifications"] == []
    assert isinstance(d["currentQuestionIndex"], int)
    assert [q["id"] for q in d["questions"]] == ["target", "checks"]
    assert d["questions"][0]["allowOther"] is False
    assert d["questions"][1]["minSelections"] == 1


async def test_single_answered_with_other_only(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single("target")))["questionnaireId"]
        q = await p.wait_for("question")
        await p.answer(q, [], other="  canary  ")
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.details["answers"] == [{"questionId": "target", "selectedOptionIds": [], "other": "canary"}]
    assert 'target: optionIds=[] other="canary"' in result.lines


# --- normalization and validation -------------------------------------------------------


async def test_start_normalizes_the_questions(deployment: Deployment, agent: Agent, sid: str) -> None:
    raw = [
        {
            "id": "  target  ",
            "prompt": "  Where to?  ",
            "type": "single",
            "options": [{"id": " staging "}, {"id": "prod", "label": "  Production ", "description": " window "}],
        },
        {"id": "checks", "label": "Checks", "prompt": "Which?", "type": "multi", "options": [{"id": "unit"}]},
    ]
    async with person(deployment.client_ws_url, sid) as p:
        qid = pending(await agent.post({"action": "start", "questions": raw}))["questionnaireId"]
        shown = (await p.wait_for("question"))["question"]
    details = tool_result(await agent.delete(qid)).details
    first, second = details["questions"]
    assert shown == first
    assert first["id"] == "target" and first["label"] == "target", "ids are trimmed; label defaults to the id"
    assert first["prompt"] == "Where to?"
    assert first["allowOther"] is True, "allowOther defaults to true"
    assert "minSelections" not in first and "maxSelections" not in first, "selection bounds are multi-only"
    assert first["options"][0] == {"id": "staging", "label": "staging"}
    assert first["options"][1] == {"id": "prod", "label": "Production", "description": "window"}
    assert second["minSelections"] == 0, "minSelections defaults to 0"
    assert second.get("maxSelections") is None


def _q(**extra: Any) -> dict[str, Any]:
    return {**single(), **extra}


def _m(**extra: Any) -> dict[str, Any]:
    return {**multi(), **extra}


def _opts(n: int) -> list[dict[str, str]]:
    return [{"id": f"o{i}"} for i in range(n)]


INVALID_INPUTS: dict[str, Any] = {
    "not an object": [1, 2],
    "no action": {"questions": [single()]},
    "unknown action": {"action": "ask", "questions": [single()]},
    "start without questions": {"action": "start"},
    "zero questions": {"action": "start", "questions": []},
    "21 questions": {"action": "start", "questions": [single(f"q{i}") for i in range(21)]},
    "questions not a list": {"action": "start", "questions": {"id": "x"}},
    "start with extra key": {**start_body(single()), "questionnaireId": "x"},
    "unknown question key": start_body(_q(required=True)),
    "unknown option key": start_body(_q(options=[{"id": "a", "value": 1}])),
    "zero options": start_body(_q(options=[])),
    "51 options": start_body(_q(options=_opts(51))),
    "empty id after trim": start_body(_q(id="   ")),
    "missing id": start_body({k: v for k, v in single().items() if k != "id"}),
    "empty option id": start_body(_q(options=[{"id": " "}])),
    "id too long": start_body(_q(id="i" * 129)),
    "option id too long": start_body(_q(options=[{"id": "o" * 129}])),
    "label too long": start_body(_q(label="l" * 201)),
    "empty label": start_body(_q(label="  ")),
    "prompt too long": start_body(_q(prompt="p" * 2001)),
    "description too long": start_body(_q(options=[{"id": "a", "description": "d" * 501}])),
    "duplicate question ids after trim": start_body(single("dup"), single(" dup ")),
    "duplicate option ids after trim": start_body(_q(options=[{"id": "a"}, {"id": " a"}])),
    "bad type": start_body(_q(type="ranking")),
    "minSelections on single": start_body(_q(minSelections=0)),
    "maxSelections on single": start_body(_q(maxSelections=1)),
    "maxSelections zero": start_body(_m(maxSelections=0)),
    "min above max": start_body(_m(minSelections=2, maxSelections=1)),
    "max above options+other": start_body(_m(maxSelections=5)),
    "max above options without other": start_body(_m(allowOther=False, maxSelections=4)),
    "min above options+other": start_body(_m(minSelections=5)),
    "negative min": start_body(_m(minSelections=-1)),
    "non-integer max": start_body(_m(maxSelections=1.5)),
    "allowOther not a boolean": start_body(_q(allowOther="yes")),
    "resume with questions": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": 1,
        "clarificationResponse": "r",
        "questions": [single()],
    },
    "resume with unknown key": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": 1,
        "clarificationResponse": "r",
        "note": "n",
    },
    "resume without revision": {"action": "resume", "questionnaireId": "x", "clarificationResponse": "r"},
    "resume revision zero": {"action": "resume", "questionnaireId": "x", "revision": 0, "clarificationResponse": "r"},
    "resume revision string": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": "1",
        "clarificationResponse": "r",
    },
    "resume revision boolean": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": True,
        "clarificationResponse": "r",
    },
    "resume revision float": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": 1.5,
        "clarificationResponse": "r",
    },
    "resume empty response": {"action": "resume", "questionnaireId": "x", "revision": 1, "clarificationResponse": "  "},
    "resume response too long": {
        "action": "resume",
        "questionnaireId": "x",
        "revision": 1,
        "clarificationResponse": "r" * 1001,
    },
    "resume without questionnaireId": {"action": "resume", "revision": 1, "clarificationResponse": "r"},
}


@pytest.mark.parametrize("body", list(INVALID_INPUTS.values()), ids=list(INVALID_INPUTS))
async def test_invalid_tool_input_is_400_invalid_arguments(agent: Agent, body: Any) -> None:
    error(await agent.post(body, wait=0), 400, "invalid_arguments")


@pytest.mark.parametrize("raw", ["{not json", "", "null"], ids=["malformed", "empty", "null"])
async def test_body_that_is_not_a_json_object_is_400(agent: Agent, raw: str) -> None:
    error(await agent.post(raw, wait=0), 400, "invalid_arguments")


async def test_invalid_start_creates_nothing(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.wait_for("idle")
        error(await agent.start(_q(prompt="p" * 2001)), 400, "invalid_arguments")
        await p.ping()
        assert [f["type"] for f in p.received] == ["welcome", "idle", "pong"]


async def test_inputs_at_the_seed_limits_are_accepted(agent: Agent) -> None:
    questions = [single(f"q{i}") for i in range(19)]
    questions.append(
        {
            "id": "i" * 128,
            "label": "l" * 200,
            "prompt": "p" * 2000,
            "type": "multi",
            "options": [{"id": f"o{i}", "description": "d" * 500} for i in range(50)],
            "minSelections": 1,
            "maxSelections": 51,  # 50 options + Other
        }
    )
    qid = pending(await agent.post({"action": "start", "questions": questions}))["questionnaireId"]
    details = tool_result(await agent.delete(qid)).details
    assert len(details["questions"]) == 20
    assert details["questions"][-1]["maxSelections"] == 51


# --- wait -------------------------------------------------------------------------------


@pytest.mark.parametrize("wait", ["-1", "301", "abc", "nan", "inf", "1e9", ""])
async def test_wait_outside_0_to_300_is_400(agent: Agent, wait: str) -> None:
    error(await agent.start(single(), wait=wait), 400, "invalid_arguments")


async def test_wait_outside_bounds_on_get_is_400(agent: Agent) -> None:
    qid = (await agent.start_pending(single()))["questionnaireId"]
    error(await agent.get(qid, wait="301"), 400, "invalid_arguments")
    error(await agent.get(qid, wait="-0.5"), 400, "invalid_arguments")
    tool_result(await agent.delete(qid))


async def test_wait_300_is_accepted_and_returns_at_the_outcome(agent: Agent) -> None:
    qid = (await agent.start_pending(single()))["questionnaireId"]
    tool_result(await agent.delete(qid))
    started = time.monotonic()
    result = tool_result(await agent.get(qid, wait=300))
    assert time.monotonic() - started < 5
    assert result.details["cancellationReason"] == "aborted"


async def test_wait_bounds_how_long_the_call_blocks(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.wait_for("question")
        started = time.monotonic()
        body = pending(await agent.get(qid, wait=1.5))
        elapsed = time.monotonic() - started
        assert 1.2 <= elapsed < 6, elapsed
        assert body["questionnaireId"] == qid


# --- GET re-attach, DELETE abort, dropped connections -----------------------------------


async def test_get_reattaches_and_returns_the_same_outcome(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        first = await agent.start_pending(single())
        qid = first["questionnaireId"]
        again = pending(await agent.get(qid, wait=0))
        assert again == first
        q = await p.wait_for("question")
        waiting = asyncio.create_task(agent.get(qid, wait=20))
        await p.answer(q, ["staging"])
        result = tool_result(await asyncio.wait_for(waiting, 15))
    assert result.status == "completed"
    repeat = await agent.get(qid, wait=0)
    assert repeat.json() == result.body


async def test_unknown_questionnaire_is_404(agent: Agent) -> None:
    error(await agent.get("no-such-questionnaire", wait=0), 404, "unknown_questionnaire")
    error(await agent.delete("no-such-questionnaire"), 404, "unknown_questionnaire")
    error(await agent.resume("no-such-questionnaire", 1, "hi"), 404, "unknown_questionnaire")


async def test_questionnaire_of_another_session_is_not_visible(deployment: Deployment, agent: Agent) -> None:
    qid = (await agent.start_pending(single()))["questionnaireId"]
    async with Agent(deployment.agent_url, new_sid()) as stranger:
        error(await stranger.get(qid, wait=0), 404, "unknown_questionnaire")
        error(await stranger.delete(qid), 404, "unknown_questionnaire")
        error(await stranger.resume(qid, 1, "hi"), 404, "unknown_questionnaire")
    pending(await agent.get(qid, wait=0))  # untouched
    tool_result(await agent.delete(qid))


async def test_delete_aborts_and_every_client_sees_it(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as a, person(deployment.other_ws_url, sid) as b:
        qid = (await agent.start_pending(single(), single("second")))["questionnaireId"]
        q = await a.wait_for("question")
        await b.wait_for("question")
        await a.answer(q, ["staging"])
        await a.wait_for("question", where=lambda f: f["index"] == 1)
        waiting = asyncio.create_task(agent.get(qid, wait=20))
        result = tool_result(await agent.delete(qid))
        for client in (a, b):
            closed = await client.wait_for("closed")
            assert closed == {"type": "closed", "questionnaireId": qid, "status": "cancelled", "reason": "aborted"}
            await client.wait_for("idle")
        waited = tool_result(await asyncio.wait_for(waiting, 15))
    assert result.marker == "QUESTIONNAIRE_CANCELLED"
    assert result.details["cancellationReason"] == "aborted"
    assert result.details["answers"] == [{"questionId": "target", "selectedOptionIds": ["staging"]}]
    assert waited.body == result.body
    again = await agent.delete(qid)
    assert again.status_code == 200 and again.json() == result.body, "DELETE of a terminal one is unchanged"
    assert (await agent.get(qid, wait=0)).json() == result.body


async def test_delete_of_a_completed_questionnaire_returns_it_unchanged(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["staging"])
        await p.wait_for("closed")
    completed = await agent.outcome(qid)
    deleted = tool_result(await agent.delete(qid))
    assert deleted.status == "completed"
    assert deleted.body == completed.body


async def test_dropped_agent_connection_is_not_an_abort(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.wait_for("idle")
        with pytest.raises(httpx.ReadTimeout):
            await agent.post(start_body(single(), single("second")), wait=30, timeout=1.0)
        q = await p.wait_for("question")
        qid = q["questionnaireId"]
        await p.answer(q, ["production"])
        q = await p.wait_for("question", where=lambda f: f["index"] == 1)
        mark = len(p.received)
        # A second dropped call, this time a re-attach.
        with pytest.raises(httpx.ReadTimeout):
            await agent.get(qid, wait=30, timeout=0.5)
        await p.ping()
        assert not frames_since(p, mark, "closed"), p.received[mark:]
        pending(await agent.get(qid, wait=0))
        await p.answer(q, ["staging"])
        await p.wait_for("closed")
    result = await agent.outcome(qid)
    assert result.status == "completed"
    assert [a["selectedOptionIds"] for a in result.details["answers"]] == [["production"], ["staging"]]


# --- Idempotency-Key ----------------------------------------------------------------------


async def test_idempotency_key_returns_the_same_questionnaire(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        first = await agent.start_pending(single(), key="retry-1")
        second = await agent.start_pending(single(), key="retry-1")
        assert second["questionnaireId"] == first["questionnaireId"]
        other = await agent.start_pending(single(), key="retry-2")
        assert other["questionnaireId"] != first["questionnaireId"]
        unkeyed = await agent.start_pending(single())
        assert unkeyed["questionnaireId"] not in (first["questionnaireId"], other["questionnaireId"])
        # Only the first is shown; finishing it shows the second, never a duplicate.
        q = await p.wait_for("question")
        assert q["questionnaireId"] == first["questionnaireId"]
        await p.answer(q, ["staging"])
        await p.wait_for("closed")
        nxt = await p.wait_for("question")
        assert nxt["questionnaireId"] == other["questionnaireId"]
        # After the outcome the same key still names the same (now completed) questionnaire.
        retried = tool_result(await agent.start(single(), key="retry-1", wait=0))
        assert retried.questionnaire_id == first["questionnaireId"]
        assert retried.status == "completed"
        for qid in (other["questionnaireId"], unkeyed["questionnaireId"]):
            tool_result(await agent.delete(qid))


async def test_an_idempotency_key_reused_for_other_questions_is_refused(agent: Agent) -> None:
    # A retry repeats its call; other questions under a used key are a reused key, and
    # handing back the first questionnaire would answer the wrong questions.
    first = await agent.start_pending(single(), key="reused")
    message = error(await agent.start(multi(), key="reused", wait=0), 400, "invalid_arguments")
    assert f"already used in this session for questionnaire {first['questionnaireId']}" in message
    assert "questions differ" in message
    # The same questions again (even spelt with extra spaces) are a retry, as before.
    spaced = single()
    spaced["prompt"] = f"  {spaced['prompt']} "
    again = await agent.start_pending(spaced, key="reused")
    assert again["questionnaireId"] == first["questionnaireId"]
    tool_result(await agent.delete(first["questionnaireId"]))


async def test_idempotency_key_is_per_session(deployment: Deployment, agent: Agent) -> None:
    mine = await agent.start_pending(single(), key="shared-key")
    async with Agent(deployment.agent_url, new_sid()) as other_agent:
        theirs = await other_agent.start_pending(single(), key="shared-key")
        assert theirs["questionnaireId"] != mine["questionnaireId"]
        tool_result(await other_agent.delete(theirs["questionnaireId"]))
    tool_result(await agent.delete(mine["questionnaireId"]))


async def test_concurrent_retries_with_one_key_make_one_questionnaire(agent: Agent) -> None:
    responses = await asyncio.gather(*(agent.start(single(), key="burst", wait=0) for _ in range(5)))
    ids = {pending(r)["questionnaireId"] for r in responses}
    assert len(ids) == 1
    tool_result(await agent.delete(ids.pop()))


async def reattaching_start(agent: Agent, *questions: dict[str, Any], key: str | None = None) -> httpx.Response:
    extra = {"Idempotency-Key": key} if key is not None else {}
    return await agent.http.post(
        f"{agent.base_url}/v1/sessions/{agent.sid}/questionnaire",
        params={"wait": "0", "reattach": "true"},
        json=start_body(*questions),
        headers=agent.headers(extra),
    )


async def test_reattach_true_joins_an_identical_open_start_and_asks_anew_once_it_ended(agent: Agent) -> None:
    first = pending(await reattaching_start(agent, single()))
    again = pending(await reattaching_start(agent, single()))
    assert again["questionnaireId"] == first["questionnaireId"]
    other = pending(await reattaching_start(agent, multi()))
    assert other["questionnaireId"] != first["questionnaireId"]  # other questions: another questionnaire
    plain = pending(await agent.start(single(), wait=0))
    assert plain["questionnaireId"] != first["questionnaireId"]  # without reattach: a start is a start
    tool_result(await agent.delete(first["questionnaireId"]))
    after = pending(await reattaching_start(agent, single()))
    assert after["questionnaireId"] != first["questionnaireId"]  # the first one ended: asked again
    for qid in (after["questionnaireId"], other["questionnaireId"], plain["questionnaireId"]):
        tool_result(await agent.delete(qid))


async def test_reattach_takes_no_key_no_other_value_and_no_resume(agent: Agent) -> None:
    message = error(await reattaching_start(agent, single(), key="k1"), 400, "invalid_arguments")
    assert "send one" in message
    response = await agent.http.post(
        f"{agent.base_url}/v1/sessions/{agent.sid}/questionnaire",
        params={"wait": "0", "reattach": "1"},
        json=start_body(single()),
        headers=agent.headers(),
    )
    assert "reattach must be true" in error(response, 400, "invalid_arguments")
    response = await agent.http.post(
        f"{agent.base_url}/v1/sessions/{agent.sid}/questionnaire",
        params={"wait": "0", "reattach": "true"},
        json=resume_body("q", 1, "r"),
        headers=agent.headers(),
    )
    assert "not to a resume" in error(response, 400, "invalid_arguments")


# --- tokens ------------------------------------------------------------------------------


async def test_service_wide_agent_token_works_for_any_session(deployment: Deployment) -> None:
    wide = token("*", "agent")
    for sid in (new_sid(), new_sid()):
        async with Agent(deployment.agent_url, sid, wide) as agent:
            qid = (await agent.start_pending(single()))["questionnaireId"]
            pending(await agent.get(qid, wait=0))
            assert tool_result(await agent.delete(qid)).details["cancellationReason"] == "aborted"


async def test_health_endpoints(deployment: Deployment) -> None:
    async with httpx.AsyncClient() as http:
        for url in deployment.agent_urls:
            assert (await http.get(f"{url}/healthz")).status_code == 200
            assert (await http.get(f"{url}/readyz")).status_code == 200


def test_error_bodies_are_json(deployment: Deployment) -> None:
    response = httpx.post(
        f"{deployment.agent_url}/v1/sessions/{new_sid()}/questionnaire", content=json.dumps(start_body())
    )
    error(response, 401, "unauthorized")
    assert response.headers["content-type"].startswith("application/json")


# --- the HTTP surface: methods, headers, bodies that are not plain JSON ---------------------


def _is_json_with_its_length(response: httpx.Response) -> None:
    assert response.headers["content-type"] == "application/json", response.headers
    assert int(response.headers["content-length"]) == len(response.content)


async def test_agent_api_responses_are_json_with_a_content_length(agent: Agent) -> None:
    started = await agent.start(single(), wait=0)
    pending(started)
    qid = started.json()["questionnaireId"]
    responses = [
        started,
        await agent.get(qid, wait=0),
        await agent.delete(qid),  # 200
        await agent.get("no-such-questionnaire", wait=0),  # 404
        await agent.post("{not json"),  # 400
    ]
    assert [r.status_code for r in responses] == [202, 202, 200, 404, 400]
    for response in responses:
        _is_json_with_its_length(response)


@pytest.mark.parametrize(
    ("path", "method", "allow"),
    [
        ("questionnaire", "GET", "POST"),
        ("questionnaire", "HEAD", "POST"),
        ("questionnaire", "PUT", "POST"),
        ("questionnaire", "DELETE", "POST"),
        ("questionnaire", "PATCH", "POST"),
        ("questionnaire", "OPTIONS", "POST"),
        ("questionnaire", "PROPFIND", "POST"),
        ("questionnaires/q1", "POST", "GET, HEAD, DELETE"),
        ("questionnaires/q1", "PUT", "GET, HEAD, DELETE"),
        ("questionnaires/q1", "PATCH", "GET, HEAD, DELETE"),
        ("questionnaires/q1", "OPTIONS", "GET, HEAD, DELETE"),
        ("questionnaires/q1", "TRACE", "GET, HEAD, DELETE"),
        ("questionnaires/q1", "PROPFIND", "GET, HEAD, DELETE"),
    ],
)
async def test_a_wrong_method_is_405_naming_the_right_ones(agent: Agent, path: str, method: str, allow: str) -> None:
    url = f"{agent.base_url}/v1/sessions/{agent.sid}/{path}"
    response = await agent.http.request(method, url, headers=agent.headers())
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    if method != "HEAD":
        message = error(response, 405, "method_not_allowed")
        assert method in message and allow in message
        _is_json_with_its_length(response)


async def test_head_on_a_questionnaire_is_its_get_without_a_body(agent: Agent) -> None:
    qid = (await agent.start_pending(single()))["questionnaireId"]
    url = f"{agent.base_url}/v1/sessions/{agent.sid}/questionnaires/{qid}"
    head = await agent.http.head(url, params={"wait": "0"}, headers=agent.headers())
    get = await agent.get(qid, wait=0)
    assert head.status_code == get.status_code == 202
    assert head.content == b""
    assert head.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == get.headers["content-length"]
    tool_result(await agent.delete(qid))


@pytest.mark.parametrize(
    "path",
    [
        "/v1/sessions/s/questionnaire/",
        "/v1/sessions//questionnaire",
        "/v1/sessions/s/questionnaires/",  # (without the slash: the session's history)
        "/v1/sessions/s/questionnaires//events",
        "/v1/sessions/s/questionnaires/q/events/more",
        "/v1/sessions/s/questionnaires/q/",
        "/v1/sessions/s/questionnaires/q/more",
        "/v1/sessions/s/x/questionnaire",
        "/v1/v1/sessions/s/questionnaire",  # a broker URL given with /v1 on it
        "/v1/nothing",
        "/v1/v1/revocations",
        "/v1/v1/inbox",
    ],
)
async def test_paths_beside_the_agent_api_are_not_found(deployment: Deployment, path: str) -> None:
    # In the API's own JSON error shape, saying what its paths are, for any method; the
    # agent API's "questionnaire:" first only for a path meant for it.
    async with httpx.AsyncClient() as http:
        for method in ("POST", "GET", "DELETE"):
            response = await http.request(
                method, f"{deployment.agent_url}{path}", headers={"Authorization": f"Bearer {token('s', 'agent')}"}
            )
            if "/questionnaire" in path:
                message = error(response, 404, "not_found")
                assert message.startswith(f"questionnaire: no such endpoint: {method} {path};"), message
            else:
                assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
                message = response.json()["error"]["message"]
                assert message.startswith(f"no such endpoint: {method} {path};"), message
            assert "POST /v1/sessions/{sid}/questionnaire" in message


NOT_PLAIN_JSON: dict[str, bytes] = {
    # The stdlib parser took each of these; none is JSON an agent should be sending.
    "lone surrogate escape in a prompt": json.dumps(start_body(single(prompt="bad \ud800 text"))).encode(),
    "lone surrogate escape in a resume": json.dumps(
        {"action": "resume", "questionnaireId": "x", "revision": 1, "clarificationResponse": "\udc00"}
    ).encode(),
    "NaN": json.dumps({**start_body(multi()), "questions": [{**multi(), "maxSelections": float("nan")}]}).encode(),
    "Infinity": json.dumps({"action": "start", "questions": [{**multi(), "maxSelections": float("inf")}]}).encode(),
    "UTF-16": json.dumps(start_body(single())).encode("utf-16"),
    "invalid UTF-8": b'{"action":"start","questions":[{"id":"\xff"}]}',
    "nested 1020 deep": b'{"action":"start","questions":' + b"[" * 1020 + b"]" * 1020 + b"}",
    # The refusal shows the bad value: showing 1000 levels must not exhaust the stack.
    "question type nested 1000 deep": json.dumps(start_body(single()))
    .encode()
    .replace(b'"single"', b"[" * 1000 + b"]" * 1000),
    "question type nested 1020 deep": json.dumps(start_body(single()))
    .encode()
    .replace(b'"single"', b"[" * 1020 + b"]" * 1020),
    "nested past the parser's limit": b'{"action":"start","questions":' + b"[" * 5000 + b"]" * 5000 + b"}",
}


@pytest.mark.parametrize("raw", list(NOT_PLAIN_JSON.values()), ids=list(NOT_PLAIN_JSON))
async def test_a_body_that_is_not_plain_json_is_400_and_starts_nothing(agent: Agent, raw: bytes) -> None:
    error(await agent.post(raw, wait=0), 400, "invalid_arguments")


async def test_an_integer_beyond_64_bits_is_not_a_revision(agent: Agent) -> None:
    body = b'{"action":"resume","questionnaireId":"x","revision":18446744073709551616,"clarificationResponse":"r"}'
    assert "revision" in error(await agent.post(body, wait=0), 400, "invalid_arguments")


async def test_a_utf8_byte_order_mark_before_the_body_is_ignored(agent: Agent) -> None:
    qid = pending(await agent.post(b"\xef\xbb\xbf" + json.dumps(start_body(single())).encode()))["questionnaireId"]
    tool_result(await agent.delete(qid))
