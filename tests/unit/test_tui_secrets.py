"""The terminal client stops before sending a text that looks like a secret
(clients/tui/secret_stop.py): s sends it anyway with confirmedNotSecret, e or Esc edits it."""

from __future__ import annotations

from typing import Any

from clients.tui.model import TuiModel
from tests.unit.test_tui_model import connected, question_frame, screen, strip_refs, suspended_frame

# Fabricated, and put together here so that no secret scanner flags this file.
TOKEN = "ghp_" + "Zr4mQ8vNc2Lx7Tb1Wk9Hs3Jd6Fp0Ya5GeR2u"
PAIR = "DB_PASSWORD=" + "Wq7!zR2mK9"


def mode_of(model: TuiModel) -> str:
    return model.mode  # (a plain str: mypy would keep the mode narrowed across key presses)


def open_other(model: TuiModel, text: str) -> None:
    """Highlight "Other…", open it, paste ``text``."""
    model.key("end")
    for _ in range(2):
        model.key("up")  # from "Cancel questionnaire" past "Ask to clarify…"
    assert model.key("enter") == []
    assert model.mode == "other"
    assert model.key("paste", text) == []


def open_clarify(model: TuiModel, text: str) -> None:
    model.key("end")
    model.key("up")
    assert model.key("enter") == []
    assert model.mode == "clarify"
    assert model.key("paste", text) == []


def test_enter_on_an_other_answer_that_looks_like_a_token_stops_and_says_why() -> None:
    model = connected(question_frame())
    open_other(model, f"use {TOKEN}")
    assert model.key("enter") == []
    assert model.mode == "secret"
    shown = screen(model, 100, 30)
    assert "This looks like a secret — nothing was sent" in shown
    assert "Your answer looks like a GitHub token" in shown
    assert "[s] send anyway  [e] edit" in shown
    assert "s send anyway" in shown.splitlines()[-1] and "e/Esc edit" in shown.splitlines()[-1]
    assert not model.busy


def test_s_sends_the_same_answer_saying_the_person_confirmed() -> None:
    model = connected(question_frame(step=4))
    open_other(model, f"use {TOKEN}")
    model.key("enter")
    sent = model.key("char", "s")
    assert strip_refs(sent) == [
        {
            "type": "answer",
            "questionnaireId": "qn-1",
            "step": 4,
            "questionId": "target",
            "selectedOptionIds": [],
            "other": f"use {TOKEN}",
            "confirmedNotSecret": True,
        }
    ]
    assert model.busy and model.held is None


def test_e_and_escape_go_back_to_the_text_as_typed() -> None:
    for key, data in (("char", "e"), ("escape", "")):
        model = connected(question_frame())
        open_other(model, f"use {TOKEN}")
        model.key("enter")
        assert model.key(key, data) == []
        assert model.mode == "other"
        assert model.input.text == f"use {TOKEN}"
        assert "This looks like a secret" not in screen(model)


def test_other_keys_leave_the_stop_up() -> None:
    model = connected(question_frame())
    open_other(model, TOKEN)
    model.key("enter")
    for key, data in (("enter", ""), ("char", "y"), ("space", " "), ("char", "x")):
        assert model.key(key, data) == []
        assert model.mode == "secret"
    assert model.input.text == TOKEN


def test_an_ordinary_other_answer_goes_at_once_without_the_flag() -> None:
    model = connected(question_frame())
    open_other(model, "Postgres 16 on staging")
    [frame] = model.key("enter")
    assert frame["other"] == "Postgres 16 on staging" and "confirmedNotSecret" not in frame


def test_a_multi_questions_other_stops_before_its_draft_and_later_frames_carry_the_flag() -> None:
    model = connected(question_frame("multi", step=2))
    open_other(model, PAIR)
    assert model.key("enter") == []
    assert model.mode == "secret"
    [draft] = model.key("char", "s")
    assert draft["type"] == "draft" and draft["other"] == PAIR and draft["confirmedNotSecret"] is True
    assert mode_of(model) == "list"
    model.key("home")
    [answer] = model.key("enter")  # Continue
    assert answer["type"] == "answer" and answer["other"] == PAIR and answer["confirmedNotSecret"] is True


def test_a_clarification_that_looks_like_a_password_stops_then_goes_with_the_flag() -> None:
    model = connected(question_frame(step=3))
    open_clarify(model, f"is {PAIR} the one?")
    assert model.key("enter") == []
    assert "Your question for the agent looks like a password" in screen(model, 100, 30)
    assert "Ask the agent about this question" in screen(model, 100, 30)
    [frame] = model.key("char", "S")
    assert frame["type"] == "clarify" and frame["confirmedNotSecret"] is True


def test_the_stop_goes_when_the_question_moves_on_and_nothing_is_sent() -> None:
    for moved_on in (question_frame(step=9, qid="other_q"), suspended_frame(step=9), {"type": "idle"}):
        model = connected(question_frame(step=1))
        open_other(model, TOKEN)
        model.key("enter")
        model.apply(moved_on)
        assert model.mode != "secret" and model.held is None
        assert model.key("char", "s") == []


def test_what_was_confirmed_is_forgotten_with_the_question() -> None:
    model = connected(question_frame(step=1))
    open_other(model, TOKEN)
    model.key("enter")
    model.key("char", "s")
    model.apply(question_frame(step=2, qid="next"))
    open_other(model, TOKEN)
    assert model.key("enter") == []
    assert model.mode == "secret"


def test_a_draft_the_broker_echoes_was_confirmed_elsewhere() -> None:
    draft: dict[str, Any] = {"selectedOptionIds": [], "other": PAIR}
    model = connected(question_frame("multi", step=5, draft=draft))
    model.key("home")
    [answer] = model.key("enter")
    assert answer["other"] == PAIR and answer["confirmedNotSecret"] is True


def test_a_refusal_from_the_broker_is_said_in_words() -> None:
    model = connected(question_frame())
    model.apply(
        {"type": "error", "code": "looks_like_secret", "rule": "github_token", "message": "…", "field": "other"}
    )
    assert "Not sent: the broker says it looks like a GitHub token" in screen(model, 120, 24)
