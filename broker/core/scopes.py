"""Token scopes: which sessions a token's ``sid`` claim covers.

A scope is one of

- a session id (``alice:build``): that session only;
- a prefix pattern, a non-empty session-id prefix followed by ``*`` (``alice:*``): every
  session whose id starts with the prefix (the prefix itself included, as a glob's ``*``
  also matches nothing);
- ``*`` alone: every session.

Patterns and session ids share one alphabet, and ``*`` is not in it, so a scope is read
without escaping and a session id can never be mistaken for a pattern. Which roles may
hold which scopes is a rule of the tokens (broker/tokens/claims.py), not of the scopes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from broker.core.wire import MAX_SESSION_ID, SESSION_ID_ALPHABET, is_session_id

ANY: Final = "*"
# A prefix is as long as a session id may be: "a" * 128 + "*" covers exactly that session.
_PATTERN: Final = re.compile(rf"[{SESSION_ID_ALPHABET}]{{1,{MAX_SESSION_ID}}}\*")
SCOPE_RULE: Final = "a session id, a session-id prefix followed by * (as in alice:*), or * alone"  # for messages


def is_pattern(text: str) -> bool:
    """``text`` is a prefix pattern (``alice:*``), not ``*`` alone nor a session id."""
    return _PATTERN.fullmatch(text) is not None


def is_scope(text: str) -> bool:
    """``text`` is a session id, a prefix pattern or ``*``."""
    return text == ANY or is_session_id(text) or is_pattern(text)


def scope_prefix(scope: str) -> str | None:
    """The prefix a scope covers: the pattern's prefix, ``""`` for ``*``, None for a session
    id (it covers itself only). Raises ``ValueError`` for what is no scope."""
    if scope == ANY:
        return ""
    if is_pattern(scope):
        return scope[:-1]
    if is_session_id(scope):
        return None
    raise ValueError(f"not a scope: {scope[:140]!r}; a scope is {SCOPE_RULE}")


def covers(scope: str, session_id: str) -> bool:
    """Whether ``scope`` covers the session ``session_id`` (a valid session id: the caller
    checks it, as every request and connection does before asking). What is no scope covers
    nothing."""
    if scope == session_id:
        return True
    if scope == ANY:
        return True
    # (endswith first: a session id, the usual scope, is turned down without a regex)
    return scope.endswith("*") and is_pattern(scope) and session_id.startswith(scope[:-1])


def covering_scopes(session_id: str) -> Iterator[str]:
    """Every scope that covers ``session_id``: itself, each of its prefixes with ``*``, and
    ``*``. A store keyed by scope looks these few names up instead of scanning every scope."""
    yield session_id
    for end in range(min(len(session_id), MAX_SESSION_ID), 0, -1):
        yield session_id[:end] + "*"
    yield ANY
