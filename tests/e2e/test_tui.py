"""End-to-end: the real ``qbroker tui`` in an 80x24 tmux pane against a live broker.

Each test starts the program in its own tmux server (``tests/helpers/terminal.py``), plays
the agent over HTTP, presses keys with ``send-keys`` and waits, with a deadline, for the
text it expects on the captured screen. The screenshot test also saves
``docs/screenshot-tui.txt`` (ANSI) and renders it to ``docs/screenshot-tui.png``
(``tests/helpers/ansi_png.py``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from clients.tui.text import cells
from tests.helpers.agent_http import ask, outcome, resume
from tests.helpers.ansi_png import render_png
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, redis_server, token
from tests.helpers.samples import TARGET, new_sid
from tests.helpers.terminal import WIDTH, Terminal, terminal
from tests.helpers.waiting import wait_until

DOCS = REPO_ROOT / "docs"

__all__ = ["terminal"]  # the fixture, for the tests below


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    with broker(client_wait=10, reconnect_grace=30) as process:
        yield process


def session_id() -> str:
    return new_sid("tui")


def tui_argv(process: BrokerProcess, sid: str, client_token: str | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "qbroker.cli",
        "tui",
        "--url",
        process.url,
        "--session",
        sid,
        "--token",
        client_token or token(sid, "client"),
    ]


def open_tui(term: Terminal, process: BrokerProcess, sid: str, **env: str) -> None:
    term.start(tui_argv(process, sid), env=env)
    term.wait_for("Waiting for questions", "● connected")


CHECKS = {
    "id": "checks",
    "label": "Pre-flight checks",
    "prompt": "Which checks must pass before the deploy?",
    "type": "multi",
    "options": [
        {"id": "unit", "label": "Unit tests"},
        {"id": "e2e", "label": "End-to-end tests", "description": "Runs in the staging cluster (12 min)"},
        {"id": "lint", "label": "Lint and types"},
    ],
    "minSelections": 1,
    "maxSelections": 2,
}

NAME = {
    "id": "codename",
    "label": "Codename",
    "prompt": "What should the release be called?",
    "type": "single",
    "options": [{"id": "aurora", "label": "Aurora"}, {"id": "borealis", "label": "Borealis"}],
}


def answers(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["questionId"]: a for a in result["answers"]}


# --- the paths --------------------------------------------------------------------------


def test_single_question_is_answered_with_enter(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = ask(live.url, sid, TARGET, NAME)
    screen = terminal.wait_for("Question 1 of 2", "❯ Staging", "Requires an approved release window")
    assert "● Target" in screen and "○ Codename" in screen
    terminal.keys("Down", "Enter")
    screen = terminal.wait_for("Question 2 of 2", "✓ Target", "❯ Aurora")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed", "Waiting for questions")
    result = outcome(live.url, sid, qid)
    assert result["status"] == "completed"
    assert answers(result)["deploy_target"]["selectedOptionIds"] == ["production"]
    assert answers(result)["codename"]["selectedOptionIds"] == ["aurora"]


def answer_elsewhere(process: BrokerProcess, sid: str, sub: str, *option_ids: str) -> None:
    """Answer the questions shown, one option each, as another screen of the session would
    (a browser page's hello: ``kind`` web)."""
    with connect(
        f"{process.ws_url}/v1/sessions/{sid}/ws", subprotocols=[Subprotocol("qbroker.v1.json")], open_timeout=10
    ) as ws:
        hello = {
            "type": "hello",
            "token": token(sid, "client", sub=sub),
            "client": {"kind": "web", "name": "qbroker web"},
        }
        ws.send(json.dumps(hello))
        for option_id in option_ids:
            while (frame := json.loads(ws.recv(timeout=10)))["type"] != "question":
                pass
            ws.send(
                json.dumps(
                    {
                        "type": "answer",
                        "questionnaireId": frame["questionnaireId"],
                        "step": frame["step"],
                        "questionId": frame["question"]["id"],
                        "selectedOptionIds": [option_id],
                    }
                )
            )
        while json.loads(ws.recv(timeout=10))["type"] not in ("question", "closed"):
            pass  # the answer took: the broker moved on


def test_who_answered_on_another_screen_is_shown_and_its_own_answers_are_not(
    terminal: Terminal, live: BrokerProcess
) -> None:
    sid = session_id()
    terminal.start(tui_argv(live, sid, token(sid, "client", sub="bob")))
    terminal.wait_for("Waiting for questions", "● connected")
    first = ask(live.url, sid, TARGET, NAME)
    terminal.wait_for("Question 1 of 2")
    answer_elsewhere(live, sid, "alice", "staging")
    terminal.wait_for("Question 2 of 2", "Question 1 was answered by alice in the browser.")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed — your answers were sent to the agent.")
    assert outcome(live.url, sid, first)["status"] == "completed"

    ask(live.url, sid, NAME)
    terminal.wait_for("Question 1 of 1")
    answer_elsewhere(live, sid, "alice", "borealis")
    terminal.wait_for("Questionnaire completed — answered by alice in the browser.", "Waiting for questions")


def test_multi_question_explains_unmet_bounds(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = ask(live.url, sid, CHECKS)
    terminal.wait_for("choose 1–2", "[ ] Unit tests")
    terminal.keys("Enter")
    terminal.wait_for("Choose at least 1 (you have 0)")
    terminal.keys("Space", "Down", "Down", "Space", "Down")
    terminal.wait_for("[✓] Unit tests", "[✓] Lint and types", "2 selected of at most 2")
    terminal.keys("Up", "Up", "Space")
    terminal.wait_for("You can choose at most 2")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    result = outcome(live.url, sid, qid)
    assert answers(result)["checks"]["selectedOptionIds"] == ["unit", "lint"]


def test_other_answer_is_typed_trimmed_and_sent(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = ask(live.url, sid, NAME)
    terminal.wait_for("❯ Aurora", "Other…")
    terminal.keys("Down", "Down", "Enter")
    terminal.wait_for("Your own answer", "0/2000")
    terminal.type("  Nordlicht 北極光 ✨  ")
    terminal.wait_for("Nordlicht 北極光")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    answer = answers(outcome(live.url, sid, qid))["codename"]
    assert answer["selectedOptionIds"] == []
    assert answer["other"] == "Nordlicht 北極光 ✨"


def test_clarify_then_resume_shows_the_agents_response(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = ask(live.url, sid, CHECKS)
    terminal.wait_for("[ ] Unit tests")
    terminal.keys("Space")  # a toggle in progress survives the clarification
    terminal.wait_for("[✓] Unit tests")
    terminal.keys("End", "Up", "Enter")
    terminal.wait_for("Ask the agent about this question")
    terminal.type("How long do end-to-end")
    terminal.keys("Escape")  # back to the options: what was typed is kept
    terminal.wait_gone("Ask the agent about this question")
    terminal.keys("Enter")
    terminal.wait_for("Ask the agent about this question", "How long do end-to-end")
    terminal.type(" tests take?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent", "How long do end-to-end tests take?")
    result = outcome(live.url, sid, qid)
    assert result["status"] == "needs_clarification"
    revision = result["revision"]
    resume(live.url, sid, qid, revision, "About twelve minutes on the staging cluster.")
    # Back on the first chosen option (not on "Ask to clarify…"), so Enter would continue.
    screen = terminal.wait_for("About twelve minutes on the staging cluster.", "❯ [✓] Unit tests", "Enter continue")
    assert "Agent" in screen and "You asked" in screen
    terminal.keys("Down", "Space", "Enter")
    terminal.wait_for("Questionnaire completed")
    done = outcome(live.url, sid, qid)
    assert answers(done)["checks"]["selectedOptionIds"] == ["unit", "e2e"]
    assert done["clarifications"][0]["response"].startswith("About twelve")


def test_escape_cancels_only_after_confirmation(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = ask(live.url, sid, TARGET)
    terminal.wait_for("❯ Staging")
    terminal.keys("Escape")
    terminal.wait_for("Cancel this questionnaire?")
    terminal.keys("n")
    terminal.wait_gone("Cancel this questionnaire?")
    pending = httpx.get(
        f"{live.url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": 0},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=10,
    )
    assert pending.status_code == 202
    terminal.keys("Escape")
    terminal.wait_for("Cancel this questionnaire?")
    terminal.keys("y")
    terminal.wait_for("Questionnaire cancelled", "Waiting for questions")
    result = outcome(live.url, sid, qid)
    assert result["status"] == "cancelled"
    assert result["cancellationReason"] == "user_cancelled"


def test_ctrl_c_exits_cleanly_and_restores_the_terminal(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    assert terminal.pane("#{alternate_on}") == "1"
    terminal.keys("C-c")
    assert terminal.exit_status() == 0
    assert terminal.pane("#{alternate_on}") == "0"  # back on the normal screen
    assert "Waiting for questions" not in terminal.history()
    assert_terminal_restored(terminal.output())


def assert_terminal_restored(output: str) -> None:
    """The last words of the program leave the alternate screen and show the cursor again."""
    assert "\x1b[?1049h" in output  # it did use the alternate screen
    tail = output[output.rindex("\x1b[?1049l") :]
    assert output.rindex("\x1b[?25h") > output.rindex("\x1b[?25l")
    assert "\x1b[?2004l" in output  # bracketed paste off
    assert tail.count("\x1b[?1049h") == 0


def test_a_refused_token_is_shown_and_exits_non_zero(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    terminal.start(tui_argv(live, sid, client_token=token(sid, "agent")))  # wrong role
    assert terminal.exit_status() == 1
    said = terminal.history()
    assert "refused the token (4401: an agent token cannot be used by a client); the TUI needs a client token" in said
    assert f"`qbroker token --session {sid} --role client`" in said
    assert_terminal_restored(terminal.output())


def test_a_token_for_another_session_is_shown_and_exits_non_zero(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    terminal.start(tui_argv(live, sid, client_token=token("someone-else", "client")))
    assert terminal.exit_status() == 1
    assert "the token is for another session (4403" in terminal.history()


def test_unicode_labels_line_up_in_80_columns(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    labels = ["日本語のラベル", "Emoji 🎉 launch", "한국어 옵션", "Ünïcödé àccents", "中文" * 60]
    question = {
        "id": "langs",
        "label": "言語 🌐",
        "prompt": "どれを使いますか？ Pick any.",
        "type": "multi",
        "options": [{"id": f"l{i}", "label": label} for i, label in enumerate(labels)],
    }
    ask(live.url, sid, question)
    screen = terminal.wait_for("[ ] 日本語のラベル", "[ ] Emoji 🎉 launch", "[ ] 한국어 옵션")
    terminal.keys("Space", "Down", "Space")
    screen = terminal.wait_for("[✓] Emoji 🎉 launch")
    lines = screen.split("\n")
    assert all(cells(line) <= WIDTH for line in lines)
    header = lines[0]
    assert header.rstrip().endswith("● connected") and cells(header.rstrip()) == WIDTH - 1
    # The checkbox column is the same on every option row, whatever the label is written in.
    columns = {line.index("[") for line in lines if re.search(r"\[[ ✓]\] ", line)}
    assert len(columns) == 1
    long_row = next(line for line in lines if "中文中文" in line)
    assert long_row.rstrip().endswith("…")


def test_reconnects_after_a_broker_restart_with_state_intact(terminal: Terminal) -> None:
    with redis_server() as redis, broker(redis.url, client_wait=10, reconnect_grace=60) as process:
        sid = session_id()
        open_tui(terminal, process, sid)
        qid = ask(process.url, sid, CHECKS)
        terminal.wait_for("[ ] Lint and types")
        terminal.keys("Down", "Down", "Space")
        terminal.wait_for("[✓] Lint and types", "1 selected")
        process.stop()
        terminal.wait_for("offline", "Connection lost", "Answers already sent are saved by the broker")
        terminal.keys("Space")  # refused while offline: nothing is sent, and the screen says so
        terminal.wait_for("Not connected — nothing was sent")
        process.start()
        screen = terminal.wait_for("● connected", "[✓] Lint and types", timeout=30)
        assert "Connection lost" not in screen
        terminal.wait_gone("Not connected")  # with no key pressed: the welcome ends that notice
        terminal.keys("Enter")
        terminal.wait_for("Questionnaire completed")
        assert answers(outcome(process.url, sid, qid))["checks"]["selectedOptionIds"] == ["lint"]


def test_a_questionnaire_lost_in_a_broker_restart_is_explained(terminal: Terminal) -> None:
    with broker(client_wait=10, reconnect_grace=60) as process:  # a memory store: a restart forgets
        sid = session_id()
        open_tui(terminal, process, sid)
        ask(process.url, sid, TARGET)
        terminal.wait_for("❯ Staging")
        process.stop()
        terminal.wait_for("offline", "Answers already sent are saved by the broker")
        process.start()
        terminal.wait_for(
            "● connected",
            "Waiting for questions",
            "The questionnaire you were answering ended while you were offline",
            timeout=30,
        )


def _page_down_until(terminal: Terminal, text: str, steady: str) -> str:
    """Press PageDown (at most 12 times, each time until the screen has moved on and shows
    ``steady``) until ``text`` was on screen; returns every screen seen."""
    seen, screen = "", terminal.screen()
    for _ in range(12):
        terminal.keys("PageDown")

        def moved(before: str = screen) -> str | None:
            now = terminal.screen()
            return now if now != before and steady in now else None

        screen = str(wait_until(moved, timeout=15, interval=0.05, what="the text to scroll"))
        seen += screen
        if text in seen:
            break
    return seen


def test_a_long_prompt_and_reply_are_read_with_page_down(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    prompt = " ".join(f"Sentence {i} of the prompt adds one more detail to read." for i in range(1, 33))
    reply = " ".join(f"Reply {i} explains the staging cluster a little more." for i in range(1, 20))
    assert len(prompt) > 1750 and 990 < len(reply) <= 1000  # the seed's limit
    qid = ask(live.url, sid, dict(TARGET, prompt=prompt))
    screen = terminal.wait_for("Sentence 1 of", "more lines · PgDn", "PgUp/PgDn read", "❯ Staging")
    assert "Sentence 32 of" not in screen
    seen = screen + _page_down_until(terminal, "Sentence 32 of", "❯ Staging")
    joined = " ".join(seen.split())
    assert all(f"Sentence {i} of" in joined for i in range(1, 33)), seen
    terminal.wait_for("lines above · PgUp")
    terminal.keys("End", "Up", "Enter")
    terminal.wait_for("Ask the agent about this question")
    terminal.type("What is staging?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    resume(live.url, sid, qid, outcome(live.url, sid, qid)["revision"], reply)
    seen = terminal.wait_for("You asked  What is staging?", "Reply 1 explains", "❯ Staging")  # shown at its start
    seen += _page_down_until(terminal, "Reply 19 explains", "❯ Staging")
    joined = " ".join(seen.split())
    assert all(f"Reply {i} explains" in joined for i in range(1, 20)), seen
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    assert answers(outcome(live.url, sid, qid))["deploy_target"]["selectedOptionIds"] == ["staging"]


def test_sixty_columns_show_every_question_mark_or_an_ellipsis_and_whole_options(terminal: Terminal) -> None:
    with broker(client_wait=10, reconnect_grace=30) as process:
        terminal.width = 60
        sid = session_id()
        open_tui(terminal, process, sid)
        label = " ".join(f"word{i}" for i in range(1, 21))
        description = " ".join(f"detail{i}" for i in range(1, 31))
        first = dict(
            TARGET,
            options=[
                {"id": "staging", "label": "Staging"},
                {"id": "production", "label": label, "description": description},
            ],
        )
        others = [dict(NAME, id=f"q{i}", label=f"Question {i}") for i in range(2, 21)]
        ask(process.url, sid, first, *others)
        screen = terminal.wait_for("Question 1 of 20", "❯ Staging")
        progress = screen.split("\n")[1]
        assert progress.rstrip().endswith("…") and progress.count("○") < 19, progress
        assert "word20" not in screen  # one line while not highlighted
        terminal.keys("Down")
        screen = terminal.wait_for("word20", "detail30")
        assert all(cells(line) <= 60 for line in screen.split("\n"))


def test_screenshot(terminal: Terminal, live: BrokerProcess) -> None:
    """The README's picture: a multi question after a clarification, taken from a real run."""
    sid = "demo"
    terminal.start(tui_argv(live, sid), env={"COLORTERM": "truecolor"})
    terminal.wait_for("Waiting for questions")
    checks = dict(
        CHECKS,
        options=[
            {"id": "unit", "label": "Unit tests", "description": "pytest, about 40 s"},
            {
                "id": "e2e",
                "label": "End-to-end tests",
                "description": "Browser and terminal clients against a live broker, about 3 minutes",
            },
            {"id": "lint", "label": "Lint and types"},
            {"id": "i18n", "label": "Translations · 翻訳チェック"},
        ],
        maxSelections=3,
    )
    qid = ask(live.url, sid, TARGET, checks, NAME)
    terminal.wait_for("❯ Staging")
    terminal.keys("Enter")
    terminal.wait_for("[ ] Unit tests")
    terminal.keys("Space", "End", "Up", "Enter")
    terminal.type("Do the end-to-end tests need the staging cluster?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    revision = outcome(live.url, sid, qid)["revision"]
    resume(live.url, sid, qid, revision, "No — each test starts its own broker on 127.0.0.1.")
    terminal.wait_for("its own broker on 127.0.0.1.", "[✓] Unit tests")
    terminal.keys("Home", "Down", "Space")
    terminal.wait_for("[✓] End-to-end tests", "2 selected")
    ansi = terminal.screen(ansi=True)
    DOCS.mkdir(exist_ok=True)
    (DOCS / "screenshot-tui.txt").write_text(ansi, encoding="utf-8")
    image = render_png(ansi, DOCS / "screenshot-tui.png", title=f"qbroker tui — session {sid}")
    assert image.size[0] > 600
    terminal.keys("Enter")
    terminal.wait_for("Question 3 of 3")
    terminal.keys("Escape", "y")
    terminal.wait_for("Questionnaire cancelled")
