"""The one store interface. ``memory`` and ``redis`` implement it; the service cannot tell them apart.

What a store keeps, per session (every Redis key carries the ``{sid}`` hash tag):

- questionnaires, each a ``Questionnaire`` record with a ``version``; writes are
  compare-and-set on that version, so two processes can never both extend one state;
- the session queue: ids of the questionnaires not yet terminal, oldest first (the head is
  the one shown to the person);
- idempotency keys (``Idempotency-Key`` of a start) -> questionnaire id;
- presence: which clients are connected anywhere, each kept alive by heartbeats with a
  TTL, plus the last time any client was seen (for the reconnect grace);
- notifications: after every successful write the store publishes a small ``Notice``
  (ids and versions only, never answers) to every broker process interested in the session.

Terminal questionnaires expire ``retention`` seconds after their last change; open ones
too, counted from their last change, so that nothing abandoned lives for ever.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.machine import Questionnaire


@dataclass(frozen=True, slots=True)
class Notice:
    """'Questionnaire ``questionnaire_id`` of ``session_id`` is now at ``version``.'"""

    session_id: str
    questionnaire_id: str
    version: int


@dataclass(frozen=True, slots=True)
class Presence:
    clients: int  # clients connected now, on any process
    last_seen: float | None  # last time the session had a client (None: never)


NoticeHandler = Callable[[Notice], Awaitable[None]]
ReconnectHandler = Callable[[], Awaitable[None]]


class StoreUnavailable(Exception):
    """The backing store cannot be reached (the HTTP API answers 503)."""


class Store(abc.ABC):
    """Async, process-safe questionnaire storage. All times are Unix seconds (floats)."""

    retention: float

    # --- questionnaires --------------------------------------------------------------

    @abc.abstractmethod
    async def create(self, state: Questionnaire, idempotency_key: str | None = None) -> Questionnaire:
        """Store a new questionnaire and queue it; publish a notice.

        With ``idempotency_key`` already used in this session, store nothing and return the
        questionnaire created under that key (as it is now).
        """

    @abc.abstractmethod
    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        """The latest state, or None when unknown (or expired)."""

    @abc.abstractmethod
    async def compare_and_set(self, state: Questionnaire, expected_version: int) -> bool:
        """Replace the stored state if its version is still ``expected_version``.

        On success a terminal state leaves the queue and starts its retention countdown,
        and a notice is published. Returns False (and changes nothing) when the stored
        version moved on or the questionnaire is gone.
        """

    @abc.abstractmethod
    async def queue(self, session_id: str) -> list[str]:
        """Ids of the session's open questionnaires, oldest first."""

    async def shown(self, session_id: str) -> Questionnaire | None:
        """The questionnaire the session's clients see: the oldest open one."""
        for questionnaire_id in await self.queue(session_id):
            state = await self.load(session_id, questionnaire_id)
            if state is not None and not state.is_terminal:
                return state
        return None

    # --- presence ---------------------------------------------------------------------

    @abc.abstractmethod
    async def heartbeat(self, session_id: str, client_id: str, ttl: float, now: float) -> None:
        """Mark ``client_id`` connected until ``now + ttl`` (call again before it lapses)."""

    @abc.abstractmethod
    async def leave(self, session_id: str, client_id: str, now: float) -> None:
        """``client_id`` disconnected cleanly."""

    @abc.abstractmethod
    async def presence(self, session_id: str, now: float) -> Presence:
        """Live clients (lapsed heartbeats do not count) and when one was last seen."""

    # --- notifications ----------------------------------------------------------------

    @abc.abstractmethod
    async def subscribe(self, session_id: str) -> None:
        """Start delivering this session's notices to the handler given to ``start``."""

    @abc.abstractmethod
    async def unsubscribe(self, session_id: str) -> None:
        """Stop delivering this session's notices."""

    # --- life cycle -------------------------------------------------------------------

    @abc.abstractmethod
    async def start(self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler) -> None:
        """Connect. ``on_notice`` gets every notice of subscribed sessions; ``on_reconnect``
        runs after the notification channel was lost and re-established (notices may have
        been missed: re-read everything)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Disconnect and stop background tasks."""

    async def ping(self) -> bool:
        """True when the store answers (for /readyz)."""
        return True
