"""Where ``qbroker tui`` takes its token (clients/tui/app.py, ``given_token``): the flag, a
file (``--token-file`` or $QBROKER_TOKEN_FILE; "-": standard input), the environment; so
that it need never be in the arguments, which every user of the machine can read."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from clients.tui.app import given_token


def test_a_token_file_is_read_first_line_trimmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QBROKER_TOKEN", "from-env")
    path = tmp_path / "token"
    path.write_text("  from-file \nsecond line\n")
    assert given_token(None, str(path)) == "from-file"


def test_the_file_may_come_from_the_environment_or_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text("env-file\n")
    monkeypatch.setenv("QBROKER_TOKEN_FILE", str(path))
    assert given_token(None, None) == "env-file"
    monkeypatch.setattr("sys.stdin", io.StringIO("piped\n"))
    assert given_token(None, "-") == "piped"


def test_the_environment_then_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QBROKER_TOKEN_FILE", raising=False)
    monkeypatch.setenv("QBROKER_TOKEN", "from-env\n")
    assert given_token(None, None) == "from-env"
    assert given_token("flag", None) == "flag"
    monkeypatch.delenv("QBROKER_TOKEN")
    assert given_token(None, None) == ""
