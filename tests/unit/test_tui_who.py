"""The terminal client tells who answered on another screen (``answeredBy``), and not its own."""

from __future__ import annotations

from typing import Any

import pytest

from clients.tui.who import answered_by_phrase
from tests.unit.test_tui_model import connected, question_frame, screen, suspended_frame

ALICE_WEB = {"sub": "alice", "role": "client", "client": {"kind": "web", "name": "qbroker web"}}


def moved_on(answered_by: Any, **fields: Any) -> dict[str, Any]:
    """A question frame that says who answered the question before it."""
    return {**question_frame(**fields), "answeredBy": answered_by}


@pytest.mark.parametrize(
    ("by", "phrase"),
    [
        (ALICE_WEB, "answered by alice in the browser"),
        ({"sub": "bob", "role": "client", "client": {"kind": "tui", "name": "x"}}, "answered by bob in the terminal"),
        (
            {"sub": "ci", "role": "client", "client": {"kind": "bot", "name": "qbroker-bots 2"}},
            "answered by ci with qbroker-bots 2",
        ),
        ({"sub": None, "role": "client", "client": {"kind": "bot", "name": ""}}, "answered with a script"),
        ({"sub": None, "role": "client", "client": {"kind": "web", "name": ""}}, "answered in the browser"),
        ({"sub": " ", "role": "client", "client": None}, None),
        (None, None),
        ("alice", None),
    ],
)
def test_the_phrase_names_the_person_and_where(by: Any, phrase: str | None) -> None:
    assert answered_by_phrase(by) == phrase


def test_a_question_another_screen_moved_on_to_says_who_answered() -> None:
    model = connected(question_frame(step=0, index=0))
    model.apply(moved_on(ALICE_WEB, step=1, index=1, qid="checks"))
    assert model.notice is not None and model.notice.kind == "info"
    assert model.notice.text == "Question 1 was answered by alice in the browser."
    assert "Question 1 was answered by alice in the browser." in screen(model, width=100)


def test_its_own_answer_is_not_told_back() -> None:
    model = connected(question_frame(step=0, index=0))
    assert model.key("enter")[0]["type"] == "answer"
    alice_here = {**ALICE_WEB, "client": {"kind": "tui", "name": "qbroker tui"}}
    model.apply(moved_on(alice_here, step=1, index=1, qid="checks"))
    assert model.notice is None
    model.apply(moved_on(alice_here, step=2, index=2, qid="confirm"))  # the next one came from elsewhere
    assert model.notice is not None and model.notice.text == "Question 2 was answered by alice in the terminal."


def test_a_client_that_opens_later_is_told_who_answered_the_question_before() -> None:
    model = connected(moved_on(ALICE_WEB, step=3, index=2, qid="checks"))
    assert model.notice is not None and model.notice.text == "Question 2 was answered by alice in the browser."


def test_back_from_the_agent_the_note_is_not_repeated() -> None:
    model = connected(question_frame(step=1, index=1, qid="checks"))
    model.apply(suspended_frame(step=2, qid="checks"))
    model.apply(moved_on(ALICE_WEB, step=3, index=1, qid="checks"))
    assert model.notice is None


def test_the_question_of_the_next_questionnaire_drops_the_note() -> None:
    model = connected(moved_on(ALICE_WEB, step=1, index=1, qid="checks"))
    model.apply(question_frame(step=0, index=0, qn="qn-2"))
    assert model.notice is None


def test_a_questionnaire_completed_on_another_screen_says_who_answered() -> None:
    model = connected(question_frame(step=2, index=2, qid="checks"))
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "completed", "answeredBy": ALICE_WEB})
    assert model.notice is not None
    assert model.notice.text == "Questionnaire completed — answered by alice in the browser."


def test_a_questionnaire_it_completed_itself_thanks_the_person() -> None:
    model = connected(question_frame(step=2, index=2, qid="checks"))
    model.key("enter")
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "completed", "answeredBy": ALICE_WEB})
    assert model.notice is not None
    assert model.notice.text == "Questionnaire completed — your answers were sent to the agent."
