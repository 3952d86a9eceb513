"""``qbroker tui --inbox`` end to end: the real program in an 80x24 tmux pane against a live
broker, agents played over HTTP with their own tokens (``tests/helpers/terminal.py``).

Each test takes a fresh prefix (``tuibox-<hex>:``) and a client token for ``<prefix>*``. The
screenshot test saves ``docs/screenshot-tui-inbox.txt`` (ANSI) and renders it to
``docs/screenshot-tui-inbox.png``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.helpers.agent_http import ask, outcome
from tests.helpers.ansi_png import render_png
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, token
from tests.helpers.samples import REVIEWER, TARGET, TONE, new_sid
from tests.helpers.terminal import Terminal, terminal

__all__ = ["terminal"]  # the fixture, for the tests below

DOCS = REPO_ROOT / "docs"


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    # The questionnaires are asked before the inbox opens (an open inbox holds them, protocol.md,
    # "When nobody is there"), and a loaded machine may take seconds to open it.
    with broker(client_wait=120, reconnect_grace=120) as process:
        yield process


@pytest.fixture
def prefix() -> str:
    return new_sid("tuibox") + ":"


def inbox_argv(process: BrokerProcess, client_token: str) -> list[str]:
    return [sys.executable, "-m", "qbroker.cli", "tui", "--url", process.url, "--inbox", "--token", client_token]


def open_inbox(term: Terminal, process: BrokerProcess, prefix: str, **env: str) -> None:
    term.start(inbox_argv(process, token(prefix + "*", "client")), env=env)
    term.wait_for("● connected", "inbox · 0 waiting", "Nothing is waiting for you")


def test_the_inbox_lists_two_sessions_answers_one_and_comes_back_to_the_other(
    terminal: Terminal, live: BrokerProcess, prefix: str
) -> None:
    build, review = prefix + "build", prefix + "review"
    open_inbox(terminal, live, prefix)
    first = ask(live.url, build, TARGET, TONE, sub="build-bot")
    second = ask(live.url, review, REVIEWER, sub="review-bot")
    ask(live.url, new_sid("elsewhere"), TARGET)  # not covered by the token
    screen = terminal.wait_for("inbox · 2 waiting", "Reviewer", "Target")
    assert screen.index("Target") < screen.index("Reviewer"), "oldest first"
    assert "❯ Target" in screen and "build-bot" in screen and "question 1 of 2" in screen
    assert screen.count("waiting for the agent") == 0

    terminal.keys("Enter")
    screen = terminal.wait_for(f"session {build} · 1 other waiting", "❯ Staging", "← inbox")
    terminal.keys("Down", "Enter")
    terminal.wait_for("Question 2 of 2", "❯ Plain")
    terminal.keys("Enter")
    screen = terminal.wait_for("✓ Answers sent. Next: Reviewer", "inbox · 1 waiting")
    assert "❯ Reviewer" in screen and build not in screen
    details = outcome(live.url, build, first)
    assert details["status"] == "completed"
    assert [a["selectedOptionIds"] for a in details["answers"]] == [["production"], ["plain"]]

    terminal.keys("Enter")
    terminal.wait_for(f"session {review} · inbox", "❯ Ana (platform)")
    terminal.keys("Left")  # back, the questionnaire still open
    screen = terminal.wait_for("inbox · 1 waiting", "❯ Reviewer")
    assert "Answers sent" not in screen
    terminal.keys("Enter")
    terminal.wait_for("❯ Ana (platform)")
    terminal.keys("Down", "Enter")
    terminal.wait_for("Answers sent. Nothing else is waiting for you.", "inbox · 0 waiting")
    assert outcome(live.url, review, second)["answers"] == [{"questionId": "reviewer", "selectedOptionIds": ["bo"]}]
    terminal.keys("C-c")
    assert terminal.exit_status() == 0


def test_a_new_questionnaire_appears_while_the_list_is_open(
    terminal: Terminal, live: BrokerProcess, prefix: str
) -> None:
    open_inbox(terminal, live, prefix)
    ask(live.url, prefix + "one", TARGET)
    terminal.wait_for("inbox · 1 waiting", "❯ Target")
    ask(live.url, prefix + "two", REVIEWER, sub="review-bot")
    screen = terminal.wait_for("inbox · 2 waiting", f"New: Reviewer in {prefix}two")
    assert "❯ Target" in screen, "the highlight stays where it was"


def test_a_token_for_one_session_lists_that_session_alone(terminal: Terminal, live: BrokerProcess, prefix: str) -> None:
    ask(live.url, prefix + "other", REVIEWER)
    ask(live.url, prefix + "only", TARGET)
    terminal.start(inbox_argv(live, token(prefix + "only", "client")))
    screen = terminal.wait_for("inbox · 1 waiting", "❯ Target")
    assert "Reviewer" not in screen


def test_a_refused_token_ends_the_program_saying_why(terminal: Terminal, live: BrokerProcess, prefix: str) -> None:
    terminal.start(inbox_argv(live, token(prefix + "*", "agent")))
    assert terminal.exit_status() == 1
    assert "the broker refused the token (4401" in terminal.history()


def test_screenshot(terminal: Terminal, live: BrokerProcess) -> None:
    """The docs' picture of the inbox: three agents' questionnaires, one waiting for its agent."""
    prefix = "alice:"  # the only test of this broker with these sessions
    terminal.start(inbox_argv(live, token(prefix + "*", "client")), env={"COLORTERM": "truecolor"})
    terminal.wait_for("Nothing is waiting for you")
    ask(live.url, prefix + "docs", TONE, sub="docs-agent")
    ask(live.url, prefix + "build", TARGET, REVIEWER, sub="build-bot")
    ask(live.url, prefix + "review", REVIEWER, TONE, TARGET, sub="review-bot")
    terminal.wait_for("inbox · 3 waiting")
    # One waits for its agent: the person asked it something.
    terminal.keys("Enter")
    terminal.wait_for("❯ Plain")
    terminal.keys("End", "Up", "Enter")
    terminal.type("Is this for the public changelog or the internal one?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    terminal.keys("Left")
    terminal.wait_for("inbox · 2 waiting", "waiting for the agent")
    terminal.keys("Home", "Down")
    terminal.wait_for("❯ Reviewer")
    ansi = terminal.screen(ansi=True)
    (DOCS / "screenshot-tui-inbox.txt").write_text(ansi, encoding="utf-8")
    image = render_png(ansi, DOCS / "screenshot-tui-inbox.png", title="qbroker tui --inbox")
    assert image.size[0] > 600
