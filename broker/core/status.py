"""Named websocket close codes (docs/protocol.md, "Close codes")."""

from __future__ import annotations

from enum import IntEnum


class CloseCode(IntEnum):
    GOING_AWAY = 1001  # broker shutting down: reconnect with backoff
    POLICY_VIOLATION = 1008  # rate limit, foreign Origin, too slow
    MESSAGE_TOO_BIG = 1009  # frame over 64 KiB
    INTERNAL_ERROR = 1011  # a fault in the broker: reconnect
    SERVICE_RESTART = 1012  # broker restarting: reconnect with backoff
    TRY_AGAIN_LATER = 1013  # too many connections for the session, store unavailable
    PROTOCOL_VIOLATION = 4400  # first frame not a hello
    BAD_TOKEN = 4401  # bad or expired token, or wrong role
    WRONG_SESSION = 4403  # token for another session
    HELLO_TIMEOUT = 4408  # no hello in time
