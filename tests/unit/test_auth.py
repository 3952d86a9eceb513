"""Token roles: a token of the wrong role is refused, and the refusal reads as English."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.auth import mint_token, verify_token
from broker.errors import BrokerError

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
    from broker.cli import main

    monkeypatch.delenv("QBROKER_SECRET", raising=False)
    if secret is not None:
        monkeypatch.setenv("QBROKER_SECRET", secret)
    code = main(["token", "--session", "s-1", "--role", "agent", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("ttl", ["0", "-5"])
def test_a_token_that_would_be_born_expired_is_refused(
    ttl: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = token_command(["--ttl", ttl], capsys, monkeypatch, SECRET)
    assert (code, out) == (1, "")
    assert err == f"qbroker token: --ttl must be a positive number of seconds, got {ttl}\n"


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
