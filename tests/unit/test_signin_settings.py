"""Signing people in (docs/web-client.md, "Signing in"): the settings behind GET /v1/signin,
the page's policy that lets it reach the identity provider, and notification links that
carry no token where people sign in."""

from __future__ import annotations

import pytest

from broker.core import machine
from broker.core.model import StartInput, parse_tool_input
from broker.http.signin import page_html
from broker.notify.config import Route
from broker.notify.triggers import Notifier
from broker.runtime.config import Config
from broker.runtime.metrics import Metrics
from broker.store.memory import MemoryStore
from clients.web import ROOT as WEB_ROOT
from tests.helpers.samples import single, start_body

SECRET = "unit-test-secret-0123456789abcdef"
PROVIDER = {
    "QBROKER_JWKS_URL": "https://sso.example.com/jwks",
    "QBROKER_JWT_ISSUER": "https://sso.example.com/realms/acme",
    "QBROKER_JWT_AUDIENCE": "qbroker",
}


def config(**env: str) -> Config:
    return Config.from_env({"QBROKER_SECRET": SECRET, **env}).checked()


def test_sign_in_settings_are_the_issuer_the_public_client_and_the_scopes() -> None:
    assert config().sign_in() is None
    assert config(**PROVIDER).sign_in() is None  # the provider's tokens are trusted, nobody signs in here
    signing = config(**PROVIDER, QBROKER_OIDC_CLIENT_ID="qbroker-web", QBROKER_OIDC_SCOPE=" openid  offline_access ")
    assert signing.sign_in() == {
        "issuer": "https://sso.example.com/realms/acme",
        "clientId": "qbroker-web",
        "scope": "openid offline_access",
    }
    assert config(**PROVIDER, QBROKER_OIDC_CLIENT_ID="web").sign_in() == {
        "issuer": PROVIDER["QBROKER_JWT_ISSUER"],
        "clientId": "web",
        "scope": "openid",
    }


def test_a_client_id_without_the_provider_s_settings_is_refused() -> None:
    with pytest.raises(SystemExit, match="QBROKER_OIDC_CLIENT_ID needs QBROKER_JWKS_URL"):
        config(QBROKER_OIDC_CLIENT_ID="qbroker-web")


def test_the_page_may_reach_the_provider_only_where_people_sign_in() -> None:
    web = WEB_ROOT
    plain = page_html(web, config(**PROVIDER))
    assert plain == (web / "index.html").read_text(encoding="utf-8")
    signing = page_html(web, config(**PROVIDER, QBROKER_OIDC_CLIENT_ID="qbroker-web"))
    assert "connect-src 'self' https://sso.example.com;" in signing
    assert signing.count("https://sso.example.com") == 1  # nothing else of the policy changed


@pytest.mark.parametrize(
    ("env", "link_token", "fragment"),
    [
        ({}, False, "session={sid}"),
        ({**PROVIDER, "QBROKER_OIDC_CLIENT_ID": "qbroker-web"}, False, "session={sid}&questionnaire={qid}"),
        ({**PROVIDER, "QBROKER_OIDC_CLIENT_ID": "qbroker-web"}, True, "session={sid}&questionnaire={qid}"),
    ],
    ids=["no-sign-in", "sign-in", "sign-in-beats-link-token"],
)
async def test_notification_links_carry_no_token_where_people_sign_in(
    env: dict[str, str], link_token: bool, fragment: str
) -> None:
    settings = config(**env, QBROKER_PUBLIC_URL="https://qbroker.example.com")
    route = Route(index=1, sessions="*", kind="webhook", link_token=link_token, options={"url": "https://hook"})
    notifier = Notifier(settings, MemoryStore(), Metrics(), (), {}, clock=lambda: 1000.0)
    parsed = parse_tool_input(start_body(single()))
    assert isinstance(parsed, StartInput)
    state = machine.start("q-1", "alice:build", parsed.questions, 1000.0)
    note = notifier.notification(route, "started", state, "claim")
    expected = "https://qbroker.example.com/#" + fragment.format(sid="alice:build", qid="q-1")
    assert note.link == expected
    await notifier.http.aclose()
