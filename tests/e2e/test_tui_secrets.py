"""End to end: the real ``qbroker tui`` in an 80x24 tmux pane stops before sending a text that
looks like a secret (docs/tui.md, "Pasted secrets"): ``e``/Esc edits it, ``s`` sends it anyway,
and nothing reaches the agent before that.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.test_tui import answers, open_tui, session_id
from tests.helpers.agent_http import ask, outcome
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.terminal import Terminal, terminal

__all__ = ["terminal"]  # the fixture, for the tests below

# Fabricated, and put together here so that no secret scanner flags this file.
TOKEN = "ghp_" + "Zr4mQ8vNc2Lx7Tb1Wk9Hs3Jd6Fp0Ya5GeR2u"
PAIR = "DB_PASSWORD=" + "Wq7!zR2mK9"

DATABASE: dict[str, Any] = {
    "id": "database",
    "label": "Database",
    "prompt": "Which database should the service use?",
    "type": "single",
    "options": [{"id": "postgres", "label": "Postgres"}, {"id": "mysql", "label": "MySQL"}],
}


@pytest.fixture(scope="module")
def secrets_broker() -> Iterator[BrokerProcess]:
    with broker(client_wait=10, reconnect_grace=30) as process:
        yield process


def still_pending(process: BrokerProcess, sid: str, qid: str) -> bool:
    """The questionnaire is still with the person (asked without waiting)."""
    response = httpx.get(
        f"{process.url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": 0},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=10,
    )
    assert response.status_code in (200, 202), response.text
    return response.status_code == 202


def test_an_other_answer_with_a_token_stops_then_edit_and_send_anyway(
    terminal: Terminal, secrets_broker: BrokerProcess
) -> None:
    sid = session_id()
    open_tui(terminal, secrets_broker, sid)
    qid = ask(secrets_broker.url, sid, DATABASE)
    terminal.wait_for("❯ Postgres", "Other…")
    terminal.keys("Down", "Down", "Enter")
    terminal.wait_for("Your own answer", "0/2000")
    terminal.type(f"use {TOKEN}")
    terminal.keys("Enter")
    screen = terminal.wait_for("This looks like a secret — nothing was sent", "[s] send anyway  [e] edit")
    assert "Your answer looks like a GitHub token" in screen
    assert "s send anyway" in screen and "e/Esc edit" in screen
    assert still_pending(secrets_broker, sid, qid)

    terminal.keys("e")  # Edit: back in the field, the text as typed
    terminal.wait_gone("This looks like a secret")
    screen = terminal.wait_for("Your own answer", "Enter send")
    assert f"use {TOKEN}" in screen
    assert still_pending(secrets_broker, sid, qid)

    terminal.keys("Enter")
    terminal.wait_for("This looks like a secret")
    terminal.keys("s")  # Send anyway
    terminal.wait_for("Questionnaire completed")
    answer = answers(outcome(secrets_broker.url, sid, qid))["database"]
    assert answer["other"] == f"use {TOKEN}"


def test_a_clarification_with_a_password_stops_and_escape_edits_it(
    terminal: Terminal, secrets_broker: BrokerProcess
) -> None:
    sid = session_id()
    open_tui(terminal, secrets_broker, sid)
    qid = ask(secrets_broker.url, sid, DATABASE)
    terminal.wait_for("❯ Postgres", "Ask to clarify…")
    terminal.keys("Down", "Down", "Down", "Enter")
    terminal.wait_for("Ask the agent about this question")
    terminal.type(f"Should it use {PAIR}?")
    terminal.keys("Enter")
    terminal.wait_for("This looks like a secret", "Your question for the agent looks like a password")
    assert still_pending(secrets_broker, sid, qid)
    terminal.keys("Escape")
    terminal.wait_gone("This looks like a secret")
    terminal.keys("C-u")
    terminal.type("Which one is cheaper to run?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    result = outcome(secrets_broker.url, sid, qid)
    assert result["status"] == "needs_clarification"
    assert result["clarificationRequest"]["request"] == "Which one is cheaper to run?"
    assert PAIR not in str(result)
