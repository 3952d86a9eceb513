"""The browser for the e2e tests that drive the web page (test_browser*.py).

``chromium`` is Debian's Chromium, launched once per module on each xdist worker that runs
the module's tests. Not once per worker: Playwright's sync API marks its event loop as
running in the thread between its calls, so a browser left open would stop the asyncio
tests that the same worker runs next. ``context`` is a fresh context per test, its window
``viewport`` (a desktop's; a module that took screenshots at another size overrides
``viewport``), and ``page`` a page in it whose uncaught errors fail the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect, sync_playwright

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, LAUNCH_TIMEOUT_MS, TIMEOUT_MS, new_context, watch
from tests.helpers.processes import need

expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    need(os.path.exists(CHROMIUM), f"Debian chromium is not installed at {CHROMIUM}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=LAUNCH_TIMEOUT_MS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def viewport() -> ViewportSize:
    return DESKTOP


@pytest.fixture
def context(chromium: Browser, viewport: ViewportSize) -> Iterator[BrowserContext]:
    opened = new_context(chromium, viewport=viewport)
    yield opened
    opened.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    errors: list[str] = []
    opened = watch(context.new_page(), errors)
    yield opened
    assert errors == [], f"uncaught errors in the page: {errors}"
