"""The terminal client's view-model: keys in, frames out, screens drawn (no terminal, no I/O)."""

from __future__ import annotations

import argparse
from typing import Any, cast

import pytest

from broker.core.errors import BrokerError
from broker.core.model import MAX_CLARIFICATION, MAX_OTHER
from broker.tokens.claims import mint_token, verify_token
from clients.tui import app as tui
from clients.tui.connection import (
    Connection,
    agent_token_hint,
    backoff_delay,
    describe_close,
    validate_session,
    websocket_url,
)
from clients.tui.model import TuiModel
from clients.tui.state import Mode
from clients.tui.text import cells
from clients.tui.text_input import TextInput

# --- fixtures ------------------------------------------------------------------------


def suspended_frame(request: str = "?", *, step: int, qid: str = "target", qn: str = "qn-1") -> dict[str, Any]:
    """The broker's ``suspended`` frame: the person asked ``request`` about ``qid``."""
    return {
        "type": "suspended",
        "questionnaireId": qn,
        "revision": 1,
        "step": step,
        "questionId": qid,
        "request": request,
    }


def question_frame(
    kind: str = "single",
    *,
    options: int = 3,
    step: int = 1,
    index: int = 0,
    qid: str = "target",
    qn: str = "qn-1",
    draft: dict[str, Any] | None = None,
    clarifications: list[dict[str, Any]] | None = None,
    labels: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    opts: list[dict[str, Any]] = [
        {"id": f"o{i}", "label": labels[i] if labels else f"Option {i}"} for i in range(options)
    ]
    opts[0]["description"] = "The first option, described"
    question: dict[str, Any] = {
        "id": qid,
        "label": "Target",
        "prompt": "Which environment should this release go to?",
        "type": kind,
        "options": opts,
        "allowOther": True,
    }
    if kind == "multi":
        question.update(minSelections=0, maxSelections=None)
    question.update(fields)
    return {
        "type": "question",
        "questionnaireId": qn,
        "revision": 0,
        "step": step,
        "index": index,
        "total": 3,
        "question": question,
        "draft": draft,
        "progress": [
            {"questionId": "region", "label": "Region", "state": "answered"},
            {"questionId": qid, "label": "Target", "state": "current"},
            {"questionId": "checks", "label": "Checks", "state": "pending"},
        ],
        "clarifications": clarifications or [],
    }


def connected(frame: dict[str, Any] | None = None) -> TuiModel:
    model = TuiModel("demo", "ws://127.0.0.1:1/v1/sessions/demo/ws")
    model.apply({"type": "welcome", "clientId": "c1", "sessionId": "demo", "protocol": 1})
    if frame is not None:
        model.apply(frame)
    return model


def screen(model: TuiModel, width: int = 80, height: int = 24) -> str:
    lines = model.render(width, height, now=0.0)
    return "\n".join("".join(text for _, text in line) for line in lines)


def typed(model: TuiModel, text: str) -> None:
    for ch in text:
        assert model.key("space" if ch == " " else "char", ch) == []


def strip_refs(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if k != "ref"} for f in frames]


# --- URLs, sessions, backoff, close codes ----------------------------------------------


def test_websocket_url_converts_http_and_https() -> None:
    assert websocket_url("http://127.0.0.1:8700", "s1") == "ws://127.0.0.1:8700/v1/sessions/s1/ws"
    assert websocket_url("https://q.example/base/", "a:b") == "wss://q.example/base/v1/sessions/a:b/ws"


def test_websocket_url_rejects_other_schemes() -> None:
    with pytest.raises(ValueError):
        websocket_url("ftp://host", "s1")
    with pytest.raises(ValueError):
        websocket_url("127.0.0.1:8700", "s1")


def test_validate_session() -> None:
    assert validate_session("demo.session_1:a-b") is None
    assert validate_session("") is not None
    assert validate_session("has space") is not None
    assert validate_session("x" * 129) is not None


def test_backoff_grows_exponentially_up_to_the_cap_with_jitter() -> None:
    low = [backoff_delay(n, rng=lambda: 0.0) for n in range(8)]
    high = [backoff_delay(n, rng=lambda: 1.0) for n in range(8)]
    assert low[:4] == [0.25, 0.5, 1.0, 2.0]
    assert high[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(high) == 10.0 and low[-1] == 5.0
    assert backoff_delay(10_000, rng=lambda: 1.0) == 10.0


def test_describe_close_names_fatal_and_restart_codes() -> None:
    assert describe_close(4401, "expired") == "the broker refused the token (4401: expired)"
    assert "another session" in describe_close(4403)
    assert "restarting" in describe_close(1012, "restart")
    assert "1012: restart" in describe_close(1012, "restart")


def test_an_agent_token_refused_to_the_tui_says_which_token_it_needs() -> None:
    secret = "s" * 32
    agent = mint_token(secret, "alice:review", "agent", ttl=60)
    with pytest.raises(BrokerError) as refused:  # the broker's own reason, as its 4401 carries it
        verify_token(secret, agent, role="client")
    hint = agent_token_hint(4401, refused.value.message, agent)
    assert hint is not None and "\n" not in hint
    assert hint == (
        "the TUI needs a client token: mint one with `qbroker token --session alice:review --role client` and give"
        " it with --token or QBROKER_TOKEN"
    )
    # Any other refusal keeps its own words; a token without a session still gets the command.
    assert agent_token_hint(4401, "token expired", agent) is None
    assert agent_token_hint(4403, refused.value.message, agent) is None
    assert "--session SESSION --role client" in (agent_token_hint(4401, refused.value.message, "junk") or "")


# --- navigation -------------------------------------------------------------------------


def test_highlight_starts_on_the_first_option() -> None:
    model = connected(question_frame())
    assert model.highlight == 0
    assert "❯ Option 0" in screen(model)


def test_up_down_move_and_stop_at_the_ends() -> None:
    model = connected(question_frame())
    rows = model.rows()
    assert [r.kind for r in rows] == ["option", "option", "option", "other", "clarify", "cancel"]
    model.key("up")
    assert model.highlight == 0
    for _ in range(10):
        model.key("down")
    assert model.highlight == len(rows) - 1
    model.key("home")
    assert model.highlight == 0
    model.key("end")
    assert model.highlight == len(rows) - 1


def test_page_down_moves_by_a_page() -> None:
    model = connected(question_frame(options=40))
    screen(model)  # drawing measures the page
    model.key("pagedown")
    assert model.highlight == model.scroll.page > 1
    model.key("pageup")
    assert model.highlight == 0


def test_other_row_is_absent_when_not_allowed() -> None:
    model = connected(question_frame(allowOther=False))
    assert [r.kind for r in model.rows()][-2:] == ["clarify", "cancel"]
    assert "Other…" not in screen(model)


def test_digit_jumps_to_an_option() -> None:
    model = connected(question_frame())
    model.key("char", "3")
    assert model.highlight == 2
    model.key("char", "9")
    assert model.highlight == 2


# --- single -----------------------------------------------------------------------------


def test_enter_chooses_the_highlighted_option_in_a_single_question() -> None:
    model = connected(question_frame(step=4))
    model.key("down")
    frames = model.key("enter")
    assert strip_refs(frames) == [
        {
            "type": "answer",
            "questionnaireId": "qn-1",
            "step": 4,
            "questionId": "target",
            "selectedOptionIds": ["o1"],
        }
    ]
    assert model.busy
    assert model.key("enter") == []  # no double answer while the broker decides


def test_space_does_not_choose_in_a_single_question() -> None:
    model = connected(question_frame())
    assert model.key("space") == []
    assert "Enter" in screen(model)


def test_a_new_question_resets_the_highlight_and_busy_state() -> None:
    model = connected(question_frame())
    model.key("down")
    model.key("enter")
    model.apply(question_frame(step=2, qid="checks", index=1))
    assert model.highlight == 0 and not model.busy


# --- multi ------------------------------------------------------------------------------


def test_space_toggles_and_sends_a_draft() -> None:
    model = connected(question_frame("multi", step=2))
    model.key("down")
    frames = model.key("space")
    assert strip_refs(frames) == [{"type": "draft", "questionnaireId": "qn-1", "step": 2, "selectedOptionIds": ["o1"]}]
    assert "[✓] Option 1" in screen(model)
    frames = model.key("space")
    assert frames[0]["selectedOptionIds"] == []


def test_enter_continues_with_the_selection_in_declared_order() -> None:
    model = connected(question_frame("multi", minSelections=1, maxSelections=3))
    model.key("end")
    model.key("home")
    model.key("down")
    model.key("down")
    model.key("space")  # o2
    model.key("home")
    model.key("space")  # o0
    frames = model.key("enter")
    assert frames[0]["type"] == "answer"
    assert frames[0]["selectedOptionIds"] == ["o0", "o2"]
    assert "other" not in frames[0]


def test_enter_below_min_selections_explains_the_bound_and_sends_nothing() -> None:
    model = connected(question_frame("multi", minSelections=2, maxSelections=3))
    model.key("space")
    assert model.key("enter") == []
    assert "Choose at least 2 (you have 1)" in screen(model)


def test_toggling_past_max_selections_is_refused() -> None:
    model = connected(question_frame("multi", minSelections=0, maxSelections=1))
    model.key("space")
    model.key("down")
    assert model.key("space") == []
    assert model.selected == {"o0"}
    assert "at most 1" in screen(model)


def test_bounds_are_described_in_the_title_and_status() -> None:
    model = connected(question_frame("multi", minSelections=1, maxSelections=2))
    text = screen(model)
    assert "choose 1–2" in text
    assert "0 selected · choose at least 1 to continue" in text
    assert "Space toggle" in text and "Enter continue" in text


def test_draft_from_the_broker_restores_the_selection() -> None:
    draft = {"selectedOptionIds": ["o2"], "other": "mine"}
    model = connected(question_frame("multi", draft=draft))
    assert model.selected == {"o2"} and model.other == "mine"
    assert model.selection_count() == 2
    assert "Other: “mine”" in screen(model)


def test_echoes_of_own_drafts_do_not_undo_fast_toggles() -> None:
    model = connected(question_frame("multi", step=5))
    model.key("space")  # draft [o0]
    model.key("down")
    model.key("space")  # draft [o0, o1]
    model.apply(question_frame("multi", step=5, draft={"selectedOptionIds": ["o0"]}))
    assert model.selected == {"o0", "o1"}
    model.apply(question_frame("multi", step=5, draft={"selectedOptionIds": ["o0", "o1"]}))
    assert model.selected == {"o0", "o1"}
    # Another screen's toggle, now that ours are all echoed, is adopted.
    model.apply(question_frame("multi", step=5, draft={"selectedOptionIds": ["o2"]}))
    assert model.selected == {"o2"}
    assert model.highlight == 1  # and the highlight stays where it was


def test_a_failed_draft_is_not_waited_for() -> None:
    model = connected(question_frame("multi", step=5))
    ref = model.key("space")[0]["ref"]
    model.apply({"type": "error", "code": "bad_frame", "message": "nope", "ref": ref})
    model.apply(question_frame("multi", step=5, draft={"selectedOptionIds": ["o2"]}))
    assert model.selected == {"o2"}


# --- Other ------------------------------------------------------------------------------


def test_other_in_a_single_question_sends_the_trimmed_text_only() -> None:
    model = connected(question_frame())
    model.key("end")
    model.key("up")
    model.key("up")
    assert model.key("enter") == []
    assert model.mode == "other"
    assert "Your own answer" in screen(model)
    typed(model, "  my own 答え 🎉  ")
    frames = model.key("enter")
    assert strip_refs(frames) == [
        {
            "type": "answer",
            "questionnaireId": "qn-1",
            "step": 1,
            "questionId": "target",
            "selectedOptionIds": [],
            "other": "my own 答え 🎉",
        }
    ]


def test_empty_other_is_not_sent() -> None:
    model = connected(question_frame())
    model.highlight = 3
    model.key("enter")
    typed(model, "   ")
    assert model.key("enter") == []
    assert "Type an answer" in screen(model)


def test_other_input_is_limited_to_2000_characters() -> None:
    model = connected(question_frame())
    model.highlight = 3
    model.key("enter")
    model.key("paste", "x" * (MAX_OTHER + 50))
    assert len(model.input.text) == MAX_OTHER
    assert "2000/2000" in screen(model)
    assert "limit is 2000" in screen(model)


def test_escape_in_an_input_goes_back_without_cancelling() -> None:
    model = connected(question_frame())
    model.highlight = 3
    model.key("enter")
    assert model.key("escape") == []
    assert model.mode == "list"


def test_other_in_a_multi_question_is_added_to_the_draft() -> None:
    model = connected(question_frame("multi", minSelections=2, maxSelections=2))
    model.key("space")
    model.highlight = 3
    model.key("enter")
    typed(model, "custom")
    frames = model.key("enter")
    assert strip_refs(frames) == [
        {
            "type": "draft",
            "questionnaireId": "qn-1",
            "step": 1,
            "selectedOptionIds": ["o0"],
            "other": "custom",
        }
    ]
    assert model.mode == "list"
    frames = model.key("enter")
    assert frames[0]["type"] == "answer"
    assert frames[0]["selectedOptionIds"] == ["o0"] and frames[0]["other"] == "custom"


def test_space_on_a_filled_other_row_removes_it() -> None:
    model = connected(question_frame("multi", draft={"selectedOptionIds": [], "other": "x"}))
    model.highlight = 3
    frames = model.key("space")
    assert model.other is None
    assert frames[0]["selectedOptionIds"] == [] and "other" not in frames[0]


def test_other_counts_against_max_selections() -> None:
    model = connected(question_frame("multi", maxSelections=1))
    model.key("space")
    model.highlight = 3
    model.key("enter")
    typed(model, "extra")
    assert model.key("enter") == []
    assert model.other is None


# --- clarify ----------------------------------------------------------------------------


def test_clarify_sends_the_request_and_the_multi_draft() -> None:
    model = connected(question_frame("multi", step=3))
    model.key("down")
    model.key("space")
    model.highlight = 4
    assert model.rows()[4].kind == "clarify"
    model.key("enter")
    assert model.mode == "clarify"
    assert "Ask the agent about" in screen(model)
    typed(model, " What is staging? ")
    frames = model.key("enter")
    assert strip_refs(frames) == [
        {
            "type": "clarify",
            "questionnaireId": "qn-1",
            "step": 3,
            "request": "What is staging?",
            "draft": {"selectedOptionIds": ["o1"]},
        }
    ]


def test_clarify_input_is_limited_to_1000_characters() -> None:
    model = connected(question_frame())
    model.highlight = 4
    model.key("enter")
    model.key("paste", "y" * 1500)
    assert len(model.input.text) == MAX_CLARIFICATION


def test_suspended_shows_waiting_and_resume_shows_the_agents_response() -> None:
    model = connected(question_frame("multi", step=3))
    model.key("down")
    model.key("space")
    model.highlight = 4
    model.key("enter")
    typed(model, "What is staging?")
    model.key("enter")
    model.apply(suspended_frame("What is staging?", step=4))
    text = screen(model)
    assert "Waiting for the agent" in text and "What is staging?" in text
    assert "Esc cancel questionnaire" in text
    clarification = {
        "revision": 1,
        "questionId": "target",
        "request": "What is staging?",
        "response": "A copy of production for testing.",
    }
    model.apply(question_frame("multi", step=5, draft={"selectedOptionIds": ["o1"]}, clarifications=[clarification]))
    text = screen(model)
    assert "Agent" in text and "A copy of production for testing." in text
    assert model.selected == {"o1"}
    # On the first chosen option, as in the browser: Enter now continues, not "Ask to clarify…" again.
    assert model.highlight == 1
    assert "❯ [✓] Option 1" in text and "Enter continue" in text


def test_after_a_resume_the_highlight_is_on_the_first_option_when_none_is_chosen() -> None:
    model = connected(question_frame(step=3))
    model.highlight = 4  # "Ask to clarify…"
    model.apply(suspended_frame(step=4))
    clarification = {"revision": 1, "questionId": "target", "request": "?", "response": "!"}
    model.apply(question_frame(step=5, clarifications=[clarification]))
    assert model.highlight == 0
    assert "Enter choose" in screen(model)


def test_escape_keeps_the_clarification_being_typed_until_it_is_sent() -> None:
    model = connected(question_frame(step=3))
    model.highlight = 4
    model.key("enter")
    typed(model, "What is staging?")
    model.key("escape")
    assert model.mode == "list"
    model.key("enter")  # reopened: the draft is still there, cursor at its end
    assert cast(Mode, model.mode) == "clarify" and model.input.text == "What is staging?"
    assert "What is staging?" in screen(model)
    assert model.key("enter")[0]["request"] == "What is staging?"
    # Sent but refused by the broker: the box still holds it, and Esc keeps it again.
    model.apply({"type": "error", "code": "rate_limited", "message": "slow down"})
    model.key("escape")
    assert cast(Mode, model.mode) == "list"
    model.key("enter")
    assert model.input.text == "What is staging?"  # what was in the box when Esc was pressed
    model.key("clear_line")
    typed(model, "again")
    model.key("escape")
    # Another question: the draft was about the last one.
    model.apply(question_frame(step=4, qid="checks", index=1))
    model.highlight = 4
    model.key("enter")
    assert model.input.text == ""


def test_a_sent_clarification_is_not_offered_again() -> None:
    model = connected(question_frame(step=3))
    model.highlight = 4
    model.key("enter")
    typed(model, "Why?")
    assert model.key("enter") != []
    model.apply(suspended_frame("Why?", step=4))
    clarification = {"revision": 1, "questionId": "target", "request": "Why?", "response": "Because."}
    model.apply(question_frame(step=5, clarifications=[clarification]))
    model.highlight = 4
    model.key("enter")
    assert model.mode == "clarify" and model.input.text == ""


def test_escape_while_suspended_cancels_after_confirmation() -> None:
    model = connected(question_frame())
    model.apply(suspended_frame(step=7))
    model.key("escape")
    assert "Cancel this questionnaire?" in screen(model)
    assert strip_refs(model.key("char", "y")) == [{"type": "cancel", "questionnaireId": "qn-1", "step": 7}]


# --- cancel -----------------------------------------------------------------------------


def test_escape_asks_for_confirmation_and_n_keeps_answering() -> None:
    model = connected(question_frame())
    assert model.key("escape") == []
    assert model.mode == "confirm"
    assert "Cancel this questionnaire?" in screen(model)
    assert model.key("char", "n") == []
    assert cast(Mode, model.mode) == "list"  # (mypy still narrows it to the "confirm" above)


def test_y_confirms_the_cancel() -> None:
    model = connected(question_frame(step=9))
    model.key("escape")
    assert strip_refs(model.key("char", "y")) == [{"type": "cancel", "questionnaireId": "qn-1", "step": 9}]


def test_the_cancel_row_asks_for_confirmation_too() -> None:
    model = connected(question_frame())
    model.key("end")
    assert model.rows()[model.highlight].kind == "cancel"
    assert model.key("enter") == []
    assert model.mode == "confirm"


# --- broker frames ----------------------------------------------------------------------


def test_idle_shows_waiting_for_questions() -> None:
    model = connected()
    model.apply({"type": "idle"})
    assert "Waiting for questions" in screen(model)


def test_closed_frames_become_readable_notices() -> None:
    model = connected(question_frame())
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "completed"})
    model.apply({"type": "idle"})
    assert "Questionnaire completed" in screen(model)
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "cancelled", "reason": "aborted"})
    assert "withdrew" in screen(model)


def test_a_closed_notice_goes_when_the_next_questionnaire_asks() -> None:
    model = connected(question_frame(qn="qn-1"))
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "completed"})
    model.apply(question_frame(qn="qn-1", step=2))  # still about qn-1 (a late view of it): kept
    assert "Questionnaire completed" in screen(model)
    model.apply(question_frame(qn="qn-2"))
    assert "Questionnaire completed" not in screen(model)
    # Other notices stay with the question they came with (an error, then a fresh view).
    model.apply({"type": "error", "code": "stale_step", "message": "old step"})
    model.apply(question_frame(qn="qn-3"))
    assert "changed meanwhile" in screen(model)


def test_the_hint_bar_says_what_enter_does_on_the_highlighted_row() -> None:
    # rows: 3 options, Other, Ask to clarify, Cancel
    for kind, on_option in (("single", "Enter choose"), ("multi", "Enter continue")):
        model = connected(question_frame(kind))
        assert on_option in screen(model)
        for row, says in ((3, "Enter type your answer"), (4, "Enter ask the agent"), (5, "Enter cancel")):
            model.highlight = row
            assert says in screen(model), (kind, row)
            assert on_option not in screen(model)
    model = connected(question_frame("multi", draft={"other": "mine"}))
    model.highlight = 3  # a filled Other row is like a checked option: Enter continues
    assert "Enter continue" in screen(model)


def test_error_frames_are_shown_readably_and_clear_busy() -> None:
    model = connected(question_frame())
    model.key("enter")
    model.apply({"type": "error", "code": "unknown_option", "message": "no option 'x'", "ref": 1})
    assert not model.busy
    assert "no option 'x' [unknown_option]" in screen(model)
    model.apply({"type": "error", "code": "stale_step", "message": "old step"})
    assert "changed meanwhile" in screen(model)


def test_commands_are_refused_while_offline() -> None:
    model = connected(question_frame())
    model.disconnected("connection lost", retry_at=3.0)
    assert model.key("enter") == []
    text = screen(model)
    assert "Not connected" in text
    assert "offline · retry in 3s" in text


def test_the_not_connected_notice_goes_when_the_broker_welcomes_the_client_again() -> None:
    model = connected(question_frame())
    model.disconnected("connection lost", retry_at=3.0)
    model.key("enter")
    assert "Not connected" in screen(model)
    model.connecting(1)
    model.apply({"type": "welcome", "clientId": "c1", "sessionId": "demo", "protocol": 1})
    text = screen(model)
    assert "● connected" in text and "Not connected" not in text
    # Other notices are not about the connection: a welcome leaves them alone.
    model.apply({"type": "error", "code": "rate_limited", "message": "slow"})
    model.apply({"type": "welcome", "clientId": "c1", "sessionId": "demo", "protocol": 1})
    assert "slow down" in screen(model)


def test_offline_wording_promises_only_what_the_broker_keeps() -> None:
    model = connected(question_frame())
    model.disconnected("connection lost", retry_at=3.0)
    text = screen(model)
    assert "Connection lost — retry in 3s. Answers already sent are saved by the broker." in text
    assert "Your answers are kept" not in text


def reconnected(model: TuiModel) -> None:
    model.disconnected("connection lost", retry_at=1.0)
    model.connecting(1)
    model.apply({"type": "welcome", "clientId": "c2", "sessionId": "demo", "protocol": 1})


ENDED = "The questionnaire you were answering ended while you were offline."


@pytest.mark.parametrize(
    "after",
    [
        {"type": "idle"},  # the reconnect grace ran out, or a broker with a memory store restarted
        question_frame(qn="qn-2"),  # and the agent has started another one meanwhile
        suspended_frame(step=2, qid="x", qn="qn-2"),
    ],
)
def test_a_questionnaire_that_ended_while_disconnected_is_explained(after: dict[str, Any]) -> None:
    model = connected(question_frame(qn="qn-1"))
    reconnected(model)
    model.apply(after)
    assert ENDED in screen(model, width=120)
    model.apply({"type": "idle"})  # said once
    model.key("down")
    assert ENDED not in screen(model, width=120)


def test_a_questionnaire_back_after_reconnecting_or_closed_with_a_reason_needs_no_extra_notice() -> None:
    model = connected(question_frame(qn="qn-1"))
    reconnected(model)
    model.apply(question_frame(qn="qn-1"))  # restored as stored
    assert ENDED not in screen(model, width=120)
    suspended = suspended_frame(step=2, qid="t")
    model.apply(suspended)
    reconnected(model)
    model.apply(suspended)
    assert ENDED not in screen(model, width=120)
    reconnected(model)
    model.apply({"type": "closed", "questionnaireId": "qn-1", "status": "cancelled", "reason": "aborted"})
    model.apply({"type": "idle"})
    text = screen(model, width=120)
    assert "withdrew" in text and ENDED not in text
    # Offline with nothing on screen: nothing to have lost.
    reconnected(model)
    model.apply(question_frame(qn="qn-3"))
    assert ENDED not in screen(model, width=120)


def twenty_questions(current: int) -> dict[str, Any]:
    frame = question_frame(index=current)
    frame["total"] = 20
    frame["progress"] = [
        {
            "questionId": f"q{i}",
            "label": f"Question {i}",
            "state": "answered" if i < current else "current" if i == current else "pending",
        }
        for i in range(20)
    ]
    return frame


def test_progress_marks_that_do_not_fit_are_shown_as_an_ellipsis() -> None:
    for current in (0, 9, 19):
        line = screen(connected(twenty_questions(current)), width=60).split("\n")[1]
        assert f"Question {current + 1} of 20" in line
        assert "●" in line and cells(line) <= 60
        marks = sum(line.count(m) for m in "✓●○")
        assert marks < 20
        assert line.rstrip().endswith("…") == (current < 19), line
        assert ("   …  " in line) == (current > 0), line
    line = screen(connected(twenty_questions(9)), width=80).split("\n")[1]
    assert sum(line.count(m) for m in "✓●○") == 20 and "…" not in line


def test_progress_shows_position_and_labels() -> None:
    text = screen(connected(question_frame()))
    assert "Question 1 of 3" in text
    assert "✓ Region" in text and "● Target" in text and "○ Checks" in text


def test_connection_state_is_shown_in_the_header() -> None:
    model = TuiModel("demo", "ws://x")
    assert "connecting…" in screen(model)
    model.apply({"type": "welcome"})
    assert "● connected" in screen(model)
    model.fatal("the broker refused the token")
    assert "disconnected" in screen(model) and "refused the token" in screen(model)
    assert model.key("enter") == []


# --- drawing ----------------------------------------------------------------------------

UNICODE_LABELS = [
    "日本語のラベル",
    "Emoji 🎉🚀 launch",
    "Ünïcödé àccents",
    "한국어 옵션",
    "中文选项非常长的标签" * 6,
]


@pytest.mark.parametrize("size", [(80, 24), (40, 12), (120, 40)])
@pytest.mark.parametrize("kind", ["single", "multi"])
def test_every_screen_fits_the_terminal(size: tuple[int, int], kind: str) -> None:
    width, height = size
    long_prompt = "Pick the one that matters most to you. " * 40
    frame = question_frame(kind, options=5, labels=UNICODE_LABELS, prompt=long_prompt)
    model = connected(frame)
    states: list[TuiModel] = [model]
    for keys in (["down"], ["end"], ["end", "up", "up", "enter"], ["escape"]):
        m = connected(frame)
        for k in keys:
            m.key(k)
        states.append(m)
    for m in states:
        lines = m.render(width, height)
        assert len(lines) == height
        for line in lines:
            assert sum(cells(text) for _, text in line) <= width


def test_unicode_labels_render_whole_when_they_fit() -> None:
    model = connected(question_frame("multi", options=4, labels=UNICODE_LABELS[:4]))
    text = screen(model)
    for label in UNICODE_LABELS[:4]:
        assert label in text


def test_long_lists_scroll_to_keep_the_highlight_visible() -> None:
    model = connected(question_frame(options=50))
    text = screen(model)
    assert "↓" in text and "Option 49" not in text
    model.key("end")
    text = screen(model)
    assert "❯ Cancel questionnaire" in text
    assert "↑" in text and "Option 0" not in text
    for _ in range(3):
        model.key("up")
    assert "❯ Option 49" in screen(model)


LONG_PROMPT = " ".join(f"Sentence {i} of the prompt adds one more detail to read." for i in range(1, 33))


def sentences_read(model: TuiModel, width: int, height: int, pages: int = 40) -> str:
    """Everything shown while paging down through the question's text."""
    seen = screen(model, width, height)
    for _ in range(pages):
        model.key("pagedown")
        seen += screen(model, width, height)
    return seen


@pytest.mark.parametrize("size", [(80, 24), (60, 24)])
def test_a_long_prompt_is_read_in_full_with_page_down(size: tuple[int, int]) -> None:
    width, height = size
    assert len(LONG_PROMPT) > 1750
    model = connected(question_frame("multi", prompt=LONG_PROMPT))
    text = screen(model, width, height)
    assert "Sentence 1 of" in text and "Sentence 32 of" not in text
    assert "more lines · PgDn" in text  # the cut is marked
    assert "PgUp/PgDn read" in text  # and the keys said
    assert "❯ [ ] Option 0" in text  # the options stay in view
    seen = sentences_read(model, width, height)
    joined = " ".join(seen.split())
    for i in range(1, 33):
        assert f"Sentence {i} of" in joined, i
    assert model.highlight == 0  # PageDown read on; it did not move the highlight
    assert "lines above · PgUp" in screen(model, width, height)
    for _ in range(40):
        model.key("pageup")
    assert "Sentence 1 of" in screen(model, width, height)


def test_page_keys_scroll_the_text_while_typing_a_clarification() -> None:
    model = connected(question_frame(prompt=LONG_PROMPT))
    model.highlight = 4
    model.key("enter")
    typed(model, "which one?")
    seen = sentences_read(model, 80, 24)
    assert "Sentence 32 of" in seen
    assert model.input.text == "which one?"
    assert "PgUp/PgDn read" in screen(model)


def test_the_agents_long_reply_is_shown_after_a_resume_and_read_in_full() -> None:
    reply = " ".join(f"Reply {i} explains the staging cluster a little more." for i in range(1, 20))
    assert 990 < len(reply) <= 1000  # the seed's limit
    clarification = {"revision": 1, "questionId": "target", "request": "What is staging?", "response": reply}
    model = connected(question_frame(prompt=LONG_PROMPT, step=3))
    model.apply(suspended_frame(step=4))
    model.apply(question_frame(prompt=LONG_PROMPT, step=5, clarifications=[clarification]))
    text = screen(model)
    assert "You asked  What is staging?" in text and "Reply 1 explains" in text  # scrolled to the reply
    seen = " ".join(sentences_read(model, 80, 24).split())
    for i in range(1, 20):
        assert f"Reply {i} explains" in seen, i


LONG_REQUEST = " ".join(f"Doubt {i} is about the staging cluster and its data." for i in range(1, 20))


@pytest.mark.parametrize("size", [(80, 24), (60, 24)])
def test_the_persons_long_question_is_read_in_full_while_waiting(size: tuple[int, int]) -> None:
    width, height = size
    assert 950 < len(LONG_REQUEST) <= 1000  # near the seed's limit for a clarification
    model = connected(question_frame(step=3))
    model.apply(suspended_frame(LONG_REQUEST, step=4))
    text = screen(model, width, height)
    assert "Waiting for the agent" in text and "Doubt 1 is" in text and "Doubt 19 is" not in text
    assert "more lines · PgDn" in text  # the cut is marked
    assert "PgUp/PgDn read" in text and "Esc cancel questionnaire" in text  # and the keys said
    assert "Your answers and current selections are kept." in text
    seen = " ".join(sentences_read(model, width, height).split())
    for i in range(1, 20):
        assert f"Doubt {i} is" in seen, i
    assert "lines above · PgUp" in screen(model, width, height)
    for _ in range(40):
        model.key("pageup")
    assert "Doubt 1 is" in screen(model, width, height)
    assert all(sum(cells(t) for _, t in line) <= width for line in model.render(width, height))
    # The question, back with the agent's reply, is shown from its own start: not scrolled as the request was.
    model.key("pagedown")
    model.apply(question_frame(step=5, prompt=LONG_PROMPT))
    assert "Sentence 1 of" in screen(model, width, height)


def test_a_short_question_while_waiting_is_not_cut() -> None:
    model = connected(question_frame(step=3))
    model.apply(suspended_frame("What is staging?", step=4))
    text = screen(model)
    assert "more lines" not in text and "PgUp/PgDn" not in text
    assert model.key("pagedown") == [] and "What is staging?" in screen(model)


def test_short_text_is_not_cut_and_page_keys_page_the_options() -> None:
    model = connected(question_frame(options=40))
    text = screen(model)
    assert "more lines" not in text and "PgUp/PgDn" not in text
    model.key("pagedown")
    assert model.highlight > 1


LONG_LABEL = " ".join(f"label{i}" for i in range(1, 25))
LONG_DESCRIPTION = " ".join(f"describes{i}" for i in range(1, 45))


@pytest.mark.parametrize("kind", ["single", "multi"])
@pytest.mark.parametrize("size", [(60, 24), (80, 24)])
def test_the_highlighted_option_shows_its_whole_label_and_description(kind: str, size: tuple[int, int]) -> None:
    assert len(LONG_LABEL) > 150 and len(LONG_DESCRIPTION) > 450
    frame = question_frame(kind, options=4, prompt=LONG_PROMPT)
    frame["question"]["options"][1].update(label=LONG_LABEL, description=LONG_DESCRIPTION)
    model = connected(frame)
    text = screen(model, *size)
    assert "label24" not in text and "describes44" not in text  # not highlighted: a line each
    model.key("down")
    text = " ".join(screen(model, *size).split())
    for i in range(1, 25):
        assert f"label{i} " in text, i
    # On 24 rows of 60 columns the option is taller than its space: PageDown reads the rest.
    text = " ".join(sentences_read(model, *size).split())
    for i in range(1, 45):
        assert f"describes{i} " in text, i
    assert model.highlight == 1
    lines = model.render(*size)
    assert all(sum(cells(t) for _, t in line) <= size[0] for line in lines)


LONG_OTHER = " ".join(f"mine{i}" for i in range(1, 61))


@pytest.mark.parametrize("size", [(60, 24), (80, 24)])
def test_the_highlighted_other_answer_shows_its_whole_text(size: tuple[int, int]) -> None:
    assert len(LONG_OTHER) > 300
    model = connected(question_frame("multi", options=3))
    model.highlight = 3  # Other…
    model.key("enter")
    model.key("paste", LONG_OTHER)
    model.key("enter")  # a ticked Other: "…" row, highlighted
    assert model.mode == "list" and model.other == LONG_OTHER and model.highlight == 3
    text = " ".join(screen(model, *size).split())
    assert "Other: “mine1 " in text
    for i in range(1, 61):
        assert f"mine{i} " in text or f"mine{i}”" in text, i
    model.key("up")  # not highlighted: one line, cut
    text = screen(model, *size)
    assert "Other: “mine1 " in text and "mine60" not in text
    lines = model.render(*size)
    assert all(sum(cells(t) for _, t in line) <= size[0] for line in lines)


def test_typing_wide_characters_keeps_the_input_box_aligned() -> None:
    model = connected(question_frame())
    model.highlight = 3
    model.key("enter")
    typed(model, "答え🎉" * 30)
    lines = model.render(80, 24)
    boxes = [line for line in lines if any("│" in text for _, text in line)]
    assert boxes
    widths = {sum(cells(text) for _, text in line) for line in boxes}
    assert len(widths) == 1


def test_text_input_editing() -> None:
    box = TextInput(10, "hello")
    box.move(-2)
    box.insert("XY")
    assert box.text == "helXYlo" and box.cursor == 5
    box.backspace()
    box.delete()
    assert box.text == "helXo"
    box.home()
    box.delete()
    assert box.text == "elXo"
    box.end()
    assert not box.insert("123456789")
    assert box.text == "elXo123456"
    box.move(-3)
    box.clear_line()
    assert box.text == "456" and box.cursor == 0


# --- command line -----------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tui.configure(parser)
    return parser.parse_args(list(argv))


def test_run_without_a_token_explains_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("QBROKER_TOKEN", raising=False)
    assert tui.run(parse("--url", "http://127.0.0.1:1", "--session", "s")) == 2
    assert "QBROKER_TOKEN" in capsys.readouterr().err


def test_url_and_session_come_from_the_environment_as_for_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QBROKER_URL", "http://127.0.0.1:8700")
    monkeypatch.setenv("QBROKER_SESSION", "demo")
    args = parse()
    assert (args.url, args.session) == ("http://127.0.0.1:8700", "demo")
    assert parse("--session", "other").session == "other"  # a flag still wins
    monkeypatch.delenv("QBROKER_URL")
    with pytest.raises(SystemExit):
        parse()  # no URL anywhere: a usage error


def test_run_rejects_a_bad_url_or_session(capsys: pytest.CaptureFixture[str]) -> None:
    assert tui.run(parse("--url", "ftp://x", "--session", "s", "--token", "t")) == 2
    assert tui.run(parse("--url", "http://x", "--session", "bad session", "--token", "t")) == 2
    err = capsys.readouterr().err
    assert "--url" in err and "--session" in err


def test_a_malformed_question_frame_changes_nothing() -> None:
    model = connected(question_frame(step=3))
    model.key("down")
    bad = question_frame(step=4)
    del bad["question"]["options"]
    with pytest.raises(ValueError):
        model.apply(bad)
    assert model.frame is not None and model.frame["step"] == 3 and model.highlight == 1
    assert "Option 1" in screen(model)


def test_the_connection_turns_an_unreadable_frame_into_a_notice() -> None:
    model = connected(question_frame())
    conn = Connection(model, "ws://127.0.0.1:1/x", "t", "n", on_change=lambda: None)
    conn._apply({"type": "question", "questionnaireId": "qn-2"})
    assert model.frame is not None and model.frame["questionnaireId"] == "qn-1"
    assert "Could not show a 'question' frame" in screen(model)


def test_a_client_opened_during_the_wait_names_the_question_asked_about() -> None:
    # No question frame came before: the suspended frame's label and place say which it was.
    model = connected(None)
    frame = suspended_frame("Is staging required?", step=4)
    model.apply({**frame, "label": "Pre-flight checks", "index": 1, "total": 4})
    text = screen(model)
    assert "Questionnaire paused · question 2 of 4" in text
    assert "Pre-flight checks" in text and "Is staging required?" in text
