"""Token roles: a token of the wrong role is refused, and the refusal reads as English."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from broker.core.errors import BrokerError
from broker.tokens.claims import mint_token, parse_ttl, verify_token

SECRET = "a-secret-of-at-least-thirty-two-bytes!"


@pytest.mark.parametrize(
    ("minted", "used_as", "says"),
    [
        ("client", "agent", "a client token cannot be used by an agent"),
        ("agent", "client", "an agent token cannot be used by a client"),
    ],
)
def test_a_token_of_the_other_role_is_refused_in_plain_words(minted: str, used_as: str, says: str) -> None:
    with pytest.raises(BrokerError) as refused:
        verify_token(SECRET, mint_token(SECRET, "s-1", minted), role=used_as)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.message) == ("unauthorized", says)


# --- qbroker token ------------------------------------------------------------------------


def token_command(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, secret: str | None = None
) -> tuple[int, str, str]:
    from qbroker.cli import main

    monkeypatch.delenv("QBROKER_SECRET", raising=False)
    if secret is not None:
        monkeypatch.setenv("QBROKER_SECRET", secret)
    code = main(["token", "--session", "s-1", "--role", "agent", *args])
    out, err = capsys.readouterr()
    return code, out, err


def claims_of(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token.strip(), SECRET, algorithms=["HS256"], options={"verify_exp": False})
    return claims


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600.0),
        ("1.5", 1.5),
        ("45s", 45.0),
        ("90m", 5400.0),
        ("12h", 43200.0),
        ("1.5h", 5400.0),
        ("30d", 2592000.0),
        (".5d", 43200.0),
        (" 12h ", 43200.0),
        ("never", None),
        ("NEVER", None),
        ("Never", None),
    ],
)
def test_a_ttl_is_seconds_a_number_with_a_unit_or_never(text: str, seconds: float | None) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0", "more than 0"),
        ("0h", "more than 0"),
        ("-5", "more than 0"),
        ("-5m", "more than 0"),
        ("", "a number of seconds"),
        ("10x", "a number of seconds"),
        ("30D", "a number of seconds"),  # M could be read as months: the units are lower-case only
        ("30 d", "a number of seconds"),
        ("d", "a number of seconds"),
        ("12h30m", "a number of seconds"),
        ("1e3", "a number of seconds"),
        ("inf", "a number of seconds"),
        ("nan", "a number of seconds"),
        ("forever", "a number of seconds"),
        ("\u0661\u0662", "a number of seconds"),  # Arabic-Indic digits: not a number here
        ("9" * 400, "at most 100 years"),
        ("36501d", "at most 100 years"),
    ],
)
def test_a_ttl_that_is_not_one_is_refused_saying_what_it_must_be(text: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_ttl(text)
    assert str(refused.value).startswith(f"must be {says}") and str(refused.value).endswith(f"got {text!r}")


def test_a_token_expires_after_30_days_by_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command([], capsys, monkeypatch, SECRET)
    assert (code, err) == (0, "")
    claims = claims_of(out)
    assert abs(claims["exp"] - (time.time() + 30 * 86400)) < 5


@pytest.mark.parametrize(("ttl", "seconds"), [("12h", 12 * 3600), ("90m", 90 * 60), ("600", 600), ("2d", 2 * 86400)])
def test_a_ttl_sets_the_expiry(
    ttl: str, seconds: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command(["--ttl", ttl], capsys, monkeypatch, SECRET)
    assert (code, err) == (0, "")
    assert abs(claims_of(out)["exp"] - (time.time() + seconds)) < 5


@pytest.mark.parametrize("ttl", ["never", "NEVER"])
def test_ttl_never_mints_a_token_without_expiry(
    ttl: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command(["--ttl", ttl], capsys, monkeypatch, SECRET)
    assert (code, err) == (0, "")
    assert "exp" not in claims_of(out)
    assert verify_token(SECRET, out.strip(), role="agent").exp is None


@pytest.mark.parametrize(
    ("ttl", "says"),
    [
        ("0", "more than 0 (a token would be born expired), or never; got '0'"),
        ("-5", "more than 0 (a token would be born expired), or never; got '-5'"),
        ("10x", "a number of seconds, or one with s, m, h or d (as in 90m, 12h, 30d), or never; got '10x'"),
        ("", "a number of seconds, or one with s, m, h or d (as in 90m, 12h, 30d), or never; got ''"),
    ],
)
def test_a_bad_ttl_is_refused_in_one_line(
    ttl: str, says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command(["--ttl", ttl], capsys, monkeypatch, SECRET)
    assert (code, out) == (1, "")
    assert err == f"qbroker token: --ttl must be {says}\n"


def test_the_help_names_the_default_and_never(capsys: pytest.CaptureFixture[str]) -> None:
    from qbroker.cli import main

    with pytest.raises(SystemExit):
        main(["token", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: 30d, 30 days" in text and "'never'" in text


def test_a_short_secret_is_warned_about_in_one_line_and_still_signs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command([], capsys, monkeypatch, "abc")
    assert code == 0 and verify_token("abc", out.strip(), role="agent").sid == "s-1"
    assert err.startswith("qbroker token: warning: the token secret is 3 bytes; use at least 32")
    assert err.count("\n") == 1 and "InsecureKeyLengthWarning" not in err  # not PyJWT's, with its file and line
    assert token_command([], capsys, monkeypatch, SECRET)[2] == ""


def test_a_secret_generated_by_token_itself_is_pointed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No broker ever used this data dir: the token is only good for one that will.
    code, out, err = token_command(["--data-dir", str(tmp_path)], capsys, monkeypatch)
    assert code == 0 and out.count(".") == 2
    assert f"one was generated in {tmp_path / 'secret'}" in err
    # The second time the secret is there already: nothing to point out.
    assert token_command(["--data-dir", str(tmp_path)], capsys, monkeypatch)[2] == ""


def test_a_token_of_under_a_second_is_not_expired_when_minted() -> None:
    token = mint_token("s" * 32, "s1", "client", ttl=0.4)
    assert verify_token("s" * 32, token, role="client").exp is not None  # not "token expired"


# --- claims: sub, jti, iat, patterns, admin ------------------------------------------------


def test_a_minted_token_has_a_fresh_jti_an_iat_and_the_sub_asked_for() -> None:
    first, second = (claims_of(mint_token(SECRET, "s-1", "agent", sub="build-bot")) for _ in range(2))
    assert re.fullmatch(r"[0-9a-f]{32}", first["jti"]) and first["jti"] != second["jti"]
    assert abs(first["iat"] - time.time()) < 5 and first["sub"] == "build-bot"
    assert "sub" not in claims_of(mint_token(SECRET, "s-1", "agent"))
    verified = verify_token(SECRET, mint_token(SECRET, "s-1", "client", 60, sub="alice"), role="client")
    assert (verified.sub, verified.jti is not None, verified.iat is not None) == ("alice", True, True)


@pytest.mark.parametrize(
    ("sid", "role", "sub", "says"),
    [
        ("s-1", "admin", None, "an admin token is for the whole service: its session must be *"),
        ("ops:*", "admin", None, "an admin token is for the whole service: its session must be *"),
        ("s-1", "agent", "", "sub must be 1-128 characters"),
        ("s-1", "agent", "x" * 129, "sub must be 1-128 characters"),
        ("s-1", "client", "ali\nce", "sub must not contain control characters"),
        ("al*ce", "client", None, "session must be a session id, a session-id prefix followed by *"),
        ("**", "agent", None, "session must be a session id, a session-id prefix followed by *"),
        ("s-1", "root", None, "role must be one of agent, client, admin"),
    ],
)
def test_minting_refuses_what_no_broker_would_accept(sid: str, role: str, sub: str | None, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        mint_token(SECRET, sid, role, sub=sub)  # type: ignore[arg-type]
    assert str(refused.value).startswith(says)


@pytest.mark.parametrize(
    ("sid", "role", "session", "allowed"),
    [
        ("alice:*", "client", "alice:build", True),
        ("alice:*", "agent", "alice:review", True),
        ("alice:*", "client", "bob:build", False),
        ("alice:*", "agent", "bob:build", False),
        ("*", "agent", "anything", True),
        ("*", "client", "anything", True),  # every session: the operator's client token
        ("s-1", "client", "s-1", True),
        ("s-1", "client", "s-2", False),
        ("*", "admin", "anything", False),  # an admin token acts on no session
    ],
)
def test_a_tokens_scope_says_which_sessions_it_may_act_on(sid: str, role: str, session: str, allowed: bool) -> None:
    claims = verify_token(SECRET, mint_token(SECRET, sid, role), role=role)  # type: ignore[arg-type]
    assert claims.allows(session) is allowed


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"sid": "s-1", "role": "admin"}, "an admin token's sid must be *"),
        ({"sid": "al*ce", "role": "client"}, "sid must be a session id, a session-id prefix"),
        ({"sid": 5, "role": "client"}, "sid must be"),
        ({"sid": "s-1", "role": "root"}, "role must be one of agent, client, admin"),
        ({"sid": "s-1", "role": "client", "sub": "x" * 129}, "sub must be 1-128 characters"),
        ({"sid": "s-1", "role": "client", "sub": "a\u2028b"}, "sub must not contain control characters"),
        ({"sid": "s-1", "role": "client", "jti": "x" * 257}, "jti must be 1-256 characters"),
        ({"sid": "s-1", "role": "client", "jti": ""}, "jti must be 1-256 characters"),
        ({"sid": "s-1", "role": "client", "exp": "tomorrow"}, "exp must be a number"),
        ({"sid": "s-1", "role": "client", "exp": True}, "exp must be a number"),
    ],
)
def test_a_signed_token_with_claims_out_of_the_rules_is_refused_saying_which(claims: dict[str, Any], says: str) -> None:
    token = jwt.encode(claims, SECRET, algorithm="HS256")
    with pytest.raises(BrokerError) as refused:
        verify_token(SECRET, token, role=None)
    assert refused.value.code == "unauthorized"
    assert refused.value.message.startswith(f"invalid token claims: {says}")


@pytest.mark.parametrize("claim", [{"iat": "x"}, {"sub": 7}, {"jti": 7}])
def test_a_non_numeric_iat_or_a_non_string_sub_or_jti_is_refused(claim: dict[str, Any]) -> None:
    # (PyJWT itself refuses these; a float iat is a NumericDate too)
    with pytest.raises(BrokerError) as refused:
        verify_token(SECRET, jwt.encode({"sid": "s-1", "role": "client", **claim}, SECRET), role="client")
    assert refused.value.code == "unauthorized"
    assert (
        verify_token(SECRET, jwt.encode({"sid": "s", "role": "client", "iat": 1.5}, SECRET), role="client").iat == 1.5
    )


@pytest.mark.parametrize(
    ("used_as", "says"),
    [("agent", "an admin token cannot be used by an agent"), ("client", "an admin token cannot be used by a client")],
)
def test_an_admin_token_is_refused_as_an_agents_or_a_clients(used_as: str, says: str) -> None:
    admin = mint_token(SECRET, "*", "admin")
    assert verify_token(SECRET, admin, role="admin").role == "admin"
    with pytest.raises(BrokerError) as refused:
        verify_token(SECRET, admin, role=used_as)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.message) == ("unauthorized", says)


def test_tokens_minted_before_sub_and_jti_existed_are_still_accepted() -> None:
    old = jwt.encode({"sid": "s-1", "role": "agent", "iat": int(time.time())}, SECRET, algorithm="HS256")
    claims = verify_token(SECRET, old, role="agent")
    assert (claims.sid, claims.sub, claims.jti) == ("s-1", None, None)


def test_token_sub_and_json_print_the_token_its_jti_and_exp(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command(["--sub", "alice", "--ttl", "12h", "--json"], capsys, monkeypatch, SECRET)
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert set(printed) == {"token", "jti", "exp"}
    claims = claims_of(printed["token"])
    assert (claims["sub"], claims["jti"], claims["exp"]) == ("alice", printed["jti"], printed["exp"])
    assert abs(printed["exp"] - (time.time() + 12 * 3600)) < 5
    code, out, err = token_command(["--ttl", "never", "--json"], capsys, monkeypatch, SECRET)
    assert code == 0 and json.loads(out)["exp"] is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--session", "s-1", "--role", "admin"], "qbroker token: an admin token is for the whole service"),
        (["--session", "s-1", "--role", "agent", "--sub", "x" * 129], "qbroker token: sub must be 1-128 characters"),
        (["--session", "a*b", "--role", "client"], "qbroker token: session must be a session id, a session-id"),
    ],
)
def test_the_token_command_refuses_bad_claims_in_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from qbroker.cli import main

    monkeypatch.setenv("QBROKER_SECRET", SECRET)
    code = main(["token", *args])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "") and err.startswith(says) and err.count("\n") == 1


@pytest.mark.parametrize(("session", "role"), [("*", "admin"), ("alice:*", "client"), ("*", "client")])
def test_the_token_command_mints_admin_pattern_and_service_wide_client_tokens(
    session: str, role: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from qbroker.cli import main

    monkeypatch.setenv("QBROKER_SECRET", SECRET)
    assert main(["token", "--session", session, "--role", role]) == 0
    claims = verify_token(SECRET, capsys.readouterr().out.strip(), role=role)  # type: ignore[arg-type]
    assert (claims.sid, claims.role) == (session, role)
