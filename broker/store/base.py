"""The one store interface. ``memory`` and ``redis`` implement it; the service cannot tell them apart.

What a store keeps, per session (every Redis key carries the ``{sid}`` hash tag):

- questionnaires, each a ``Questionnaire`` record with a ``version``; writes are
  compare-and-set on that version, so two processes can never both extend one state;
- the session queue: ids of the questionnaires not yet terminal, oldest first (the head is
  the one shown to the person);
- idempotency keys (``Idempotency-Key`` of a start) -> questionnaire id;
- presence: which clients are connected anywhere, each kept alive by heartbeats with a
  TTL, plus the last time any client was seen (for the reconnect grace);
- a write sequence number per session, counting every successful write, so that a
  process that has seen writes 1..n of a session knows whether a notice is write n + 1;
- events: who changed each questionnaire and how (``broker.core.events``), appended in the
  same atomic step as the write that made them, and kept as long as the questionnaire;
- the session's history: an index of its questionnaires, newest first, each summed up
  from its first and latest events (``broker.core.history``);
- claims: names taken once across every broker (``claim``), each for a while: of several
  processes that see the same moment (a notification's trigger), exactly one acts on it;
- revocations (of no session): the tokens withdrawn before their time
  (broker/core/revocations.py), each kept until the tokens it covers have expired, with a
  version that changes on every revocation so that brokers polling it read the list only
  when it changed;
- browser push subscriptions (``broker/core/push.py``), kept per scope (a session id, a
  prefix pattern or ``*``) and not per session: a subscription hears of every session its
  scope covers, including sessions that do not exist yet;
- notifications: after every successful write the store publishes a ``Notice`` to every
  broker process interested in the session: ids, version, status and sequence number, and
  (up to a size limit) the written state itself, so that a receiver can usually act on it
  without reading the store. Notices are never logged;
- the inbox: an entry (``broker.core.inbox.Entry``) beside each open questionnaire, kept by
  the same writes, and an index of the sessions with open questionnaires that answers "which
  sessions whose id starts with P" without visiting any other session. Processes that watch
  a prefix hear of every questionnaire created under it and of every change of who is
  connected to its sessions (the rest of a session's writes they follow by subscribing to it).

Terminal questionnaires expire ``retention`` seconds after their last change; open ones
too, counted from their last change, so that nothing abandoned lives for ever.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import msgspec

from broker.core.events import Event
from broker.core.history import Summary
from broker.core.inbox import Entry
from broker.core.machine import Questionnaire
from broker.core.push import PushSubscription
from broker.core.revocations import Revocation

# Notices carry the written state only up to this size (packed): a questionnaire near the
# input limit would otherwise cost every subscriber a megabyte per toggle. Larger states
# are read from the store by whoever needs them.
NOTICE_STATE_LIMIT = 64 * 1024
# An inbox socket's last heartbeat is kept this long after it lapsed: longer than any
# reconnect grace it extends, short enough that the scopes of past sockets do not pile up.
INBOX_SOCKETS_KEPT = 3600.0


class Record:
    """A stored state, decoded on first use: most receivers of a notice never need it."""

    __slots__ = ("_raw", "_decode", "_state")

    def __init__(self, raw: Any, decode: Callable[[Any], Questionnaire]) -> None:
        self._raw: Any = raw
        self._decode: Callable[[Any], Questionnaire] | None = decode
        self._state: Questionnaire | None = None

    @classmethod
    def of(cls, state: Questionnaire) -> Record:
        """A record that is already decoded (the memory store's; a Redis store's own write)."""
        record = cls.__new__(cls)
        record._raw, record._decode, record._state = None, None, state
        return record

    def state(self) -> Questionnaire:
        """The state; a malformed record raises whatever decoding it raises."""
        if self._decode is not None:
            self._state = self._decode(self._raw)
            self._raw, self._decode = None, None
        assert self._state is not None
        return self._state


class Head(msgspec.Struct, frozen=True):
    """The questionnaire a session's clients see (the oldest open one; None: idle), as of
    the session's write number ``seq`` (0: not known)."""

    state: Questionnaire | None
    seq: int = 0


class Written(msgspec.Struct, frozen=True):
    """A successful compare-and-set: its place in the session's writes (``seq``, 0: not
    known, e.g. a retry that found its own write) and, when it made a questionnaire
    terminal, the session's head after it (None: not known)."""

    seq: int = 0
    head: Head | None = None


class Notice(msgspec.Struct, frozen=True, eq=False):
    """'Questionnaire ``questionnaire_id`` of ``session_id`` is now at ``version``.'

    Notices compare by those three (``__eq__`` and ``__hash__`` below: a Struct's own would
    compare every field); the rest says more when the publisher knew it (a notice from an
    older broker has none of it, and means only "look again"):

    - ``status``: the written state's status (whether the write is an outcome);
    - ``seq``: the session's write number of this write (0: not said);
    - ``record``: the written state (None: not carried, e.g. too large);
    - ``head``: for a write that made a questionnaire terminal, the session's head after
      it (None: not said).

    (A Struct, not a frozen dataclass: a process builds one for every notice it hears, and a
    frozen dataclass sets each field through ``object.__setattr__``, seven times the cost.)
    """

    session_id: str
    questionnaire_id: str
    version: int
    status: str | None = None
    seq: int = 0
    record: Record | None = None
    head: Head | None = None

    def _identity(self) -> tuple[str, str, int]:
        return (self.session_id, self.questionnaire_id, self.version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Notice):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:  # without the record and the head (a state each)
        return (
            f"Notice(session_id={self.session_id!r}, questionnaire_id={self.questionnaire_id!r}, "
            f"version={self.version}, status={self.status!r}, seq={self.seq})"
        )


class Presence(msgspec.Struct, frozen=True):
    clients: int  # clients connected now, on any process
    last_seen: float | None  # last time the session had a client (None: never)


class SessionInbox(msgspec.Struct, frozen=True):
    """A session as the inbox shows it: its open questionnaires' entries (in no particular
    order), its connected clients, and the session's write number they are as of (0: none)."""

    session_id: str
    entries: tuple[Entry, ...]
    clients: int
    seq: int = 0


# A notice's handler: None when it dealt with the notice at once, else the work left to await.
NoticeHandler = Callable[[Notice], Coroutine[Any, Any, None] | None]
ReconnectHandler = Callable[[], Awaitable[None]]
# A change of who is connected to a session: its id and its connected clients now.
PresenceHandler = Callable[[str, int], Coroutine[Any, Any, None]]


class StoreUnavailable(Exception):
    """The backing store cannot be reached (the HTTP API answers 503)."""


class Store(abc.ABC):
    """Async, process-safe questionnaire storage. All times are Unix seconds (floats)."""

    retention: float
    # No call needs a current task (as asyncio.timeout does) before its first wait: a
    # client's frame may then start at once, in the read callback (broker/speedups/eager.py).
    eager_safe: bool = False

    # --- questionnaires --------------------------------------------------------------

    @abc.abstractmethod
    async def create(
        self, state: Questionnaire, idempotency_key: str | None = None, events: Sequence[Event] = ()
    ) -> Questionnaire:
        """Store a new questionnaire with its first ``events``, queue it and add it to the
        session's history; publish a notice.

        With ``idempotency_key`` already used in this session, store nothing and return the
        questionnaire created under that key (as it is now).
        """

    @abc.abstractmethod
    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        """The latest state, or None when unknown (or expired)."""

    async def compare_and_set(self, state: Questionnaire, expected_version: int, events: Sequence[Event] = ()) -> bool:
        """Replace the stored state if its version is still ``expected_version``, and
        append ``events`` to the questionnaire's, in the same atomic step.

        On success a terminal state leaves the queue and starts its retention countdown,
        and a notice is published. Returns False (and changes nothing) when the stored
        version moved on or the questionnaire is gone.
        """
        return await self.commit(state, expected_version, events=events) is not None

    @abc.abstractmethod
    async def commit(
        self,
        state: Questionnaire,
        expected_version: int,
        *,
        shown_by_writer: bool = False,
        events: Sequence[Event] = (),
    ) -> Written | None:
        """``compare_and_set`` that says where the write landed (None: it did not).

        ``shown_by_writer``: the caller shows the write to its own clients and wakes its own
        waiting agent calls itself, so this process is not told of it: a store whose notices
        reach only this process (memory) publishes none; others publish it all the same, for
        other processes, and drop it unread when it comes back here.
        """

    @abc.abstractmethod
    async def events(self, session_id: str, questionnaire_id: str) -> list[Event] | None:
        """The questionnaire's events, oldest first; None when it is unknown (or expired)."""

    @abc.abstractmethod
    async def history(self, session_id: str, before: int | None, count: int) -> list[Summary]:
        """Up to ``count`` of the session's questionnaires within retention, newest first,
        each summed up (``Summary``); only those older than the one at ``before`` (a
        ``Summary.seq``; None: from the newest). Questionnaires started by a broker that
        kept no events are not listed."""

    @abc.abstractmethod
    async def queue(self, session_id: str) -> list[str]:
        """Ids of the session's open questionnaires, oldest first."""

    @abc.abstractmethod
    async def head(self, session_id: str) -> Head:
        """The questionnaire the session's clients see, and the write number it is as of."""

    async def shown(self, session_id: str) -> Questionnaire | None:
        """The questionnaire the session's clients see: the oldest open one."""
        return (await self.head(session_id)).state

    @abc.abstractmethod
    async def write_counts(self, session_ids: list[str]) -> list[int]:
        """Each session's write number now (0: none kept), in one round trip: a process
        compares them with what its clients were shown to find what it missed."""

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

    # --- claims -----------------------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, session_id: str, name: str, ttl: float) -> bool:
        """Take ``name`` in ``session_id`` for ``ttl`` seconds: True for the one caller that
        took it, False for every other caller, on any process, until it expires."""

    # --- notes ------------------------------------------------------------------------

    @abc.abstractmethod
    async def note(self, session_id: str, name: str, value: str | None, ttl: float) -> None:
        """Keep the text ``value`` under ``name`` in ``session_id`` for ``ttl`` seconds, for
        every process to read (None: forget it). What one broker leaves for another: the
        form an MCP host was shown, which any broker may get the reply to."""

    @abc.abstractmethod
    async def noted(self, session_id: str, name: str) -> str | None:
        """The text kept under ``name`` (None: none, or it expired)."""

    # --- revocations ------------------------------------------------------------------

    @abc.abstractmethod
    async def revoke(self, revocation: Revocation, now: float) -> None:
        """Keep ``revocation`` (merged with a kept one of the same token or holder,
        ``Revocation.merged``) for every broker, and change the list's version; drop the
        revocations whose ``until`` is past ``now``."""

    @abc.abstractmethod
    async def revocations(self, known: str | None) -> tuple[str, list[Revocation]] | None:
        """The list's version and every revocation kept (some may be past their ``until``:
        the caller filters); None when the version is still ``known``, in one cheap read
        (every broker asks twice a second)."""

    # --- browser push subscriptions ---------------------------------------------------

    @abc.abstractmethod
    async def add_push_subscription(self, subscription: PushSubscription, limit: int) -> None:
        """Keep ``subscription`` under its scope until its ``expires``, replacing the one of the
        same endpoint there; a scope keeps at most ``limit``: those due to expire first go."""

    @abc.abstractmethod
    async def remove_push_subscription(self, scope: str, endpoint: str) -> bool:
        """Forget the subscription of ``endpoint`` under ``scope``; False when there was none."""

    @abc.abstractmethod
    async def push_subscriptions(self, session_id: str, now: float) -> list[PushSubscription]:
        """The subscriptions, not expired at ``now``, whose scope covers ``session_id``."""

    async def has_push_subscription(self, session_id: str, now: float) -> bool:
        """Whether a subscription covers ``session_id`` (someone may come when pushed)."""
        return bool(await self.push_subscriptions(session_id, now))

    # --- notification deliveries (broker/notify/deliveries.py) --------------------------

    @abc.abstractmethod
    async def add_delivery(self, record: bytes) -> None:
        """Keep a notification for delivery by whichever broker takes it first."""

    @abc.abstractmethod
    async def take_deliveries(self, consumer: str, count: int, idle: float) -> list[tuple[str, bytes]]:
        """Up to ``count`` deliveries for ``consumer`` (one broker process), as (id, record):
        first those another consumer took and left alone for ``idle`` seconds (it stopped),
        then new ones. Each is ``consumer``'s until it finishes it or leaves it alone."""

    @abc.abstractmethod
    async def keep_deliveries(self, consumer: str, delivery_ids: list[str]) -> None:
        """``consumer`` still holds these deliveries: their idle time starts again."""

    @abc.abstractmethod
    async def finish_delivery(self, delivery_id: str) -> None:
        """Delivered or given up: forget the delivery."""

    # --- notifications ----------------------------------------------------------------

    @abc.abstractmethod
    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Start delivering this session's notices to the handler given to ``start``: every
        write's, or (``outcomes_only``) only those of writes that reached an outcome (a
        process with only agent calls waiting on a session needs no more). A session
        subscribed both ways may get an outcome's notice twice."""

    @abc.abstractmethod
    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        """Stop delivering this session's notices (of that subscription)."""

    # --- the inbox ----------------------------------------------------------------------

    @abc.abstractmethod
    async def open_sessions(self, prefix: str) -> list[str]:
        """Ids of the sessions whose id starts with ``prefix`` ("": every session) that have
        open questionnaires (and perhaps a few whose last one has just ended), in no order."""

    @abc.abstractmethod
    async def inbox_sessions(self, prefix: str, start: str, count: int) -> list[str]:
        """The first ``count`` of ``open_sessions(prefix)`` whose id is ``start`` or after it,
        in id order (the order of their UTF-8 bytes): the inbox's pages walk them so, and
        read only the sessions they show (perhaps with a few whose last questionnaire has
        just ended)."""

    @abc.abstractmethod
    async def session_inboxes(self, session_ids: list[str], now: float) -> list[SessionInbox]:
        """Each session's entries, connected clients and write number, in the order asked
        (a session with nothing open has no entries), in one round trip where the store can."""

    @abc.abstractmethod
    async def watch_inbox(self, prefix: str) -> None:
        """Start delivering, for the sessions whose id starts with ``prefix`` (""; every
        session): the notice of every questionnaire created, to ``on_notice``, and every
        change of a session's connected clients, to ``on_presence`` (the handlers given to
        ``start``). Returns once the store confirmed it. A store may deliver more (of other
        prefixes) and may deliver a create's notice twice (when the session is subscribed
        to as well). Counted: it lasts until as many ``unwatch_inbox(prefix)``."""

    @abc.abstractmethod
    async def unwatch_inbox(self, prefix: str) -> None:
        """Undo one ``watch_inbox(prefix)``."""

    @abc.abstractmethod
    async def inbox_heartbeat(self, scopes: list[str], ttl: float, now: float) -> None:
        """Inbox sockets with these scopes are connected (on this process) until ``now + ttl``
        (call again before it lapses): they hold the questionnaires of the sessions they
        cover (core/availability.py)."""

    @abc.abstractmethod
    async def inbox_until(self, session_id: str) -> float | None:
        """Until when an inbox socket covering ``session_id`` is known connected, on any
        process (the latest expiry of a heartbeat of a covering scope; None: none kept)."""

    # --- life cycle -------------------------------------------------------------------

    @abc.abstractmethod
    async def start(
        self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler, on_presence: PresenceHandler | None = None
    ) -> None:
        """Connect. ``on_notice`` gets every notice of subscribed sessions (and of creates
        under watched prefixes); ``on_reconnect`` runs after the notification channel was lost
        and re-established (notices may have been missed: re-read everything);
        ``on_presence`` gets the changes of who is connected under watched prefixes."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Disconnect and stop background tasks."""

    async def ping(self) -> bool:
        """True when the store answers (for /readyz)."""
        return True

    @property
    def notices_connected(self) -> bool:
        """Whether notices of other processes' writes can arrive now (for /metrics): an
        embedded store has no connection to lose."""
        return True
