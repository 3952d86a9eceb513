"""broker/core/push.py: what a page may register, which sessions it hears of, for how long."""

from __future__ import annotations

import pytest

from broker.core.push import (
    DEFAULT_PUSH_SERVICES,
    MAX_LIFETIME,
    InvalidSubscription,
    check_endpoint,
    lifetime_end,
    parse_push_services,
    parse_subscription,
)
from broker.core.scopes import covering_scopes, covers

SERVICES = parse_push_services(",".join(DEFAULT_PUSH_SERVICES))
KEYS = {"p256dh": "B" + "A" * 86, "auth": "A" * 22}


def test_covering_scopes_are_exactly_the_scopes_that_cover_the_session() -> None:
    found = list(covering_scopes("team-a:build"))
    assert found[0] == "team-a:build" and found[-1] == "*"
    assert "team-a:*" in found and "t*" in found and "team-a:build*" in found
    assert len(found) == len(set(found)) == len("team-a:build") + 2
    assert all(covers(scope, "team-a:build") for scope in found)
    assert not covers("team-b:*", "team-a:build") and "team-b:*" not in found


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://fcm.googleapis.com/fcm/send/abc:def",
        "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
        "https://web.push.apple.com/QGuQyavXutnMk",
        "https://wns2-par02p.notify.windows.com/w/?token=BQYAAA",
        "https://fcm.googleapis.com:443/fcm/send/x",
    ],
)
def test_the_browsers_push_services_are_allowed_by_default(endpoint: str) -> None:
    assert check_endpoint(endpoint, SERVICES) == endpoint


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://fcm.googleapis.com/fcm/send/x",  # not https
        "https://fcm.googleapis.com:8443/x",  # another port
        "https://evil.example/fcm.googleapis.com",
        "https://fcm.googleapis.com.evil.example/x",
        "https://push.apple.com/x",  # *. allows subdomains only
        "https://user:pw@fcm.googleapis.com/x",
        "https://127.0.0.1/x",
        "https://fcm.googleapis.com/x#frag",
        "https://fcm.googleapis.com/a b",
        "ftp://fcm.googleapis.com/x",
        "https://[x/",  # (urlsplit raises on it)
        42,
    ],
)
def test_anything_else_is_refused(endpoint: object) -> None:
    with pytest.raises(InvalidSubscription):
        check_endpoint(endpoint, SERVICES)


def test_push_services_setting() -> None:
    local = parse_push_services("http://127.0.0.1:8123, push.example.com")
    assert check_endpoint("http://127.0.0.1:8123/p/1", local)
    assert check_endpoint("https://push.example.com/p", local)
    with pytest.raises(InvalidSubscription):
        check_endpoint("http://127.0.0.1:8124/p/1", local)
    for bad in ("ftp://x", "https://x/path", "https://*x.com", "https://a:b@x", "https://x:port"):
        with pytest.raises(ValueError, match="is not"):
            parse_push_services(bad)


def test_a_browser_s_subscription_parses() -> None:
    endpoint = "https://fcm.googleapis.com/fcm/send/x"
    parsed = parse_subscription({"endpoint": endpoint, "expirationTime": 1_800_000_000_000, "keys": KEYS}, SERVICES)
    assert parsed == (endpoint, KEYS["p256dh"], KEYS["auth"], 1_800_000_000.0)
    padded = {"p256dh": KEYS["p256dh"] + "=", "auth": KEYS["auth"] + "=="}
    assert parse_subscription({"endpoint": endpoint, "keys": padded, "extra": 1}, SERVICES)[1:3] == (
        KEYS["p256dh"],
        KEYS["auth"],
    )


@pytest.mark.parametrize(
    "keys",
    [
        {"p256dh": "A" * 87, "auth": "A" * 22},  # not 0x04 first
        {"p256dh": "B" + "A" * 85, "auth": "A" * 22},  # 64 bytes
        {"p256dh": "B" + "A" * 86, "auth": "A" * 21},
        {"p256dh": "B" + "+" * 86, "auth": "A" * 22},  # base64, not base64url
        {"p256dh": None, "auth": "A" * 22},
        {"auth": "A" * 22},
        "keys",
    ],
)
def test_keys_must_be_a_p256_point_and_16_bytes_of_auth(keys: object) -> None:
    with pytest.raises(InvalidSubscription):
        parse_subscription({"endpoint": "https://fcm.googleapis.com/x", "keys": keys}, SERVICES)


def test_a_subscription_lives_no_longer_than_its_token_the_browser_or_30_days() -> None:
    assert lifetime_end(100.0, None, None) == 100.0 + MAX_LIFETIME
    assert lifetime_end(100.0, 200.0, None) == 200.0
    assert lifetime_end(100.0, 300.0, 150.0) == 150.0
    assert lifetime_end(100.0, 100.0 + 2 * MAX_LIFETIME, None) == 100.0 + MAX_LIFETIME
