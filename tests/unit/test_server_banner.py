"""What ``qbroker serve`` prints about its store: the Redis URL, never its passwords
(broker/server.py: _redacted); and, without ``QBROKER_SECRET``, demo tokens that expire
after a day and say when. The startup warnings are checked on a real process in
tests/integration/test_serve_startup.py."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

import jwt
import pytest

from broker.runtime.config import Config
from broker.server import _banner, _redacted
from broker.tokens.claims import verify_token


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://u:pw@redis:6379/0", "redis://u:***@redis:6379/0"),
        ("redis://:pw@[::1]:6379/0", "redis://:***@[::1]:6379/0"),
        ("redis://127.0.0.1:6379/0?password=pw", "redis://127.0.0.1:6379/0?password=***"),
        (
            "rediss://redis/0?ssl_ca_certs=/ca.pem&ssl_password=pw",
            "rediss://redis/0?ssl_ca_certs=/ca.pem&ssl_password=***",
        ),
        ("unix:///run/redis.sock?db=0&password=pw", "unix:///run/redis.sock?db=0&password=***"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
    ],
)
def test_the_banner_shows_the_redis_url_without_its_passwords(url: str, shown: str) -> None:
    assert _redacted(url) == shown


def test_the_banner_tokens_expire_after_24_hours_and_it_says_when(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "a-secret-of-at-least-thirty-two-bytes!"
    _banner(Config(secret=secret, data_dir=tmp_path), generated=True)
    printed = capsys.readouterr().out
    client = re.search(r"#session=demo&token=(\S+)", printed)
    agent = re.search(r"export QBROKER_TOKEN=(\S+)", printed)
    assert client and agent, printed
    expected = time.time() + 24 * 3600
    for token, role in ((client[1], "client"), (agent[1], "agent")):
        claims = verify_token(secret, token, role=role)  # type: ignore[arg-type]
        assert claims.sid == "demo" and claims.exp is not None and abs(claims.exp - expected) < 5
    said = re.search(r"valid 24 h, until (\d{4}-\d\d-\d\d \d\d:\d\d) UTC", printed)
    assert said, printed
    until = datetime.strptime(said[1], "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
    exp = jwt.decode(client[1], secret, algorithms=["HS256"])["exp"]
    # The expiry to the minute, never later than it is (exp is rounded up to the second).
    assert exp - 61 < until <= exp


def test_with_a_secret_set_the_banner_prints_no_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _banner(Config(secret="s" * 32, data_dir=tmp_path), generated=False)
    printed = capsys.readouterr().out
    assert "token" not in printed and "valid" not in printed
