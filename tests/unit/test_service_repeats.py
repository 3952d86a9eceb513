"""Broker.start_or_reattach and Broker.resume_or_reattach (what the MCP endpoint calls), in
process on the memory store: a repeated call re-attaches to what the first one did while it
is still open, and asks again once it has ended."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from broker.core import machine, repeats
from broker.core.errors import BrokerError
from broker.core.model import Question, ResumeInput, StartInput, parse_tool_input
from broker.runtime.config import Config
from broker.service import Broker
from broker.store.memory import MemoryStore
from tests.helpers.samples import multi, new_sid, single, start_body


def _questions(*items: dict[str, object]) -> tuple[Question, ...]:
    parsed = parse_tool_input(start_body(*items))
    assert isinstance(parsed, StartInput)
    return parsed.questions


QUESTIONS = _questions(single(), multi())


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    service = Broker(Config(secret="unit-test-secret-0123456789abcdef", client_wait=60), MemoryStore())
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def _end(broker: Broker, sid: str, qid: str) -> None:
    await broker.writer.update(sid, qid, machine.Abort())


async def _clarify(broker: Broker, sid: str, qid: str, request: str) -> None:
    """The person pauses at the current question to ask something."""
    state = await broker.writer.load(sid, qid)
    await broker.writer.update(sid, qid, machine.Clarify(qid, state.step, request))


async def test_a_repeated_start_re_attaches_while_the_first_is_open(broker: Broker) -> None:
    sid = new_sid()
    status, first = await broker.start_or_reattach(sid, QUESTIONS, 0, asked_by="alice")
    assert status == 202
    status, again = await broker.start_or_reattach(sid, QUESTIONS, 0, asked_by="alice")
    assert status == 202 and again["questionnaireId"] == first["questionnaireId"]
    assert await broker.store.queue(sid) == [first["questionnaireId"]]
    state = await broker.store.load(sid, first["questionnaireId"])
    assert state is not None and state.asked_by == "alice"


async def test_another_asker_or_other_questions_start_another(broker: Broker) -> None:
    sid = new_sid()
    _, first = await broker.start_or_reattach(sid, QUESTIONS, 0, asked_by="alice")
    _, bob = await broker.start_or_reattach(sid, QUESTIONS, 0, asked_by="bob")
    _, other = await broker.start_or_reattach(sid, _questions(single()), 0, asked_by="alice")
    assert len({first["questionnaireId"], bob["questionnaireId"], other["questionnaireId"]}) == 3


async def test_a_repeat_after_clarification_was_asked_gets_that_outcome_again(broker: Broker) -> None:
    sid = new_sid()
    _, first = await broker.start_or_reattach(sid, QUESTIONS, 0)
    qid = first["questionnaireId"]
    await _clarify(broker, sid, qid, "why?")
    status, again = await broker.start_or_reattach(sid, QUESTIONS, 0)
    assert status == 200 and again["details"]["status"] == "needs_clarification"
    assert again["details"]["questionnaireId"] == qid


async def test_once_it_has_ended_the_same_start_asks_again_and_the_next_repeat_finds_that_one(
    broker: Broker,
) -> None:
    sid = new_sid()
    _, first = await broker.start_or_reattach(sid, QUESTIONS, 0)
    await _end(broker, sid, first["questionnaireId"])
    status, second = await broker.start_or_reattach(sid, QUESTIONS, 0)
    assert status == 202 and second["questionnaireId"] != first["questionnaireId"]
    _, repeat = await broker.start_or_reattach(sid, QUESTIONS, 0)
    assert repeat["questionnaireId"] == second["questionnaireId"]
    await _end(broker, sid, second["questionnaireId"])
    _, third = await broker.start_or_reattach(sid, QUESTIONS, 0)
    assert third["questionnaireId"] not in (first["questionnaireId"], second["questionnaireId"])


async def test_past_the_longest_chain_a_start_asks_with_no_key(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repeats, "MAX_LINKS", 2)
    sid = new_sid()
    seen = []
    for _ in range(2):
        _, started = await broker.start_or_reattach(sid, QUESTIONS, 0)
        seen.append(started["questionnaireId"])
        await _end(broker, sid, started["questionnaireId"])
    _, unkeyed = await broker.start_or_reattach(sid, QUESTIONS, 0)
    _, unkeyed_again = await broker.start_or_reattach(sid, QUESTIONS, 0)
    assert len({*seen, unkeyed["questionnaireId"], unkeyed_again["questionnaireId"]}) == 4


async def test_a_repeated_resume_waits_for_the_outcome_instead_of_being_refused(broker: Broker) -> None:
    sid = new_sid()
    _, first = await broker.start_or_reattach(sid, QUESTIONS, 0)
    qid = first["questionnaireId"]
    await _clarify(broker, sid, qid, "why?")
    resume = ResumeInput(qid, 1, "Because.")
    status, resumed = await broker.resume_or_reattach(sid, resume, 0)
    assert status == 202 and resumed["revision"] == 1
    status, again = await broker.resume_or_reattach(sid, ResumeInput(qid, 1, "  Because. "), 0)
    assert status == 202 and again["questionnaireId"] == qid
    # Once it moved on, the repeat reads where it is now.
    await _clarify(broker, sid, qid, "and?")
    status, later = await broker.resume_or_reattach(sid, resume, 0)
    assert status == 200 and later["details"]["revision"] == 2


async def test_a_resume_that_was_never_applied_is_still_refused(broker: Broker) -> None:
    sid = new_sid()
    _, first = await broker.start_or_reattach(sid, QUESTIONS, 0)
    qid = first["questionnaireId"]
    await _clarify(broker, sid, qid, "why?")
    await broker.resume_or_reattach(sid, ResumeInput(qid, 1, "Because."), 0)
    with pytest.raises(BrokerError) as other_response:
        await broker.resume_or_reattach(sid, ResumeInput(qid, 1, "Something else."), 0)
    assert other_response.value.code == "not_awaiting_clarification"
    with pytest.raises(BrokerError) as stale:
        await broker.resume_or_reattach(sid, ResumeInput(qid, 7, "Because."), 0)
    assert stale.value.code == "stale_revision"
    with pytest.raises(BrokerError) as unknown:
        await broker.resume_or_reattach(sid, ResumeInput("nope", 1, "Because."), 0)
    assert unknown.value.code == "unknown_questionnaire"
