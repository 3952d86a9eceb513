"""Named websocket close codes and reasons (docs/protocol.md, "Close codes").

The broker closes with these, and clients decide with them whether to reconnect; both sides
take the numbers from here, so a code is written once.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class CloseCode(IntEnum):
    NORMAL_CLOSURE = 1000  # an ordinary close (a client leaving)
    GOING_AWAY = 1001  # broker shutting down: reconnect with backoff
    # Never sent: what a websocket library reports when the connection ended with no close
    # frame at all (a dropped network, a killed process).
    ABNORMAL_CLOSURE = 1006
    INVALID_PAYLOAD = 1007  # a text frame that is not UTF-8
    POLICY_VIOLATION = 1008  # rate limit, foreign Origin, too slow
    MESSAGE_TOO_BIG = 1009  # frame over 64 KiB
    INTERNAL_ERROR = 1011  # the broker failed on this connection
    SERVICE_RESTART = 1012  # broker restarting: reconnect with backoff
    TRY_AGAIN_LATER = 1013  # too many connections for the session, store unavailable
    PROTOCOL_VIOLATION = 4400  # first frame not a hello
    BAD_TOKEN = 4401  # bad or expired token, or wrong role
    WRONG_SESSION = 4403  # token for another session
    HELLO_TIMEOUT = 4408  # no hello in time


class CloseReason(StrEnum):
    """The fixed reasons the broker gives with its close codes. Where one code has several
    causes the reason tells them apart: 1008 is a rate limit (slow down) or a client too
    slow to read its frames; 4401 an expired token (get a new one), a revoked one, or a bad one."""

    HELLO_TIMEOUT = "no hello in time"
    NOT_A_HELLO = "the first frame must be a hello"
    TOKEN_EXPIRED = "token expired"
    TOKEN_REVOKED = "token revoked"
    WRONG_SESSION = "token is for another session"
    TOO_MANY_CONNECTIONS = "too many connections for this session"
    TOO_MANY_INBOXES = "too many inbox connections for this token's sessions"
    STORE_UNAVAILABLE = "state store unavailable"
    RATE_LIMITED = "rate limit exceeded"
    TOO_SLOW = "client too slow"
    INTERNAL_ERROR = "internal error"
