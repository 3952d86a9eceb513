"""The browser page without a browser: its pure modules under Node's own test runner
(``tests/web/*.test.mjs``), and the broker serving its ES modules so that a browser will run
them (a JavaScript content type, same-origin imports the Content-Security-Policy allows).

The Node tests live in ``tests/web/``, outside ``clients/web/``: the broker serves every file
of that folder at ``/``, and tests are no part of the page.
"""

from __future__ import annotations

import mimetypes
import re
import shutil
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import httpx
import pytest

from broker.app import create_app
from broker.runtime.config import Config
from clients.web import ROOT as WEB_ROOT
from tests.helpers.processes import REPO_ROOT, need

NODE_TESTS = REPO_ROOT / "tests" / "web"
MODULES = sorted(WEB_ROOT.glob("*.mjs"))
JAVASCRIPT = re.compile(r"^(text|application)/javascript(;|$)")
IMPORT = re.compile(r"""\bimport\s*(?:[\w{},*\s]+from\s*)?\(?\s*["']([^"']+)["']""")


def node_major(node: str) -> int:
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.match(r"v(\d+)\.", version.strip())
    return int(match.group(1)) if match else 0


def test_the_pages_pure_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    need(node is not None, "node is not installed (the web page's state tests run under node --test)")
    assert node is not None
    need(node_major(node) >= 18, "node --test needs Node.js 18 or later")
    files = sorted(NODE_TESTS.glob("*.test.mjs"))
    assert files, f"no *.test.mjs in {NODE_TESTS}"
    result = subprocess.run(
        [node, "--test", *(str(f) for f in files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, f"node --test failed:\n{result.stdout[-12000:]}\n{result.stderr[-4000:]}"
    assert re.search(r"^# fail 0$", result.stdout, re.M), result.stdout[-4000:]


@pytest.fixture
async def page() -> httpx.AsyncClient:
    app = create_app(Config(secret="unit-test-secret-0123456789abcdef"), web_dir=WEB_ROOT)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    )  # (a Host the broker answers for)


async def test_every_module_is_served_as_javascript(page: httpx.AsyncClient) -> None:
    """Browsers refuse to run a module served with any other content type."""
    assert MODULES, f"no *.mjs in {WEB_ROOT}"
    async with page:
        for module in MODULES:
            response = await page.get(f"/{module.name}")
            assert response.status_code == 200, module.name
            assert JAVASCRIPT.match(response.headers["content-type"]), (module.name, response.headers["content-type"])


def test_pythons_own_table_says_javascript_too() -> None:
    """Without /etc/mime.types (a slim container image) Starlette falls back on Python's table."""
    for suffix in (".mjs", ".js"):
        guessed = mimetypes.MimeTypes(filenames=()).guess_type(f"x{suffix}")[0] or ""
        assert JAVASCRIPT.match(guessed), (suffix, guessed)


@pytest.mark.parametrize("path", ["/", "/app.mjs", "/sw.js", "/style.css"])
async def test_no_other_site_may_frame_the_page(page: httpx.AsyncClient, path: str) -> None:
    async with page:
        response = await page.get(path)
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert response.headers["x-frame-options"] == "DENY"


async def test_the_page_loads_its_entry_module_under_its_csp(page: httpx.AsyncClient) -> None:
    async with page:
        response = await page.get("/")
    assert response.status_code == 200
    html = response.text
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts == ['<script type="module" src="app.mjs">'], scripts
    assert not re.search(r"<script\b[^>]*>(?!\s*</script>)", html), "no inline script: the CSP forbids it"
    csp = re.search(r'http-equiv="Content-Security-Policy"\s+content="([^"]+)"', html)
    assert csp, "index.html sets a Content-Security-Policy"
    directives = dict(d.strip().split(" ", 1) for d in csp.group(1).split(";") if d.strip())
    assert directives["script-src"] == "'self'"  # modules and their imports from the page's origin


def test_the_page_preloads_every_module_it_imports() -> None:
    """A module left out still works, one round trip later; one listed but gone is a 404."""
    html = (WEB_ROOT / "index.html").read_text(encoding="utf-8")
    preloaded = sorted(re.findall(r'<link rel="modulepreload" href="([^"]+)">', html))
    assert preloaded == sorted(m.name for m in MODULES if m.name != "app.mjs")


def test_every_import_is_a_file_beside_the_page() -> None:
    """Relative, same-origin imports only: no CDN, no bare specifiers a browser cannot resolve."""
    for module in MODULES:
        for spec in IMPORT.findall(module.read_text(encoding="utf-8")):
            assert spec.startswith("./"), (module.name, spec)
            assert (WEB_ROOT / spec).resolve().parent == WEB_ROOT and (WEB_ROOT / spec).is_file(), (module.name, spec)


def test_the_package_ships_every_file_of_the_page() -> None:
    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "clients.web"
    ]
    files = [p.name for p in WEB_ROOT.iterdir() if p.is_file() and p.suffix != ".py" and p.suffix != ".pyc"]
    assert "index.html" in files
    unshipped = [name for name in files if not any(fnmatch(name, pattern) for pattern in patterns)]
    assert unshipped == [], f"add to [tool.setuptools.package-data] clients.web: {unshipped}"


def test_no_test_is_served_with_the_page() -> None:
    assert not [p for p in WEB_ROOT.rglob("*") if p.name.endswith((".test.mjs", ".test.js"))]
    assert Path(NODE_TESTS).is_dir()
