"""Fan-out: this process's session hubs, kept in step with the store.

Cross-process convergence: each process keeps a ``SessionHub`` per session it serves
(connected clients, waiting agent calls). The store numbers a session's writes and
publishes a notice after each one, with the written state. A hub knows which write its
clients' view is as of, so a notice of the next write can be applied as it stands, without
reading the store; a notice it cannot apply (a gap in the numbers, a state too large to
carry, a publisher that did not say) makes it re-read the session. A waiting agent call
wakes only for what can end its wait: an outcome (carried in the notice, so it need not
read either), shutdown, a client leaving, the time to check who is there. A missed notice
costs nothing but time: on a periodic reconciliation tick, hubs compare their write numbers
with the store's (one round trip for all of them): clients' views behind it re-read, and
waiting agent calls of a session with writes not heard of look again; after the
notification channel reconnects, everything is re-read.

A hub is made when a client or an agent call first needs it, subscribed to the session's
notices before it is used, and dropped (unsubscribed) a while after its last user left.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from broker.core import frames, machine
from broker.core.machine import Questionnaire
from broker.runtime.metrics import Metrics
from broker.service.hubs import EVERY_WRITE, OUTCOMES_ONLY, Connection, Encoded, SessionHub
from broker.store.base import Head, Notice, Store, StoreUnavailable, Written

log = logging.getLogger("qbroker.service")

# How long a session hub with no clients and no waiting agent call keeps its subscription.
HUB_LINGER = 30.0


class Fanout:
    """The hubs of the sessions this process serves, by session id: who is here, what
    they were shown, which notices they hear; and keeping what they show in step with the
    store (a client's write, another process's notice, the reconciliation)."""

    def __init__(self, store: Store, metrics: Metrics, clock: Callable[[], float]) -> None:
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.hubs: dict[str, SessionHub] = {}
        # The inbox's handler (service/inbox.py), set while this process has inbox sockets:
        # it hears every notice first (a create in a session no hub serves included).
        self.inbox_notice: Callable[[Notice], Coroutine[Any, Any, None]] | None = None

    # --- the hubs --------------------------------------------------------------------

    def hub(self, session_id: str) -> SessionHub:
        """The session's hub, made if this process has none yet, and in use again."""
        hub = self.hubs.get(session_id)
        if hub is None:
            hub = self.hubs[session_id] = SessionHub(session_id)
        hub.idle_since = None
        return hub

    async def ensure_subscribed(self, hub: SessionHub, every_write: bool) -> None:
        """Return once the store confirmed a subscription to the session's notices of
        ``every_write`` or only of outcomes (callers meanwhile share the store's wait for
        it), so that no notice after it can be missed."""
        kind = EVERY_WRITE if every_write else OUTCOMES_ONLY
        if EVERY_WRITE in hub.confirmed or kind in hub.confirmed:
            return
        hub.subscribed.add(kind)
        await self.store.subscribe(hub.session_id, outcomes_only=kind == OUTCOMES_ONLY)
        hub.confirmed.add(kind)

    def release(self, hub: SessionHub) -> None:
        """Note that ``hub`` lost its last client or waiter; the reconciliation drops it later.

        Lingering keeps the subscription across the gaps between one agent call and the
        next (a long-poll ends, the re-attach follows), instead of an unsubscribe and a
        subscribe round trip each time.
        """
        if not hub.interested and hub.idle_since is None:
            hub.idle_since = time.monotonic()

    async def _drop_idle_hubs(self) -> None:
        cutoff = time.monotonic() - HUB_LINGER
        for hub in list(self.hubs.values()):
            if hub.interested:
                hub.idle_since = None
            elif hub.idle_since is not None and hub.idle_since < cutoff:
                await self._drop(hub)

    async def _drop(self, hub: SessionHub) -> None:
        if hub.interested or self.hubs.get(hub.session_id) is not hub:
            return
        del self.hubs[hub.session_id]
        for kind in hub.subscribed:
            with contextlib.suppress(StoreUnavailable):
                await self.store.unsubscribe(hub.session_id, outcomes_only=kind == OUTCOMES_ONLY)

    # --- keeping them in step with the store -----------------------------------------

    async def refresh(self, hub: SessionHub, newcomer: Connection | None = None) -> None:
        """Bring local clients up to date by reading the store, pushing only what they have
        not seen. ``newcomer`` (a client that just said hello) gets the current view and
        joins the hub under the same lock, so it sees every later change exactly once."""
        if not hub.clients and not hub.joining and newcomer is None:
            return
        async with hub.lock:
            # Checked again under the lock: a client joining meanwhile has been added.
            if not hub.clients and newcomer is None:
                return
            await self._show(hub, await self.store.head(hub.session_id))
            if newcomer is not None:
                newcomer.deliver(Encoded(frames.view(hub.shown)))
                hub.clients[newcomer.client_id] = newcomer

    async def _show(self, hub: SessionHub, head: Head, ended: Questionnaire | None = None) -> None:
        """Make ``head`` the local clients' view (under ``hub.lock``). When the questionnaire
        shown so far goes, its clients get ``closed`` first, with its final state: ``ended``
        if that is it, else read from the store."""
        previous = hub.shown
        if previous is not None and _needs_read(hub, head, ended):
            ended = await self.store.load(hub.session_id, previous.id)
        _show_known(hub, head, ended)

    async def follow_write(self, hub: SessionHub, new: Questionnaire, written: Written) -> None:
        """Show local clients a write this process made on a client's command.

        The write's number and (when it closed a questionnaire) the head after it describe
        the session as of that write exactly, so it shows without a read, whatever notices
        of earlier writes are still on their way (they are then skipped as seen)."""
        async with hub.lock:
            if not _followed_known(hub, new, written):
                await self._show(hub, await self.store.head(hub.session_id), ended=new)

    def followed_at_once(self, hub: SessionHub, new: Questionnaire, written: Written) -> bool:
        """``follow_write`` done now, without a coroutine, when it needs no read and the hub's
        lock is free (nothing runs between taking and releasing it then); False: await
        ``follow_write``. The path of nearly every answer."""
        return hub.lock.free() and _followed_known(hub, new, written)

    def on_notice(self, notice: Notice) -> Coroutine[Any, Any, None] | None:
        """The store's handler for a notice of a write to a session subscribed to: None when
        the notice is dealt with at once (the usual one: no coroutine made), else the work
        left, to await."""
        if self.inbox_notice is not None:
            return self._heard_after_the_inbox(notice)
        return self._heard(notice)

    async def _heard_after_the_inbox(self, notice: Notice) -> None:
        assert self.inbox_notice is not None
        await self.inbox_notice(notice)
        work = self._heard(notice)
        if work is not None:
            await work

    def _heard(self, notice: Notice) -> Coroutine[Any, Any, None] | None:
        hub = self.hubs.get(notice.session_id)
        if hub is None:
            return None
        hub.heard = max(hub.heard, notice.seq)
        if hub.waiters and (notice.status is None or notice.status in machine.OUTCOMES):
            hub.poke(_carried(notice))  # without the state, they read the store
        if not hub.clients and not hub.joining:
            return None  # only agent calls wait here
        if notice.seq and hub.seq is not None and notice.seq <= hub.seq:
            return None  # already shown (usually our own write)
        shown = hub.shown
        if (
            not notice.seq
            and shown is not None
            and shown.id == notice.questionnaire_id
            and shown.version >= notice.version
        ):
            return None  # an unnumbered notice (an older broker) of what is already shown
        seq = hub.seq
        if notice.seq and seq is not None and notice.seq == seq + 1 and hub.clients and hub.lock.free():
            # The next write, shown without a read while the lock is free (nothing runs
            # between taking and releasing it then): no coroutine for the usual notice.
            follows = _following(hub.shown, notice)
            if follows is not None and not _needs_read(hub, *follows):
                _show_known(hub, *follows)
                return None
        return self._show_heard(hub, notice)

    async def _show_heard(self, hub: SessionHub, notice: Notice) -> None:
        async with hub.lock:
            if not hub.clients:
                return  # still joining: the newcomer's read comes after this write
            if notice.seq and hub.seq is not None:
                if notice.seq <= hub.seq:
                    return
                if notice.seq == hub.seq + 1:
                    follows = _following(hub.shown, notice)
                    if follows is not None:
                        await self._show(hub, follows[0], ended=follows[1])
                        return
            await self._show(hub, await self.store.head(hub.session_id), ended=_carried(notice))

    async def on_reconnect(self) -> None:
        """The store's handler once its notification channel is back: notices may be lost."""
        log.warning("notification channel reconnected; re-reading every session")
        self.metrics.store_reconnects.inc()
        await self._drop_idle_hubs()
        for hub in list(self.hubs.values()):
            hub.poke()
            await self._refresh_alone(hub)

    async def reconcile(self) -> None:
        """Catch up on missed notices: one read of every served session's write count, then
        local clients whose view is behind it re-read, and waiting agent calls of sessions
        with writes not heard of look again."""
        await self._drop_idle_hubs()
        hubs = [hub for hub in self.hubs.values() if hub.clients or hub.waiters]
        if not hubs:
            return
        counts = await self.store.write_counts([hub.session_id for hub in hubs])
        now = self.clock()
        for hub, count in zip(hubs, counts, strict=True):
            if hub.waiters and count != hub.counted and count > hub.heard:
                hub.poke()  # (a write whose notice is still on its way costs a read too)
            hub.counted = count
            shown = hub.shown
            # An open questionnaire left alone for the whole retention expires without a write.
            expiring = shown is not None and now - shown.updated_at >= self.store.retention
            if hub.clients and (hub.seq != count or expiring):
                await self._refresh_alone(hub)

    async def _refresh_alone(self, hub: SessionHub) -> None:
        """``refresh`` one session of many: whatever goes wrong with it, the others go on."""
        try:
            await self.refresh(hub)
        except StoreUnavailable:
            pass  # the next tick, or the reconnect, reads it again
        except Exception:  # a bug, logged: the other sessions are still re-read
            log.exception("re-reading a session failed", extra={"session": hub.session_id})


def _carried(notice: Notice) -> Questionnaire | None:
    """The state a notice carries, or None (not carried, or not readable: read instead)."""
    if notice.record is None:
        return None
    try:
        return notice.record.state()
    except Exception:  # a malformed record costs a read, nothing more
        log.warning("unreadable state in a notice", extra={"session": notice.session_id})
        return None


def _following(previous: Questionnaire | None, notice: Notice) -> tuple[Head, Questionnaire | None] | None:
    """The view after the write of ``notice``, from the view ``previous`` as of the write
    just before it, and the state that ended when the view moves on; None when it cannot
    be told without reading the store.

    The head of a session (the oldest open questionnaire) changes only when it closes (the
    notice then says what comes next) or when one is created into an empty queue.
    """
    if notice.status is None:
        return None
    if previous is not None and notice.questionnaire_id == previous.id:
        if notice.status in machine.TERMINAL:
            return None if notice.head is None else (notice.head, _carried(notice))
        state = _carried(notice)
        if state is None:
            return None
        return Head(state if state.version > previous.version else previous, notice.seq), None
    if previous is None:
        if notice.version != 0:
            return None  # a write to an open questionnaire this view does not know of
        state = _carried(notice)
        return None if state is None else (Head(state, notice.seq), None)
    return Head(previous, notice.seq), None  # behind the head: the head stays


def _followed_known(hub: SessionHub, new: Questionnaire, written: Written) -> bool:
    """``follow_write``'s work when what to show is known without a read (True: done); the
    caller holds the hub's lock, or runs with no wait while it is free."""
    if not hub.clients:
        return True
    if written.seq and hub.seq is not None and written.seq <= hub.seq:
        return True  # a read or a notice already showed this write
    previous = hub.shown
    if written.seq and previous is not None and previous.id == new.id:
        # The shown questionnaire was the head and stays it while open.
        if not new.is_terminal:
            _show_known(hub, Head(new, written.seq), None)
            return True
        if written.head is not None:
            _show_known(hub, written.head, new)
            return True
    return False


def _needs_read(hub: SessionHub, head: Head, ended: Questionnaire | None) -> bool:
    """Whether showing ``head`` needs the final state of the questionnaire shown so far
    read from the store: it goes, and ``ended`` is not it."""
    previous, shown = hub.shown, head.state
    return (
        bool(hub.clients)
        and previous is not None
        and (shown is None or shown.id != previous.id)
        and (ended is None or ended.id != previous.id)
    )


def _show_known(hub: SessionHub, head: Head, ended: Questionnaire | None) -> None:
    """``Fanout._show`` once the state that ended is known (``ended``, when it is the one
    shown so far): no read, so no coroutine on the path of every answer."""
    previous, shown = hub.shown, head.state
    if hub.clients and not _same_view(previous, shown):
        closing: list[dict[str, Any]] = []
        moved_on = previous is not None and (shown is None or shown.id != previous.id)
        if moved_on and ended is not None and previous is not None and ended.id == previous.id and ended.is_terminal:
            closing.append(frames.closed(ended))  # sent with the next view, in one write
        hub.broadcast(*closing, frames.view(shown))
    hub.shown, hub.seq = shown, head.seq


def _same_view(before: Questionnaire | None, after: Questionnaire | None) -> bool:
    if before is None or after is None:
        return before is after
    return before.id == after.id and before.version == after.version
