"""``qbroker tui --inbox`` without a terminal: inbox frames and keys in, the session to open
and the screens out (the model alone; the real program is driven in tests/e2e/test_tui.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from clients.tui import app as tui
from clients.tui.connection import describe_close, inbox_websocket_url
from clients.tui.inbox_model import InboxModel, InboxSocket, SessionSocket
from clients.tui.inbox_state import WAITING, WITH_AGENT, InboxState, seconds
from clients.tui.inbox_view import ago
from clients.tui.text import cells

T0 = 1_700_000_000.0


def item(sid: str, qid: str, **fields: Any) -> dict[str, Any]:
    return {
        "sessionId": sid,
        "questionnaireId": qid,
        "status": WAITING,
        "label": "Target",
        "prompt": "Which environment should this release go to?",
        "index": 0,
        "total": 2,
        "createdAt": T0,
        "updatedAt": T0,
        "askedBy": None,
        "clients": 0,
        **fields,
    }


BUILD = item("alice:build", "q-a", createdAt=T0 + 10, label="Target", askedBy="build-bot")
REVIEW = item("alice:review", "q-b", createdAt=T0 + 5, label="Reviewer", prompt="Who should review it?")
DOCS = item("alice:docs", "q-c", createdAt=T0 + 1, status=WITH_AGENT, label="Tone", prompt="Which tone?")


def question(sid_qn: str = "q-b", label: str = "Reviewer") -> dict[str, Any]:
    return {
        "type": "question",
        "questionnaireId": sid_qn,
        "revision": 0,
        "step": 0,
        "index": 0,
        "total": 1,
        "question": {
            "id": "reviewer",
            "label": label,
            "prompt": "Who should review it?",
            "type": "single",
            "options": [{"id": "ana", "label": "Ana"}, {"id": "bo", "label": "Bo"}],
            "allowOther": False,
        },
        "draft": None,
        "progress": [{"questionId": "reviewer", "label": label, "state": "current"}],
        "clarifications": [],
    }


def model_with(*items: dict[str, Any]) -> InboxModel:
    model = InboxModel(
        "ws://127.0.0.1:1/v1/inbox/ws", lambda sid: f"ws://127.0.0.1:1/v1/sessions/{sid}/ws", lambda: T0 + 190
    )
    InboxSocket(model).apply({"type": "inbox", "items": list(items)})
    return model


def screen(model: InboxModel, width: int = 80, height: int = 24) -> str:
    lines = model.render(width, height, 0.0)
    assert len(lines) == height
    for line in lines:
        assert sum(cells(text) for _, text in line) <= width, line
    return "\n".join("".join(text for _, text in line) for line in lines)


def highlighted_label(model: InboxModel) -> str:
    item = model.inbox.highlighted()
    assert item is not None
    return str(item["label"])


# --- the list ---------------------------------------------------------------------------


def test_the_list_puts_what_waits_for_the_person_first_then_the_oldest() -> None:
    model = model_with(BUILD, DOCS, REVIEW)
    assert [i["label"] for i in model.inbox.ordered()] == ["Reviewer", "Target", "Tone"]
    text = screen(model)
    long_session = item("tuibox-3addbd9dd1ab4c1c:build", "q-l", askedBy="build-bot", createdAt=T0 + 30)
    assert "tuibox-3addbd9dd1ab4c1c:build · build-bot · 2 min ago" in screen(model_with(long_session))
    assert "inbox · 2 waiting" in text
    assert "Inbox — 2 questionnaires wait for you · 1 waits for the agent's reply." in text
    assert text.index("Reviewer") < text.index("Target") < text.index("Tone")
    assert "❯ Reviewer" in text
    assert "alice:build · build-bot · 3 min ago" in text
    assert "◔ waiting for the agent" in text
    assert "· question 1 of 2" in text  # the place in a longer questionnaire
    assert "Enter answer" in text


def test_the_highlight_stays_on_its_questionnaire_while_others_arrive_and_go() -> None:
    model = model_with(BUILD, REVIEW)
    model.key("down")
    assert highlighted_label(model) == "Target"
    older = item("bob:x", "q-old", createdAt=T0 - 100, label="Older")
    InboxSocket(model).apply({"type": "inbox_item", "item": older})
    assert highlighted_label(model) == "Target"  # the row moved down, the highlight with it
    assert model.inbox.notice is not None and model.inbox.notice.text == "New: Older in bob:x"
    InboxSocket(model).apply({"type": "inbox_item", "item": item("bob:y", "q-y", label="Newer", createdAt=T0 + 50)})
    assert model.inbox.notice.text == "New: Newer in bob:y"  # the latest news
    InboxSocket(model).apply({"type": "inbox_removed", "sessionId": "alice:build", "questionnaireId": "q-a"})
    assert highlighted_label(model) == "Newer"  # its item went: the one now in its place
    model.key("home")
    assert highlighted_label(model) == "Older"
    model.key("char", "2")
    assert highlighted_label(model) == "Reviewer"


def test_a_list_after_a_reconnect_replaces_the_old_one_and_names_what_is_new() -> None:
    state = InboxState()
    assert state.apply({"type": "inbox", "items": [BUILD, DOCS]}) == []  # the first list is not news
    arrived = state.apply({"type": "inbox", "items": [dict(DOCS, status=WAITING), REVIEW]})
    assert sorted(i["label"] for i in arrived) == ["Reviewer", "Tone"]
    assert [i["label"] for i in state.ordered()] == ["Tone", "Reviewer"]
    assert state.apply({"type": "inbox_item", "item": dict(REVIEW, index=1)}) == []  # changed, not new
    assert state.apply({"type": "inbox_item", "item": {"label": "no ids"}}) == []
    assert len(state.items) == 2


def test_nothing_waiting_and_not_yet_connected_say_so() -> None:
    model = InboxModel("ws://127.0.0.1:1/v1/inbox/ws", lambda sid: sid, lambda: T0)
    assert "Connecting…" in screen(model)
    model.inbox_disconnected("connection refused", 3.0)
    assert "Can't reach the broker" in screen(model) and "offline" in screen(model)
    InboxSocket(model).apply({"type": "inbox", "items": []})
    text = screen(model)
    assert "Nothing is waiting for you" in text and "● connected" in text
    assert model.key("enter") == [] and model.session_wanted is None


def test_a_long_list_scrolls_with_the_highlight_and_says_what_is_cut() -> None:
    many = [item(f"s{i:02d}", f"q{i}", createdAt=T0 + i, label=f"Question {i:02d}") for i in range(12)]
    model = model_with(*many)
    text = screen(model)
    assert "Question 00" in text and "↓" in text and "more" in text
    model.key("end")
    text = screen(model)
    assert "❯ Question 11" in text and "↑" in text and "Question 00" not in text


@pytest.mark.parametrize(("width", "height"), [(80, 24), (40, 12), (120, 40), (20, 6)])
def test_every_line_fits_whatever_the_labels_are_written_in(width: int, height: int) -> None:
    wide = item(
        "チーム:ビルド", "q-w", label="デプロイ先 🚀 " * 5, prompt="どの環境に出しますか? " * 10, askedBy="ビルド係"
    )
    model = model_with(wide, BUILD, DOCS)
    screen(model, width, height)


# --- answering one, and coming back ----------------------------------------------------


def test_enter_opens_the_highlighted_one_on_its_sessions_socket() -> None:
    model = model_with(BUILD, REVIEW)
    assert model.key("enter") == []
    assert model.session_wanted == "alice:review"
    session = SessionSocket(model, "alice:review")
    session.apply({"type": "welcome", "clientId": "c", "sessionId": "alice:review", "protocol": 1})
    session.apply(question())
    text = screen(model)
    assert "session alice:review · 1 other waiting" in text
    assert "❯ Ana" in text and "← inbox" in text
    frames = model.key("enter")
    assert [(f["type"], f["selectedOptionIds"]) for f in frames] == [("answer", ["ana"])]


def test_when_it_ends_the_list_comes_back_with_the_next_one_offered() -> None:
    model = model_with(BUILD, REVIEW)
    model.key("enter")
    session = SessionSocket(model, "alice:review")
    session.apply({"type": "welcome"})
    session.apply(question())
    session.apply({"type": "closed", "questionnaireId": "q-b", "status": "completed"})
    assert model.session_wanted is None
    text = screen(model)
    # The inbox's own inbox_removed may come later: the one answered is never offered.
    assert "✓ Answers sent. Next: Target (alice:build) — Enter answers it" in text
    assert highlighted_label(model) == "Target"
    model.key("enter")
    assert model.session_wanted == "alice:build"


def test_the_offer_follows_the_list() -> None:
    model = model_with(BUILD, REVIEW)
    model.key("enter")
    SessionSocket(model, "alice:review").apply({"type": "closed", "questionnaireId": "q-b", "status": "cancelled"})
    InboxSocket(model).apply({"type": "inbox_removed", "sessionId": "alice:build", "questionnaireId": "q-a"})
    assert "Questionnaire cancelled. Nothing else is waiting for you." in screen(model)


def test_a_session_with_nothing_open_any_more_goes_back_to_the_list() -> None:
    model = model_with(REVIEW)
    model.key("enter")
    SessionSocket(model, "alice:review").apply({"type": "welcome"})
    SessionSocket(model, "alice:review").apply({"type": "idle"})
    assert model.session_wanted is None
    assert "That questionnaire is no longer open." in screen(model)


def test_left_goes_back_to_the_list_and_leaves_the_questionnaire_open() -> None:
    model = model_with(BUILD, REVIEW)
    model.key("down")
    model.key("enter")
    session = SessionSocket(model, "alice:build")
    session.apply({"type": "welcome"})
    session.apply(question("q-a", "Target"))
    model.key("left")
    assert model.session_wanted is None
    assert highlighted_label(model) == "Target"
    assert "Next:" not in screen(model)  # nothing ended
    # Frames of the socket being closed change nothing any more.
    session.apply({"type": "closed", "questionnaireId": "q-a", "status": "completed"})
    assert model.inbox.ended is None


def test_left_in_a_text_field_moves_the_cursor_instead() -> None:
    model = model_with(REVIEW)
    model.key("enter")
    session = SessionSocket(model, "alice:review")
    session.apply({"type": "welcome"})
    session.apply(question())
    model.key("down")
    model.key("down")  # "Ask to clarify…"
    model.key("enter")
    assert model.session is not None and model.session.mode == "clarify"
    model.key("char", "x")
    model.key("left")
    assert model.session_wanted == "alice:review"
    assert "← inbox" not in screen(model)


def test_a_session_refused_for_good_comes_back_to_the_list_saying_why() -> None:
    model = model_with(REVIEW)
    model.key("enter")
    SessionSocket(model, "alice:review").fatal("the broker refused the token (4401: token revoked)")
    assert model.session_wanted is None
    assert "✗ Could not open alice:review: the broker refused the token" in screen(model)


def test_the_inbox_refused_for_good_shows_why_and_ignores_keys() -> None:
    model = model_with(REVIEW)
    model.key("enter")
    InboxSocket(model).fatal(describe_close(4401, "token revoked"))
    assert model.session_wanted is None
    assert model.fatal_message == "the broker refused the token (4401: token revoked)"
    assert "✗ disconnected" in screen(model)
    assert model.key("enter") == [] and model.session_wanted is None


def test_the_count_in_the_sessions_header_stays_live() -> None:
    model = model_with(REVIEW)
    model.key("enter")
    SessionSocket(model, "alice:review").apply({"type": "welcome"})
    SessionSocket(model, "alice:review").apply(question())
    assert "session alice:review · inbox" in screen(model)
    InboxSocket(model).apply({"type": "inbox_item", "item": BUILD})
    assert "session alice:review · 1 other waiting" in screen(model)


# --- times, URLs and the command line -----------------------------------------------------


def test_times_in_the_brokers_forms_and_ages() -> None:
    assert seconds(T0) == T0
    assert seconds(T0 * 1000) == T0
    assert seconds("2023-11-14T22:13:20Z") == T0
    assert seconds("2023-11-14T22:13:20") is None  # no zone: not a time to trust
    assert seconds("soon") is None and seconds(None) is None and seconds(True) is None
    assert ago(T0, T0 + 30) == "just now"
    assert ago(T0, T0 - 30) == "just now"
    assert ago(T0, T0 + 125) == "2 min ago"
    assert ago(T0, T0 + 3 * 3600) == "3 h ago"
    assert ago(T0, T0 + 3 * 86400) == "3 days ago"
    assert ago(None, T0) == ""


def test_the_inbox_socket_is_found_from_the_brokers_url() -> None:
    assert inbox_websocket_url("http://127.0.0.1:8700") == "ws://127.0.0.1:8700/v1/inbox/ws"
    assert inbox_websocket_url("https://q.example/base/") == "wss://q.example/base/v1/inbox/ws"
    with pytest.raises(ValueError):
        inbox_websocket_url("ftp://host")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tui.configure(parser)
    return parser.parse_args(list(argv))


def test_inbox_needs_no_session_but_a_session_client_still_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("QBROKER_SESSION", raising=False)
    monkeypatch.delenv("QBROKER_TOKEN", raising=False)
    args = parse("--url", "http://127.0.0.1:1", "--inbox")
    assert args.inbox and args.session is None
    assert tui.run(args) == 2
    assert "QBROKER_TOKEN" in capsys.readouterr().err  # it got past the session
    assert tui.run(parse("--url", "http://127.0.0.1:1", "--token", "t")) == 2
    assert "--inbox" in capsys.readouterr().err
