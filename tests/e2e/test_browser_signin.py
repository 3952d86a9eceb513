"""People sign in with the team's identity provider, end to end: Debian Chromium against a
broker that trusts a real OpenID Connect provider (panva's oidc-provider, tests/helpers/oidc.py),
whose login and consent pages the tests fill in as a person would.

The page runs the authorization code flow with PKCE, keeps the access token in memory, uses it
as its client token, and opens the inbox of the person's sessions; a notification link (no
token: the session and the questionnaire) opens its question after the sign-in; signing out
and a sign-in that ends bring "Sign in" back, never a dead "Try again".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import httpx
import jwt
import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from tests.helpers.agent_http import ask, outcome
from tests.helpers.browser import new_context
from tests.helpers.oidc import AUDIENCE, Provider, signing_in
from tests.helpers.processes import REPO_ROOT, BrokerProcess
from tests.helpers.samples import REVIEWER, TARGET, new_sid

pytestmark = pytest.mark.browser

DESKTOP: ViewportSize = {"width": 1040, "height": 760}
PHONE: ViewportSize = {"width": 390, "height": 844}
SIGN_IN_SHOT = REPO_ROOT / "docs" / "screenshot-sign-in.png"
PHONE_SHOT = REPO_ROOT / "docs" / "screenshot-phone-inbox-answer.png"


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[BrokerProcess, Provider]]:
    with signing_in(client_wait=120, reconnect_grace=120) as both:
        yield both


@pytest.fixture
def viewport() -> ViewportSize:
    """The size the sign-in screenshot was taken at."""
    return DESKTOP


def log_in_at_the_provider(page: Page, idp: Provider, user: str) -> None:
    """The provider's own login and consent pages, as a person fills them in."""
    expect(page).to_have_url(re.compile("^" + re.escape(idp.issuer)))
    page.locator("input[name=login]").fill(user)
    page.locator("input[name=password]").fill("correct horse battery staple")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()  # consent: the page may act as the person


def sign_in(page: Page, url: str, idp: Provider, user: str = "alice") -> None:
    page.goto(url + "/")
    page.get_by_role("button", name="Sign in").click()
    log_in_at_the_provider(page, idp, user)
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()


def test_sign_in_opens_the_inbox_of_the_person_s_sessions_with_the_access_token_in_memory(
    page: Page, deployment: tuple[BrokerProcess, Provider]
) -> None:
    process, idp = deployment
    url = process.url
    settings = httpx.get(f"{url}/v1/signin", timeout=10).json()
    assert settings == {"issuer": idp.issuer, "clientId": "qbroker", "scope": "openid"}

    page.goto(url + "/")
    expect(page.get_by_role("heading", name="Sign in to answer")).to_be_visible()
    expect(page.locator("#conn-text")).to_have_text("Signed out")
    expect(page.locator("#sign-in")).to_be_visible()
    page.screenshot(path=str(SIGN_IN_SHOT), animations="disabled")

    tokens: list[dict[str, Any]] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: tokens.append({"frame": payload})))
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url.startswith(idp.issuer + "/auth?") else None)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(idp.issuer)))
    authorize = asked[0]
    assert "code_challenge_method=S256" in authorize and "code_challenge=" in authorize
    assert "response_mode=fragment" in authorize and "client_secret" not in authorize
    log_in_at_the_provider(page, idp, "alice")

    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    expect(page.locator("#account-text")).to_have_text("Signed in as alice.")
    expect(page.locator("#remember-setting")).to_be_hidden()  # nothing to remember: the sign-in is the way back
    assert "code=" not in page.url and "state=" not in page.url
    # The access token is the client token, and the page keeps it in memory only.
    stored = page.evaluate("JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage)])")
    assert stored == '[[],["qbroker.refresh"]]'
    hello = next(str(t["frame"]) for t in tokens if '"hello"' in str(t["frame"]))
    access = re.search(r'"token":"([^"]+)"', hello)
    assert access is not None
    claims = jwt.decode(access.group(1), options={"verify_signature": False})
    assert (claims["iss"], claims["aud"], claims["sub"], claims["qbroker_sid"], claims["role"]) == (
        idp.issuer,
        AUDIENCE,
        "alice",
        "alice:*",
        "client",
    )

    build = "alice:" + new_sid("build")
    mine = ask(url, build, TARGET, sub="build-bot")
    ask(url, "bob:" + new_sid("build"), REVIEWER, sub="build-bot")  # bob's: never in alice's inbox
    item = page.locator(".inbox-list .inbox-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("Which environment should this release go to?")
    item.click()
    page.locator(".options .option[data-option-id='staging']").click()
    expect(page.locator("#inbox-offer-title")).to_have_text("Answers sent.")
    assert outcome(url, build, mine)["status"] == "completed"


def test_a_notification_link_carries_no_token_and_opens_its_question_after_sign_in(
    chromium: Browser, deployment: tuple[BrokerProcess, Provider]
) -> None:
    """On a 390 px phone: the link from a notification, the sign-in, the question with its
    session and agent in the header, answered (docs/web-client.md's phone screenshot)."""
    process, idp = deployment
    url = process.url
    sid = "alice:release-42"  # the only test of this broker with this session: a stable screenshot
    ask(url, "alice:" + new_sid("other"), REVIEWER, sub="review-bot")  # another one waits too
    qid = ask(url, sid, TARGET, sub="deploy-bot")
    context = new_context(
        chromium, viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2, color_scheme="light"
    )
    try:
        page = context.new_page()
        page.goto(f"{url}/#session={sid}&questionnaire={qid}")  # what a notification links to now
        expect(page.get_by_role("heading", name="Sign in to answer")).to_be_visible()
        expect(page.locator("#setup-text")).to_contain_text(f"in session “{sid}”")
        page.get_by_role("button", name="Sign in").tap()
        log_in_at_the_provider(page, idp, "alice")

        expect(page.locator("#q-prompt")).to_have_text(TARGET["prompt"])  # that question, not the other
        expect(page.locator("#session-name")).to_have_text(sid)
        expect(page.locator("#session-agent")).to_have_text("asked by deploy-bot")
        expect(page.locator("#inbox-back")).to_be_visible()
        assert unquote(page.url).endswith(f"/#session={sid}&questionnaire={qid}")  # the code is gone
        page.screenshot(path=str(PHONE_SHOT), animations="disabled")
        page.locator(".options .option[data-option-id='production']").tap()
        expect(page.locator("#inbox-offer-title")).to_have_text("Answers sent.")
        assert outcome(url, sid, qid)["answers"] == [
            {"questionId": "deploy_target", "selectedOptionIds": ["production"]}
        ]
    finally:
        context.close()


def test_sign_out_brings_sign_in_back_and_forgets_the_tokens(
    page: Page, deployment: tuple[BrokerProcess, Provider]
) -> None:
    process, idp = deployment
    sign_in(page, process.url, idp)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="You have signed out")).to_be_visible()
    expect(page.locator("#conn-text")).to_have_text("Signed out")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.get_by_role("button", name="Try again")).to_have_count(0)
    assert page.evaluate("sessionStorage.length + localStorage.length") == 0
    page.reload()
    expect(page.get_by_role("heading", name="Sign in to answer")).to_be_visible()


@pytest.fixture(scope="module")
def short_lived() -> Iterator[tuple[BrokerProcess, Provider]]:
    """Access tokens that live 12 s: renewed by the page before they run out."""
    with signing_in(access_token_ttl=12, client_wait=120, reconnect_grace=120) as both:
        yield both


def test_the_access_token_is_renewed_and_a_sign_in_that_ends_offers_sign_in_again(
    page: Page, short_lived: tuple[BrokerProcess, Provider]
) -> None:
    process, idp = short_lived
    sign_in(page, process.url, idp)
    renewals: list[str] = []
    page.on("request", lambda r: renewals.append(r.post_data or "") if r.url.endswith("/token") else None)
    # Past the first token's life (and the broker's 4401 "token expired" close of the socket
    # that used it): the page renewed it and is live on the inbox still.
    page.wait_for_timeout(14_000)  # the scenario: the token's 12 s must pass
    expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    assert any("grant_type=refresh_token" in body for body in renewals), renewals
    ask(process.url, "alice:" + new_sid("late"), TARGET, sub="build-bot")
    expect(page.locator(".inbox-list .inbox-item")).to_have_count(1)

    # The provider no longer renews it (the refresh token is gone): at the next renewal the
    # page says the sign-in ended, with "Sign in again", and no dead "Try again".
    page.evaluate("sessionStorage.removeItem('qbroker.refresh')")
    expect(page.get_by_role("heading", name="You have been signed out")).to_be_visible(timeout=20_000)
    expect(page.locator("#conn-text")).to_have_text("Signed out")
    expect(page.get_by_role("button", name="Try again")).to_have_count(0)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()  # the provider remembers alice
