"""Which Host the broker answers for (broker/runtime/hosts.py): IP addresses, loopback names,
QBROKER_PUBLIC_URL's host, QBROKER_ALLOWED_HOSTS; any port; nothing else."""

from __future__ import annotations

import pytest

from broker.runtime.config import Config
from broker.runtime.hosts import AllowedHosts, hostname

HOSTS = AllowedHosts(
    Config(public_url="https://qbroker.example.test/team", allowed_hosts=("agents.internal", "*.corp.test"))
)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("Example.COM:8700", "example.com"),
        ("example.com.", "example.com"),
        ("[::1]:8700", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("", None),
        (None, None),
        ("[::1", None),
        ("[::1]x", None),
        ("a@b", None),
        ("a b", None),
        ("a/b", None),
    ],
)
def test_a_host_header_s_name(header: str | None, name: str | None) -> None:
    assert hostname(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "127.0.0.1:8700",
        "10.1.2.3",  # a pod's address: probes and scrapers
        "[::1]:8700",
        "localhost:8700",
        "app.localhost",
        "qbroker.example.test",
        "QBROKER.example.test:443",
        "agents.internal:8700",
        "build.corp.test",
    ],
)
def test_allowed(header: str) -> None:
    assert HOSTS.allows(header)


@pytest.mark.parametrize(
    "header",
    [
        "evil.example",
        "evil.example:8700",
        "qbroker.example.test.evil.example",
        "corp.test",  # *. allows subdomains only
        "localhost.evil.example",
        "",
        None,
    ],
)
def test_refused(header: str | None) -> None:
    assert not HOSTS.allows(header)


def test_a_star_answers_for_any_host() -> None:
    assert AllowedHosts(Config(allowed_hosts=("*",))).allows("evil.example")


def test_a_header_judged_before_gets_the_same_answer_however_many_came_between() -> None:
    hosts = AllowedHosts(Config(public_url="https://qbroker.example.test"))
    assert hosts.allows("127.0.0.1:8700") and not hosts.allows("evil.example")
    for n in range(600):  # past the table's bound: it is emptied, the answers stay right
        assert hosts.allows(f"10.0.{n // 256}.{n % 256}")
        assert not hosts.allows(f"evil{n}.example")
    assert hosts.allows("127.0.0.1:8700") and not hosts.allows("evil.example")
    assert hosts.allows("127.0.0.1:8700") and not hosts.allows(None)
