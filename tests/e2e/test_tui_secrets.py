"""End to end: the real ``qbroker tui`` in an 80x24 tmux pane stops before sending a text that
looks like a secret (docs/tui.md, "Pasted secrets"): ``e``/Esc edits it, ``s`` sends it anyway,
and nothing reaches the agent before that.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_tui import answers, open_tui, session_id
from tests.helpers.agent_http import ask, outcome
from tests.helpers.processes import BrokerProcess, broker, need, token
from tests.helpers.terminal import Terminal

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


@pytest.fixture
def pane() -> Iterator[Terminal]:
    need(shutil.which("tmux") is not None, "tmux is not installed")
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        term = Terminal(Path(tmp))
        try:
            yield term
        finally:
            term.close()


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
    pane: Terminal, secrets_broker: BrokerProcess
) -> None:
    sid = session_id()
    open_tui(pane, secrets_broker, sid)
    qid = ask(secrets_broker.url, sid, DATABASE)
    pane.wait_for("❯ Postgres", "Other…")
    pane.keys("Down", "Down", "Enter")
    pane.wait_for("Your own answer", "0/2000")
    pane.type(f"use {TOKEN}")
    pane.keys("Enter")
    screen = pane.wait_for("This looks like a secret — nothing was sent", "[s] send anyway  [e] edit")
    assert "Your answer looks like a GitHub token" in screen
    assert "s send anyway" in screen and "e/Esc edit" in screen
    assert still_pending(secrets_broker, sid, qid)

    pane.keys("e")  # Edit: back in the field, the text as typed
    pane.wait_gone("This looks like a secret")
    screen = pane.wait_for("Your own answer", "Enter send")
    assert f"use {TOKEN}" in screen
    assert still_pending(secrets_broker, sid, qid)

    pane.keys("Enter")
    pane.wait_for("This looks like a secret")
    pane.keys("s")  # Send anyway
    pane.wait_for("Questionnaire completed")
    answer = answers(outcome(secrets_broker.url, sid, qid))["database"]
    assert answer["other"] == f"use {TOKEN}"


def test_a_clarification_with_a_password_stops_and_escape_edits_it(
    pane: Terminal, secrets_broker: BrokerProcess
) -> None:
    sid = session_id()
    open_tui(pane, secrets_broker, sid)
    qid = ask(secrets_broker.url, sid, DATABASE)
    pane.wait_for("❯ Postgres", "Ask to clarify…")
    pane.keys("Down", "Down", "Down", "Enter")
    pane.wait_for("Ask the agent about this question")
    pane.type(f"Should it use {PAIR}?")
    pane.keys("Enter")
    pane.wait_for("This looks like a secret", "Your question for the agent looks like a password")
    assert still_pending(secrets_broker, sid, qid)
    pane.keys("Escape")
    pane.wait_gone("This looks like a secret")
    pane.keys("C-u")
    pane.type("Which one is cheaper to run?")
    pane.keys("Enter")
    pane.wait_for("Waiting for the agent")
    result = outcome(secrets_broker.url, sid, qid)
    assert result["status"] == "needs_clarification"
    assert result["clarificationRequest"]["request"] == "Which one is cheaper to run?"
    assert PAIR not in str(result)
