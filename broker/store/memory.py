"""The embedded store: plain dicts in one process. The default when no Redis is configured.

Every method body runs without an ``await`` in between its reads and writes, so on one
event loop each call is atomic: compare-and-set needs no lock.

A questionnaire that has ended is kept packed, a msgpack record as Redis holds one: it
never changes again and is seldom read (an agent re-attaching, an idempotent repeat), and
a week's retention of them as live objects would be most of the heap. As bytes, one takes
a fraction of the memory and nothing of the cyclic collector's time: under load, walking
thousands of retained states made up most of the collector's passes.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.core.events import Event
from broker.core.history import Summary
from broker.core.inbox import Entry, next_entry
from broker.core.machine import Questionnaire
from broker.core.push import PushSubscription, subscription_id
from broker.core.revocations import Revocation
from broker.core.scopes import covering_scopes
from broker.speedups.eager import eagerly
from broker.store import revocations_file
from broker.store.base import (
    INBOX_SOCKETS_KEPT,
    Head,
    Notice,
    NoticeHandler,
    Presence,
    PresenceHandler,
    ReconnectHandler,
    Record,
    SessionInbox,
    Store,
    StoreUnavailable,
    Written,
)
from broker.store.memory_deliveries import MemoryDeliveries
from broker.store.records import from_msgpack, to_msgpack

log = logging.getLogger("qbroker.store.memory")


@dataclass
class _Session:
    # Open questionnaires as states; ended ones as their packed records (see above).
    questionnaires: dict[str, Questionnaire | bytes] = field(default_factory=dict)
    # Questionnaire id -> expiry, kept in the order of the last write: with one retention
    # period for all, the ones due first are at the front, so a sweep stops at the first
    # one still alive instead of visiting every retained questionnaire.
    expires_at: dict[str, float] = field(default_factory=dict)
    queue: list[str] = field(default_factory=list)
    entries: dict[str, Entry] = field(default_factory=dict)  # the inbox's, of open questionnaires
    events: dict[str, list[Event]] = field(default_factory=dict)  # questionnaire id -> its events
    # Questionnaire id -> the session's write number when it was created, oldest first.
    history: dict[str, int] = field(default_factory=dict)
    idempotency: dict[str, tuple[str, float]] = field(default_factory=dict)  # key -> (id, expiry)
    clients: dict[str, float] = field(default_factory=dict)  # client id -> heartbeat expiry
    last_seen: float | None = None
    swept_at: float = 0.0
    seq: int = 0  # successful writes so far
    claims: dict[str, float] = field(default_factory=dict)  # name -> expiry
    notes: dict[str, tuple[str, float]] = field(default_factory=dict)  # name -> (text, expiry)

    def head(self) -> Questionnaire | None:
        for questionnaire_id in self.queue:
            state = self.questionnaires.get(questionnaire_id)
            if isinstance(state, Questionnaire) and not state.is_terminal:
                return state
        return None

    def state(self, questionnaire_id: str) -> Questionnaire | None:
        kept = self.questionnaires.get(questionnaire_id)
        if isinstance(kept, bytes):
            return Questionnaire.from_record(from_msgpack(kept))
        return kept

    def keep(self, state: Questionnaire) -> None:
        self.questionnaires[state.id] = to_msgpack(state.to_record()) if state.is_terminal else state
        entry = next_entry(self.entries.get(state.id), state)
        if entry is None:
            self.entries.pop(state.id, None)
        else:
            self.entries[state.id] = entry

    def live_clients(self, now: float) -> int:
        return sum(1 for expiry in self.clients.values() if expiry > now)

    def renew(self, questionnaire_id: str, expiry: float) -> None:
        self.expires_at.pop(questionnaire_id, None)
        self.expires_at[questionnaire_id] = expiry  # to the back: written last, due last


class MemoryStore(Store):
    eager_safe = True

    def __init__(self, retention: float = 7 * 24 * 3600.0, revocations_file: Path | None = None) -> None:
        self.retention = retention
        # Where the revocations are kept across restarts (None: in this process only).
        self._revocations_file = revocations_file
        self._sessions: defaultdict[str, _Session] = defaultdict(_Session)
        # The inbox's index: ids of sessions given a questionnaire, in id order; those with
        # nothing open left are taken out by the reader that finds them so.
        self._indexed: list[str] = []
        self._subscribed: set[str] = set()  # every write's notices
        self._subscribed_to_outcomes: set[str] = set()  # only outcomes' notices
        self._watched: Counter[str] = Counter()  # prefixes whose creates and presence are told
        self._inbox_sockets: dict[str, float] = {}  # scope -> until when an inbox socket has it
        self._on_notice: NoticeHandler | None = None
        self._on_presence: PresenceHandler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # (get_running_loop() is a system call on 3.11)
        self._pending: set[asyncio.Future[None]] = set()
        self._revocations: dict[str, Revocation] = {}  # Revocation.key -> revocation
        self._revocations_version = 0
        # Browser push subscriptions: scope -> endpoint's id -> subscription.
        self._push: dict[str, dict[str, PushSubscription]] = {}
        self._deliveries = MemoryDeliveries()

    # The memory store measures retention with the wall clock: it is the only clock
    # shared with the states' own timestamps.
    @staticmethod
    def _now() -> float:
        return time.time()

    async def create(
        self, state: Questionnaire, idempotency_key: str | None = None, events: Sequence[Event] = ()
    ) -> Questionnaire:
        session = self._sessions[state.session_id]
        self._expire(session)
        if idempotency_key is not None:
            known = session.idempotency.get(idempotency_key)
            if known is not None and (first := session.state(known[0])) is not None:
                return first
            session.idempotency[idempotency_key] = (state.id, self._now() + self.retention)
        session.keep(state)
        if session.entries:
            self._index(state.session_id)
        session.renew(state.id, self._now() + self.retention)
        session.queue.append(state.id)
        session.seq += 1
        session.events[state.id] = list(events)
        session.history[state.id] = session.seq
        self._notify(state, session.seq, None, created=True)
        return state

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        self._expire(session, (questionnaire_id,))
        return session.state(questionnaire_id)

    async def commit(
        self,
        state: Questionnaire,
        expected_version: int,
        *,
        shown_by_writer: bool = False,
        events: Sequence[Event] = (),
    ) -> Written | None:
        session = self._sessions.get(state.session_id)
        current = session.state(state.id) if session else None
        if session is None or current is None or current.version != expected_version:
            return None
        session.keep(state)
        if events:
            session.events.setdefault(state.id, []).extend(events)
        session.renew(state.id, self._now() + self.retention)
        session.seq += 1
        head = None
        if state.is_terminal:
            if state.id in session.queue:
                session.queue.remove(state.id)
            self._expire(session, tuple(session.queue))
            head = Head(session.head(), session.seq)
        if not shown_by_writer:  # (the writer is this process: nobody else to tell)
            self._notify(state, session.seq, head)
        return Written(session.seq, head)

    async def queue(self, session_id: str) -> list[str]:
        session = self._sessions.get(session_id)
        if session is None:
            return []
        self._expire(session, tuple(session.queue))
        return list(session.queue)

    async def head(self, session_id: str) -> Head:
        session = self._sessions.get(session_id)
        if session is None:
            return Head(None, 0)
        self._expire(session, tuple(session.queue))
        return Head(session.head(), session.seq)

    async def events(self, session_id: str, questionnaire_id: str) -> list[Event] | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        self._expire(session, (questionnaire_id,))
        if questionnaire_id not in session.questionnaires:
            return None
        return list(session.events.get(questionnaire_id, ()))

    async def history(self, session_id: str, before: int | None, count: int) -> list[Summary]:
        session = self._sessions.get(session_id)
        if session is None or count <= 0:
            return []
        now, found, gone = self._now(), [], []
        for questionnaire_id, seq in reversed(session.history.items()):
            if before is not None and seq >= before:
                continue
            if session.expires_at.get(questionnaire_id, 0.0) <= now:
                gone.append(questionnaire_id)
                continue
            events = session.events.get(questionnaire_id)
            if events:
                found.append(Summary(questionnaire_id, seq, events[0], events[-1]))
                if len(found) == count:
                    break
        if gone:
            self._expire(session, tuple(gone))
        return found

    async def write_counts(self, session_ids: list[str]) -> list[int]:
        sessions = self._sessions
        return [sessions[sid].seq if sid in sessions else 0 for sid in session_ids]

    async def heartbeat(self, session_id: str, client_id: str, ttl: float, now: float) -> None:
        session = self._sessions[session_id]
        arrived = session.clients.get(client_id, now) <= now  # new, or back after lapsing
        session.clients[client_id] = now + ttl
        session.last_seen = now
        if arrived:
            self._tell_presence(session_id, session.live_clients(now))

    async def leave(self, session_id: str, client_id: str, now: float) -> None:
        session = self._sessions[session_id]
        if session.clients.pop(client_id, None) is not None:
            session.last_seen = now
            self._tell_presence(session_id, session.live_clients(now))

    async def presence(self, session_id: str, now: float) -> Presence:
        session = self._sessions.get(session_id)
        if session is None:
            return Presence(0, None)
        lapsed = False
        for client_id, expiry in list(session.clients.items()):
            if expiry <= now:
                del session.clients[client_id]
                session.last_seen = max(session.last_seen or expiry, expiry)
                lapsed = True
        if lapsed:
            self._tell_presence(session_id, len(session.clients))
        return Presence(len(session.clients), session.last_seen)

    async def claim(self, session_id: str, name: str, ttl: float) -> bool:
        claims = self._sessions[session_id].claims
        now = self._now()
        for taken, expiry in list(claims.items()):  # (a handful per questionnaire: swept here)
            if expiry <= now:
                del claims[taken]
        if name in claims:
            return False
        claims[name] = now + ttl
        return True

    async def note(self, session_id: str, name: str, value: str | None, ttl: float) -> None:
        notes = self._sessions[session_id].notes
        now = self._now()
        for kept, (_, expiry) in list(notes.items()):  # (a handful per session: swept here)
            if expiry <= now:
                del notes[kept]
        if value is None:
            notes.pop(name, None)
        else:
            notes[name] = (value, now + ttl)

    async def noted(self, session_id: str, name: str) -> str | None:
        kept = self._sessions[session_id].notes.get(name)
        return kept[0] if kept is not None and kept[1] > self._now() else None

    async def revoke(self, revocation: Revocation, now: float) -> None:
        kept = self._revocations.get(revocation.key)
        self._revocations[revocation.key] = revocation if kept is None else kept.merged(revocation)
        for key, each in list(self._revocations.items()):
            if each.until <= now:
                del self._revocations[key]
        self._revocations_version += 1
        if self._revocations_file is not None:
            try:
                revocations_file.write(self._revocations_file, list(self._revocations.values()))
            except OSError as exc:
                raise StoreUnavailable(f"memory store: cannot keep the revocation: {exc}") from exc

    async def revocations(self, known: str | None) -> tuple[str, list[Revocation]] | None:
        version = str(self._revocations_version)
        return None if version == known else (version, list(self._revocations.values()))

    async def add_delivery(self, record: bytes) -> None:
        self._deliveries.add(record)

    async def take_deliveries(self, consumer: str, count: int, idle: float) -> list[tuple[str, bytes]]:
        return self._deliveries.take(consumer, count, idle)

    async def keep_deliveries(self, consumer: str, delivery_ids: list[str]) -> None:
        self._deliveries.keep(consumer, delivery_ids)

    async def finish_delivery(self, delivery_id: str) -> None:
        self._deliveries.finish(delivery_id)

    async def open_sessions(self, prefix: str) -> list[str]:
        return [sid for sid, session in self._sessions.items() if session.entries and sid.startswith(prefix)]

    async def inbox_sessions(self, prefix: str, start: str, count: int) -> list[str]:
        found: list[str] = []
        at = bisect.bisect_left(self._indexed, max(prefix, start))
        while at < len(self._indexed) and len(found) < count:
            session_id = self._indexed[at]
            if not session_id.startswith(prefix):
                break
            session = self._sessions.get(session_id)
            if session is None or not session.entries:
                del self._indexed[at]  # (its last questionnaire ended since it was indexed)
                continue
            found.append(session_id)
            at += 1
        return found

    def _index(self, session_id: str) -> None:
        at = bisect.bisect_left(self._indexed, session_id)
        if at == len(self._indexed) or self._indexed[at] != session_id:
            self._indexed.insert(at, session_id)

    async def session_inboxes(self, session_ids: list[str], now: float) -> list[SessionInbox]:
        inboxes = []
        for session_id in session_ids:
            session = self._sessions.get(session_id)
            if session is None:
                inboxes.append(SessionInbox(session_id, (), 0, 0))
                continue
            self._expire(session, tuple(session.entries))
            inboxes.append(
                SessionInbox(session_id, tuple(session.entries.values()), session.live_clients(now), session.seq)
            )
        return inboxes

    async def watch_inbox(self, prefix: str) -> None:
        self._watched[prefix] += 1

    async def unwatch_inbox(self, prefix: str) -> None:
        if self._watched[prefix] <= 1:
            self._watched.pop(prefix, None)
        else:
            self._watched[prefix] -= 1

    async def inbox_heartbeat(self, scopes: list[str], ttl: float, now: float) -> None:
        for scope in scopes:
            self._inbox_sockets[scope] = max(self._inbox_sockets.get(scope, 0.0), now + ttl)
        for scope, until in list(self._inbox_sockets.items()):  # (a few per person: swept here)
            if until < now - INBOX_SOCKETS_KEPT:
                del self._inbox_sockets[scope]

    async def inbox_until(self, session_id: str) -> float | None:
        kept = [self._inbox_sockets.get(scope) for scope in covering_scopes(session_id)]
        return max((until for until in kept if until is not None), default=None)

    def _is_watched(self, session_id: str) -> bool:
        return any(session_id.startswith(prefix) for prefix in self._watched)

    async def add_push_subscription(self, subscription: PushSubscription, limit: int) -> None:
        kept = self._push.setdefault(subscription.scope, {})
        kept.pop(subscription.id, None)
        for key, other in list(kept.items()):
            if other.expires <= subscription.created:
                del kept[key]
        kept[subscription.id] = subscription
        others = sorted((key for key in kept if key != subscription.id), key=lambda key: kept[key].expires)
        for key in others[: max(0, len(kept) - limit)]:  # those due to expire first go
            del kept[key]

    async def remove_push_subscription(self, scope: str, endpoint: str) -> bool:
        kept = self._push.get(scope)
        if kept is None or kept.pop(subscription_id(endpoint), None) is None:
            return False
        if not kept:
            del self._push[scope]
        return True

    async def push_subscriptions(self, session_id: str, now: float) -> list[PushSubscription]:
        return [
            subscription
            for scope in covering_scopes(session_id)
            for subscription in self._push.get(scope, {}).values()
            if subscription.expires > now
        ]

    async def subscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        (self._subscribed_to_outcomes if outcomes_only else self._subscribed).add(session_id)

    async def unsubscribe(self, session_id: str, outcomes_only: bool = False) -> None:
        (self._subscribed_to_outcomes if outcomes_only else self._subscribed).discard(session_id)

    async def start(
        self, on_notice: NoticeHandler, on_reconnect: ReconnectHandler, on_presence: PresenceHandler | None = None
    ) -> None:
        if self._revocations_file is not None:
            try:
                kept = revocations_file.read(self._revocations_file)
            except revocations_file.UnreadableRevocations as exc:
                raise StoreUnavailable(f"memory store: {exc}") from exc
            self._revocations = {revocation.key: revocation for revocation in kept}
        self._on_notice = on_notice
        self._on_presence = on_presence
        self._loop = asyncio.get_running_loop()

    async def close(self) -> None:
        self._on_notice = None
        self._on_presence = None
        for task in list(self._pending):
            task.cancel()

    def _notify(self, state: Questionnaire, seq: int, head: Head | None, created: bool = False) -> None:
        """Deliver the notice on the next loop turn, as pub/sub would: after the writer
        has finished its own fan-out, so its own write is not shown twice."""
        sid = state.session_id
        if self._on_notice is not None and (
            sid in self._subscribed
            or (state.is_outcome and sid in self._subscribed_to_outcomes)
            or (created and self._watched and self._is_watched(sid))
        ):
            # Even the notice is made on that turn: the writer's fan-out goes first, unhindered.
            assert self._loop is not None  # (set by start, with _on_notice)
            self._loop.call_soon(self._deliver, state, seq, head)

    def _deliver(self, state: Questionnaire, seq: int, head: Head | None) -> None:
        if self._on_notice is None:
            return  # closed meanwhile
        notice = Notice(state.session_id, state.id, state.version, state.status, seq, Record.of(state), head)
        try:
            work = self._on_notice(notice)  # usually done at once: None
            task = None if work is None else eagerly(work)
        except Exception:
            log.exception("notice handler failed")
            return
        if task is not None:
            assert isinstance(task, asyncio.Task)  # (it waited on a lock: only Redis replies are Resumable)
            self._pending.add(task)
            task.add_done_callback(self._notice_done)

    def _tell_presence(self, session_id: str, clients: int) -> None:
        """A change of who is connected, on the next loop turn, to a watcher of the session."""
        if self._on_presence is not None and self._watched and self._is_watched(session_id):
            assert self._loop is not None  # (set by start, with _on_presence)
            self._loop.call_soon(self._deliver_presence, session_id, clients)

    def _deliver_presence(self, session_id: str, clients: int) -> None:
        if self._on_presence is not None:
            self._run(self._on_presence(session_id, clients))

    def _run(self, handler: Coroutine[Any, Any, None]) -> None:
        try:
            task = eagerly(handler)
        except Exception:
            log.exception("presence handler failed")
            return
        if task is not None:
            assert isinstance(task, asyncio.Task)
            self._pending.add(task)
            task.add_done_callback(self._notice_done)

    def _notice_done(self, task: asyncio.Future[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("notice handler failed", exc_info=task.exception())

    def _expire(self, session: _Session, only: tuple[str, ...] | None = None) -> None:
        """Drop what outlived the retention: ``only`` these ids (cheap, on reads), or all
        (on creates, at most once a second: a busy session retains thousands)."""
        now = self._now()
        if only is None:
            if now - session.swept_at < 1.0:
                return
            session.swept_at = now
        if only is None:
            due = []
            for questionnaire_id, expiry in session.expires_at.items():
                if expiry > now:
                    break  # everything after it was written later
                due.append((questionnaire_id, expiry))
        else:
            due = [(q, session.expires_at[q]) for q in only if q in session.expires_at]
        for questionnaire_id, expiry in due:
            if expiry <= now:
                del session.expires_at[questionnaire_id]
                session.questionnaires.pop(questionnaire_id, None)
                session.entries.pop(questionnaire_id, None)
                session.events.pop(questionnaire_id, None)
                session.history.pop(questionnaire_id, None)
                if questionnaire_id in session.queue:
                    session.queue.remove(questionnaire_id)
        if only is not None:
            return
        stale = []
        for key, (_, expiry) in session.idempotency.items():  # in creation order, like expiries
            if expiry > now:
                break
            stale.append(key)
        for key in stale:
            del session.idempotency[key]
