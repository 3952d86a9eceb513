"""An agent call's wait for an outcome (the agent API's long poll).

A call waits for its questionnaire's outcome until its time runs out (then 202, and the
agent attaches again). It reads the store only when it must: it follows its hub's rounds
of waking (``hubs.Wake``), and a write that decided the questionnaire hands it the state.
While it waits, it closes the questionnaire when nobody is there to answer it
(``core.availability``; a client's join closes what ran out the same way), looking at who is
there only when something can be due; through a store outage it keeps what it last saw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core import availability, machine, results
from broker.core.errors import BrokerError
from broker.core.machine import Questionnaire
from broker.runtime.config import Config
from broker.service.fanout import Fanout
from broker.service.hubs import SessionHub, Wake, _watch
from broker.service.writes import Writer
from broker.store.base import Store, StoreUnavailable


class AgentWaits:
    """The waits of the agent calls on this process, counted on their sessions' hubs."""

    def __init__(
        self,
        config: Config,
        store: Store,
        clock: Callable[[], float],
        fanout: Fanout,
        writer: Writer,
        shutting_down: asyncio.Event,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.fanout = fanout
        self.writer = writer
        self.shutting_down = shutting_down  # set: every wait answers 202 at once
        # Set when the broker starts (get_running_loop() is a system call on 3.11).
        self.loop: asyncio.AbstractEventLoop | None = None

    async def wait_for_outcome(self, session_id: str, questionnaire_id: str, wait: float) -> tuple[int, dict[str, Any]]:
        """200 with the tool result as soon as there is an outcome; 202 when ``wait`` runs out."""
        hub = self.fanout.hub(session_id)
        hub.waiters += 1
        try:
            # Inside the try: a subscription Redis never confirms raises StoreUnavailable
            # (a 503), and the waiter must not stay counted, or the hub would never go.
            await self.fanout.ensure_subscribed(hub, every_write=False)
            return await self._wait(hub, questionnaire_id, wait, None, hub.wake)
        finally:
            hub.waiters -= 1
            self.fanout.release(hub)

    async def write_and_wait(
        self, session_id: str, write: Callable[[], Awaitable[Questionnaire]], wait: float
    ) -> tuple[int, dict[str, Any]]:
        """Subscribe, ``write``, then wait from the state written: no read in between, and
        no outcome can slip by, as the round of waiting was taken before the write."""
        hub = self.fanout.hub(session_id)
        hub.waiters += 1
        try:
            await self.fanout.ensure_subscribed(hub, every_write=False)
            wake = hub.wake
            state = await write()
            return await self._wait(hub, state.id, wait, state, wake)
        finally:
            hub.waiters -= 1
            self.fanout.release(hub)

    async def _wait(
        self, hub: SessionHub, questionnaire_id: str, wait: float, state: Questionnaire | None, wake: Wake
    ) -> tuple[int, dict[str, Any]]:
        """Wait for an outcome of ``questionnaire_id`` from ``state`` (None: read it first),
        following the pokes from ``wake`` (taken before ``state`` was current)."""
        loop = self.loop or asyncio.get_running_loop()
        deadline = loop.time() + wait
        known = state  # the latest state seen: what a 202 shows if the store goes away
        while True:
            try:
                if state is None:
                    wake = hub.wake  # taken before the read, so no change slips between
                    state = known = await self.writer.load(hub.session_id, questionnaire_id)
                if state.is_outcome:
                    return 200, results.tool_result(state)
                if self.shutting_down.is_set():
                    return 202, results.pending(state)  # re-attach elsewhere (which enforces)
                state, due_at = await self.enforce_availability(state)
                known = state
            except StoreUnavailable:
                # A store outage (Redis restarting, failing over) does not fail a poll that
                # has its questionnaire: it looks again every reconciliation interval, and
                # answers 202 with what it last saw at its deadline.
                if known is None:
                    raise
                now = loop.time()
                if deadline <= now or self.shutting_down.is_set():
                    return 202, results.pending(known)
                state = None
                await asyncio.sleep(min(self.config.reconcile_interval, deadline - now))
                continue
            if state.is_outcome:
                return 200, results.tool_result(state)
            now = loop.time()
            if deadline <= now or self.shutting_down.is_set():
                return 202, results.pending(state)
            # A missed notice is caught by the reconciliation, which pokes the waiters.
            until = deadline
            if due_at is not None:
                until = min(until, now + max(0.0, due_at - self.clock()) + 0.01)
            outcome = await _watch(loop, wake, questionnaire_id, state.version, until)
            # The write that decided it carried its state: no read. Else read the store.
            state = outcome

    async def enforce_availability(self, state: Questionnaire) -> tuple[Questionnaire, float | None]:
        """Mark ``state`` unavailable if nobody is there; else say when to look again (None:
        only on a change: it is not in progress)."""
        if state.status != "in_progress":
            return state, None
        now = self.clock()
        # Nothing can be due before this (availability.deadline is never earlier): until
        # then, the presence is not worth a store round trip.
        first_wait = availability.first_client_wait(state, self.config.client_wait)
        earliest = min(state.created_at + first_wait, state.updated_at + self.config.reconnect_grace)
        if now < earliest:
            return state, earliest
        presence = await self.store.presence(state.session_id, now)
        # An inbox socket covering the session holds it too (read only when no client does).
        inbox_until = None if presence.clients else await self.store.inbox_until(state.session_id)
        due = availability.deadline(
            state,
            presence.clients,
            presence.last_seen,
            client_wait=self.config.client_wait,
            reconnect_grace=self.config.reconnect_grace,
            inbox_until=inbox_until,
        )
        if due is None:  # someone is there; they may leave without a write telling us
            return state, now + self.config.reconcile_interval
        if now < due.at:
            return state, due.at
        try:
            state = await self.writer.update(state.session_id, state.id, machine.MarkUnavailable(due.reason))
        except BrokerError:
            state = await self.writer.load(state.session_id, state.id)  # something else closed it
        return state, None
