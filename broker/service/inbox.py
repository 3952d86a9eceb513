"""The inbox: what is open in the sessions a token covers, kept live for this process's
inbox sockets (``InboxFeed``; its pages are inbox_pages.py's).

Each inbox socket (a ``Watcher``, broker/ws/inbox.py) covers the sessions of its token's
scope: a prefix (``alice:`` of ``alice:*``, "" of ``*``) or one session. The feed follows
the covered sessions that have something open (a ``Followed`` each: their entries and
connected clients, as of one of the session's write numbers) and tells every socket covering
a session what changed in it, as soon as this process hears of it:

- a followed session's writes come as its notices: the feed keeps the session's hub
  (fanout.py) with ``watchers`` set, so the hub stays subscribed to every write, and a
  notice's state gives the entry without a read (a draft leaves it: no frame);
- a questionnaire created in a session not followed yet comes on the prefix's watch
  (``Store.watch_inbox``): the feed starts following that session (subscribe, then read);
- a change of who is connected comes on the watch too (``on_presence``);
- this process's own client commands are shown by the broker (``observe``): the memory
  store sends no notice of them, and on Redis it is quicker than the notice's round trip.

A notice missed (pub/sub delivers at most once) is caught by the reconciliation, which
compares the followed sessions' write numbers with the store's; when the store's notice
channel reconnects, every followed session is read again and every watched prefix listed
again. A socket gets its whole list (``inbox``) once, when it is ready; every frame after
it (``inbox_item``, ``inbox_removed``) is a change to that list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from broker.core import inbox
from broker.core.inbox import Entry, Row
from broker.core.machine import Questionnaire
from broker.core.scopes import covers, scope_prefix
from broker.runtime.metrics import Metrics
from broker.service.fanout import Fanout
from broker.service.hubs import Encoded, SessionHub
from broker.store.base import Notice, Record, SessionInbox, Store, StoreUnavailable

log = logging.getLogger("qbroker.inbox")

# How long a followed session with nothing open (or no socket covering it) stays followed:
# a page that reconnects, or an agent that asks again, finds it still subscribed.
FOLLOW_LINGER: Final = 30.0
# Questionnaires of a session that ended, remembered so that a late notice of one (the
# create's, through the watch) does not bring it back.
_ENDED_KEPT: Final = 64


class Watcher(Protocol):
    """An inbox socket, as the feed sees it (implemented by broker.ws.inbox)."""

    client_id: str
    scope: str  # its token's sid: a session id, a prefix pattern or *
    ready: bool  # it has had its ``inbox`` frame: changes go to it from now on

    def deliver(self, *frames: Encoded) -> None:
        """Queue already-encoded frames for sending; never blocks."""


@dataclass(eq=False)
class Followed:
    """A session the inbox sockets of this process cover, as the feed last heard of it."""

    session_id: str
    hub: SessionHub
    entries: dict[str, Entry] = field(default_factory=dict)
    clients: int = 0
    seq: int = 0  # the session's write number ``entries`` are as of (0: not read yet)
    ended: dict[str, None] = field(default_factory=dict)  # ids of questionnaires that ended (oldest first)
    watchers: set[Watcher] = field(default_factory=set)
    read: asyncio.Future[None] | None = None  # the first read, while it is under way
    # What came while the first read was under way (it may or may not include it): applied
    # after it, each as of its write number.
    heard: list[Notice] = field(default_factory=list)
    heard_clients: int | None = None
    idle_since: float | None = None  # monotonic time it lost its last entry or watcher

    def rows(self) -> Iterable[Row]:
        return ((entry, self.clients) for entry in self.entries.values())

    def tell(self, frame: dict[str, object]) -> None:
        """Send ``frame`` to the ready sockets covering the session."""
        encoded = Encoded(frame)
        for watcher in self.watchers:
            if watcher.ready:
                watcher.deliver(encoded)

    def forget(self, questionnaire_id: str) -> None:
        self.ended[questionnaire_id] = None
        if len(self.ended) > _ENDED_KEPT:
            del self.ended[next(iter(self.ended))]


class InboxFeed:
    """This process's inbox sockets and the sessions they cover, kept in step with the store."""

    def __init__(
        self,
        store: Store,
        fanout: Fanout,
        metrics: Metrics,
        clock: Callable[[], float],
        heartbeat_ttl: float | None = None,
    ) -> None:
        self.store = store
        # How long a heartbeat of this process's inbox scopes lasts (None: none are sent);
        # the sockets hold the questionnaires of the sessions they cover (core/availability.py).
        self.heartbeat_ttl = heartbeat_ttl
        self.fanout = fanout
        self.metrics = metrics
        self.clock = clock
        self.watchers: set[Watcher] = set()
        self._by_scope: Counter[str] = Counter()  # watchers per scope (the per-scope limit)
        self._store_watched: set[Watcher] = set()  # whose prefix the store watches for them
        self.sessions: dict[str, Followed] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def sockets(self, scope: str) -> int:
        """Inbox sockets of this process with ``scope``."""
        return self._by_scope[scope]

    def scopes(self) -> list[str]:
        """The scopes of this process's inbox sockets, once each."""
        return list(self._by_scope)

    async def heartbeat(self, scopes: list[str]) -> None:
        """Tell the store these scopes have an inbox socket here (raises ``StoreUnavailable``)."""
        if self.heartbeat_ttl is not None and scopes:
            await self.store.inbox_heartbeat(scopes, self.heartbeat_ttl, self.clock())

    # --- sockets ---------------------------------------------------------------------

    async def watch(self, watcher: Watcher) -> None:
        """Follow what ``watcher`` covers, then send it its list (``inbox``): from then on,
        every change. Raises ``StoreUnavailable`` (the socket closes 1013)."""
        prefix = scope_prefix(watcher.scope)
        self.watchers.add(watcher)  # from now on, a create under its scope is followed
        self._by_scope[watcher.scope] += 1
        self.metrics.inbox_connections.inc()
        self.fanout.inbox_notice = self.on_notice
        # The store watches the prefix, or the one session (its creates and presence changes).
        await self.store.watch_inbox(_watched(watcher.scope))
        self._store_watched.add(watcher)
        await self.heartbeat([watcher.scope])  # at once: a questionnaire started now is held
        session_ids = [watcher.scope] if prefix is None else await self.store.open_sessions(prefix)
        await self._follow([sid for sid in session_ids if covers(watcher.scope, sid)])
        # No await from here on: the list and the changes after it cannot cross.
        rows: list[Row] = []
        for followed in self.sessions.values():
            if covers(watcher.scope, followed.session_id):
                followed.watchers.add(watcher)
                if followed.entries:
                    followed.idle_since = None
                elif followed.idle_since is None:  # (nothing open: dropped after a while)
                    followed.idle_since = time.monotonic()
                rows.extend(followed.rows())
        watcher.ready = True
        watcher.deliver(Encoded(inbox.inbox_frame(rows)))

    async def unwatch(self, watcher: Watcher) -> None:
        if watcher not in self.watchers:
            return
        self.watchers.discard(watcher)
        self._by_scope[watcher.scope] -= 1
        if self._by_scope[watcher.scope] <= 0:
            del self._by_scope[watcher.scope]
        self.metrics.inbox_connections.dec()
        for followed in self.sessions.values():
            followed.watchers.discard(watcher)
            if not followed.watchers and followed.idle_since is None:
                followed.idle_since = time.monotonic()
        if watcher in self._store_watched:
            self._store_watched.discard(watcher)
            with contextlib.suppress(StoreUnavailable):
                await self.store.unwatch_inbox(_watched(watcher.scope))

    # --- following sessions ----------------------------------------------------------

    async def _follow(self, session_ids: list[str]) -> None:
        """Start following these sessions (subscribed, then read); returns when each is read
        (also those another caller started following)."""
        fresh: list[Followed] = []
        pending: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        for sid in session_ids:
            followed = self.sessions.get(sid)
            if followed is None:
                hub = self.fanout.hub(sid)
                hub.watchers += 1
                followed = self.sessions[sid] = Followed(sid, hub, read=loop.create_future())
                followed.watchers = {w for w in self.watchers if covers(w.scope, sid)}
                self.metrics.inbox_sessions.inc()
                fresh.append(followed)
            elif followed.read is not None:
                pending.append(followed.read)
        if fresh:
            try:
                # Subscribed before the read: no write after the read can go unheard.
                await asyncio.gather(*(self.fanout.ensure_subscribed(f.hub, every_write=True) for f in fresh))
                found = await self.store.session_inboxes([f.session_id for f in fresh], self.clock())
            except BaseException:
                for followed in fresh:
                    self._unfollow(followed)
                    assert followed.read is not None
                    if not followed.read.done():
                        followed.read.set_exception(StoreUnavailable("the session could not be followed"))
                        followed.read.exception()  # (retrieved: nobody else may wait for it)
                raise
            for followed, one in zip(fresh, found, strict=True):
                self._replace(followed, one)
                assert followed.read is not None
                followed.read.set_result(None)
                followed.read = None
                heard, followed.heard = followed.heard, []
                for notice in heard:
                    self._heard(followed, notice)
                if followed.heard_clients is not None:
                    self._clients(followed, followed.heard_clients)
        for waiting in pending:
            await asyncio.shield(waiting)

    def _unfollow(self, followed: Followed) -> None:
        if self.sessions.get(followed.session_id) is not followed:
            return
        del self.sessions[followed.session_id]
        self.metrics.inbox_sessions.dec()
        followed.hub.watchers -= 1
        self.fanout.release(followed.hub)

    async def _reread(self, followed: Followed) -> None:
        """Read a followed session again and send what changed (a notice was missed)."""
        self.metrics.inbox_rereads.inc()
        (found,) = await self.store.session_inboxes([followed.session_id], self.clock())
        if self.sessions.get(followed.session_id) is followed and found.seq >= followed.seq:
            await self._diff(followed, found)

    def _replace(self, followed: Followed, found: SessionInbox) -> None:
        """Take the first read of a session: every entry is news to the sockets already ready."""
        followed.seq, followed.clients = found.seq, found.clients
        for entry in found.entries:
            followed.entries[entry.questionnaire_id] = entry
            followed.tell(inbox.item_frame(entry, followed.clients))
        if not followed.entries:
            followed.idle_since = time.monotonic()

    async def _diff(self, followed: Followed, found: SessionInbox) -> None:
        """Make ``found`` (a later read) the session's state, telling the sockets what changed."""
        followed.seq = found.seq
        clients_changed = found.clients != followed.clients
        followed.clients = found.clients
        fresh = {entry.questionnaire_id: entry for entry in found.entries}
        for questionnaire_id in [q for q in followed.entries if q not in fresh]:
            del followed.entries[questionnaire_id]
            followed.forget(questionnaire_id)
            state = await self.store.load(followed.session_id, questionnaire_id)
            followed.tell(_removed(followed.session_id, questionnaire_id, state))
        for questionnaire_id, entry in fresh.items():
            if clients_changed or followed.entries.get(questionnaire_id) != entry:
                followed.entries[questionnaire_id] = entry
                followed.tell(inbox.item_frame(entry, followed.clients))
        followed.idle_since = None if followed.entries else (followed.idle_since or time.monotonic())

    # --- what the store and the broker tell ------------------------------------------

    async def on_notice(self, notice: Notice) -> None:
        """A notice of a followed session, or of a create under a watched prefix."""
        followed = self.sessions.get(notice.session_id)
        if followed is None:
            if notice.version == 0 and any(covers(w.scope, notice.session_id) for w in self.watchers):
                self._in_background(self._follow([notice.session_id]))
            return
        if followed.read is not None:
            followed.heard.append(notice)  # its first read is under way: after it
            return
        self._heard(followed, notice)

    def _heard(self, followed: Followed, notice: Notice) -> None:
        if notice.seq and notice.seq <= followed.seq:
            return  # already known (a read, our own write, or the create's second notice)
        if notice.seq and followed.seq and notice.seq > followed.seq + 1:
            self._in_background(self._reread(followed))  # a gap: writes in between were missed
        state = _carried(notice)
        if state is None:  # not carried (too large), or a notice of an older broker
            self._in_background(self._reread(followed))
            return
        self._apply(followed, state, notice.seq)

    def observe(self, state: Questionnaire, seq: int) -> None:
        """This process wrote ``state`` as the session's write ``seq`` (a client's command)."""
        followed = self.sessions.get(state.session_id)
        if followed is None:
            return
        if followed.read is not None:
            notice = Notice(state.session_id, state.id, state.version, state.status, seq, Record.of(state))
            followed.heard.append(notice)
        elif seq > followed.seq:
            self._apply(followed, state, seq)

    async def on_presence(self, session_id: str, clients: int) -> None:
        followed = self.sessions.get(session_id)
        if followed is None:
            return
        if followed.read is not None:
            followed.heard_clients = clients  # (the latest: applied after the first read)
            return
        self._clients(followed, clients)

    def _clients(self, followed: Followed, clients: int) -> None:
        if clients == followed.clients:
            return
        followed.clients = clients
        for entry in followed.entries.values():
            followed.tell(inbox.item_frame(entry, clients))

    def _apply(self, followed: Followed, state: Questionnaire, seq: int) -> None:
        followed.seq = max(followed.seq, seq)
        previous = followed.entries.get(state.id)
        if previous is None and state.id in followed.ended:
            return  # a late notice of one that has ended
        entry = inbox.next_entry(previous, state)
        if entry is None:
            if previous is not None:
                del followed.entries[state.id]
                followed.forget(state.id)
                followed.tell(inbox.removed_frame(state))
                if not followed.entries:
                    followed.idle_since = time.monotonic()
            return
        if entry is not previous:
            followed.entries[state.id] = entry
            followed.idle_since = None
            followed.tell(inbox.item_frame(entry, followed.clients))

    async def on_reconnect(self) -> None:
        """Notices may have been lost: list every watched prefix again, read every session."""
        if not self.sessions and not self.watchers:
            return
        for followed in list(self.sessions.values()):
            if followed.read is None:
                await self._alone(self._reread(followed))
        for scope in {w.scope for w in self.watchers}:
            prefix = scope_prefix(scope)
            with contextlib.suppress(StoreUnavailable):
                listed = [scope] if prefix is None else await self.store.open_sessions(prefix)
                await self._alone(self._follow([sid for sid in listed if sid not in self.sessions]))

    async def reconcile(self) -> None:
        """Catch up on missed notices (one read of every followed session's write count),
        and stop following what nobody needs any more."""
        cutoff = time.monotonic() - FOLLOW_LINGER
        for followed in list(self.sessions.values()):
            idle = followed.idle_since is not None and followed.idle_since < cutoff
            if followed.read is None and idle and not _needed(followed):
                self._unfollow(followed)
        if not self.sessions and not self.watchers:
            self.fanout.inbox_notice = None  # (no notice is worth a call to the feed now)
        followed_now = [f for f in self.sessions.values() if f.read is None]
        if not followed_now:
            return
        counts = await self.store.write_counts([f.session_id for f in followed_now])
        for followed, count in zip(followed_now, counts, strict=True):
            if count != followed.seq:
                await self._alone(self._reread(followed))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    # --- helpers ---------------------------------------------------------------------

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(self._alone(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alone(self, work: Awaitable[None]) -> None:
        """Await ``work`` (one session's upkeep): whatever goes wrong with it, the rest goes on."""
        try:
            await work
        except StoreUnavailable:
            pass  # the reconciliation, or the reconnect, tries again
        except Exception:
            log.exception("inbox upkeep failed")


def _watched(scope: str) -> str:
    """What the store watches for a scope: its prefix, or the session itself (a prefix of
    its own id: the store may tell more, the feed keeps what the scope covers)."""
    prefix = scope_prefix(scope)
    return scope if prefix is None else prefix


def _needed(followed: Followed) -> bool:
    """Whether a session must stay followed: a socket covers it and it has something open
    (a create in one with nothing open comes on the store's watch)."""
    return bool(followed.watchers) and bool(followed.entries)


def _carried(notice: Notice) -> Questionnaire | None:
    if notice.record is None or notice.status is None:
        return None
    try:
        return notice.record.state()
    except Exception:  # a malformed record costs a read, nothing more
        return None


def _removed(session_id: str, questionnaire_id: str, state: Questionnaire | None) -> dict[str, object]:
    """The frame for a questionnaire that left the inbox: how it ended, or ``expired`` when
    it is gone (left open for the whole retention period)."""
    if state is not None and state.is_terminal:
        return inbox.removed_frame(state)
    return {"type": "inbox_removed", "sessionId": session_id, "questionnaireId": questionnaire_id, "status": "expired"}
