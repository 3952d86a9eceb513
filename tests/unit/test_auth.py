"""Token roles: a token of the wrong role is refused, and the refusal reads as English."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from broker.auth import mint_token, parse_ttl, verify_token
from broker.core.errors import BrokerError

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
