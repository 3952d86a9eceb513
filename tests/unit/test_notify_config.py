"""The routes file (QBROKER_NOTIFY_CONFIG): what it accepts, and the one line that stops serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.notify.config import _CHECKS, DEFAULT_AFTER, covers, load_routes, parse_routes
from broker.notify.kinds import KINDS

WEBHOOK = {"sessions": "team-a:*", "kind": "webhook", "url": "https://hooks.example.com/q", "secret": "whsec_1"}


def stop(document: dict[str, Any]) -> str:
    with pytest.raises(SystemExit) as raised:
        parse_routes(document, "/etc/qbroker/notify.toml")
    message = str(raised.value.code)
    assert "\n" not in message
    return message


def test_the_issue_s_example_route_reads_as_written(tmp_path: Path) -> None:
    path = tmp_path / "notify.toml"
    path.write_text(
        """
[[route]]
sessions = "team-a:*"      # a session id, a prefix pattern ending in *, or "*"
kind = "webhook"           # webhook | slack | ntfy | webpush | email
url = "https://hooks.example.com/qbroker"   # the target (not for webpush)
secret = "whsec_..."       # webhook: the signing secret
after = 120                # seconds nobody has acted on an open question before an "idle" notice
include_prompt = true      # false: the question's label and prompt are left out
link_token = false         # true: the link carries a client token for that one session, 1 h
"""
    )
    (route,) = load_routes(path)
    assert (route.index, route.sessions, route.kind, route.after) == (1, "team-a:*", "webhook", 120.0)
    assert (route.include_prompt, route.link_token) == (True, False)
    assert dict(route.options) == {"url": "https://hooks.example.com/qbroker", "secret": "whsec_..."}


def test_defaults_of_a_route() -> None:
    (route,) = parse_routes({"route": [WEBHOOK]}, "f")
    assert (route.after, route.include_prompt, route.link_token) == (DEFAULT_AFTER, True, False)


def test_every_kind_reads() -> None:
    routes = parse_routes(
        {
            "route": [
                WEBHOOK,
                {"sessions": "*", "kind": "slack", "url": "https://hooks.slack.com/services/T/B/X"},
                {
                    "sessions": "ops",
                    "kind": "ntfy",
                    "url": "https://ntfy.sh/topic",
                    "priority": "urgent",
                    "tags": ["a"],
                },
                {"sessions": "*", "kind": "webpush"},
                {"sessions": "*", "kind": "email", "url": "smtp://mail:25", "to": "a@b.c", "from": "q@b.c"},
            ]
        },
        "f",
    )
    assert [r.kind for r in routes] == ["webhook", "slack", "ntfy", "webpush", "email"]
    assert routes[2].options["priority"] == 5
    assert routes[4].options["to"] == ["a@b.c"]


@pytest.mark.parametrize(
    ("pattern", "session", "covered"),
    [
        ("*", "x", True),
        ("team-a:*", "team-a:1", True),
        ("team-a:*", "team-b:1", False),
        ("s1", "s1", True),
        ("s1", "s10", False),
    ],
)
def test_sessions_cover_an_id_a_prefix_or_everything(pattern: str, session: str, covered: bool) -> None:
    assert covers(pattern, session) is covered


def test_an_unknown_key_names_the_file_the_route_and_the_key() -> None:
    message = stop({"route": [{**WEBHOOK}, {**WEBHOOK, "sessions": "b*", "urll": "x"}]})
    assert message.startswith('qbroker: /etc/qbroker/notify.toml: route 2 (sessions "b*"): unknown key "urll"')


def test_an_unknown_kind_names_the_key() -> None:
    message = stop({"route": [{**WEBHOOK, "kind": "pager"}]})
    assert 'route 1 (sessions "team-a:*"): key "kind": unknown kind \'pager\'' in message


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"after": 0}, "after"),
        ({"after": "2m"}, "after"),
        ({"after": True}, "after"),
        ({"include_prompt": "no"}, "include_prompt"),
        ({"link_token": 1}, "link_token"),
        ({"link_sub": ""}, "link_sub"),
        ({"link_sub": "alice\nbob"}, "link_sub"),
        ({"link_sub": 7}, "link_sub"),
        ({"sessions": "bad id!"}, "sessions"),
        ({"sessions": "**"}, "sessions"),
        ({"url": "ftp://x/y"}, "url"),
        ({"url": "https://x:port/"}, "url"),
        ({"secret": ""}, "secret"),
    ],
)
def test_a_bad_value_names_its_key(change: dict[str, Any], key: str) -> None:
    assert f'key "{key}"' in stop({"route": [{**WEBHOOK, **change}]})


def test_a_route_names_the_holder_of_its_link_tokens() -> None:
    (route,) = parse_routes({"route": [{**WEBHOOK, "link_token": True, "link_sub": "alice@example.com"}]}, "x")
    assert route.link_sub == "alice@example.com"


def test_a_missing_required_key_is_named() -> None:
    route = {k: v for k, v in WEBHOOK.items() if k != "secret"}
    assert 'key "secret" is missing' in stop({"route": [route]})


def test_a_bad_url_is_shown_without_its_path_or_password() -> None:
    message = stop({"route": [{**WEBHOOK, "url": "htps://user:pw@hooks.example.com/secret-path"}]})
    assert "secret-path" not in message and "pw" not in message


def test_a_key_outside_the_routes_is_refused() -> None:
    assert 'unknown key "routes"' in stop({"routes": []})


def test_a_file_that_is_not_toml_stops_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "n.toml"
    path.write_text("[[route]\n")
    with pytest.raises(SystemExit) as raised:
        load_routes(path)
    assert str(raised.value.code).startswith(f"qbroker: {path}: not valid TOML")


def test_a_missing_file_stops_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as raised:
        load_routes(tmp_path / "absent.toml")
    assert "cannot read" in str(raised.value.code)


def test_every_kind_s_key_has_a_check_and_its_required_keys_are_its_own() -> None:
    for kind in KINDS.values():
        assert set(kind.required) <= kind.keys, kind.name
        assert kind.keys <= set(_CHECKS), kind.name
        assert ("url" in kind.keys) == bool(kind.url_schemes), kind.name
