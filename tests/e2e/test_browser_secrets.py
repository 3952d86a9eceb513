"""The page stops before sending a text that looks like a secret, end to end: Debian Chromium
(headless, via Playwright) against a live broker (docs/web-client.md, "Pasted secrets").

The stop is an alert dialog with "Edit" (focused, and Escape) and "Send anyway", both by
keyboard; nothing reaches the broker until the person chooses to send.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import open_client, option
from tests.helpers.agent_http import Agent
from tests.helpers.processes import broker
from tests.helpers.samples import new_sid

pytestmark = pytest.mark.browser

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
CHECKS: dict[str, Any] = {
    "id": "checks",
    "label": "Checks",
    "prompt": "Which checks must pass?",
    "type": "multi",
    "options": [{"id": "unit", "label": "Unit tests"}, {"id": "e2e", "label": "End-to-end tests"}],
    "minSelections": 1,
}


@pytest.fixture(scope="module")
def secrets_broker() -> Iterator[Any]:
    with broker(client_wait=10, reconnect_grace=30) as process:
        yield process


@pytest.fixture
def secrets_page(page: Page) -> Page:
    """The conftest's page, keeping every frame it sends, to show what did (and did not) leave it."""
    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(str(payload))))
    page.sent = sent  # type: ignore[attr-defined]
    return page


@pytest.fixture
def secrets_agent(secrets_broker: Any) -> Agent:
    return Agent(secrets_broker.url, new_sid("web-secret"))


def _sent(page: Page) -> str:
    return "\n".join(page.sent)  # type: ignore[attr-defined]


def test_an_other_answer_that_looks_like_a_token_stops_and_edit_goes_back_to_it(
    secrets_page: Page, secrets_broker: Any, secrets_agent: Agent
) -> None:
    page = secrets_page
    open_client(page, secrets_broker.url, secrets_agent.sid)
    qid = secrets_agent.start(DATABASE, CHECKS)

    page.get_by_role("button", name=re.compile("^Other…")).click()
    field = page.locator("#other-input")
    field.fill(f"use {TOKEN}")
    field.press("Enter")

    dialog = page.get_by_role("alertdialog", name="This looks like a secret")
    expect(dialog).to_be_visible()
    expect(dialog).to_have_accessible_description(re.compile(r"^Your answer looks like a GitHub token"))
    expect(dialog.get_by_role("button", name="Edit")).to_be_focused()
    assert TOKEN not in (dialog.text_content() or "")
    assert secrets_agent.pending(qid)

    page.keyboard.press("Escape")  # Edit: back to the text, as typed
    expect(dialog).to_be_hidden()
    expect(field).to_be_focused()
    expect(field).to_have_value(f"use {TOKEN}")

    field.fill("Postgres 16, with the password from the team vault")
    field.press("Enter")  # an ordinary answer goes at once
    expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
    expect(dialog).to_be_hidden()
    assert TOKEN[4:] not in _sent(page)  # the token never left the page
    option(page, "unit").click()
    page.locator("#continue").click()
    details = secrets_agent.outcome(qid)
    assert details["answers"][0]["other"] == "Postgres 16, with the password from the team vault"


def test_send_anyway_sends_a_clarification_that_looks_like_a_password(
    secrets_page: Page, secrets_broker: Any, secrets_agent: Agent
) -> None:
    page = secrets_page
    open_client(page, secrets_broker.url, secrets_agent.sid)
    qid = secrets_agent.start(CHECKS)

    option(page, "e2e").click()
    page.get_by_role("button", name="Ask to clarify…").click()
    request = page.locator("#clarify-input")
    request.fill(f"Is {PAIR} the staging password you need?")
    request.press("Enter")

    dialog = page.get_by_role("alertdialog", name="This looks like a secret")
    expect(dialog).to_be_visible()
    expect(dialog).to_have_accessible_description(
        re.compile(r"^Your question for the agent looks like a password, secret or token")
    )
    assert secrets_agent.pending(qid)
    page.keyboard.press("Tab")  # from Edit to Send anyway, by keyboard alone
    expect(dialog.get_by_role("button", name="Send anyway")).to_be_focused()
    page.keyboard.press("Enter")

    expect(dialog).to_be_hidden()
    expect(page.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
    details = secrets_agent.outcome(qid)
    assert details["status"] == "needs_clarification"
    assert PAIR in details["clarificationRequest"]["request"]
    assert '"confirmedNotSecret":true' in _sent(page)


def test_a_multi_questions_other_text_is_held_back_until_the_person_sends_it(
    secrets_page: Page, secrets_broker: Any, secrets_agent: Agent
) -> None:
    page = secrets_page
    open_client(page, secrets_broker.url, secrets_agent.sid)
    qid = secrets_agent.start(CHECKS)

    option(page, "unit").click()
    expect(page.locator("#draft-state")).to_have_text("Selections saved")
    page.get_by_role("button", name=re.compile("^Other…")).click()
    page.locator("#other-input").fill(TOKEN)
    expect(page.locator("#draft-state")).to_have_text(re.compile("^Not saved: this looks like a secret"))
    expect(page.locator("#continue")).to_have_text("Continue with 2 selections")
    page.locator("#continue").click()

    dialog = page.get_by_role("alertdialog", name="This looks like a secret")
    expect(dialog).to_be_visible()
    assert TOKEN[4:] not in _sent(page)  # no draft carried it either
    dialog.get_by_role("button", name="Send anyway").click()

    details = secrets_agent.outcome(qid)
    assert details["status"] == "completed"
    assert details["answers"] == [{"questionId": "checks", "selectedOptionIds": ["unit"], "other": TOKEN}]
