"""A real OpenID Connect provider for the sign-in tests, and a broker that trusts it.

The provider is panva's ``oidc-provider`` (a certified OpenID Provider implementation),
pinned by the lockfile in ``tests/tools/oidc-provider/`` and installed by the tests' own
set-up (``tests/helpers/npm.py``: a cached ``npm ci``; a skip without Node/npm, a failure
under QBROKER_REQUIRE_ALL=1), run by ``tests/tools/oidc-provider/provider.mjs`` with the
settings below: one public client, users whose access tokens carry qbroker's ``sid`` and
``role`` claims for the broker's audience, and the provider's own login and consent pages.

``signing_in()`` starts both (the provider needs the page's address as its redirect URI, the
broker the provider's issuer), so a test gets a broker where people sign in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.helpers.npm import npm_install
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, free_port, need, port_open
from tests.helpers.waiting import wait_until

PACKAGE: Final = REPO_ROOT / "tests" / "tools" / "oidc-provider"
CLIENT_ID: Final = "qbroker"
AUDIENCE: Final = "qbroker"
# The people of the provider: who they are, and the sessions their sign-in covers.
USERS: Final = {
    "alice": {"sid": "alice:*", "role": "client"},
    "bob": {"sid": "bob:*", "role": "client"},
    "ci-bot": {"sid": "*", "role": "agent"},  # an account for programs: it cannot answer
}


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen[bytes]
    log: Path

    def logged(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def provider(redirect_uris: list[str], *, access_token_ttl: int = 600) -> Iterator[Provider]:
    """The provider on a free port of 127.0.0.1, until the block ends."""
    modules = npm_install(PACKAGE)
    node = shutil.which("node")
    need(node is not None, "node is not installed")
    assert node is not None
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "OIDC_PROVIDER_MODULE": str(modules / "oidc-provider" / "lib" / "index.js"),
        "OIDC_PORT": str(port),
        "OIDC_ISSUER": issuer,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_REDIRECT_URIS": json.dumps(redirect_uris),
        "OIDC_AUDIENCE": AUDIENCE,
        "OIDC_USERS": json.dumps(USERS),
        "OIDC_ACCESS_TOKEN_TTL": str(access_token_ttl),
    }
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"oidc-provider-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [node, str(PACKAGE / "provider.mjs")], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=PACKAGE
        )
    found = Provider(issuer, process, log)
    try:
        wait_until(lambda: port_open(port) or process.poll() is not None, timeout=30)
        assert process.poll() is None, f"oidc-provider did not start:\n{found.logged()}"
        yield found
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def signing_in(*, access_token_ttl: int = 600, **settings: object) -> Iterator[tuple[BrokerProcess, Provider]]:
    """A broker where people sign in with a provider of their own (``settings``: the
    broker's other QBROKER_* settings)."""
    port = free_port()
    page = f"http://127.0.0.1:{port}/"
    with provider([page], access_token_ttl=access_token_ttl) as idp:
        trusted = {"jwks_url": f"{idp.issuer}/jwks", "jwt_issuer": idp.issuer, "jwt_audience": AUDIENCE}
        with broker(None, port=port, oidc_client_id=CLIENT_ID, **trusted, **settings) as process:
            yield process, idp
