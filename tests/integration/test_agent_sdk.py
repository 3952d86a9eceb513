"""The agent SDK against a live broker, with a scripted person answering over the websocket."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.agent.sdk import (
    AsyncQBrokerClient,
    Clarification,
    ForbiddenError,
    InvalidArguments,
    NotAwaitingClarification,
    Pending,
    QBrokerClient,
    QBrokerTimeout,
    StaleRevision,
    UnauthorizedError,
    UnknownQuestionnaire,
)
from tests.helpers.clients import ScriptedClient
from tests.helpers.processes import REPO_ROOT, BrokerProcess, token
from tests.helpers.samples import new_sid

DEPLOY: list[dict[str, Any]] = json.loads(Path(REPO_ROOT, "examples", "deploy.json").read_text())["questions"]
QUICK = 20.0  # an upper bound for any single step of a test, never a sleep


@pytest.fixture
def sid() -> str:
    return new_sid("sdk")


def agent(live: BrokerProcess, sid: str, **kw: Any) -> AsyncQBrokerClient:
    kw.setdefault("timeout", QUICK)
    return AsyncQBrokerClient(live.url, sid, token(sid, "agent"), **kw)


def person(live: BrokerProcess, sid: str) -> Any:
    return ScriptedClient.connect(live.ws_url, sid, token(sid, "client"))


async def test_start_returns_the_answers_the_person_gave(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        closed = await someone.answer_all(
            {"deploy_target": ["production"], "checks": {"selected": ["e2e", "unit"], "other": "smoke"}}
        )
        result = await asyncio.wait_for(call, QUICK)
    assert closed["status"] == "completed"
    assert result.status == "completed" and result.revision == 0
    assert result.questionnaire_id == closed["questionnaireId"]
    assert result.text.splitlines()[0] == (
        f"QUESTIONNAIRE_COMPLETED questionnaireId={result.questionnaire_id} revision=0"
    )
    assert result.answer("deploy_target").selected_option_ids == ("production",)  # type: ignore[union-attr]
    checks = result.answer("checks")
    assert checks is not None
    assert checks.selected_option_ids == ("unit", "e2e")  # declared order, not click order
    assert checks.other == "smoke"
    assert result.details["version"] == 1 and result.details["status"] == "completed"


async def test_the_blocking_client_works_the_same(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:

        def ask() -> Any:
            with QBrokerClient(live.url, sid, token(sid, "agent"), timeout=QUICK) as qb:
                return qb.start(DEPLOY)

        call = asyncio.create_task(asyncio.to_thread(ask))
        await someone.answer_all({"deploy_target": ["staging"], "checks": ["lint"]})
        result = await asyncio.wait_for(call, QUICK)
    assert result.completed
    assert [a.question_id for a in result.answers] == ["deploy_target", "checks"]


async def test_clarification_then_resume_continues_where_the_person_paused(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        first = await someone.wait_for("question")
        await someone.answer(first, ["staging"])
        second = await someone.wait_for("question", where=lambda f: f["question"]["id"] == "checks")
        await someone.clarify(second, "Do e2e tests run against staging?", draft={"selectedOptionIds": ["unit"]})
        await someone.wait_for("suspended")
        asked = await asyncio.wait_for(call, QUICK)

        assert asked.needs_clarification and asked.revision == 1
        assert asked.clarification_request == Clarification(1, "checks", "Do e2e tests run against staging?")
        assert asked.text.startswith(
            f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={asked.questionnaire_id} revision=1"
        )
        assert asked.answer("deploy_target").selected_option_ids == ("staging",)  # type: ignore[union-attr]

        call = asyncio.create_task(qb.resume(asked.questionnaire_id, asked.revision, "Yes, nightly."))
        again = await someone.wait_for("question")
        assert again["question"]["id"] == "checks"  # not back at the first question
        assert again["draft"]["selectedOptionIds"] == ["unit"]  # the toggles survived
        assert again["clarifications"][-1]["response"] == "Yes, nightly."
        await someone.answer(again, ["unit", "e2e"])
        done = await asyncio.wait_for(call, QUICK)
    assert done.completed and done.revision == 1
    assert done.questionnaire_id == asked.questionnaire_id
    assert done.clarifications == (Clarification(1, "checks", "Do e2e tests run against staging?", "Yes, nightly."),)

    async with agent(live, sid) as qb:
        with pytest.raises(NotAwaitingClarification) as refused:
            await qb.resume(done.questionnaire_id, 1, "again")
    assert refused.value.status == 409 and refused.value.message.startswith("questionnaire:")


async def test_resume_with_a_stale_revision_is_refused_and_changes_nothing(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        question = await someone.wait_for("question")
        await someone.clarify(question, "first?")
        await someone.wait_for("suspended")
        first = await asyncio.wait_for(call, QUICK)
        call = asyncio.create_task(qb.resume(first.questionnaire_id, 1, "answer one"))
        question = await someone.wait_for("question")
        await someone.clarify(question, "second?")
        await someone.wait_for("suspended")
        second = await asyncio.wait_for(call, QUICK)
        assert second.revision == 2

        with pytest.raises(StaleRevision) as stale:
            await qb.resume(first.questionnaire_id, 1, "late")
        assert (stale.value.code, stale.value.status) == ("stale_revision", 409)
        assert "2" in stale.value.message
        still = await qb.get(first.questionnaire_id, wait=0)
        assert still.needs_clarification and still.revision == 2


async def test_the_person_cancelling_is_a_cancelled_result(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        question = await someone.wait_for("question")
        await someone.answer(question, ["staging"])
        await someone.cancel(await someone.wait_for("question"))
        result = await asyncio.wait_for(call, QUICK)
    assert result.cancelled and result.cancellation_reason == "user_cancelled"
    assert result.text.startswith("QUESTIONNAIRE_CANCELLED")
    assert [a.question_id for a in result.answers] == ["deploy_target"]


async def test_nobody_connected_is_an_unavailable_result(live: BrokerProcess, sid: str) -> None:
    async with agent(live, sid) as qb:
        result = await qb.start(DEPLOY)  # client_wait=1 and no client at all
    assert result.unavailable and result.cancellation_reason == "ui_unavailable"
    assert result.text.startswith(f"QUESTIONNAIRE_UNAVAILABLE questionnaireId={result.questionnaire_id}")


async def test_a_202_is_followed_until_the_person_answers(live: BrokerProcess, sid: str) -> None:
    seen: list[Pending] = []
    told = asyncio.Event()

    def on_pending(pending: Pending) -> None:
        seen.append(pending)
        told.set()

    async with person(live, sid) as someone, agent(live, sid, wait=0.3, on_pending=on_pending) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        question = await someone.wait_for("question")
        await asyncio.wait_for(told.wait(), QUICK)  # the POST came back 202: now re-attaching
        await someone.answer_all(first=question)
        result = await asyncio.wait_for(call, QUICK)
    assert result.completed
    assert seen[0] == Pending(question["questionnaireId"], 0, 0)


async def test_the_overall_timeout_leaves_the_questionnaire_open_for_get(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid, wait=0.2) as qb:
        with pytest.raises(QBrokerTimeout) as timed_out:
            await qb.start(DEPLOY, timeout=0.5)
        pending = timed_out.value.pending
        assert pending is not None
        call = asyncio.create_task(qb.get(pending.questionnaire_id, wait=5))
        await someone.answer_all({})
        result = await asyncio.wait_for(call, QUICK)
    assert result.completed and result.questionnaire_id == pending.questionnaire_id


class DropFirstStartResponse(httpx.AsyncBaseTransport):
    """Delivers the first POST to the broker, then loses the response (a reset)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.posts: list[httpx.Request] = []
        self.retried = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posts.append(request)
            if len(self.posts) == 1:
                response = await self.inner.handle_async_request(request)
                await response.aread()
                await response.aclose()
                raise httpx.ReadError("connection reset by peer", request=request)
            self.retried.set()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_retried_start_never_creates_a_second_questionnaire(live: BrokerProcess, sid: str) -> None:
    transport = DropFirstStartResponse()
    async with person(live, sid) as someone, agent(live, sid, wait=0.5, backoff=0.01, transport=transport) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        question = await someone.wait_for("question")
        await asyncio.wait_for(transport.retried.wait(), QUICK)
        closed = await someone.answer_all(first=question)
        result = await asyncio.wait_for(call, QUICK)
        # Only one questionnaire ever reached the person: after it closed, the session is idle.
        await someone.wait_for("idle")
        assert not [
            f for f in someone.received if f["type"] == "question" and f["questionnaireId"] != result.questionnaire_id
        ]
    keys = [r.headers["Idempotency-Key"] for r in transport.posts]
    assert len(keys) == 2 and keys[0] == keys[1]
    assert result.completed
    assert result.questionnaire_id == question["questionnaireId"] == closed["questionnaireId"]


async def test_the_same_idempotency_key_returns_the_same_questionnaire(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid) as qb:
        with pytest.raises(QBrokerTimeout) as first:
            await qb.start(DEPLOY, idempotency_key="deploy-1", wait=0, timeout=0)
        with pytest.raises(QBrokerTimeout) as second:
            await qb.start(DEPLOY, idempotency_key="deploy-1", wait=0, timeout=0)
        assert first.value.pending and second.value.pending
        assert first.value.pending.questionnaire_id == second.value.pending.questionnaire_id
        await someone.answer_all({})
        again = await qb.start(DEPLOY, idempotency_key="deploy-1")  # after the outcome, too
        assert again.completed and again.questionnaire_id == first.value.pending.questionnaire_id
        fresh = asyncio.create_task(qb.start(DEPLOY, idempotency_key="deploy-2"))
        question = await someone.wait_for("question")
        assert question["questionnaireId"] != again.questionnaire_id
        await someone.answer_all(first=question)
        assert (await asyncio.wait_for(fresh, QUICK)).completed


async def test_abort_ends_the_questionnaire_for_everyone(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone, agent(live, sid, wait=0.3) as qb:
        call = asyncio.create_task(qb.start(DEPLOY))
        question = await someone.wait_for("question")
        aborted = await qb.abort(question["questionnaireId"])
        closed = await someone.wait_for("closed")
        result = await asyncio.wait_for(call, QUICK)
        assert await qb.abort(question["questionnaireId"]) == aborted  # unchanged when repeated
    assert aborted.cancelled and aborted.cancellation_reason == "aborted"
    assert closed["status"] == "cancelled"
    assert result.cancelled and result.questionnaire_id == aborted.questionnaire_id


async def test_refusals_raise_typed_errors_with_the_wire_code(live: BrokerProcess, sid: str) -> None:
    async with agent(live, sid) as qb:
        with pytest.raises(InvalidArguments) as invalid:
            await qb.start([{"id": "q", "prompt": "?", "type": "single", "options": [], "bogus": 1}])
        assert invalid.value.status == 400 and invalid.value.message.startswith("questionnaire:")
        with pytest.raises(InvalidArguments):
            await qb.call(
                {
                    "action": "resume",
                    "questionnaireId": "x",
                    "revision": 1,
                    "clarificationResponse": "y",
                    "questions": [],
                }
            )
        with pytest.raises(UnknownQuestionnaire) as unknown:
            await qb.resume("no-such-questionnaire", 1, "hello")
        assert unknown.value.status == 404
        with pytest.raises(UnknownQuestionnaire):
            await qb.get("no-such-questionnaire", wait=0)
    async with AsyncQBrokerClient(live.url, sid, "not-a-token") as qb:
        with pytest.raises(UnauthorizedError) as unauthorized:
            await qb.get("x", wait=0)
        assert unauthorized.value.status == 401
    async with AsyncQBrokerClient(live.url, sid, token("another-session", "agent")) as qb:
        with pytest.raises(ForbiddenError) as forbidden:
            await qb.start(DEPLOY)
        assert forbidden.value.status == 403
    async with AsyncQBrokerClient(live.url, sid, token(sid, "client")) as qb:
        with pytest.raises(UnauthorizedError):
            await qb.start(DEPLOY)
