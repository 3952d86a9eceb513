"""One exception root for everything the broker can refuse.

Every ``BrokerError`` carries a ``code`` that is, word for word, an error code on the
wire (PROTOCOL.md): the HTTP API puts it in ``{"error": {"code", "message"}}`` with the
status from ``HTTP_STATUS``; the websocket puts it in an ``error`` frame. User input never
reaches an ``assert``: it is checked and refused with one of these.
"""

from __future__ import annotations

from typing import Final

# code -> HTTP status for the agent API. Codes that only ever travel in websocket
# ``error`` frames map to 400 so that nothing unexpected becomes a 500.
HTTP_STATUS: Final[dict[str, int]] = {
    "invalid_arguments": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "unknown_questionnaire": 404,
    "unknown_session": 404,
    "not_found": 404,  # a path under /v1/ that is no endpoint
    "stale_revision": 409,
    "not_awaiting_clarification": 409,
    "questionnaire_closed": 409,
    "conflict": 409,
    "method_not_allowed": 405,
    "payload_too_large": 413,
    "misdirected_request": 421,  # a Host this broker does not answer for (DNS rebinding)
    "rate_limited": 429,
    "store_unavailable": 503,
    "shutting_down": 503,
}


class BrokerError(Exception):
    """A refused command or request. The state it was aimed at is unchanged.

    The message is for people; a program decides by the fields: ``code`` (the wire's error
    code) and, for a refused websocket frame, ``frame`` (its ``type``, once that was read)
    and ``field`` (the offending field's path, e.g. ``token`` or ``client.kind``, when one
    field is to blame).
    """

    def __init__(
        self, code: str, message: str, *, ref: object = None, frame: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref
        self.frame = frame
        self.field = field

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 400)

    def __repr__(self) -> str:
        return f"BrokerError({self.code!r}, {self.message!r})"


def invalid(message: str) -> BrokerError:
    """A tool-input rejection: one clear sentence starting with ``questionnaire:``."""
    return BrokerError("invalid_arguments", f"questionnaire: {message}")
