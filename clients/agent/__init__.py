"""The agent's side of qbroker: the Python SDK and ``qbroker ask`` / ``qbroker resume``.

``from clients.agent import QBrokerClient`` is the SDK's documented import; ``sdk`` holds
it, ``cli`` the two commands.
"""

from clients.agent.sdk import (
    EXIT_CODES,
    Answer,
    AsyncQBrokerClient,
    Clarification,
    ForbiddenError,
    InvalidArguments,
    NotAwaitingClarification,
    Pending,
    ProtocolError,
    QBrokerClient,
    QBrokerError,
    QBrokerTimeout,
    QuestionnaireResult,
    RateLimited,
    ServiceUnavailable,
    StaleRevision,
    Status,
    TransportError,
    UnauthorizedError,
    UnknownQuestionnaire,
)

__all__ = [
    "Answer",
    "AsyncQBrokerClient",
    "Clarification",
    "EXIT_CODES",
    "ForbiddenError",
    "InvalidArguments",
    "NotAwaitingClarification",
    "Pending",
    "ProtocolError",
    "QBrokerClient",
    "QBrokerError",
    "QBrokerTimeout",
    "QuestionnaireResult",
    "RateLimited",
    "ServiceUnavailable",
    "StaleRevision",
    "Status",
    "TransportError",
    "UnauthorizedError",
    "UnknownQuestionnaire",
]
