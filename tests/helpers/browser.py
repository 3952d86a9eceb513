"""The browser the e2e tests drive, and the docs' screenshots of the page.

Debian's Chromium (``/usr/bin/chromium``; never a downloaded one) through Playwright, with
the flags a container and a quiet test run need. tests/e2e/conftest.py launches it (the
``chromium`` fixture) and opens contexts and pages on it (``context``, ``page``);
``new_context`` and ``watch`` are for a test that needs another viewport or a second tab.
Deadlines are scaled by tests/helpers/waiting.py's factor.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize

from tests.helpers.waiting import scaled_ms

TIMEOUT_MS = scaled_ms(10_000)  # what a page may take to show what a test expects
LAUNCH_TIMEOUT_MS = scaled_ms(30_000)
DESKTOP: ViewportSize = {"width": 1100, "height": 900}

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def new_context(browser: Browser, **options: Any) -> BrowserContext:
    """A context of its own (cookies, storage, service workers): a desktop window unless
    ``options`` say otherwise, with the suite's deadline for every action and navigation."""
    context = browser.new_context(**{"viewport": DESKTOP, **options})
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    return context


def watch(page: Page, errors: list[str]) -> Page:
    """Collect the page's uncaught errors into ``errors`` (a test asserts there are none)."""
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page


def compose_screenshots(browser: Browser, desktop_png: bytes, phone_png: bytes, path: Path) -> None:
    """A desktop and a phone screenshot side by side on one canvas (a window frame and a phone
    frame), rendered by the same browser, written to ``path``."""
    desktop_src = "data:image/png;base64," + base64.b64encode(desktop_png).decode()
    phone_src = "data:image/png;base64," + base64.b64encode(phone_png).decode()
    html = f"""<!doctype html><html><head><style>
      html, body {{ margin: 0; }}
      body {{ display: inline-flex; align-items: flex-start; gap: 44px; padding: 40px 44px;
             background: linear-gradient(135deg, #e7e9f7, #d9dcf0 55%, #2a2d45 55.1%, #1b1d2c); }}
      .desktop {{ width: 900px; border-radius: 12px; overflow: hidden;
                  box-shadow: 0 24px 60px rgba(20, 24, 60, .28); border: 1px solid #c9cde0; background: #fff; }}
      .bar {{ height: 30px; background: #eceef5; display: flex; gap: 7px; align-items: center; padding: 0 12px; }}
      .bar i {{ width: 11px; height: 11px; border-radius: 50%; background: #c8ccd9; display: block; }}
      .desktop img {{ width: 900px; display: block; }}
      .phone {{ width: 330px; margin-top: 60px; border-radius: 38px; padding: 11px; background: #05060a;
                box-shadow: 0 24px 60px rgba(0, 0, 0, .5); }}
      .phone img {{ width: 100%; display: block; border-radius: 28px; }}
    </style></head><body>
      <div class="desktop"><div class="bar"><i></i><i></i><i></i></div><img src="{desktop_src}"></div>
      <div class="phone"><img src="{phone_src}"></div>
    </body></html>"""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
    try:
        page = context.new_page()
        page.set_content(html)
        page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        box = page.evaluate(
            "(() => { const r = document.body.getBoundingClientRect(); return [r.width, r.height]; })()"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": box[0], "height": box[1]}, full_page=True)
    finally:
        context.close()
