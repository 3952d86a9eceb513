"""When a person is told that a questionnaire waits (broker/core/reminders.py): values in, values out."""

from __future__ import annotations

from broker.core.reminders import claim_name, idle_at, is_idle, waiting_question, wanted
from tests.helpers.machine import T0, answer, cancel, clarify, draft, new_questionnaire, resume
from tests.helpers.samples import single


def test_started_and_idle_are_claimed_once_per_questionnaire_and_route() -> None:
    state = new_questionnaire()
    later = answer(new_questionnaire(single("a"), single("b")), "staging")
    assert claim_name(state, "started", 1) == f"notify:{state.id}:started:1"
    assert claim_name(state, "idle", 2) == f"notify:{state.id}:idle:2"
    assert claim_name(later, "idle", 2) == claim_name(new_questionnaire(), "idle", 2)  # (same id)


def test_each_resume_is_a_moment_of_its_own() -> None:
    once = resume(clarify(new_questionnaire()))
    twice = resume(clarify(once))
    assert claim_name(once, "resumed", 1) != claim_name(twice, "resumed", 1)


def test_only_a_questionnaire_waiting_for_the_person_is_announced() -> None:
    assert wanted(new_questionnaire())
    assert wanted(resume(clarify(new_questionnaire())))
    assert not wanted(clarify(new_questionnaire()))  # the person waits for the agent
    assert not wanted(cancel(new_questionnaire()))


def test_the_waiting_question_is_the_current_one() -> None:
    state = answer(new_questionnaire(single("first"), single("second")), "staging")
    question = waiting_question(state)
    assert question is not None and question.id == "second"
    assert waiting_question(cancel(new_questionnaire())) is None


def test_idle_counts_from_the_last_change_or_the_showing_whichever_is_later() -> None:
    state = draft(new_questionnaire(single("a")), "staging", now=T0 + 10)
    assert idle_at(state, shown_since=T0, after=120) == T0 + 10 + 120
    assert idle_at(state, shown_since=T0 + 50, after=120) == T0 + 50 + 120
    assert not is_idle(state, T0, 120, now=T0 + 129.9)
    assert is_idle(state, T0, 120, now=T0 + 130)


def test_a_question_waiting_for_the_agent_is_never_idle() -> None:
    assert idle_at(clarify(new_questionnaire()), T0, 120) is None
    assert not is_idle(clarify(new_questionnaire()), T0, 120, now=T0 + 10_000)
