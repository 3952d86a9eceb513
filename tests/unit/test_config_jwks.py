"""The identity-provider settings (QBROKER_JWKS_URL and its siblings): read from the
environment, and a bad combination stopped in one line before anything listens."""

from __future__ import annotations

import pytest

from broker.runtime.config import Config

IDP = {
    "QBROKER_JWKS_URL": "https://idp.example.com/.well-known/jwks.json",
    "QBROKER_JWT_ISSUER": "https://idp.example.com/",
    "QBROKER_JWT_AUDIENCE": "qbroker",
}


def test_the_settings_are_read_with_defaults_for_the_claim_names() -> None:
    config = Config.from_env(IDP)
    assert (config.jwks_url, config.jwt_issuer, config.jwt_audience) == (
        "https://idp.example.com/.well-known/jwks.json",
        "https://idp.example.com/",
        ("qbroker",),
    )
    assert (config.jwt_sid_claim, config.jwt_role_claim, config.jwt_sub_claim) == ("qbroker_sid", "role", "sub")
    assert config.jwks_refetch_interval == 60


def test_claim_names_audiences_and_the_refetch_interval_can_be_set() -> None:
    config = Config.from_env(
        {
            **IDP,
            "QBROKER_JWT_AUDIENCE": "qbroker, https://qbroker.example.com",
            "QBROKER_JWT_SID_CLAIM": "https://qbroker.example.com/sid",
            "QBROKER_JWT_ROLE_CLAIM": "roles",
            "QBROKER_JWT_SUB_CLAIM": "email",
            "QBROKER_JWKS_REFETCH_INTERVAL": "120",
        }
    )
    assert config.jwt_audience == ("qbroker", "https://qbroker.example.com")
    assert (config.jwt_sid_claim, config.jwt_role_claim, config.jwt_sub_claim) == (
        "https://qbroker.example.com/sid",
        "roles",
        "email",
    )
    assert config.jwks_refetch_interval == 120


def test_without_a_jwks_url_nothing_is_asked_of_a_provider() -> None:
    config = Config.from_env({})
    assert (config.jwks_url, config.jwt_issuer, config.jwt_audience) == (None, None, ())


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {**IDP, "QBROKER_JWT_ISSUER": ""},
            "qbroker: QBROKER_JWKS_URL needs QBROKER_JWT_ISSUER: without them a token the identity provider"
            " signed for any other application would be accepted",
        ),
        (
            {"QBROKER_JWKS_URL": IDP["QBROKER_JWKS_URL"]},
            "qbroker: QBROKER_JWKS_URL needs QBROKER_JWT_ISSUER and QBROKER_JWT_AUDIENCE: without them a token"
            " the identity provider signed for any other application would be accepted",
        ),
        (
            {"QBROKER_JWT_AUDIENCE": "qbroker"},
            "qbroker: QBROKER_JWT_AUDIENCE is set but QBROKER_JWKS_URL is not: set both, or neither",
        ),
        (
            {**IDP, "QBROKER_JWKS_URL": "idp.example.com/jwks.json"},
            "qbroker: QBROKER_JWKS_URL: a JWKS URL must be https:// (http:// only for a loopback address or"
            " localhost), got 'idp.example.com/jwks.json'",
        ),
        (
            {**IDP, "QBROKER_JWKS_URL": "file:///etc/passwd"},
            "qbroker: QBROKER_JWKS_URL: a JWKS URL must be https:// (http:// only for a loopback address or"
            " localhost), got 'file:///etc/passwd'",
        ),
        (
            {**IDP, "QBROKER_JWT_ROLE_CLAIM": "app roles"},
            "qbroker: QBROKER_JWT_ROLE_CLAIM must be a claim name without spaces, got 'app roles'",
        ),
        (
            {**IDP, "QBROKER_JWKS_REFETCH_INTERVAL": "0"},
            "qbroker: QBROKER_JWKS_REFETCH_INTERVAL must be above 0, got 0",
        ),
        (
            {**IDP, "QBROKER_JWKS_REFETCH_INTERVAL": "soon"},
            "qbroker: QBROKER_JWKS_REFETCH_INTERVAL must be a number, got 'soon'",
        ),
    ],
)
def test_a_bad_setting_stops_in_one_line(env: dict[str, str], says: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        Config.from_env(env)
    assert str(stopped.value) == says
