"""What the agent reads back: the tool-result text and the versioned details object."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from broker.core.machine import Abort, MarkUnavailable, Questionnaire, apply
from broker.core.results import DETAILS_VERSION, MARKERS, details, pending, result_text, tool_result
from tests.helpers.machine import QID, SID, answer, cancel, clarify, draft, new_questionnaire, resume
from tests.helpers.samples import multi, single


def fresh() -> Questionnaire:
    return new_questionnaire(
        single("pick", ("a", "b", "c"), label="Pick one"),
        multi("checks", ("unit", "e2e", "lint"), maxSelections=3),
        single("confirm", ("yes", "no"), allowOther=False),
    )


def completed() -> Questionnaire:
    state = answer(fresh(), other='say "hi"\nnext line')
    state = answer(state, "lint", "unit", other="ünïcode")
    return answer(state, "no")


def suspended_at_first() -> Questionnaire:
    return clarify(fresh(), 'What is "a"?')


def suspended_later() -> Questionnaire:
    return clarify(draft(answer(fresh(), "b"), "e2e"), "Which is slow?")


def user_cancelled() -> Questionnaire:
    return cancel(answer(fresh(), "a"))


def aborted() -> Questionnaire:
    return apply(fresh(), Abort(), 2000.0)


def ui_unavailable() -> Questionnaire:
    return apply(fresh(), MarkUnavailable("ui_unavailable"), 2000.0)


def ui_error() -> Questionnaire:
    return apply(answer(fresh(), "c"), MarkUnavailable("ui_error"), 2000.0)


OUTCOMES: dict[str, Callable[[], Questionnaire]] = {
    "completed": completed,
    "needs_clarification": suspended_later,
    "cancelled": user_cancelled,
    "unavailable": ui_error,
}


def lines(state: Questionnaire) -> list[str]:
    return result_text(state).split("\n")


# --- the marker line ----------------------------------------------------------------


@pytest.mark.parametrize(("status", "state_of"), OUTCOMES.items(), ids=OUTCOMES.keys())
def test_the_first_line_is_the_marker_the_id_and_the_revision(
    status: str, state_of: Callable[[], Questionnaire]
) -> None:
    state = state_of()
    assert state.status == status
    assert lines(state)[0] == f"{MARKERS[status]} questionnaireId={QID} revision={state.revision}"


def test_the_four_markers_are_the_seed_markers() -> None:
    assert MARKERS == {
        "completed": "QUESTIONNAIRE_COMPLETED",
        "needs_clarification": "QUESTIONNAIRE_NEEDS_CLARIFICATION",
        "cancelled": "QUESTIONNAIRE_CANCELLED",
        "unavailable": "QUESTIONNAIRE_UNAVAILABLE",
    }


def test_the_marker_line_carries_a_revision_above_zero_after_clarifications() -> None:
    state = answer(resume(suspended_later()), "unit")
    state = answer(state, "yes")
    assert lines(state)[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={QID} revision=1"


# --- completed ----------------------------------------------------------------------


def test_a_completed_result_lists_every_answer_in_question_order() -> None:
    text = lines(completed())
    assert text[1] == "The user answered all 3 question(s). Answers, in question order:"
    assert text[2:5] == [
        'pick: optionIds=[] other="say \\"hi\\"\\nnext line"',
        'checks: optionIds=[unit, lint] other="ünïcode"',
        "confirm: optionIds=[no]",
    ]
    assert "declared" in text[5]
    assert len(text) == 6


def test_an_other_answer_line_is_json_quoted_and_stays_on_one_line() -> None:
    line = lines(completed())[2]
    quoted = line.split(" other=", 1)[1]
    assert json.loads(quoted) == 'say "hi"\nnext line'


def test_an_empty_multi_answer_reads_as_an_empty_list() -> None:
    state = answer(answer(answer(fresh(), "a")), "yes")
    assert "checks: optionIds=[]" in lines(state)


# --- needs_clarification ------------------------------------------------------------


def _resume_call(state: Questionnaire) -> dict[str, object]:
    calls = [line for line in lines(state) if line.startswith('{"action": "resume"')]
    assert len(calls) == 1
    call: dict[str, object] = json.loads(calls[0])
    return call


@pytest.mark.parametrize("state_of", [suspended_at_first, suspended_later])
def test_a_clarification_result_carries_the_exact_resume_call(
    state_of: Callable[[], Questionnaire],
) -> None:
    state = state_of()
    call = _resume_call(state)
    assert call["action"] == "resume"
    assert call["questionnaireId"] == QID
    assert call["revision"] == state.revision
    assert set(call) == {"action", "questionnaireId", "revision", "clarificationResponse"}
    assert "1000 characters" in str(call["clarificationResponse"])


def test_a_clarification_result_names_the_question_and_quotes_the_request() -> None:
    text = lines(suspended_at_first())
    assert text[1] == 'The user paused at question 1 of 3 (pick: "Pick one") and asks:'
    assert text[2] == '"What is \\"a\\"?"'
    assert "Answers so far" not in result_text(suspended_at_first())


def test_a_clarification_result_lists_the_answers_already_stored() -> None:
    text = lines(suspended_later())
    assert text[1].startswith("The user paused at question 2 of 3 (checks:")
    assert text[3:5] == ["Answers so far (already stored):", "pick: optionIds=[b]"]


def test_a_second_clarification_asks_for_the_new_revision() -> None:
    state = clarify(resume(suspended_later()), "And now?")
    assert _resume_call(state)["revision"] == 2
    assert lines(state)[0].endswith("revision=2")
    assert '"And now?"' in lines(state)


def test_a_clarification_result_tells_the_model_not_to_restart_or_guess() -> None:
    text = result_text(suspended_later())
    assert "Do not resend questions" in text
    assert "do not guess" in text


# --- cancelled and unavailable ------------------------------------------------------


def test_a_user_cancellation_says_where_and_lists_partial_answers() -> None:
    text = lines(user_cancelled())
    assert text[1] == "The user cancelled the questionnaire at question 2 of 3."
    assert text[2:4] == ["Answers given before it ended:", "pick: optionIds=[a]"]
    assert "Do not guess" in text[-1]


def test_an_agent_abort_says_so_and_that_nothing_was_answered() -> None:
    text = lines(aborted())
    assert text[0] == f"QUESTIONNAIRE_CANCELLED questionnaireId={QID} revision=0"
    assert text[1] == "The questionnaire was aborted by the agent before the user finished it."
    assert text[2] == "No question had been answered."
    # The agent's doing: never passed off to the model as the person's decision.
    assert text[-1] == "The user did not decline these questions. Do not guess the missing answers."
    assert "real decision" in lines(user_cancelled())[-1]


def test_an_unavailable_ui_names_the_session() -> None:
    text = lines(ui_unavailable())
    assert text[0] == f"QUESTIONNAIRE_UNAVAILABLE questionnaireId={QID} revision=0"
    assert f"session {SID}" in text[1]
    assert text[2] == "No question had been answered."
    assert "Do not guess" in text[-1]


def test_a_disconnected_ui_says_it_did_not_come_back_and_lists_partial_answers() -> None:
    text = lines(ui_error())
    assert "disconnected" in text[1]
    assert text[2:4] == ["Answers given before it ended:", "pick: optionIds=[c]"]


# --- details ------------------------------------------------------------------------


def test_completed_details_carry_every_field_of_version_1() -> None:
    state = completed()
    assert details(state) == {
        "version": 1,
        "questionnaireId": QID,
        "revision": 0,
        "status": "completed",
        "currentQuestionIndex": 3,
        "questions": [q.to_wire() for q in state.questions],
        "answers": [
            {"questionId": "pick", "selectedOptionIds": [], "other": 'say "hi"\nnext line'},
            {"questionId": "checks", "selectedOptionIds": ["unit", "lint"], "other": "ünïcode"},
            {"questionId": "confirm", "selectedOptionIds": ["no"]},
        ],
        "draftAnswer": None,
        "clarifications": [],
    }
    assert DETAILS_VERSION == 1


def test_clarification_details_carry_the_request_and_the_draft() -> None:
    state = suspended_later()
    assert details(state) == {
        "version": 1,
        "questionnaireId": QID,
        "revision": 1,
        "status": "needs_clarification",
        "currentQuestionIndex": 1,
        "questions": [q.to_wire() for q in state.questions],
        "answers": [{"questionId": "pick", "selectedOptionIds": ["b"]}],
        "draftAnswer": {"selectedOptionIds": ["e2e"]},
        "clarificationRequest": {"revision": 1, "questionId": "checks", "request": "Which is slow?"},
        "clarifications": [{"revision": 1, "questionId": "checks", "request": "Which is slow?"}],
    }


def test_clarification_request_is_gone_once_resumed_but_the_history_keeps_the_response() -> None:
    state = cancel(resume(suspended_later(), "e2e is slow"))
    out = details(state)
    assert "clarificationRequest" not in out
    assert out["clarifications"] == [
        {"revision": 1, "questionId": "checks", "request": "Which is slow?", "response": "e2e is slow"}
    ]


@pytest.mark.parametrize(
    ("state_of", "reason"),
    [
        (user_cancelled, "user_cancelled"),
        (aborted, "aborted"),
        (ui_unavailable, "ui_unavailable"),
        (ui_error, "ui_error"),
    ],
)
def test_cancellation_reason_is_present_for_cancelled_and_unavailable(
    state_of: Callable[[], Questionnaire], reason: str
) -> None:
    out = details(state_of())
    assert out["cancellationReason"] == reason
    assert "clarificationRequest" not in out
    assert list(out)[:5] == ["version", "questionnaireId", "revision", "status", "cancellationReason"]


@pytest.mark.parametrize("state_of", [completed, suspended_later])
def test_cancellation_reason_is_absent_otherwise(state_of: Callable[[], Questionnaire]) -> None:
    assert "cancellationReason" not in details(state_of())


def test_a_cancelled_multi_draft_is_reported_as_the_draft_answer() -> None:
    state = cancel(draft(answer(fresh(), "b"), "lint", "unit", other="more"))
    assert details(state)["draftAnswer"] == {"selectedOptionIds": ["unit", "lint"], "other": "more"}
    assert details(state)["currentQuestionIndex"] == 1


def test_details_are_json_serializable() -> None:
    for state_of in (*OUTCOMES.values(), aborted, ui_unavailable):
        state = state_of()
        assert json.loads(json.dumps(tool_result(state))) == tool_result(state)


# --- bodies -------------------------------------------------------------------------


@pytest.mark.parametrize("state_of", OUTCOMES.values(), ids=OUTCOMES.keys())
def test_a_tool_result_is_one_text_block_plus_details(state_of: Callable[[], Questionnaire]) -> None:
    state = state_of()
    assert tool_result(state) == {
        "content": [{"type": "text", "text": result_text(state)}],
        "details": details(state),
        "isError": False,
    }


def test_a_questionnaire_still_in_progress_has_no_tool_result() -> None:
    with pytest.raises(ValueError, match="no outcome"):
        tool_result(answer(fresh(), "a"))


def test_pending_names_the_id_revision_and_step() -> None:
    state = resume(suspended_later())
    assert pending(state) == {"status": "pending", "questionnaireId": QID, "revision": 1, "step": 3}
