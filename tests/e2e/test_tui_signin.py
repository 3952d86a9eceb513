"""``qbroker tui`` signs in with the device authorization grant (RFC 8628), end to end: the real
program in a tmux pane against a broker that trusts a real OpenID Connect provider (panva's
oidc-provider, tests/helpers/oidc.py); the person types the code in Chromium, on the
provider's own pages, and signs in there.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from tests.helpers.agent_http import ask, outcome
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.oidc import Provider, signing_in
from tests.helpers.processes import BrokerProcess, need
from tests.helpers.samples import TARGET, new_sid
from tests.helpers.terminal import Terminal, terminal

__all__ = ["terminal"]  # the fixture, for the tests below

pytestmark = pytest.mark.browser
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    need(os.path.exists(CHROMIUM), f"Debian chromium is not installed at {CHROMIUM}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=30_000
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[BrokerProcess, Provider]]:
    with signing_in(client_wait=120, reconnect_grace=120) as both:
        yield both


@pytest.fixture
def config_home() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="qbroker-config-") as home:
        yield Path(home)


def tui(terminal: Terminal, url: str, config_home: Path, *args: str) -> None:
    env = {"XDG_CONFIG_HOME": str(config_home), "QBROKER_TOKEN": ""}
    terminal.start([sys.executable, "-m", "qbroker.cli", "tui", "--url", url, *args], env=env)


def enter_the_code_in_a_browser(chromium: Browser, screen: str, user: str) -> None:
    """What the person does with the code on the terminal: the provider's device page, the
    code, the login and the consent."""
    where = re.search(r"open (\S+) in a browser\s+and enter the code (\S+)", screen)
    assert where is not None, screen
    context = chromium.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(where.group(1))
        page.locator("input[name=user_code]").fill(where.group(2))
        page.get_by_role("button", name="Continue").click()
        # The provider's pages, in its order: "Confirm Device", the login, the consent.
        for _ in range(6):
            page.wait_for_load_state()
            if "Sign-in Success" in page.locator("body").inner_text():
                break
            if page.locator("input[name=login]").count():
                page.locator("input[name=login]").fill(user)
                page.locator("input[name=password]").fill("correct horse battery staple")
                page.get_by_role("button", name="Sign-in").click()
            else:
                page.get_by_role("button", name="Continue").click()
        expect(page.locator("body")).to_contain_text("Sign-in Success")
    finally:
        context.close()


def test_the_tui_signs_in_with_a_device_code_keeps_its_refresh_token_0600_and_signs_out(
    terminal: Terminal, chromium: Browser, deployment: tuple[BrokerProcess, Provider], config_home: Path
) -> None:
    process, _ = deployment
    tui(terminal, process.url, config_home)
    terminal.wait_for("To sign in, open", "enter the code", "Waiting for you to sign in")
    enter_the_code_in_a_browser(chromium, terminal.history(), "alice")

    # Signed in: the inbox of alice's sessions, with the access token as its client token.
    terminal.wait_for("● connected", "inbox · 0 waiting")
    kept = config_home / "qbroker" / "sign-in.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert "refreshToken" in kept.read_text()
    sid = "alice:" + new_sid("tui")
    qid = ask(process.url, sid, TARGET, sub="build-bot")
    ask(process.url, "bob:" + new_sid("tui"), TARGET, sub="build-bot")  # bob's: never listed
    terminal.wait_for("inbox · 1 waiting", "❯ Target")
    terminal.keys("Enter")
    terminal.wait_for("❯ Staging")
    terminal.keys("Enter")
    terminal.wait_for("Answers sent")
    assert outcome(process.url, sid, qid)["status"] == "completed"
    terminal.keys("C-c")
    assert terminal.exit_status() == 0


def test_a_kept_sign_in_needs_no_code_and_sign_out_forgets_it(
    chromium: Browser, deployment: tuple[BrokerProcess, Provider], config_home: Path
) -> None:
    process, _ = deployment
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        first = Terminal(Path(tmp))
        try:
            tui(first, process.url, config_home)
            first.wait_for("enter the code")
            enter_the_code_in_a_browser(chromium, first.history(), "alice")
            first.wait_for("● connected", "inbox · ")
            first.keys("C-c")
            assert first.exit_status() == 0
        finally:
            first.close()
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        again = Terminal(Path(tmp))
        try:
            tui(again, process.url, config_home)
            again.wait_for("● connected", "inbox · ")
            assert "enter the code" not in again.history()
            again.keys("C-c")
            assert again.exit_status() == 0
        finally:
            again.close()
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        out = Terminal(Path(tmp))
        try:
            tui(out, process.url, config_home, "--sign-out")
            out.wait_for("Signed out:")
            assert out.exit_status() == 0
        finally:
            out.close()
    assert not (config_home / "qbroker" / "sign-in.json").exists()
