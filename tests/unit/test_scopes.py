"""Token scopes (broker/core/scopes.py): a session id, a prefix pattern, or ``*``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.core.scopes import ANY, covers, is_pattern, is_scope, scope_prefix
from broker.core.wire import MAX_SESSION_ID, is_session_id

ALPHABET = "ABCZabcz0189._:-"
session_ids = st.text(alphabet=ALPHABET, min_size=1, max_size=MAX_SESSION_ID)


@pytest.mark.parametrize("scope", ["alice:build", "a", "alice:*", "a*", "*", "x" * MAX_SESSION_ID + "*", ".*", "-*"])
def test_a_session_id_a_prefix_pattern_and_star_are_scopes(scope: str) -> None:
    assert is_scope(scope)


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "**",
        "alice**",
        "*alice",
        "al*ce",
        "al*ce*",
        "alice *",
        "alice/*",
        "alice:*\n",
        "é*",
        "x" * (MAX_SESSION_ID + 1) + "*",
        "x" * (MAX_SESSION_ID + 1),
        "{tag}*",
    ],
)
def test_anything_else_is_no_scope(scope: str) -> None:
    assert not is_scope(scope)
    with pytest.raises(ValueError, match="not a scope"):
        scope_prefix(scope)


def test_a_pattern_is_a_prefix_and_a_star_neither_a_session_id_nor_star_alone() -> None:
    assert is_pattern("alice:*") and not is_pattern("*") and not is_pattern("alice:")
    assert not is_session_id("alice:*")  # a session id can never be mistaken for a pattern


@pytest.mark.parametrize(("scope", "prefix"), [("*", ""), ("alice:*", "alice:"), ("a*", "a"), ("alice", None)])
def test_scope_prefix_is_the_patterns_prefix_empty_for_star_none_for_a_session(scope: str, prefix: str | None) -> None:
    assert scope_prefix(scope) == prefix


@pytest.mark.parametrize(
    ("scope", "session_id", "covered"),
    [
        ("alice:*", "alice:build", True),
        ("alice:*", "alice:review", True),
        ("alice:*", "alice:", True),  # a glob's * matches nothing too
        ("alice:*", "alice", False),
        ("alice:*", "bob:build", False),
        ("alice:*", "xalice:build", False),
        ("alice*", "alice:build", True),
        ("alice*", "alicent", True),
        ("alice", "alice", True),
        ("alice", "alice:build", False),
        ("alice", "alic", False),
        ("*", "anything", True),
        ("**", "anything", False),  # no scope covers nothing
        ("al*ce", "alice", False),
        ("", "alice", False),
    ],
)
def test_a_scope_covers_its_session_the_sessions_of_its_prefix_or_all(
    scope: str, session_id: str, covered: bool
) -> None:
    assert covers(scope, session_id) is covered


@given(session_ids, st.integers(min_value=1, max_value=MAX_SESSION_ID))
def test_every_prefix_of_a_session_id_makes_a_pattern_that_covers_it(session_id: str, cut: int) -> None:
    pattern = session_id[:cut] + "*"
    assert is_scope(pattern) and covers(pattern, session_id)
    assert scope_prefix(pattern) == session_id[:cut]


@given(st.one_of(session_ids, session_ids.map(lambda s: s + "*"), st.just(ANY)), session_ids)
def test_covers_means_equal_to_a_session_id_or_starting_with_the_prefix(scope: str, session_id: str) -> None:
    prefix = scope_prefix(scope)
    expected = scope == session_id if prefix is None else session_id.startswith(prefix)
    assert covers(scope, session_id) is expected


@given(st.text(max_size=140))
def test_what_is_no_scope_covers_nothing(text: str) -> None:
    # A claim that is no scope grants nothing (a scope that covers "alice" is one).
    if not is_scope(text):
        assert not covers(text, "alice")
