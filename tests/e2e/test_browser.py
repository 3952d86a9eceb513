"""The browser client, end to end: Debian Chromium (headless, via Playwright) against a live broker.

The agent side is plain HTTP (httpx) with an agent token; the person's side is the real page
served by the broker at ``/``. Every wait is a Playwright expectation or an HTTP long-poll with
a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, WebSocketRoute, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.helpers.agent_http import Agent
from tests.helpers.browser import DESKTOP, compose_screenshots, new_context, watch
from tests.helpers.processes import REPO_ROOT, broker, free_port, redis_server, revoked_token, token
from tests.helpers.samples import TARGET, new_sid
from tests.helpers.waiting import scaled_ms

pytestmark = pytest.mark.browser

RECONNECT_TIMEOUT_MS = scaled_ms(20_000)  # a broker restart plus a few backoff rounds
PHONE = {"width": 390, "height": 844}
SCREENSHOT = REPO_ROOT / "docs" / "screenshot-web.png"

NOTIFY: dict[str, Any] = {
    "id": "notify",
    "label": "Notify",
    "prompt": "Who should hear about the release?",
    "type": "single",
    "options": [{"id": "team", "label": "The team"}, {"id": "nobody", "label": "Nobody"}],
}
CHECKS: dict[str, Any] = {
    "id": "checks",
    "label": "Pre-flight checks",
    "prompt": "Which checks must pass before the deploy?",
    "type": "multi",
    "options": [
        {"id": "unit", "label": "Unit tests", "description": "Fast; run on every push"},
        {"id": "e2e", "label": "End-to-end tests", "description": "Headless browser against staging"},
        {"id": "lint", "label": "Lint and types"},
        {"id": "docs", "label": "Docs build"},
    ],
    "allowOther": False,
    "minSelections": 2,
    "maxSelections": 3,
}
EXTRAS: dict[str, Any] = {
    "id": "extras",
    "label": "Extras",
    "prompt": "Anything else to run?",
    "type": "multi",
    "options": [{"id": "bench", "label": "Benchmarks"}],
    "minSelections": 1,
}
WS_PATH = re.compile(r"/v1/sessions/[^/]+/ws$")


# --- fixtures (prefixed web_ so they never collide with other e2e suites; the browser,
# ``context`` and ``page`` are tests/e2e/conftest.py's) -----------------------------


@pytest.fixture(scope="module")
def web_broker() -> Iterator[Any]:
    with broker(client_wait=10, reconnect_grace=30) as process:
        yield process


@pytest.fixture
def web_sid() -> str:
    return new_sid("web")


@pytest.fixture
def web_agent(web_broker: Any, web_sid: str) -> Agent:
    return Agent(web_broker.url, web_sid)


# --- helpers -------------------------------------------------------------------------


def link(base_url: str, sid: str, client_token: str | None = None) -> str:
    return f"{base_url}/#session={sid}&token={client_token or token(sid, 'client')}"


def open_client(page: Page, base_url: str, sid: str) -> None:
    page.goto(link(base_url, sid))
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")


def option(page: Page, option_id: str) -> Any:
    return page.locator(f".options .option[data-option-id='{option_id}']")


def idle_heading(page: Page) -> Any:
    return page.get_by_role("heading", name="Waiting for questions")


# --- tests ---------------------------------------------------------------------------


def test_the_token_leaves_the_address_bar_once_read_and_a_reload_still_opens_the_session(
    page: Page, web_broker: Any, web_sid: str
) -> None:
    open_client(page, web_broker.url, web_sid)
    assert "token" not in page.url, page.url
    assert page.url.endswith(f"/#session={web_sid}")
    assert "token" not in page.evaluate("window.location.href")
    page.reload()
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    assert "token" not in page.url


def test_single_question_is_answered_by_a_click_or_the_keyboard(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    expect(idle_heading(page)).to_be_visible()

    qid = web_agent.start(TARGET, NOTIFY)
    expect(page.locator("#progress-count")).to_have_text("Question 1 of 2")
    expect(page.locator("#q-label")).to_have_text("Target")
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
    expect(page.locator(".step .step-label")).to_have_text(["Target", "Notify"])
    expect(page.locator(".step-current .step-label")).to_have_text("Target")
    production = page.get_by_role("button", name=re.compile("^Production"))
    expect(production).to_contain_text("Requires an approved release window")
    expect(page).to_have_title(re.compile(r"\(1/2\) Target"))
    production.click()

    expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
    expect(page.locator(".step-answered .step-label")).to_have_text(["Target"])
    expect(page.locator(".step-current .step-label")).to_have_text("Notify")
    # The keyboard alone: the first option has focus, Tab and the arrow keys move, Enter answers.
    first = page.locator(".options .option").first
    expect(first).to_be_focused()
    page.keyboard.press("Tab")
    expect(option(page, "nobody")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(option(page, "team")).to_be_focused()
    page.keyboard.press("ArrowUp")  # wraps to the last row, "Other…"
    expect(page.locator("#other-open")).to_be_focused()
    page.keyboard.press("Home")
    expect(option(page, "team")).to_be_focused()
    page.keyboard.press("Enter")

    details = web_agent.outcome(qid)
    assert details["status"] == "completed"
    assert details["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["production"]},
        {"questionId": "notify", "selectedOptionIds": ["team"]},
    ]
    expect(idle_heading(page)).to_be_visible()
    expect(page.locator(".idle-note")).to_have_text("Your last answers were sent to the agent.")


def test_multi_question_explains_its_bounds_until_they_are_met(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(CHECKS)

    proceed = page.locator("#continue")
    hint = page.locator("#continue-hint")
    expect(page.locator("#q-hint")).to_have_text("Choose 2 to 3.")
    expect(proceed).to_have_text("Continue with 0 selections")
    expect(proceed).to_be_disabled()
    expect(hint).to_have_text("Select 2 more options to continue (at least 2).")

    option(page, "unit").click()
    expect(option(page, "unit")).to_have_attribute("aria-pressed", "true")
    expect(proceed).to_have_text("Continue with 1 selection")
    expect(proceed).to_be_disabled()
    expect(hint).to_have_text("Select 1 more option to continue (at least 2).")

    option(page, "docs").click()
    expect(proceed).to_have_text("Continue with 2 selections")
    expect(proceed).to_be_enabled()
    expect(hint).to_be_hidden()

    option(page, "lint").click()
    option(page, "e2e").click()
    expect(proceed).to_have_text("Continue with 4 selections")
    expect(proceed).to_be_disabled()
    expect(hint).to_have_text("Deselect 1 option to continue (at most 3).")

    option(page, "unit").click()
    expect(option(page, "unit")).to_have_attribute("aria-pressed", "false")
    expect(proceed).to_be_enabled()
    expect(proceed).to_have_text("Continue with 3 selections")
    proceed.click()

    details = web_agent.outcome(qid)
    assert details["status"] == "completed"
    # Option ids come back in their declared order, whatever the click order was.
    assert details["answers"] == [{"questionId": "checks", "selectedOptionIds": ["e2e", "lint", "docs"]}]


def test_other_opens_a_text_field_with_a_counter_and_enter_submits(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(NOTIFY, EXTRAS)

    other = page.get_by_role("button", name=re.compile("^Other…"))
    other.click()
    field = page.locator("#other-input")
    counter = page.locator("#other-count")
    expect(field).to_be_focused()
    expect(page.get_by_label("Your own answer")).to_be_visible()
    expect(counter).to_have_text("0 / 2000")
    field.press("Escape")  # closes the field, back on the button
    expect(field).to_be_hidden()
    expect(other).to_be_focused()
    expect(other).to_have_attribute("aria-expanded", "false")

    page.keyboard.press("Enter")  # reopens it
    expect(field).to_be_focused()
    field.fill("x" * 2001)
    expect(counter).to_have_text("2001 / 2000")
    expect(counter).to_have_class(re.compile(r"\bover\b"))
    field.press("Enter")  # refused here, never sent
    expect(page.locator("#other-error")).to_have_text("Please shorten your answer to 2000 characters.")
    expect(page.locator("#progress-count")).to_have_text("Question 1 of 2")

    field.fill("   Ping the #release channel   ")
    expect(counter).to_have_text(f"{len('Ping the #release channel')} / 2000")
    field.press("Enter")

    # A multi question: Other counts as one selection toward minSelections.
    expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
    proceed = page.locator("#continue")
    expect(proceed).to_be_disabled()
    page.get_by_role("button", name=re.compile("^Other…")).click()
    page.locator("#other-input").fill("Smoke test on the canary")
    expect(page.locator("#other-open")).to_have_attribute("aria-pressed", "true")
    expect(proceed).to_have_text("Continue with 1 selection")
    expect(proceed).to_be_enabled()
    page.locator("#other-input").press("Enter")

    details = web_agent.outcome(qid)
    assert details["status"] == "completed"
    assert details["answers"] == [
        {"questionId": "notify", "selectedOptionIds": [], "other": "Ping the #release channel"},
        {"questionId": "extras", "selectedOptionIds": [], "other": "Smoke test on the canary"},
    ]


def test_clarify_waits_for_the_agent_then_shows_its_response_with_the_draft_intact(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(CHECKS)

    option(page, "e2e").click()
    page.get_by_role("button", name="Ask to clarify…").click()
    request = page.locator("#clarify-input")
    expect(request).to_be_focused()
    expect(page.locator("#clarify-count")).to_have_text("0 / 1000")
    text = "Do the end-to-end tests need staging to be up?"
    request.fill(text)
    expect(page.locator("#clarify-count")).to_have_text(f"{len(text)} / 1000")
    page.get_by_role("button", name="Send", exact=True).click()

    expect(page.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
    expect(page.locator(".waiting-request")).to_have_text("Do the end-to-end tests need staging to be up?")
    expect(page.locator("#cancel-open")).to_be_visible()  # cancelling stays possible while waiting
    # A page opened during the wait (a reload, another device) says which question it was.
    page.reload()
    expect(page.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
    expect(page.locator(".waiting .panel-text").first).to_have_text(
        "You asked about “Pre-flight checks”:"  # (its place is said only when there are several)
    )

    details = web_agent.outcome(qid)
    assert details["status"] == "needs_clarification"
    assert details["revision"] == 1
    assert "staging to be up" in json.dumps(details["clarificationRequest"])
    assert details["draftAnswer"]["selectedOptionIds"] == ["e2e"]

    web_agent.resume(qid, 1, "Yes: they run against the staging stack, so deploy staging first.")
    response = page.locator(".clar-latest .clar-response")
    expect(response).to_have_text("Yes: they run against the staging stack, so deploy staging first.")
    expect(page.locator(".clar-latest .clar-ask .clar-text")).to_have_text(
        "Do the end-to-end tests need staging to be up?"
    )
    expect(page.locator("#q-prompt")).to_have_text(CHECKS["prompt"])
    expect(option(page, "e2e")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#continue")).to_have_text("Continue with 1 selection")
    # Screen readers hear the reply once, with no doubled full stop after it.
    expect(page.locator("#announcer")).to_have_text(
        "The agent replied: Yes: they run against the staging stack, so deploy staging first. "
        "Back to Pre-flight checks."
    )

    # A second clarification, sent with Enter this time; the first one stays readable.
    page.get_by_role("button", name="Ask to clarify…").click()
    page.locator("#clarify-input").fill("And the docs build?")
    page.locator("#clarify-input").press("Enter")
    expect(page.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
    assert web_agent.outcome(qid)["revision"] == 2
    web_agent.resume(qid, 2, "Only for releases that change docs/.")
    expect(response).to_have_text("Only for releases that change docs/.")
    expect(page.locator(".clar-earlier summary")).to_have_text("Earlier clarifications (1)")

    option(page, "unit").click()
    page.locator("#continue").click()
    details = web_agent.outcome(qid)
    assert details["status"] == "completed"
    assert details["answers"] == [{"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]}]
    assert [c.get("response") for c in details["clarifications"]] == [
        "Yes: they run against the staging stack, so deploy staging first.",
        "Only for releases that change docs/.",
    ]


def test_cancel_asks_for_confirmation_in_an_accessible_dialog(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(TARGET)

    opener = page.locator("#cancel-open")
    opener.click()
    dialog = page.get_by_role("dialog", name="Cancel this questionnaire?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Keep answering")).to_be_focused()
    page.keyboard.press("Escape")  # closes the dialog and changes nothing
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])

    opener.click()
    dialog.get_by_role("button", name="Keep answering").click()
    expect(dialog).to_be_hidden()
    opener.click()
    dialog.get_by_role("button", name="Cancel questionnaire").click()

    details = web_agent.outcome(qid)
    assert details["status"] == "cancelled"
    assert details["cancellationReason"] == "user_cancelled"
    expect(idle_heading(page)).to_be_visible()
    expect(page.locator(".idle-note")).to_have_text("You cancelled the last questionnaire.")


def test_a_reload_mid_multi_keeps_the_draft_and_other_tabs_stay_in_sync(
    page: Page, context: BrowserContext, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(CHECKS)

    option(page, "unit").click()
    option(page, "lint").click()
    expect(page.locator("#draft-state")).to_have_text("Selections saved")  # echoed by the broker

    errors: list[str] = []
    other_tab = watch(context.new_page(), errors)
    open_client(other_tab, web_broker.url, web_sid)
    expect(option(other_tab, "unit")).to_have_attribute("aria-pressed", "true")
    expect(option(other_tab, "lint")).to_have_attribute("aria-pressed", "true")

    page.reload()
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    expect(option(page, "unit")).to_have_attribute("aria-pressed", "true")
    expect(option(page, "lint")).to_have_attribute("aria-pressed", "true")
    expect(option(page, "e2e")).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#continue")).to_have_text("Continue with 2 selections")

    option(other_tab, "e2e").click()  # a toggle in one tab shows in the other
    expect(option(page, "e2e")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#continue")).to_have_text("Continue with 3 selections")
    page.locator("#continue").click()

    details = web_agent.outcome(qid)
    assert details["answers"] == [{"questionId": "checks", "selectedOptionIds": ["unit", "e2e", "lint"]}]
    expect(idle_heading(other_tab)).to_be_visible()
    assert errors == []


def test_the_other_tab_is_told_who_answered_and_its_own_answers_are_not_told_back(
    context: BrowserContext, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    errors: list[str] = []
    alice, bob = (watch(context.new_page(), errors) for _ in range(2))
    for page, sub in ((alice, "alice"), (bob, "bob")):
        page.goto(link(web_broker.url, web_sid, token(web_sid, "client", sub=sub)))
        expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    web_agent.start(TARGET, NOTIFY)

    option(alice, "staging").click()
    expect(bob.locator("#progress-count")).to_have_text("Question 2 of 2")
    expect(bob.get_by_role("note")).to_have_text("Question 1 was answered by alice in the browser.")
    expect(bob.locator("#announcer")).to_contain_text("Question 1 was answered by alice in the browser.")
    expect(alice.locator("#progress-count")).to_have_text("Question 2 of 2")
    expect(alice.locator("#answered-note")).to_have_count(0)

    option(alice, "team").click()
    expect(bob.locator(".toast-success")).to_contain_text("Answered by alice in the browser.")
    expect(bob.locator(".idle-note")).to_have_text("The last questionnaire was answered by alice in the browser.")
    expect(alice.locator(".toast-success")).to_contain_text("The agent has your answers.")
    expect(alice.locator(".idle-note")).to_have_text("Your last answers were sent to the agent.")
    assert errors == []


def test_error_frames_are_shown_as_readable_messages(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    """Frames injected into the page's own connection make the real broker answer with errors."""
    sockets: list[Any] = []
    page.route_web_socket(re.compile(r"/v1/sessions/[^/]+/ws$"), lambda ws: sockets.append(ws.connect_to_server()))
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(TARGET)
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
    server = sockets[-1]

    server.send(
        json.dumps(
            {
                "type": "answer",
                "questionnaireId": qid,
                "step": 0,
                "questionId": "deploy_target",
                "selectedOptionIds": ["moon"],
                "ref": "x1",
            }
        )
    )
    toast = page.locator(".toast[data-code='unknown_option']")
    expect(toast).to_be_visible()
    expect(toast).to_contain_text("That option is not part of this question")
    expect(toast).to_contain_text('no option "moon"')

    server.send(
        json.dumps(
            {
                "type": "answer",
                "questionnaireId": qid,
                "step": 41,
                "questionId": "deploy_target",
                "selectedOptionIds": ["staging"],
            }
        )
    )
    stale = page.locator(".toast[data-code='stale_step']")
    expect(stale).to_contain_text("That question had already moved on")
    expect(stale).not_to_contain_text("names step")  # a human message, not the broker's wording

    server.send(json.dumps({"type": "teleport"}))
    bad = page.locator(".toast[data-code='bad_frame']")
    expect(bad).to_contain_text("The broker could not read a message from this page")
    bad.get_by_role("button", name="Dismiss message").click()
    expect(bad).to_be_hidden()

    # The question is untouched and still answerable.
    option(page, "staging").click()
    assert web_agent.outcome(qid)["answers"] == [{"questionId": "deploy_target", "selectedOptionIds": ["staging"]}]


def test_the_cancel_dialog_closes_when_its_questionnaire_goes_and_never_cancels_the_next(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    first = web_agent.start(TARGET)
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
    second = web_agent.start(NOTIFY)  # queued behind the first

    page.locator("#cancel-open").click()
    dialog = page.get_by_role("dialog", name="Cancel this questionnaire?")
    expect(dialog).to_be_visible()
    web_agent.abort(first)  # the agent withdraws the first while the dialog is open
    expect(page.locator("#q-prompt")).to_have_text(NOTIFY["prompt"])
    expect(dialog).to_be_hidden()
    expect(page.locator(".toast").filter(has_text="Nothing was cancelled")).to_be_visible()
    expect(option(page, "team")).to_be_focused()

    # A confirmation that lands just as the next questionnaire arrives cancels nothing.
    page.evaluate("document.getElementById('cancel-confirm').click()")
    expect(page.locator("#q-prompt")).to_have_text(NOTIFY["prompt"])
    option(page, "nobody").click()
    details = web_agent.outcome(second)
    assert details["status"] == "completed"
    assert details["answers"] == [{"questionId": "notify", "selectedOptionIds": ["nobody"]}]


def test_agent_text_keeps_its_line_breaks_and_never_scrolls_sideways_on_a_phone(
    chromium: Browser, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    errors: list[str] = []
    context = new_context(chromium, viewport={"width": 375, "height": 740})
    try:
        page = watch(context.new_page(), errors)
        long_word = "Recompute_all_invoice_totals_from_the_append_only_event_log_first"
        question: dict[str, Any] = {  # no label: it defaults to the long id
            "id": "migrate_the_legacy_billing_service_to_the_new_event_store",
            "prompt": "Which checks?\nConsider:\n- speed",
            "type": "multi",
            "options": [
                {"id": "replay", "label": long_word, "description": "First line\nhttps://example.invalid/" + "a" * 90},
                {"id": "none", "label": "None"},
            ],
        }

        def no_sideways_scroll(where: str) -> None:
            width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], f"horizontal scroll {width} on {where}"

        open_client(page, web_broker.url, web_sid)
        qid = web_agent.start(question)
        expect(page.locator("#q-label")).to_have_text(question["id"])
        prompt = page.locator("#q-prompt")
        assert prompt.inner_text() == "Which checks?\nConsider:\n- speed"
        assert option(page, "replay").locator(".option-desc").inner_text().startswith("First line\nhttps://")
        no_sideways_scroll("the question")

        option(page, "replay").click()
        page.get_by_role("button", name="Ask to clarify…").click()
        page.locator("#clarify-input").fill("What_about_" + "z" * 150)
        page.locator("#clarify-input").press("Enter")
        expect(page.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
        no_sideways_scroll("the waiting view")

        web_agent.resume(qid, 1, "Line one\nhttps://example.invalid/" + "b" * 150)
        reply = page.locator(".clar-latest .clar-response")
        expect(reply).to_be_visible()
        assert reply.inner_text().startswith("Line one\nhttps://")
        no_sideways_scroll("the question with the agent's reply")
    finally:
        context.close()
    assert errors == []


def test_an_empty_other_on_a_multi_question_is_not_shown_as_a_selection(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    open_client(page, web_broker.url, web_sid)
    web_agent.start(EXTRAS)
    other = page.locator("#other-open")
    proceed = page.locator("#continue")
    other.click()
    expect(other).to_have_attribute("aria-expanded", "true")
    expect(other).to_have_attribute("aria-pressed", "false")  # open, but nothing typed: not a selection
    expect(proceed).to_have_text("Continue with 0 selections")
    page.locator("#other-input").fill("Smoke test")
    expect(other).to_have_attribute("aria-pressed", "true")
    expect(proceed).to_have_text("Continue with 1 selection")
    page.locator("#other-input").fill("   ")
    expect(other).to_have_attribute("aria-pressed", "false")
    expect(proceed).to_have_text("Continue with 0 selections")


def test_other_text_over_the_limit_on_a_multi_question_is_never_silently_dropped(
    page: Page, context: BrowserContext, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    errors: list[str] = []
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(EXTRAS)
    state = page.locator("#draft-state")
    proceed = page.locator("#continue")
    page.locator("#other-open").click()
    field = page.locator("#other-input")
    field.fill("Smoke test")
    expect(state).to_have_text("Selections saved")

    field.fill("x" * 2001)
    expect(page.locator("#other-error")).to_have_text("That is 1 character too long.")
    expect(state).to_have_text(re.compile("^Not saved"))
    expect(proceed).to_be_disabled()
    expect(page.locator("#continue-hint")).to_contain_text("longer than 2000 characters")
    option(page, "bench").click()  # a toggle does not save the draft without the text either
    expect(option(page, "bench")).to_have_attribute("aria-pressed", "true")
    expect(state).to_have_text(re.compile("^Not saved"))
    # The broker still holds the last draft that fitted, text included: a new tab shows it.
    other_tab = watch(context.new_page(), errors)
    open_client(other_tab, web_broker.url, web_sid)
    expect(other_tab.locator("#other-input")).to_have_value("Smoke test")
    expect(option(other_tab, "bench")).to_have_attribute("aria-pressed", "false")
    other_tab.close()
    expect(page.locator("#other-input")).to_have_value("x" * 2001)  # its echo changed nothing here

    # Asking to clarify would carry the draft: it is refused until the text fits.
    page.get_by_role("button", name="Ask to clarify…").click()
    page.locator("#clarify-input").fill("Is a smoke test enough?")
    page.locator("#clarify-input").press("Enter")
    expect(page.locator("#clarify-error")).to_contain_text("2000 characters")
    expect(page.locator("#q-prompt")).to_have_text(EXTRAS["prompt"])

    field.fill("Smoke test on the canary")
    expect(state).to_have_text("Selections saved")
    expect(proceed).to_have_text("Continue with 2 selections")
    proceed.click()
    assert web_agent.outcome(qid)["answers"] == [
        {"questionId": "extras", "selectedOptionIds": ["bench"], "other": "Smoke test on the canary"}
    ]
    assert errors == []


def test_losing_a_race_with_another_tab_shows_a_human_message(
    page: Page, context: BrowserContext, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    """This tab's answer is held back until another tab has answered the same question."""
    held: list[tuple[WebSocketRoute, str]] = []

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            if not held and isinstance(message, str) and json.loads(message).get("type") == "answer":
                held.append((server, message))  # only the first
            else:
                server.send(message)

        ws.on_message(from_page)

    page.route_web_socket(WS_PATH, route)
    open_client(page, web_broker.url, web_sid)
    qid = web_agent.start(TARGET, NOTIFY)
    errors: list[str] = []
    other_tab = watch(context.new_page(), errors)
    open_client(other_tab, web_broker.url, web_sid)

    option(page, "staging").click()  # held back
    option(other_tab, "production").click()  # wins
    expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
    assert len(held) == 1
    server, answer = held[0]
    server.send(answer)  # arrives late: the broker refuses it as stale

    toast = page.locator(".toast[data-code='stale_step']")
    expect(toast).to_contain_text("Another window answered it first")
    expect(toast).not_to_contain_text("current step")
    expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
    option(page, "team").click()
    assert web_agent.outcome(qid)["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["production"]},
        {"questionId": "notify", "selectedOptionIds": ["team"]},
    ]
    assert errors == []


def test_an_expired_link_says_so_and_offers_no_retry_that_cannot_work(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    page.goto(link(web_broker.url, web_sid, token(web_sid, "client", ttl=5)))
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    qid = web_agent.start(TARGET)
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])

    # The broker closes the connection with 4401 "token expired" when the token runs out.
    heading = page.get_by_role("heading", name="This link has expired")
    expect(heading).to_be_visible(timeout=RECONNECT_TIMEOUT_MS)
    main = page.locator("main")
    expect(main).to_contain_text("still open")
    expect(main).to_contain_text("Ask for a new link")
    expect(page.get_by_role("button", name="Try again")).to_have_count(0)
    expect(page.locator("#conn")).to_have_attribute("data-state", "failed")
    expect(page.locator("#conn-text")).to_have_text("Link expired")
    assert web_agent.pending(qid)  # still open, waiting for the person to come back


def test_a_questionnaire_that_ended_while_the_page_was_offline_is_explained(
    page: Page, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    """The page is cut off; meanwhile the agent withdraws the questionnaire on screen."""
    down = {"now": False}
    links: list[WebSocketRoute] = []

    def route(ws: WebSocketRoute) -> None:
        if down["now"]:
            ws.close(code=1012, reason="test: the network is down")
            return
        ws.connect_to_server()
        links.append(ws)

    page.route_web_socket(WS_PATH, route)
    open_client(page, web_broker.url, web_sid)
    first = web_agent.start(TARGET)
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
    web_agent.start(NOTIFY)

    down["now"] = True
    links[-1].close(code=1012, reason="test: the network is down")
    banner = page.locator("#offline-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Answers you already sent are saved by the broker")
    expect(banner).not_to_contain_text("nothing you answered is lost")

    # The countdown ticks outside the live region: only the state itself is announced.
    conn = page.locator("#conn")
    expect(conn).to_contain_text(re.compile(r"retrying in \d+ s"))
    # (Read while a countdown is on screen: on a busy machine the one just seen may already
    # have run out, the page then reconnecting, refused, until the next one starts.)
    live_around_countdown = page.wait_for_function(
        """() => {
          const walker = document.createTreeWalker(document.getElementById('conn'), NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (/retrying in/.test(node.data)) {
              const live = node.parentElement.closest(
                '[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]');
              return live ? live.outerHTML : 'none';
            }
          }
          return null;
        }"""
    ).json_value()
    assert live_around_countdown == "none"
    expect(conn.get_by_role("status")).to_have_text(re.compile(r"^[^0-9]+$"))

    web_agent.abort(first)
    assert web_agent.outcome(first)["status"] == "cancelled"
    # The network comes back the moment "Retry now" is clicked (were it back any earlier, a
    # countdown running out meanwhile would reconnect the page and hide the button).
    retry = page.locator("#conn-retry")
    expect(retry).to_be_visible()
    down["now"] = False
    # A countdown that runs out between the two lines above reconnects the page by itself and
    # hides the button (seen once on a busy machine): the click is moot then, and what
    # follows holds either way.
    with contextlib.suppress(PlaywrightTimeoutError):
        retry.click(timeout=scaled_ms(2000))
    expect(conn).to_have_attribute("data-state", "connected", timeout=RECONNECT_TIMEOUT_MS)
    expect(page.locator("#q-prompt")).to_have_text(NOTIFY["prompt"])
    expect(page.locator(".ended-note")).to_contain_text(
        "The questionnaire you were answering ended while this page was disconnected"
    )


def test_a_page_without_a_usable_link_says_what_a_person_can_do(page: Page, web_broker: Any, web_sid: str) -> None:
    page.goto(web_broker.url + "/")
    expect(page.get_by_role("heading", name="Open the link you were sent")).to_be_visible()
    expect(page.locator("#setup-text")).to_contain_text("Open it from the link in the message")
    expect(page.locator("#conn")).to_have_attribute("data-state", "failed")
    expect(page.locator("#conn-text")).to_have_text("No link")  # the pill says what the page says
    main = page.locator("main")
    for developers_only in ("qbroker token", "--role", "#session=", "CLIENT_TOKEN"):
        expect(main).not_to_contain_text(developers_only)  # docs/web-client.md has those
    expect(page.locator("#sign-in")).to_have_count(0)  # no identity provider configured

    page.goto(f"{web_broker.url}/#session={web_sid}")
    expect(page.get_by_role("heading", name="This link is incomplete")).to_be_visible()
    expect(page.locator("#setup-text")).to_contain_text(f"It names the session “{web_sid}” but not the key")
    expect(page.locator("#conn-text")).to_have_text("Link incomplete")
    expect(page.locator("#session-line")).to_be_hidden()

    page.get_by_text("I was given a token to paste").click()
    expect(page.get_by_label("Session (optional)")).to_have_value(web_sid)
    page.get_by_label("Token", exact=True).fill(token(web_sid, "client"))
    page.get_by_role("button", name="Open", exact=True).click()
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    expect(idle_heading(page)).to_be_visible()


@pytest.mark.parametrize(
    ("make_token", "title", "pill", "says"),
    [
        (lambda url, sid: "not-a-token", "This link does not work", "Link not accepted", "lost when it was copied"),
        (lambda url, sid: token(sid, "agent"), "This link is not for answering", "Wrong kind of link", "for a program"),
        (revoked_token, "This link has been withdrawn", "Link withdrawn", "switched this link off"),
        (
            lambda url, sid: token(sid + "-elsewhere", "client"),
            "This link is for another session",
            "Wrong session",
            "opens a different session",
        ),
    ],
    ids=["garbage-4401", "agent-role-4401", "revoked-4401", "other-session-4403"],
)
def test_a_refused_token_gets_its_own_sentence_and_no_retry_that_cannot_work(
    page: Page, web_broker: Any, web_sid: str, make_token: Any, title: str, pill: str, says: str
) -> None:
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(link(web_broker.url, web_sid, make_token(web_broker.url, web_sid)))
    expect(page.get_by_role("heading", name=title)).to_be_visible()
    expect(page.locator("main")).to_contain_text(says)
    expect(page.locator("main")).not_to_contain_text("qbroker token")
    expect(page.get_by_role("button", name="Try again")).to_have_count(0)
    expect(page.locator("#conn")).to_have_attribute("data-state", "failed")
    expect(page.locator("#conn-text")).to_have_text(pill)
    expect(page.locator("#conn-retry")).to_be_hidden()  # no reconnect is scheduled
    assert len(sockets) == 1


def test_the_page_reconnects_after_a_redis_backed_broker_restarts_and_continues(page: Page, web_sid: str) -> None:
    with redis_server() as redis:
        port = free_port()
        with broker(redis.url, port=port, client_wait=10, reconnect_grace=60) as first:
            open_client(page, first.url, web_sid)
            qid = Agent(first.url, web_sid).start(TARGET, CHECKS)
            option(page, "staging").click()
            expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
            option(page, "unit").click()
            expect(page.locator("#draft-state")).to_have_text("Selections saved")
            first.stop()
        expect(page.locator("#conn")).to_have_attribute("data-state", re.compile("waiting|connecting|offline"))
        expect(page.locator("#offline-banner")).to_be_visible()
        expect(page.locator("#q-prompt")).to_have_text(CHECKS["prompt"])  # still on screen

        with broker(redis.url, port=port, client_wait=10, reconnect_grace=60) as second:
            expect(page.locator("#conn")).to_have_attribute("data-state", "connected", timeout=RECONNECT_TIMEOUT_MS)
            expect(page.locator("#offline-banner")).to_be_hidden()
            expect(page.locator("#progress-count")).to_have_text("Question 2 of 2")
            expect(option(page, "unit")).to_have_attribute("aria-pressed", "true")
            option(page, "e2e").click()
            page.locator("#continue").click()
            details = Agent(second.url, web_sid).outcome(qid)
    assert details["status"] == "completed"
    assert details["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["staging"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
    ]


def test_the_page_reconnects_after_a_memory_broker_restarts_and_waits_for_new_questions(
    page: Page, web_sid: str
) -> None:
    port = free_port()
    with broker(port=port, client_wait=10) as first:
        open_client(page, first.url, web_sid)
        Agent(first.url, web_sid).start(TARGET)
        expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
        first.stop()
    expect(page.locator("#conn")).to_have_attribute("data-state", re.compile("waiting|connecting|offline"))
    expect(page.locator("#conn")).to_contain_text(re.compile("retrying|reconnecting", re.IGNORECASE))

    with broker(port=port, client_wait=10) as second:
        # The memory store forgot everything: the page says so by waiting for new questions.
        expect(page.locator("#conn")).to_have_attribute("data-state", "connected", timeout=RECONNECT_TIMEOUT_MS)
        expect(idle_heading(page)).to_be_visible()
        # No `closed` frame came for the questionnaire on screen: the page says it ended unseen.
        expect(page.locator(".idle-note")).to_contain_text(
            "The questionnaire you were answering ended while this page was disconnected"
        )
        agent = Agent(second.url, web_sid)
        qid = agent.start(NOTIFY)
        option(page, "nobody").click()
        assert agent.outcome(qid)["answers"] == [{"questionId": "notify", "selectedOptionIds": ["nobody"]}]


def test_screenshot_of_a_multi_question_mid_answer_on_desktop_and_phone(
    chromium: Browser, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    """Takes docs/screenshot-web.png: desktop in the light scheme, a phone in the dark one."""
    errors: list[str] = []
    desktop_context = new_context(chromium, viewport={"width": 1040, "height": 1000}, color_scheme="light")
    phone_context = new_context(
        chromium, viewport=PHONE, color_scheme="dark", device_scale_factor=2, is_mobile=True, has_touch=True
    )
    try:
        desktop = watch(desktop_context.new_page(), errors)
        open_client(desktop, web_broker.url, web_sid)
        checks = {**CHECKS, "allowOther": True}
        rollout = {
            "id": "rollout",
            "label": "Rollout",
            "prompt": "How should it roll out?",
            "type": "single",
            "options": [{"id": "all", "label": "All at once"}, {"id": "canary", "label": "Canary first"}],
        }
        qid = web_agent.start(TARGET, checks, rollout, NOTIFY)
        option(desktop, "staging").click()
        option(desktop, "unit").click()
        option(desktop, "e2e").click()
        desktop.get_by_role("button", name="Ask to clarify…").click()
        desktop.locator("#clarify-input").fill("Do the end-to-end tests need staging to be up?")
        desktop.locator("#clarify-input").press("Enter")
        expect(desktop.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
        web_agent.resume(qid, 1, "Yes: they run against the staging stack, so staging is deployed first.")
        expect(desktop.locator(".clar-latest .clar-response")).to_be_visible()
        desktop.get_by_role("button", name=re.compile("^Other…")).click()
        desktop.locator("#other-input").fill("Smoke test on the canary")
        expect(desktop.locator("#draft-state")).to_have_text("Selections saved")
        expect(desktop.locator("#continue")).to_have_text("Continue with 3 selections")
        option(desktop, "e2e").focus()
        desktop.keyboard.press("ArrowDown")  # keyboard focus: a visible focus ring in the picture
        expect(option(desktop, "lint")).to_be_focused()
        desktop.evaluate("window.scrollTo(0, 0)")
        desktop_png = desktop.screenshot(full_page=True, animations="disabled")

        # A phone in the dark scheme on the same session: the draft, Other text included, syncs.
        phone = watch(phone_context.new_page(), errors)
        open_client(phone, web_broker.url, web_sid)
        expect(option(phone, "e2e")).to_have_attribute("aria-pressed", "true")
        expect(phone.locator("#other-input")).to_have_value("Smoke test on the canary")
        expect(phone.locator(".clar-latest .clar-response")).to_be_visible()
        assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "horizontal scroll"
        background = phone.evaluate("getComputedStyle(document.body).backgroundColor")
        assert _luminance(background) < 0.2, f"dark scheme expected, body background is {background}"
        assert _luminance(desktop.evaluate("getComputedStyle(document.body).backgroundColor")) > 0.8
        phone.locator("#q-label").scroll_into_view_if_needed()
        phone.evaluate("window.scrollTo(0, document.querySelector('.clarifications').offsetTop - 70)")
        phone_png = phone.screenshot(animations="disabled")

        compose_screenshots(chromium, desktop_png, phone_png, SCREENSHOT)
        assert SCREENSHOT.stat().st_size > 20_000
    finally:
        desktop_context.close()
        phone_context.close()
    assert errors == []


def _luminance(css_color: str) -> float:
    red, green, blue = (int(x) for x in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


# A laptop window shorter than the question: the footer is off screen while the person
# answers, and comes on screen only when "Waiting for questions" replaces the question.
SHORT_DESKTOP = {"width": 1100, "height": 520}


def test_the_answers_sent_toast_never_covers_the_footer(
    chromium: Browser, web_broker: Any, web_sid: str, web_agent: Agent
) -> None:
    for viewport in (DESKTOP, PHONE, SHORT_DESKTOP):
        context = new_context(chromium, viewport=viewport)
        try:
            page = context.new_page()
            open_client(page, web_broker.url, web_sid)
            web_agent.start(TARGET)
            expect(option(page, "staging")).to_be_visible()
            if viewport is SHORT_DESKTOP:
                footer_top = page.evaluate("document.querySelector('footer.footer').getBoundingClientRect().top")
                assert footer_top > viewport["height"], "the question should push the footer off screen"
            option(page, "staging").click()
            toast = page.locator(".toast").filter(has_text="Answers sent")
            expect(toast).to_be_visible()
            expect(idle_heading(page)).to_be_visible()
            footer = page.locator("footer.footer").bounding_box()
            box = page.locator("#toasts").bounding_box()
            assert footer is not None and box is not None
            assert box["y"] + box["height"] <= footer["y"], (viewport, box, footer)
            toast.get_by_role("button", name="Dismiss message").click()
            expect(toast).to_have_count(0)
        finally:
            context.close()
