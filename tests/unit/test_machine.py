"""The questionnaire state machine: every transition with the whole resulting state asserted,
every illegal command with the state unchanged."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgpack
import msgspec
import pytest

from broker.core.actors import Actor, ClientInfo
from broker.core.errors import BrokerError
from broker.core.machine import (
    Abort,
    Answer,
    AnswerQuestion,
    Cancel,
    Clarification,
    Clarify,
    Command,
    Draft,
    MarkUnavailable,
    Questionnaire,
    Resume,
    Selection,
    apply,
    start,
)
from broker.core.model import MAX_CLARIFICATION, MAX_OTHER, ResumeInput, parse_tool_input
from tests.helpers.machine import (
    QID,
    SID,
    T0,
    answer,
    assert_refused,
    assert_transition,
    cancel,
    clarify,
    draft,
    new_questionnaire,
    parse_start,
    resume,
    standard_questions,
)
from tests.helpers.samples import multi, single, start_body

T1 = T0 + 10.0


# --- states in every status -------------------------------------------------------------


def in_progress() -> Questionnaire:
    return new_questionnaire()


def at_checks() -> Questionnaire:
    """pick answered; the multi question "checks" is current."""
    return answer(in_progress(), "b")


def at_confirm() -> Questionnaire:
    """pick and checks answered; the last question "confirm" (no Other) is current."""
    return answer(at_checks(), "unit")


def suspended() -> Questionnaire:
    return clarify(draft(at_checks(), "lint"), "Which is faster?")


def completed() -> Questionnaire:
    return answer(at_confirm(), "yes")


def user_cancelled() -> Questionnaire:
    return cancel(at_checks())


def aborted() -> Questionnaire:
    return apply(at_checks(), Abort(), T1)


def ui_unavailable() -> Questionnaire:
    return apply(in_progress(), MarkUnavailable("ui_unavailable"), T1)


def ui_error() -> Questionnaire:
    return apply(at_checks(), MarkUnavailable("ui_error"), T1)


OPEN_STATES: dict[str, Callable[[], Questionnaire]] = {
    "in_progress": at_checks,
    "needs_clarification": suspended,
}
TERMINAL_STATES: dict[str, Callable[[], Questionnaire]] = {
    "completed": completed,
    "cancelled by the user": user_cancelled,
    "aborted by the agent": aborted,
    "unavailable (ui_unavailable)": ui_unavailable,
    "unavailable (ui_error)": ui_error,
}


# --- start --------------------------------------------------------------------------


def test_start_builds_a_fresh_questionnaire_at_revision_step_and_version_zero() -> None:
    questions = parse_start(*standard_questions()).questions
    assert start(QID, SID, questions, T0) == Questionnaire(
        id=QID,
        session_id=SID,
        questions=questions,
        created_at=T0,
        updated_at=T0,
        status="in_progress",
        revision=0,
        step=0,
        version=0,
        answers=(),
        draft=None,
        clarifications=(),
        cancellation_reason=None,
        asked_by=None,
    )


def test_start_keeps_who_asked() -> None:
    state = start(QID, SID, parse_start(*standard_questions()).questions, T0, asked_by="build-agent")
    assert state.asked_by == "build-agent"
    assert state.to_record()["askedBy"] == "build-agent"
    assert Questionnaire.from_record(state.to_record()) == state


def test_who_asked_stays_through_every_transition() -> None:
    state = start(QID, SID, parse_start(*standard_questions()).questions, T0, asked_by="build-agent")
    for command in (
        Draft(QID, 0, ("a",)),
        AnswerQuestion(QID, 0, "pick", ("a",)),
        Clarify(QID, 1, "Which checks?"),
        Resume(1, "Unit and lint."),
        Cancel(QID, 3),
    ):
        state = apply(state, command, T0 + 1)
        assert state.asked_by == "build-agent"


def test_an_answer_keeps_who_gave_it_until_the_next_answer() -> None:
    alice = Actor("alice", "client", ClientInfo("tui", "qbroker tui"))
    bob = Actor("bob", "client", ClientInfo("web", "qbroker web"))
    state = apply(in_progress(), AnswerQuestion(QID, 0, "pick", ("a",)), T0 + 1, alice)
    assert state.answered_by == alice
    state = apply(state, Draft(QID, 1, ("unit",)), T0 + 2, bob)  # a draft is no answer
    state = apply(state, Clarify(QID, 1, "Which?"), T0 + 3, bob)
    state = apply(state, Resume(1, "Unit."), T0 + 4, Actor("build-agent", "agent"))
    assert state.answered_by == alice
    state = apply(state, AnswerQuestion(QID, 3, "checks", ("unit",)), T0 + 5, bob)
    assert state.answered_by == bob
    assert Questionnaire.from_record(json.loads(json.dumps(state.to_record()))) == state


def test_an_answer_by_nobody_said_is_kept_as_not_said() -> None:
    state = apply(in_progress(), AnswerQuestion(QID, 0, "pick", ("a",)), T0 + 1)
    assert state.answered_by is None and state.to_record()["answeredBy"] is None


def test_a_record_without_who_asked_loads_as_not_said() -> None:
    """Records written by brokers before ``askedBy`` existed lack the key."""
    record = answer(in_progress(), "a").to_record()
    del record["askedBy"], record["answeredBy"]
    state = Questionnaire.from_record(record)
    assert state.asked_by is None and state.answered_by is None


def test_start_without_questions_is_refused() -> None:
    with pytest.raises(BrokerError) as info:
        start(QID, SID, [], T0)
    assert info.value.code == "invalid_arguments"
    assert info.value.message.startswith("questionnaire:")


def test_a_fresh_questionnaire_shows_its_first_question() -> None:
    state = in_progress()
    assert state.current_index == 0
    assert state.current_question is not None and state.current_question.id == "pick"
    assert not state.is_terminal and not state.is_outcome
    assert state.pending_clarification is None


def test_mutating_the_input_dicts_after_start_changes_nothing() -> None:
    payload = start_body(*standard_questions())
    parsed = parse_tool_input(payload)
    state = start(QID, SID, parsed.questions, T0)  # type: ignore[union-attr]
    record = copy.deepcopy(state.to_record())
    payload["questions"][0]["id"] = "renamed"
    payload["questions"][0]["options"].append({"id": "d"})
    payload["questions"][0]["options"][0]["id"] = "z"
    payload["questions"][1]["maxSelections"] = 3
    payload["questions"][2]["allowOther"] = True
    del payload["questions"][1:]
    assert state.to_record() == record
    assert [q.id for q in state.questions] == ["pick", "checks", "confirm"]


def test_mutating_the_question_list_after_start_changes_nothing() -> None:
    questions = list(parse_start(*standard_questions()).questions)
    state = start(QID, SID, questions, T0)
    questions.clear()
    assert len(state.questions) == 3


# --- draft --------------------------------------------------------------------------


def test_a_draft_stores_the_toggles_and_bumps_only_the_version() -> None:
    state = at_checks()
    assert_transition(
        state,
        Draft(QID, state.step, ("lint", "unit"), " more "),
        T1,
        draft=Selection(("unit", "lint"), "more"),
        version=state.version + 1,
    )


def test_a_later_draft_replaces_the_earlier_one() -> None:
    state = draft(at_checks(), "unit", other="x")
    assert_transition(state, Draft(QID, state.step, ("e2e",)), T1, draft=Selection(("e2e",)), version=state.version + 1)


def test_an_emptied_other_field_in_a_draft_is_no_other() -> None:
    state = at_checks()
    after = assert_transition(
        state, Draft(QID, state.step, (), "   "), T1, draft=Selection(), version=state.version + 1
    )
    assert after.draft == Selection((), None)


def test_a_draft_on_a_single_question_may_hold_an_option_and_other_text() -> None:
    state = in_progress()
    assert_transition(state, Draft(QID, 0, ("a",), "typing"), T1, draft=Selection(("a",), "typing"), version=1)


def test_a_multi_draft_is_not_held_to_the_selection_bounds() -> None:
    state = at_checks()  # checks allows at most 2
    after = draft(state, "unit", "e2e", "lint", other="and more")
    assert after.draft == Selection(("unit", "e2e", "lint"), "and more")


@pytest.mark.parametrize(
    ("state_of", "ids", "other", "code"),
    [
        (at_checks, ("nope",), None, "unknown_option"),
        (at_checks, ("unit", "unit"), None, "invalid_answer"),
        (at_checks, (), "o" * (MAX_OTHER + 1), "text_too_long"),
        (in_progress, ("a", "b"), None, "invalid_answer"),
        (at_confirm, (), "maybe", "other_not_allowed"),
    ],
)
def test_an_invalid_draft_changes_nothing(
    state_of: Callable[[], Questionnaire], ids: tuple[str, ...], other: str | None, code: str
) -> None:
    state = state_of()
    assert_refused(state, Draft(QID, state.step, ids, other), code)


# --- answer -------------------------------------------------------------------------


def test_answering_a_single_question_with_one_option_moves_to_the_next() -> None:
    state = draft(in_progress(), "a")
    after = assert_transition(
        state,
        AnswerQuestion(QID, 0, "pick", ("b",)),
        T1,
        answers=(Answer("pick", Selection(("b",))),),
        draft=None,
        step=1,
        version=state.version + 1,
    )
    assert after.current_question is not None and after.current_question.id == "checks"
    assert after.current_index == 1


def test_answering_a_single_question_with_only_other_stores_the_trimmed_text() -> None:
    state = in_progress()
    assert_transition(
        state,
        AnswerQuestion(QID, 0, "pick", (), "  my own  "),
        T1,
        answers=(Answer("pick", Selection((), "my own")),),
        step=1,
        version=1,
    )


def test_other_of_exactly_the_limit_is_accepted() -> None:
    after = answer(in_progress(), other="o" * MAX_OTHER)
    assert after.answers[0].selection.other == "o" * MAX_OTHER


def test_answering_a_multi_question_stores_option_ids_in_declared_order() -> None:
    state = at_checks()
    assert_transition(
        state,
        AnswerQuestion(QID, state.step, "checks", ("lint", "unit")),
        T1,
        answers=(*state.answers, Answer("checks", Selection(("unit", "lint")))),
        step=state.step + 1,
        version=state.version + 1,
    )


def test_other_on_a_multi_question_is_additive_and_counts_as_one_choice() -> None:
    state = at_checks()  # 1..2 choices
    after = answer(state, "e2e", other=" flaky ones ")
    assert after.answers[-1] == Answer("checks", Selection(("e2e",), "flaky ones"))
    only_other = answer(state, other="manual QA")  # meets minSelections=1 on its own
    assert only_other.answers[-1] == Answer("checks", Selection((), "manual QA"))


def test_answering_the_last_question_completes_the_questionnaire() -> None:
    state = draft(at_confirm(), "no")
    after = assert_transition(
        state,
        AnswerQuestion(QID, state.step, "confirm", ("yes",)),
        T1,
        answers=(*state.answers, Answer("confirm", Selection(("yes",)))),
        draft=None,
        status="completed",
        step=state.step + 1,
        version=state.version + 1,
    )
    assert after.is_terminal and after.is_outcome
    assert after.current_question is None
    assert after.current_index == 3


def test_answers_come_out_in_question_order_with_option_ids_in_declared_order() -> None:
    state = new_questionnaire(
        multi("m1", ("a", "b", "c", "d")),
        single("s1", ("x", "y")),
        multi("m2", ("p", "q", "r"), allowOther=False),
    )
    state = answer(state, "d", "b", "a")
    state = answer(state, "y")
    state = answer(state, "r", "p")
    assert [a.to_wire() for a in state.answers] == [
        {"questionId": "m1", "selectedOptionIds": ["a", "b", "d"]},
        {"questionId": "s1", "selectedOptionIds": ["y"]},
        {"questionId": "m2", "selectedOptionIds": ["p", "r"]},
    ]


def test_a_multi_question_without_a_minimum_accepts_an_empty_answer() -> None:
    state = new_questionnaire(multi("m", ("a", "b")))
    assert answer(state).answers == (Answer("m", Selection()),)


def test_a_multi_question_without_a_ceiling_accepts_every_option_and_other() -> None:
    state = new_questionnaire(multi("m", ("a", "b", "c")))
    after = answer(state, "c", "b", "a", other="d")
    assert after.answers == (Answer("m", Selection(("a", "b", "c"), "d")),)


def test_a_multi_answer_exactly_at_its_bounds_is_accepted() -> None:
    state = new_questionnaire(multi("m", ("a", "b", "c"), minSelections=2, maxSelections=3))
    assert answer(state, "a", "b").answers[0].selection == Selection(("a", "b"))
    assert answer(state, "a", "b", other="c2").answers[0].selection == Selection(("a", "b"), "c2")


ANSWER_REFUSALS: list[Any] = [
    # single
    pytest.param(in_progress, "pick", ("a", "b"), None, "invalid_answer", id="single with two options"),
    pytest.param(in_progress, "pick", ("a",), "also this", "invalid_answer", id="single with option and other"),
    pytest.param(in_progress, "pick", (), None, "invalid_answer", id="single with nothing"),
    pytest.param(in_progress, "pick", (), "   ", "invalid_answer", id="single with blank other only"),
    pytest.param(in_progress, "pick", ("zz",), None, "unknown_option", id="single with unknown option"),
    pytest.param(in_progress, "pick", (), "o" * (MAX_OTHER + 1), "text_too_long", id="other over the limit"),
    pytest.param(at_confirm, "confirm", (), "maybe", "other_not_allowed", id="single other not allowed"),
    pytest.param(at_confirm, "confirm", ("yes",), "maybe", "other_not_allowed", id="single option plus disallowed other"),
    # multi (checks: 1..2 choices, Other allowed)
    pytest.param(at_checks, "checks", (), None, "below_min_selections", id="multi below min"),
    pytest.param(at_checks, "checks", (), "  ", "below_min_selections", id="multi blank other does not count"),
    pytest.param(at_checks, "checks", ("unit", "e2e", "lint"), None, "above_max_selections", id="multi above max"),
    pytest.param(at_checks, "checks", ("unit", "e2e"), "third", "above_max_selections", id="multi other counts against max"),
    pytest.param(at_checks, "checks", ("unit", "unit"), None, "invalid_answer", id="multi duplicate ids"),
    pytest.param(at_checks, "checks", ("unit", "nope"), None, "unknown_option", id="multi unknown id"),
    pytest.param(at_checks, "checks", ("a",), None, "unknown_option", id="option of another question"),
    # wrong question
    pytest.param(at_checks, "pick", ("a",), None, "invalid_answer", id="answer names an answered question"),
    pytest.param(in_progress, "confirm", ("yes",), None, "invalid_answer", id="answer names a later question"),
    pytest.param(in_progress, "ghost", ("a",), None, "invalid_answer", id="answer names an unknown question"),
]  # fmt: skip


@pytest.mark.parametrize(("state_of", "question_id", "ids", "other", "code"), ANSWER_REFUSALS)
def test_an_invalid_answer_changes_nothing(
    state_of: Callable[[], Questionnaire],
    question_id: str,
    ids: tuple[str, ...],
    other: str | None,
    code: str,
) -> None:
    state = state_of()
    error = assert_refused(state, AnswerQuestion(QID, state.step, question_id, ids, other), code)
    if code != "text_too_long":  # the one refusal about a text, not about the question
        assert f'"{question_id}"' in error.message


def test_a_multi_question_without_other_counts_only_options() -> None:
    state = new_questionnaire(multi("m", ("a", "b"), allowOther=False, minSelections=1))
    assert_refused(state, AnswerQuestion(QID, 0, "m", (), "x"), "other_not_allowed")
    assert_refused(state, AnswerQuestion(QID, 0, "m", ()), "below_min_selections")


# --- clarify ------------------------------------------------------------------------


def test_clarify_suspends_with_a_new_revision_and_keeps_answers_and_draft() -> None:
    state = draft(at_checks(), "lint", other="x")
    after = assert_transition(
        state,
        Clarify(QID, state.step, "  Which is faster?  "),
        T1,
        status="needs_clarification",
        revision=1,
        step=state.step + 1,
        version=state.version + 1,
        clarifications=(Clarification(1, "checks", "Which is faster?"),),
    )
    assert after.answers == state.answers and after.draft == Selection(("lint",), "x")
    assert after.pending_clarification == Clarification(1, "checks", "Which is faster?")
    assert after.is_outcome and not after.is_terminal


def test_clarify_with_a_draft_stores_that_draft_in_declared_order() -> None:
    state = draft(at_checks(), "unit")
    assert_transition(
        state,
        Clarify(QID, state.step, "why?", Selection(("lint", "e2e"), " note ")),
        T1,
        status="needs_clarification",
        revision=1,
        step=state.step + 1,
        version=state.version + 1,
        draft=Selection(("e2e", "lint"), "note"),
        clarifications=(Clarification(1, "checks", "why?"),),
    )


def test_a_clarification_request_of_exactly_the_limit_is_accepted() -> None:
    after = clarify(at_checks(), "r" * MAX_CLARIFICATION)
    assert after.clarifications[-1].request == "r" * MAX_CLARIFICATION


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (Clarify(QID, 1, ""), "invalid_answer"),
        (Clarify(QID, 1, " \n "), "invalid_answer"),
        (Clarify(QID, 1, "r" * (MAX_CLARIFICATION + 1)), "text_too_long"),
        (Clarify(QID, 1, "why?", Selection(("nope",))), "unknown_option"),
        (Clarify(QID, 1, "why?", Selection(("unit", "unit"))), "invalid_answer"),
    ],
)
def test_an_invalid_clarify_changes_nothing(command: Clarify, code: str) -> None:
    state = at_checks()
    assert state.step == 1
    assert_refused(state, command, code)


# --- resume -------------------------------------------------------------------------


def test_resume_continues_at_the_same_question_and_records_the_response() -> None:
    state = suspended()
    after = assert_transition(
        state,
        Resume(1, "  Unit tests are faster.  "),
        T1,
        status="in_progress",
        step=state.step + 1,
        version=state.version + 1,
        clarifications=(Clarification(1, "checks", "Which is faster?", "Unit tests are faster."),),
    )
    assert after.revision == 1
    assert after.draft == Selection(("lint",))
    assert after.answers == state.answers
    assert after.current_question is not None and after.current_question.id == "checks"
    assert after.pending_clarification is None


def test_resume_from_the_agents_tool_input() -> None:
    command = Resume.from_input(ResumeInput(QID, 1, "ok"))
    assert command == Resume(1, "ok")
    assert resume(suspended(), "ok").clarifications[-1].response == "ok"


def test_repeated_clarification_gets_increasing_revisions_and_a_full_history() -> None:
    state = at_checks()
    state = clarify(state, "first?")
    assert (state.revision, state.status) == (1, "needs_clarification")
    state = resume(state, "one")
    state = clarify(state, "second?")
    assert (state.revision, state.status) == (2, "needs_clarification")
    state = resume(state, "two")
    state = answer(state, "unit")
    state = clarify(state, "third?")
    assert state.revision == 3
    assert state.clarifications == (
        Clarification(1, "checks", "first?", "one"),
        Clarification(2, "checks", "second?", "two"),
        Clarification(3, "confirm", "third?"),
    )
    assert state.pending_clarification == Clarification(3, "confirm", "third?")
    state = resume(state, "three")
    assert answer(state, "no").status == "completed"


def test_resume_with_stale_revision_changes_nothing() -> None:
    state = clarify(resume(suspended(), "one"), "again?")
    assert state.revision == 2
    error = assert_refused(state, Resume(1, "late"), "stale_revision")
    assert "revision 1 is stale" in error.message and "latest revision" in error.message and "is 2" in error.message
    assert error.message.startswith("questionnaire:")
    assert error.http_status == 409


def test_resume_with_a_future_revision_changes_nothing() -> None:
    error = assert_refused(suspended(), Resume(2, "early"), "stale_revision")
    assert "revision 2 is not a revision of it yet; the latest revision" in error.message  # not "stale"


def test_resume_while_in_progress_with_no_clarification_is_a_stale_revision() -> None:
    assert_refused(in_progress(), Resume(1, "unasked"), "stale_revision")


def test_resume_of_a_questionnaire_not_awaiting_clarification_changes_nothing() -> None:
    state = resume(suspended(), "one")
    error = assert_refused(state, Resume(1, "again"), "not_awaiting_clarification")
    assert error.message.startswith("questionnaire:") and "is in progress, not awaiting clarification" in error.message
    assert error.http_status == 409


def test_of_two_resumes_of_one_revision_the_second_fails() -> None:
    state = suspended()
    first = apply(state, Resume(1, "first"), T1)
    second_on_old = apply(state, Resume(1, "second"), T1)  # a racer still holding the old state
    assert first.version == second_on_old.version  # so a compare-and-set lets only one win
    assert_refused(first, Resume(1, "second"), "not_awaiting_clarification")
    assert first.clarifications[-1].response == "first"


@pytest.mark.parametrize(
    ("response", "code"),
    [("", "invalid_arguments"), ("   ", "invalid_arguments"), ("r" * 1001, "text_too_long")],
)
def test_an_invalid_resume_response_changes_nothing(response: str, code: str) -> None:
    assert_refused(suspended(), Resume(1, response), code)


def test_resume_never_replaces_questions_answers_or_the_draft() -> None:
    state = suspended()
    after = resume(state)
    assert (after.questions, after.answers, after.draft) == (state.questions, state.answers, state.draft)


# --- cancel, abort, unavailable --------------------------------------------------------


@pytest.mark.parametrize("state_of", OPEN_STATES.values(), ids=OPEN_STATES.keys())
def test_the_person_can_cancel_an_open_questionnaire(state_of: Callable[[], Questionnaire]) -> None:
    state = state_of()
    after = assert_transition(
        state,
        Cancel(QID, state.step),
        T1,
        status="cancelled",
        cancellation_reason="user_cancelled",
        step=state.step + 1,
        version=state.version + 1,
    )
    assert after.is_terminal and after.pending_clarification is None


@pytest.mark.parametrize("state_of", OPEN_STATES.values(), ids=OPEN_STATES.keys())
def test_the_agent_can_abort_an_open_questionnaire(state_of: Callable[[], Questionnaire]) -> None:
    state = state_of()
    assert_transition(state, Abort(), T1, status="cancelled", cancellation_reason="aborted", version=state.version + 1)


@pytest.mark.parametrize("reason", ["ui_unavailable", "ui_error"])
@pytest.mark.parametrize("state_of", OPEN_STATES.values(), ids=OPEN_STATES.keys())
def test_an_open_questionnaire_can_become_unavailable(state_of: Callable[[], Questionnaire], reason: Any) -> None:
    state = state_of()
    assert_transition(
        state,
        MarkUnavailable(reason),
        T1,
        status="unavailable",
        cancellation_reason=reason,
        version=state.version + 1,
    )


def test_closing_keeps_the_answers_the_draft_and_the_clarifications() -> None:
    state = suspended()
    for command in (Cancel(QID, state.step), Abort(), MarkUnavailable("ui_error")):
        after = apply(state, command, T1)
        assert (after.answers, after.draft, after.clarifications) == (
            state.answers,
            state.draft,
            state.clarifications,
        )


# --- illegal commands in every status ---------------------------------------------------


def _client_commands(step: int, qid: str = QID) -> list[Command]:
    return [
        Draft(qid, step, ("unit",)),
        AnswerQuestion(qid, step, "checks", ("unit",)),
        Clarify(qid, step, "why?"),
        Cancel(qid, step),
    ]


@pytest.mark.parametrize("state_of", OPEN_STATES.values(), ids=OPEN_STATES.keys())
@pytest.mark.parametrize("offset", [-1, 1, 100])
def test_client_commands_naming_another_step_change_nothing(state_of: Callable[[], Questionnaire], offset: int) -> None:
    state = state_of()
    for command in _client_commands(state.step + offset):
        error = assert_refused(state, command, "stale_step")
        assert f"the current step is {state.step}" in error.message


@pytest.mark.parametrize("state_of", OPEN_STATES.values(), ids=OPEN_STATES.keys())
def test_client_commands_naming_another_questionnaire_change_nothing(
    state_of: Callable[[], Questionnaire],
) -> None:
    state = state_of()
    for command in _client_commands(state.step, qid="qn-other"):
        error = assert_refused(state, command, "stale_step")
        assert "qn-other" in error.message


@pytest.mark.parametrize(
    "command",
    [
        Draft(QID, 2, ("unit",)),
        AnswerQuestion(QID, 2, "checks", ("unit",)),
        Clarify(QID, 2, "again?"),
    ],
    ids=["draft", "answer", "clarify"],
)
def test_only_cancel_is_accepted_from_the_person_while_suspended(command: Command) -> None:
    state = suspended()
    assert state.step == 2
    error = assert_refused(state, command, "stale_step")
    assert "waiting for the agent" in error.message


def test_an_error_names_the_refused_command_and_the_state() -> None:
    state = at_checks()
    assert "answer names step 0" in assert_refused(state, AnswerQuestion(QID, 0, "checks", ()), "stale_step").message
    assert "draft names step 9" in assert_refused(state, Draft(QID, 9, ()), "stale_step").message
    assert "clarify names" in assert_refused(state, Clarify("x", 1, "?"), "stale_step").message
    done = completed()
    assert (
        f"cancel refused: questionnaire {QID} is completed"
        in assert_refused(done, Cancel(QID, done.step), "stale_step").message
    )


@pytest.mark.parametrize("state_of", TERMINAL_STATES.values(), ids=TERMINAL_STATES.keys())
def test_a_terminal_questionnaire_accepts_nothing(state_of: Callable[[], Questionnaire]) -> None:
    state = state_of()
    assert state.is_terminal and state.is_outcome
    for step in (state.step - 1, state.step, state.step + 1):
        for command in _client_commands(step):
            assert_refused(state, command, "stale_step")
    for command in (Abort(), MarkUnavailable("ui_unavailable"), MarkUnavailable("ui_error")):
        error = assert_refused(state, command, "questionnaire_closed")
        assert f"already {state.status}" in error.message
    assert_refused(state, Resume(state.revision, "late"), "not_awaiting_clarification")
    assert_refused(state, Resume(state.revision + 1, "late"), "stale_revision")


def test_a_questionnaire_cancelled_while_suspended_refuses_the_agents_resume() -> None:
    state = cancel(suspended())
    assert_refused(state, Resume(state.revision, "too late"), "not_awaiting_clarification")


# --- records --------------------------------------------------------------------------


ALL_STATES: dict[str, Callable[[], Questionnaire]] = {
    "fresh": in_progress,
    "with a draft": lambda: draft(at_checks(), "lint", other="x\ny"),
    "after a resume": lambda: resume(suspended(), "fine"),
    **OPEN_STATES,
    **TERMINAL_STATES,
}


@pytest.mark.parametrize("state_of", ALL_STATES.values(), ids=ALL_STATES.keys())
def test_a_state_survives_the_record_round_trip(state_of: Callable[[], Questionnaire]) -> None:
    state = state_of()
    assert Questionnaire.from_record(state.to_record()) == state
    through_json = json.loads(json.dumps(state.to_record()))
    assert Questionnaire.from_record(through_json) == state
    through_msgpack = msgpack.unpackb(msgpack.packb(state.to_record()))
    assert Questionnaire.from_record(through_msgpack) == state


def test_a_questionnaire_s_own_client_wait_is_kept_in_its_record() -> None:
    plain = new_questionnaire()
    assert plain.to_record()["clientWait"] is None
    waiting = start("qn-2", "sess-1", plain.questions, T0, client_wait=900.0)
    assert waiting.client_wait == 900.0 and waiting.to_record()["clientWait"] == 900.0
    assert Questionnaire.from_record(waiting.to_record()) == waiting


def test_a_record_with_descriptions_and_no_ceiling_round_trips() -> None:
    raw = multi("m", ("a", "b"))
    raw["options"][0]["description"] = "the first"
    state = new_questionnaire(raw, single("s", label="Pick"))
    assert Questionnaire.from_record(state.to_record()) == state


def test_a_record_is_plain_data() -> None:
    record = suspended().to_record()
    assert record == {
        "id": QID,
        "sessionId": SID,
        "questions": [q.to_wire() for q in suspended().questions],
        "createdAt": T0,
        "updatedAt": record["updatedAt"],
        "status": "needs_clarification",
        "revision": 1,
        "step": 2,
        "version": 3,
        "answers": [{"questionId": "pick", "selectedOptionIds": ["b"]}],
        "draft": {"selectedOptionIds": ["lint"]},
        "clarifications": [{"revision": 1, "questionId": "checks", "request": "Which is faster?"}],
        "cancellationReason": None,
        "askedBy": None,
        "clientWait": None,
        "answeredBy": None,
        "inHostSince": None,
    }


def test_updated_at_is_the_time_passed_in() -> None:
    state = at_checks()
    after = apply(state, Draft(QID, state.step, ()), 12345.5)
    assert (after.created_at, after.updated_at) == (T0, 12345.5)


def test_an_answer_keeps_every_field_it_does_not_change() -> None:
    """An answer changes what it must and nothing else: every other field, set off its
    default in the sample, comes through as it was."""
    state = resume(clarify(draft(new_questionnaire(), "a")))  # a revision, a clarification, a draft
    # every kept field off its default
    state = msgspec.structs.replace(
        state, cancellation_reason="aborted", asked_by="build-agent", client_wait=900.0, in_host_since=T0
    )
    changed = {"answers", "draft", "status", "step", "version", "updated_at", "answered_by"}
    for f in msgspec.structs.fields(Questionnaire):
        if f.name not in changed and f.default is not msgspec.NODEFAULT:
            assert getattr(state, f.name) != f.default, f"the sample should set {f.name}"
    answered = apply(state, AnswerQuestion(state.id, state.step, state.questions[0].id, ("a",)), T1)
    for f in msgspec.structs.fields(Questionnaire):
        if f.name not in changed:
            assert getattr(answered, f.name) == getattr(state, f.name), f.name
