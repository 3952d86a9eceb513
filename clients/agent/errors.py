"""The SDK's errors: one ``QBrokerError`` subclass per wire error code, and the mapping
from a refused HTTP response to the right one.

Callers catch these by class (``except StaleRevision``) and read ``.code`` (the wire code,
word for word) and ``.status`` (the HTTP status, ``None`` when no response was involved).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import httpx

from clients.agent.pending import Pending


class QBrokerError(Exception):
    """Root of every SDK error. ``code`` is the wire error code; ``status`` the HTTP status.

    ``status`` is ``None`` when no HTTP response was involved (transport failures, timeouts).
    """

    default_code: str = "error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.status = status

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(code={self.code!r}, status={self.status!r}, message={self.message!r})"


class InvalidArguments(QBrokerError):
    """400: the tool input broke a rule (the message names the question/option and the rule)."""

    default_code = "invalid_arguments"


class UnauthorizedError(QBrokerError):
    """401: missing, malformed or expired token, or not an agent token."""

    default_code = "unauthorized"


class ForbiddenError(QBrokerError):
    """403: the token belongs to another session."""

    default_code = "forbidden"


class UnknownQuestionnaire(QBrokerError):
    """404: no such questionnaire in this session (or it expired)."""

    default_code = "unknown_questionnaire"


class StaleRevision(QBrokerError):
    """409: ``resume`` named an old revision; the message names the latest one."""

    default_code = "stale_revision"


class NotAwaitingClarification(QBrokerError):
    """409: ``resume`` on a questionnaire that is not waiting for a clarification."""

    default_code = "not_awaiting_clarification"


class RateLimited(QBrokerError):
    """429 after every retry."""

    default_code = "rate_limited"


class ServiceUnavailable(QBrokerError):
    """503 (``store_unavailable``, ``shutting_down``) or 502/504 after every retry."""

    default_code = "service_unavailable"


class TransportError(QBrokerError):
    """The broker could not be reached (connection refused, reset, timed out) after every retry."""

    default_code = "transport_error"


class ProtocolError(QBrokerError):
    """The broker answered something this SDK cannot read (not the documented JSON)."""

    default_code = "bad_response"


class QBrokerTimeout(QBrokerError):
    """The overall ``timeout`` ran out while the person was still answering.

    The questionnaire goes on; ``pending`` says which one, so ``get(pending.questionnaire_id)``
    re-attaches later.
    """

    default_code = "timeout"

    def __init__(self, message: str, *, pending: Pending | None = None) -> None:
        super().__init__(message)
        self.pending = pending


_ERRORS_BY_CODE: Final[dict[str, type[QBrokerError]]] = {
    "invalid_arguments": InvalidArguments,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "unknown_questionnaire": UnknownQuestionnaire,
    "stale_revision": StaleRevision,
    "not_awaiting_clarification": NotAwaitingClarification,
    "rate_limited": RateLimited,
    "store_unavailable": ServiceUnavailable,
    "shutting_down": ServiceUnavailable,
}
_CODES_BY_STATUS: Final[dict[int, str]] = {
    400: "invalid_arguments",
    401: "unauthorized",
    403: "forbidden",
    404: "unknown_questionnaire",
    429: "rate_limited",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "gateway_timeout",
}


def error_from_response(response: httpx.Response) -> QBrokerError:
    """The typed error for a non-2xx broker response (``{"error": {"code", "message"}}``)."""
    status = response.status_code
    code: str | None = None
    message: str | None = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        error = body["error"]
        code = error.get("code") if isinstance(error.get("code"), str) else None
        message = error.get("message") if isinstance(error.get("message"), str) else None
    if code is None:
        code = _CODES_BY_STATUS.get(status, f"http_{status}")
    if message is None:
        text = response.text.strip()
        message = f"HTTP {status} from the broker" + (f": {text[:200]}" if text else "")
    cls = _ERRORS_BY_CODE.get(code)
    if cls is None:
        cls = ServiceUnavailable if status in (502, 503, 504) else QBrokerError
    return cls(message, code=code, status=status)
