"""What ``qbroker serve`` prints about its store: the Redis URL, never its passwords
(broker/server.py: _redacted). The startup warnings are checked on a real process in
tests/integration/test_serve_startup.py."""

from __future__ import annotations

import pytest

from broker.server import _redacted


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
