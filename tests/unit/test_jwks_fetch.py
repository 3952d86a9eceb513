"""Fetching the JWKS (broker/tokens/jwks_fetch.py): https only (loopback aside), no redirect
to another scheme, a bounded size; and QBROKER_JWKS_URL refused at start when it is http."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from broker.runtime.config import Config
from broker.tokens.jwks_fetch import MAX_BYTES, JwksFetchError, fetch_jwks, url_problem

JWKS = b'{"keys": []}'


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            port = self.server.server_address[1]  # type: ignore[index]
            if self.path == "/to-https":
                self._redirect(f"https://127.0.0.1:{port}/jwks.json")
            elif self.path == "/moved":
                self._redirect("/jwks.json")
            elif self.path == "/loop":
                self._redirect("/loop")
            elif self.path == "/huge":
                body = b'{"keys": [' + b" " * (MAX_BYTES + 10) + b"]}"
                self._send(body)
            else:
                self._send(JWKS)

        def _redirect(self, where: str) -> None:
            self.send_response(302)
            self.send_header("Location", where)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://sso.example.com/certs", True),
        ("http://127.0.0.1:8080/certs", True),
        ("http://[::1]/certs", True),
        ("http://localhost/certs", True),
        ("http://sso.example.com/certs", False),
        ("http://10.0.0.5/certs", False),
        ("ftp://sso.example.com/certs", False),
        ("https:///certs", False),
    ],
)
def test_only_https_or_loopback_http(url: str, ok: bool) -> None:
    assert (url_problem(url) is None) is ok


def test_a_jwks_is_fetched_and_a_same_scheme_redirect_followed(provider: str) -> None:
    assert fetch_jwks(provider + "/jwks.json", 5) == {"keys": []}
    assert fetch_jwks(provider + "/moved", 5) == {"keys": []}


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/to-https", "redirects to another scheme"),
        ("/loop", "redirects more than"),
        ("/huge", "is over"),
    ],
)
def test_a_redirect_to_another_scheme_a_redirect_loop_and_a_huge_body_are_refused(
    provider: str, path: str, says: str
) -> None:
    with pytest.raises(JwksFetchError, match=says):
        fetch_jwks(provider + path, 5)


def test_an_http_jwks_url_of_another_host_stops_the_broker() -> None:
    env = {"QBROKER_JWKS_URL": "http://sso.example.com/certs", "QBROKER_JWT_ISSUER": "i", "QBROKER_JWT_AUDIENCE": "a"}
    with pytest.raises(SystemExit, match="must be https://"):
        Config.from_env(env=env)
