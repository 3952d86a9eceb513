"""``qbroker tui``'s device authorization grant (clients/tui/sign_in.py) against an
httpx.MockTransport provider: polling as RFC 8628 says, what is kept and how, what it says."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.tui import sign_in as device

SETTINGS = {"issuer": "https://sso.test", "clientId": "qbroker", "scope": "openid"}
DISCOVERY = {
    "token_endpoint": "https://sso.test/token",
    "device_authorization_endpoint": "https://sso.test/device/auth",
    "revocation_endpoint": "https://sso.test/token/revocation",
}
GRANT = {
    "device_code": "dev-1",
    "user_code": "WDJB-MJHT",
    "verification_uri": "https://sso.test/device",
    "verification_uri_complete": "https://sso.test/device?user_code=WDJB-MJHT",
    "interval": 2,
    "expires_in": 600,
}


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return tmp_path


def provider(token_answers: list[httpx.Response], seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json=DISCOVERY)
        if request.url.path == "/device/auth":
            return httpx.Response(200, json=GRANT)
        if request.url.path == "/token/revocation":
            return httpx.Response(200)
        return token_answers.pop(0)

    return httpx.Client(transport=httpx.MockTransport(handler))


def oauth_error(code: str) -> httpx.Response:
    return httpx.Response(400, json={"error": code})


def form(request: httpx.Request) -> dict[str, str]:
    return dict(httpx.QueryParams(request.content.decode()))


def test_the_device_flow_polls_slows_down_when_told_and_keeps_the_refresh_token_0600(config_home: Path) -> None:
    seen: list[httpx.Request] = []
    answers = [
        oauth_error("authorization_pending"),
        oauth_error("slow_down"),
        httpx.Response(200, json={"access_token": "at-1", "refresh_token": "rt-1", "expires_in": 600}),
    ]
    waits: list[float] = []
    out = io.StringIO()
    signed = device.sign_in(SETTINGS, provider(answers, seen), out, sleep=waits.append)
    assert (signed.token, signed.refresh_token) == ("at-1", "rt-1")
    assert waits == [2, 2, 7], "the interval, then 5 s more after slow_down"
    said = out.getvalue()
    assert "To sign in, open https://sso.test/device in a browser\nand enter the code WDJB-MJHT\n" in said
    assert "(or open https://sso.test/device?user_code=WDJB-MJHT)" in said
    polls = [form(r) for r in seen if r.url.path == "/token"]
    assert polls[0] == {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "device_code": "dev-1",
        "client_id": "qbroker",
    }
    kept = config_home / "qbroker" / "sign-in.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert json.loads(kept.read_text()) == {"issuer": "https://sso.test", "clientId": "qbroker", "refreshToken": "rt-1"}


def test_a_kept_sign_in_is_renewed_without_a_code_and_a_refused_one_asks_again(config_home: Path) -> None:
    kept = config_home / "qbroker" / "sign-in.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"issuer": "https://sso.test", "clientId": "qbroker", "refreshToken": "rt-0"}))
    kept.chmod(0o644)  # a file made by hand: rewritten 0600
    seen: list[httpx.Request] = []
    renewed = httpx.Response(200, json={"access_token": "at-2", "refresh_token": "rt-2", "expires_in": 60})
    signed = device.sign_in(SETTINGS, provider([renewed], seen), io.StringIO(), sleep=lambda s: None)
    assert signed.token == "at-2" and form(seen[-1])["refresh_token"] == "rt-0"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and "rt-2" in kept.read_text()

    seen.clear()
    answers = [
        oauth_error("invalid_grant"),
        httpx.Response(200, json={"access_token": "at-3", "refresh_token": "rt-3"}),
    ]
    out = io.StringIO()
    signed = device.sign_in(SETTINGS, provider(answers, seen), out, sleep=lambda s: None)
    assert signed.token == "at-3"
    assert "your last sign-in has ended" in out.getvalue() and "enter the code" in out.getvalue()


def test_renewals_at_once_use_the_refresh_token_once() -> None:
    seen: list[httpx.Request] = []
    answers = [httpx.Response(200, json={"access_token": "at-5", "refresh_token": "rt-5"})]
    signed = device.SignedIn(SETTINGS, DISCOVERY, "at-4", "rt-4", provider(answers, seen))
    assert signed.renew() and signed.renew()  # the inbox's socket, then the session's
    assert signed.token == "at-5" and len([r for r in seen if r.url.path == "/token"]) == 1


@pytest.mark.parametrize(
    ("error", "says"),
    [
        ("access_denied", "the sign-in was refused in the browser"),
        ("expired_token", "the code ran out before anyone signed in with it"),
    ],
)
def test_a_refused_or_lapsed_code_says_so(error: str, says: str) -> None:
    with pytest.raises(device.SignInError, match=says):
        device.sign_in(SETTINGS, provider([oauth_error(error)], []), io.StringIO(), sleep=lambda s: None)


def test_sign_out_forgets_and_revokes(config_home: Path) -> None:
    seen: list[httpx.Request] = []
    answers = [httpx.Response(200, json={"access_token": "a", "refresh_token": "rt-9"})]
    device.sign_in(SETTINGS, provider(answers, seen), io.StringIO(), sleep=lambda s: None)
    assert device.sign_out(SETTINGS, provider([], seen)) is True
    assert not (config_home / "qbroker" / "sign-in.json").exists()
    revoked: Any = [form(r) for r in seen if r.url.path == "/token/revocation"]
    assert revoked == [{"token": "rt-9", "token_type_hint": "refresh_token", "client_id": "qbroker"}]
    assert device.sign_out(SETTINGS, provider([], seen)) is False
