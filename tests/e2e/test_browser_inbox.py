"""The browser page as the inbox, end to end: Debian Chromium (headless, via Playwright) against
a live broker, agents played over HTTP with their own tokens.

Each test takes a fresh prefix (``inbox-<hex>:``) and a client token for the pattern
``<prefix>*``, so that its inbox shows its own sessions and nothing of the other tests'.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.helpers.agent_http import ask, outcome
from tests.helpers.browser import compose_screenshots, new_context
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, revoked_token, token
from tests.helpers.samples import REVIEWER, TARGET, TONE, new_sid

pytestmark = pytest.mark.browser

PHONE = {"width": 375, "height": 760}
PHONE_390 = {"width": 390, "height": 844}
SCREENSHOT = REPO_ROOT / "docs" / "screenshot-inbox.png"

# A stand-in for the browser's Notification API, so that the test sees what the page asks
# and shows; and a tab the test can hide, as a person switching tabs does.
NOTIFICATION_STUB = """
(() => {
  const seen = { permission: "default", requests: 0, shown: [], hidden: false, last: null };
  window.__notify = seen;
  class StubNotification {
    constructor(title, options) {
      seen.shown.push({ title, body: (options || {}).body || "", tag: (options || {}).tag || "" });
      this.onclick = null;
      seen.last = this;
    }
    static get permission() { return seen.permission; }
    static requestPermission(callback) {
      seen.requests += 1;
      seen.permission = "granted";
      if (callback) callback("granted");
      return Promise.resolve("granted");
    }
    close() {}
  }
  window.Notification = StubNotification;
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get() { return seen.hidden; } });
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true, get() { return seen.hidden ? "hidden" : "visible"; } });
})();
"""


CHECKS_WITH_OTHER: dict[str, Any] = {
    "id": "checks",
    "label": "Checks",
    "prompt": "Which checks must pass before the release?",
    "type": "multi",
    "options": [{"id": "unit", "label": "Unit tests"}, {"id": "lint", "label": "Lint"}],
    "allowOther": True,
}


# --- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inbox_broker() -> Iterator[BrokerProcess]:
    # The questionnaires are asked before the inbox opens (an open inbox holds them, protocol.md,
    # "When nobody is there"), and a loaded machine may take seconds to open it.
    with broker(client_wait=120, reconnect_grace=120) as process:
        yield process


@pytest.fixture
def prefix() -> str:
    return new_sid("inbox") + ":"


# --- the agents and the person -----------------------------------------------------------


def open_inbox(page: Page, base_url: str, prefix: str) -> None:
    page.goto(f"{base_url}/#token={token(prefix + '*', 'client')}")
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()


def items(page: Page) -> Any:
    return page.locator(".inbox-list .inbox-item")


def item(page: Page, sid: str) -> Any:
    return page.locator(f".inbox-item[data-key^='{sid} ']")


def option(page: Page, option_id: str) -> Any:
    return page.locator(f".options .option[data-option-id='{option_id}']")


def no_sideways_scroll(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


# --- tests ---------------------------------------------------------------------------


def test_two_sessions_are_listed_one_is_answered_in_place_and_the_other_stays(
    page: Page, inbox_broker: BrokerProcess, prefix: str
) -> None:
    url = inbox_broker.url
    build, review = prefix + "build", prefix + "review"
    elsewhere = new_sid("elsewhere")  # not covered by the token: never listed
    open_inbox(page, url, prefix)
    expect(page.locator("#inbox-summary")).to_have_text("Nothing is waiting for you.")
    expect(page).to_have_title("qbroker")

    first = ask(url, build, TARGET, TONE, sub="build-bot")
    second = ask(url, review, REVIEWER, sub="review-bot")
    ask(url, elsewhere, TARGET)
    expect(items(page)).to_have_count(2)
    expect(page).to_have_title("(2) qbroker")
    expect(page.locator("#inbox-summary")).to_have_text("2 questionnaires wait for you.")
    # Oldest first, each with its question, session, place and who asked.
    expect(items(page).first).to_have_attribute("data-key", f"{build} {first}")
    expect(item(page, build)).to_contain_text("Which environment should this release go to?")
    expect(item(page, build)).to_contain_text("Question 1 of 2")
    expect(item(page, build)).to_contain_text("asked by build-bot")
    expect(item(page, build)).to_have_accessible_name(f"Target, session {build}")
    expect(item(page, review)).to_contain_text("1 question")

    # Answered in place with the questionnaire view, over the session's own socket.
    item(page, build).click()
    expect(page.locator("#inbox-bar")).to_be_visible()
    expect(page.locator("#inbox-bar-count")).to_have_text("1 other waits for you")
    expect(page.locator("#session-name")).to_have_text(build)
    expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
    expect(page).to_have_title("(2) Target · qbroker")
    option(page, "production").click()
    expect(page.locator("#q-prompt")).to_have_text(TONE["prompt"])
    option(page, "plain").click()

    # It ended: back to the list, the other one offered, the answered one gone.
    expect(page.locator("#inbox-offer-title")).to_have_text("Answers sent.")
    expect(page.locator("#inbox-offer-text")).to_have_text(f"Next waiting: Reviewer, session {review}.")
    expect(page.locator("#inbox-offer-open")).to_be_focused()
    expect(items(page)).to_have_count(1)
    expect(item(page, review)).to_be_visible()
    expect(page).to_have_title("(1) qbroker")
    expect(page.locator("#inbox-bar")).to_be_hidden()
    details = outcome(url, build, first)
    assert details["status"] == "completed"
    assert details["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["production"]},
        {"questionId": "tone", "selectedOptionIds": ["plain"]},
    ]

    page.locator("#inbox-offer-open").click()
    expect(page.locator("#q-prompt")).to_have_text(REVIEWER["prompt"])
    expect(page.locator("#inbox-bar-count")).to_have_text("Nothing else waits for you")
    # Back without answering: the questionnaire stays open, in the list.
    page.locator("#inbox-back").click()
    expect(item(page, review)).to_be_focused()
    expect(page.locator("#inbox-offer")).to_be_hidden()
    item(page, review).click()
    option(page, "bo").click()
    expect(page.locator("#inbox-offer-text")).to_have_text("Nothing else is waiting for you.")
    expect(items(page)).to_have_count(0)
    expect(page).to_have_title("qbroker")
    assert outcome(url, review, second)["answers"] == [{"questionId": "reviewer", "selectedOptionIds": ["bo"]}]


def test_notifications_are_asked_for_once_from_the_button_and_raised_in_a_hidden_tab(
    chromium: Browser, inbox_broker: BrokerProcess, prefix: str
) -> None:
    context = new_context(chromium)
    try:
        context.add_init_script(NOTIFICATION_STUB)
        page = context.new_page()
        url = inbox_broker.url
        open_inbox(page, url, prefix)
        ask_button = page.get_by_role("button", name="Notify me of new questions")
        expect(ask_button).to_be_visible()
        assert page.evaluate("__notify.requests") == 0, "never asked on load"

        ask_button.click()
        expect(page.locator("#notify-text")).to_contain_text("Notifications are on")
        expect(ask_button).to_be_hidden()  # asked once: there is nothing to ask any more
        assert page.evaluate("__notify.requests") == 1

        # In a visible tab, an arrival is announced, not notified.
        ask(url, prefix + "visible", REVIEWER)
        expect(items(page)).to_have_count(1)
        expect(page.locator("#announcer")).to_have_text(
            f"New questionnaire waiting: Reviewer, session {prefix}visible. 1 waits for you in all."
        )
        assert page.evaluate("__notify.shown.length") == 0

        page.evaluate("__notify.hidden = true; document.dispatchEvent(new Event('visibilitychange'))")
        hidden = prefix + "hidden"
        ask(url, hidden, TARGET, sub="deploy-bot")
        page.wait_for_function("__notify.shown.length === 1")
        shown = page.evaluate("__notify.shown[0]")
        assert shown["title"] == "Target · qbroker"
        assert shown["body"] == f"{TARGET['prompt']}\nSession {hidden}"
        expect(page).to_have_title("● (2) qbroker")

        # A click on the notification brings the page to that questionnaire.
        page.evaluate("__notify.hidden = false; __notify.last.onclick()")
        expect(page.locator("#session-name")).to_have_text(hidden)
        expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])
        assert page.evaluate("__notify.requests") == 1
    finally:
        context.close()


def test_a_browser_that_already_allows_notifications_is_not_asked(
    chromium: Browser, inbox_broker: BrokerProcess, prefix: str
) -> None:
    context = new_context(chromium)
    try:
        context.grant_permissions(["notifications"], origin=inbox_broker.url)
        page = context.new_page()
        open_inbox(page, inbox_broker.url, prefix)
        expect(page.locator("#notify-setting")).to_have_attribute("data-state", "on")
        expect(page.get_by_role("button", name="Notify me of new questions")).to_be_hidden()
    finally:
        context.close()


def test_the_token_is_remembered_only_when_asked_and_forgotten_on_request(
    page: Page, inbox_broker: BrokerProcess, prefix: str
) -> None:
    url = inbox_broker.url
    open_inbox(page, url, prefix)
    assert page.evaluate("window.localStorage.length") == 0, "nothing is kept unless asked"
    page.goto(url + "/")
    expect(page.get_by_role("heading", name="Open the link you were sent")).to_be_visible()

    open_inbox(page, url, prefix)
    page.get_by_role("button", name="Remember my token in this browser").click()
    forget = page.get_by_role("button", name="Forget my token")
    expect(forget).to_be_focused()
    ask(url, prefix + "later", REVIEWER)
    page.goto(url + "/")  # no token in the link: the remembered one opens the inbox
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    expect(item(page, prefix + "later")).to_be_visible()

    page.get_by_role("button", name="Forget my token").click()
    expect(page.get_by_role("heading", name="This browser has forgotten your token")).to_be_visible()
    expect(page.locator("#conn-text")).to_have_text("No link")
    assert page.evaluate("window.localStorage.length") == 0
    assert "token=" not in page.url
    page.reload()
    expect(page.get_by_role("heading", name="Open the link you were sent")).to_be_visible()


def test_the_keyboard_alone_goes_from_the_list_to_an_answer_and_back(
    page: Page, inbox_broker: BrokerProcess, prefix: str
) -> None:
    url = inbox_broker.url
    open_inbox(page, url, prefix)
    ask(url, prefix + "one", TARGET)
    ask(url, prefix + "two", REVIEWER)
    expect(items(page)).to_have_count(2)
    for _ in range(6):  # the skip link, then the first item
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('inbox-item')"):
            break
    expect(item(page, prefix + "one")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(item(page, prefix + "two")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(item(page, prefix + "one")).to_be_focused()
    # A new arrival does not take the focus away from the item it is on.
    ask(url, prefix + "three", TONE)
    expect(items(page)).to_have_count(3)
    expect(item(page, prefix + "one")).to_be_focused()

    page.keyboard.press("Enter")
    expect(option(page, "staging")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.locator("#inbox-back")).to_be_focused()
    page.keyboard.press("Enter")  # back to the list, onto the same item
    expect(item(page, prefix + "one")).to_be_focused()
    page.keyboard.press("Enter")
    expect(option(page, "staging")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#inbox-offer-open")).to_be_focused()
    expect(page.locator("#announcer")).to_have_text(f"Answers sent. Next waiting: Reviewer, session {prefix}two.")
    page.keyboard.press("Enter")
    expect(option(page, "ana")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#inbox-offer-text")).to_have_text(f"Next waiting: Changelog tone, session {prefix}three.")


def test_the_inbox_fits_a_375_px_phone(chromium: Browser, inbox_broker: BrokerProcess, prefix: str) -> None:
    context = new_context(chromium, viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        url = inbox_broker.url
        long_session = prefix + "migrate_the_legacy_billing_service_to_the_new_event_store"
        long_question = dict(
            TARGET,
            label="deploy_target_for_the_legacy_billing_service_migration_window",
            prompt="Which environment should https://billing.internal.example.com/v2/migrations/2024-q3 go to?",
        )
        open_inbox(page, url, prefix)
        ask(url, long_session, long_question, sub="a-very-long-agent-name-for-the-billing-migration")
        ask(url, prefix + "short", REVIEWER)
        expect(items(page)).to_have_count(2)
        assert no_sideways_scroll(page), "the list scrolls sideways"
        for box in [items(page).nth(i).bounding_box() for i in range(2)]:
            assert box is not None and box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= 375
        item(page, long_session).tap()
        expect(page.locator("#q-prompt")).to_contain_text("billing.internal.example.com")
        expect(page.locator("#inbox-back")).to_be_visible()
        assert no_sideways_scroll(page), "the questionnaire scrolls sideways"
        option(page, "staging").tap()
        expect(page.locator("#inbox-offer-open")).to_be_visible()
        assert no_sideways_scroll(page)
    finally:
        context.close()


def test_screenshot_of_the_inbox_on_desktop_and_phone(chromium: Browser, inbox_broker: BrokerProcess) -> None:
    """Takes docs/screenshot-inbox.png: three agents' questionnaires, one waiting for an agent."""
    url, prefix = inbox_broker.url, "alice:"  # the only test of this broker with these sessions
    desktop_context = new_context(chromium, viewport={"width": 1040, "height": 760}, color_scheme="light")
    phone_context = new_context(
        chromium,
        viewport={"width": 390, "height": 844},
        color_scheme="dark",
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    try:
        desktop = desktop_context.new_page()
        open_inbox(desktop, url, prefix)
        ask(url, prefix + "docs", TONE, sub="docs-agent")
        ask(url, prefix + "build", TARGET, REVIEWER, sub="build-bot")
        ask(url, prefix + "review", REVIEWER, TONE, TARGET, sub="review-bot")
        expect(items(desktop)).to_have_count(3)
        # One waits for its agent: the person asked it something.
        item(desktop, prefix + "docs").click()
        desktop.get_by_role("button", name="Ask to clarify…").click()
        desktop.locator("#clarify-input").fill("Is this for the public changelog or the internal one?")
        desktop.locator("#clarify-input").press("Enter")
        expect(desktop.get_by_role("heading", name="Waiting for the agent…")).to_be_visible()
        desktop.locator("#inbox-back").click()
        expect(item(desktop, prefix + "docs")).to_have_attribute("data-status", "needs_clarification")
        expect(desktop.locator("#inbox-summary")).to_have_text(
            "2 questionnaires wait for you · 1 waits for the agent's reply."
        )
        items(desktop).first.focus()
        desktop.keyboard.press("ArrowDown")  # a visible focus ring in the picture
        desktop_png = desktop.screenshot(full_page=True, animations="disabled")

        phone = phone_context.new_page()
        open_inbox(phone, url, prefix)
        expect(items(phone)).to_have_count(3)
        assert no_sideways_scroll(phone)
        phone_png = phone.screenshot(animations="disabled")
        compose_screenshots(chromium, desktop_png, phone_png, SCREENSHOT)
        assert SCREENSHOT.stat().st_size > 20_000
    finally:
        desktop_context.close()
        phone_context.close()


@pytest.mark.parametrize(
    ("make_token", "title", "pill"),
    [
        (lambda url, pattern: token(pattern, "client", ttl=1), "This link has expired", "Link expired"),
        (revoked_token, "This link has been withdrawn", "Link withdrawn"),
        (lambda url, pattern: token(pattern, "agent"), "This link is not for answering", "Wrong kind of link"),
    ],
    ids=["expired", "revoked", "agent-role"],
)
def test_the_inbox_gives_a_refused_token_its_own_sentence_and_no_dead_retry(
    page: Page, inbox_broker: BrokerProcess, prefix: str, make_token: Any, title: str, pill: str
) -> None:
    refused = make_token(inbox_broker.url, prefix + "*")
    if pill == "Link expired":
        page.wait_for_timeout(1500)  # the token's one second runs out (the scenario, not a sync)
    page.goto(f"{inbox_broker.url}/#token={refused}")
    expect(page.get_by_role("heading", name=title)).to_be_visible()
    expect(page.locator("#conn-text")).to_have_text(pill)
    expect(page.get_by_role("button", name="Try again")).to_have_count(0)
    expect(page.locator("main")).not_to_contain_text("qbroker token")


def test_a_question_answered_from_the_inbox_on_a_390_px_phone_shows_its_session_and_agent(
    chromium: Browser, inbox_broker: BrokerProcess, prefix: str
) -> None:
    """The phone's header keeps the session and the asking agent; a touch screen is told
    nothing about keys it does not have."""
    context = new_context(chromium, viewport=PHONE_390, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        url, sid = inbox_broker.url, prefix + "release"
        open_inbox(page, url, prefix)
        qid = ask(url, sid, CHECKS_WITH_OTHER, sub="deploy-bot")
        item(page, sid).tap()
        expect(page.locator("#q-prompt")).to_have_text(CHECKS_WITH_OTHER["prompt"])
        header = page.locator("header.topbar").bounding_box()
        assert header is not None
        for shown, text in (("#session-name", sid), ("#session-agent", "asked by deploy-bot")):
            expect(page.locator(shown)).to_be_visible()
            expect(page.locator(shown)).to_have_text(text)
            box = page.locator(shown).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE_390["width"], shown
            assert header["y"] <= box["y"] and box["y"] + box["height"] <= header["y"] + header["height"], shown
        assert no_sideways_scroll(page)

        page.locator("#other-open").tap()
        expect(page.locator("#other-help")).to_have_text("Tap “Other…” again to remove it")
        expect(page.locator("main")).not_to_contain_text("Esc")
        page.locator("#other-input").fill("smoke tests")
        option(page, "lint").tap()
        page.locator("#continue").tap()
        expect(page.locator("#inbox-offer-title")).to_have_text("Answers sent.")
        assert outcome(url, sid, qid)["answers"] == [
            {"questionId": "checks", "selectedOptionIds": ["lint"], "other": "smoke tests"}
        ]
    finally:
        context.close()
