"""Events: who changed a questionnaire and how, told from the states before and after."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from broker.core.actors import Actor, ClientInfo
from broker.core.events import EVENT_TYPES, Event, events_of, started
from broker.core.history import Summary
from broker.core.machine import Abort, AnswerQuestion, MarkUnavailable, Questionnaire, apply
from broker.store.records import pack_event, unpack_event
from tests.helpers.machine import QID, T0, answer, cancel, clarify, draft, new_questionnaire, resume

AGENT = Actor("build-agent", "agent")
ALICE = Actor("alice", "client", ClientInfo("tui", "qbroker tui"))
SECRET_WORDS = ("my-secret-other", "What does this mean, really?", "It means exactly this.")


def test_a_start_is_one_started_event_by_the_agent_with_the_question_count() -> None:
    state = new_questionnaire()
    assert events_of(None, state, AGENT) == (Event("started", T0, 0, AGENT, questions=3),)
    assert started(state, AGENT) == events_of(None, state, AGENT)[0]


def test_an_answer_is_one_answered_event_at_the_step_it_names() -> None:
    before = new_questionnaire()
    after = apply(before, AnswerQuestion(QID, 0, "pick", ("a",)), T0 + 1, ALICE)
    assert events_of(before, after, ALICE) == (Event("answered", T0 + 1, 0, ALICE, question_id="pick"),)


def test_the_last_answer_is_answered_then_completed() -> None:
    before = answer(answer(new_questionnaire(), "a"), "unit")
    after = apply(before, AnswerQuestion(QID, 2, "confirm", ("yes",)), T0 + 9, ALICE)
    assert events_of(before, after, ALICE) == (
        Event("answered", T0 + 9, 2, ALICE, question_id="confirm"),
        Event("completed", T0 + 9, 2, ALICE),
    )


def test_a_draft_is_no_event() -> None:
    before = new_questionnaire()
    assert events_of(before, draft(before, "a"), ALICE) == ()


def test_a_clarification_and_its_reply_name_the_question_and_the_revision() -> None:
    at_checks = answer(new_questionnaire(), "a")
    suspended = clarify(at_checks)
    assert events_of(at_checks, suspended, ALICE) == (
        Event("clarification_requested", suspended.updated_at, 1, ALICE, question_id="checks", revision=1),
    )
    resumed = resume(suspended)
    assert events_of(suspended, resumed, AGENT) == (
        Event("resumed", resumed.updated_at, 2, AGENT, question_id="checks", revision=1),
    )


def test_a_cancel_an_abort_and_unavailability_are_told_apart() -> None:
    at_checks = answer(new_questionnaire(), "a")
    cancelled = cancel(at_checks)
    assert events_of(at_checks, cancelled, ALICE) == (
        Event("cancelled", cancelled.updated_at, 1, ALICE, question_id="checks"),
    )
    aborted = apply(at_checks, Abort(), T0 + 5)
    assert events_of(at_checks, aborted, AGENT) == (Event("aborted", T0 + 5, 1, AGENT, question_id="checks"),)
    suspended = clarify(at_checks)
    aborted_while_waiting = apply(suspended, Abort(), T0 + 6)
    assert events_of(suspended, aborted_while_waiting, AGENT)[0].type == "aborted"
    gone = apply(at_checks, MarkUnavailable("ui_error"), T0 + 7)
    assert events_of(at_checks, gone, None) == (
        Event("unavailable", T0 + 7, 1, None, question_id="checks", reason="ui_error"),
    )


def test_no_event_holds_an_answer_other_text_or_clarification_text() -> None:
    state = new_questionnaire()
    seen = list(events_of(None, state, AGENT))
    steps: list[Callable[[Questionnaire], Questionnaire]] = [
        lambda s: answer(s, other=SECRET_WORDS[0]),
        lambda s: clarify(s, SECRET_WORDS[1]),
        lambda s: resume(s, SECRET_WORDS[2]),
        lambda s: answer(s, "unit"),
        lambda s: answer(s, "yes"),
    ]
    for step in steps:
        new = step(state)
        seen.extend(events_of(state, new, ALICE))
        state = new
    wire = json.dumps([event.to_wire() for event in seen])
    assert [event.type for event in seen] == [
        "started",
        "answered",
        "clarification_requested",
        "resumed",
        "answered",
        "answered",
        "completed",
    ]
    for words in SECRET_WORDS:
        assert words not in wire
        assert words.encode() not in b"".join(pack_event(event) for event in seen)


def test_every_event_type_is_named() -> None:
    assert set(EVENT_TYPES) == {
        "started",
        "answered",
        "clarification_requested",
        "resumed",
        "cancelled",
        "aborted",
        "unavailable",
        "completed",
    }


def test_an_event_on_the_wire() -> None:
    assert Event("answered", 12.5, 3, ALICE, question_id="pick").to_wire() == {
        "type": "answered",
        "at": 12.5,
        "step": 3,
        "questionId": "pick",
        "by": {"sub": "alice", "role": "client", "client": {"kind": "tui", "name": "qbroker tui"}},
    }
    assert Event("unavailable", 1.0, 0, None, reason="ui_unavailable").to_wire() == {
        "type": "unavailable",
        "at": 1.0,
        "step": 0,
        "reason": "ui_unavailable",
        "by": None,
    }
    assert Event("started", 1.0, 0, Actor(None, "agent"), questions=2).to_wire()["by"] == {
        "sub": None,
        "role": "agent",
        "client": None,
    }


@pytest.mark.parametrize(
    "event",
    [
        Event("started", T0, 0, AGENT, questions=3),
        Event("answered", T0 + 1.25, 4, ALICE, question_id="pick"),
        Event("unavailable", T0, 0, None, reason="ui_error"),
        Event("resumed", T0, 2, Actor(None, "agent"), question_id="q", revision=1),
    ],
)
def test_an_event_survives_the_stores_packing_and_the_wire(event: Event) -> None:
    assert unpack_event(pack_event(event)) == event
    assert Event.from_wire(json.loads(json.dumps(event.to_wire()))) == event


def test_an_actor_survives_the_wire() -> None:
    for actor in (ALICE, AGENT, Actor(None, "client", ClientInfo("web", ""))):
        assert Actor.from_wire(json.loads(json.dumps(actor.to_wire()))) == actor


# --- the history's summary ----------------------------------------------------------------


def _summary(state: Questionnaire, last: Event) -> dict[str, object]:
    return Summary(state.id, 7, started(state, AGENT), last).to_wire()


@pytest.mark.parametrize(
    ("last", "status", "reason", "ended"),
    [
        (Event("answered", T0 + 5, 0, ALICE, question_id="pick"), "in_progress", None, False),
        (Event("resumed", T0 + 5, 2, AGENT, question_id="pick", revision=1), "in_progress", None, False),
        (Event("clarification_requested", T0 + 5, 1, ALICE, revision=1), "needs_clarification", None, False),
        (Event("completed", T0 + 5, 2, ALICE), "completed", None, True),
        (Event("cancelled", T0 + 5, 1, ALICE), "cancelled", "user_cancelled", True),
        (Event("aborted", T0 + 5, 1, AGENT), "cancelled", "aborted", True),
        (Event("unavailable", T0 + 5, 0, None, reason="ui_unavailable"), "unavailable", "ui_unavailable", True),
    ],
)
def test_a_summary_stands_where_its_latest_event_left_it(
    last: Event, status: str, reason: str | None, ended: bool
) -> None:
    state = new_questionnaire()
    assert _summary(state, last) == {
        "id": QID,
        "status": status,
        "reason": reason,
        "createdAt": T0,
        "endedAt": T0 + 5 if ended else None,
        "askedBy": "build-agent",
        "questions": 3,
    }


def test_a_summary_of_a_questionnaire_just_started_is_in_progress() -> None:
    state = new_questionnaire()
    first = started(state, Actor(None, "agent"))
    summary = Summary(state.id, 1, first, first)
    assert summary.status == "in_progress"
    assert summary.to_wire()["askedBy"] is None and summary.to_wire()["endedAt"] is None
