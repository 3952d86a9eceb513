"""Every change of a questionnaire's state: load it, run the core's transition, and write the
result back by compare-and-set, re-running the transition against the newer state when
another process wrote first.

Agent calls (start aside, which the store creates), a client's command and the closing of a
questionnaire nobody is there to answer all write through ``Writer``. An outcome it writes
wakes this process's waiting agent calls itself, handing them the state, without waiting
for the store's notice; other processes hear of the write from that notice (fanout.py).
Each write carries its events (who made the change, and how: broker.core.events), which the
store appends in the same atomic step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from broker.core import machine
from broker.core.actors import Actor
from broker.core.errors import BrokerError
from broker.core.events import events_of
from broker.core.machine import Command, Questionnaire
from broker.runtime.metrics import Metrics
from broker.service.hubs import SessionHub
from broker.store.base import Store, Written

log = logging.getLogger("qbroker.service")

# A lost compare-and-set means another process changed the state first; the command is
# re-run against the newer state. More losses in a row than this is a conflict storm.
MAX_CAS_ATTEMPTS = 16


class Writer:
    """Load, transition, compare-and-set, for one questionnaire at a time."""

    def __init__(self, store: Store, metrics: Metrics, clock: Callable[[], float], hubs: dict[str, SessionHub]) -> None:
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.hubs = hubs  # this process's hubs (the fan-out's dict): whose waiters an outcome wakes

    async def update(
        self,
        session_id: str,
        questionnaire_id: str,
        command: Command,
        known: Questionnaire | None = None,
        *,
        by: Actor | None = None,
    ) -> Questionnaire:
        """Load, transition, compare-and-set; re-run on a lost race. Raises BrokerError.

        ``known`` (a recently seen state) saves the first load; if it is out of date the
        compare-and-set fails and the loop continues from the store's state. ``by``: who
        gives the command (None: the broker itself).
        """
        new, _ = await self.write(session_id, questionnaire_id, command, known, by=by)
        return new

    async def write(
        self,
        session_id: str,
        questionnaire_id: str,
        command: Command,
        known: Questionnaire | None = None,
        *,
        shown_by_writer: bool = False,
        by: Actor | None = None,
    ) -> tuple[Questionnaire, Written]:
        """``update``, saying also what was written (its number, and the head after it
        when it closed the questionnaire). ``shown_by_writer``: the caller shows the write
        to the local clients itself (a client's command), so the store need not tell this
        process about it."""
        for _ in range(MAX_CAS_ATTEMPTS):
            cached = known is not None
            state = known if known is not None else await self.load(session_id, questionnaire_id)
            known = None
            try:
                new = machine.apply(state, command, self.clock(), by)
            except BrokerError:
                if cached:
                    continue  # judge the command against the store's state, not a cache
                raise
            events = events_of(state, new, by)
            began = time.perf_counter()
            try:
                written = await self.store.commit(new, state.version, shown_by_writer=shown_by_writer, events=events)
            finally:
                self.metrics.commit_seconds.observe(time.perf_counter() - began)
            if written is not None:
                hub = self.hubs.get(session_id)
                if hub is not None and shown_by_writer:
                    hub.heard = max(hub.heard, written.seq)  # as its notice would (it may not come)
                if new.is_outcome:
                    self.metrics.outcomes.labels(new.status, new.cancellation_reason or "").inc()
                    # One line per outcome, whoever caused it (ids and codes, never texts);
                    # its fields are gathered only when the line is written.
                    if log.isEnabledFor(logging.INFO):
                        log.info(
                            "questionnaire outcome",
                            extra={
                                "session": session_id,
                                "questionnaire": new.id,
                                "status": new.status,
                                "reason": new.cancellation_reason or "",
                                "revision": new.revision,
                            },
                        )
                    if hub is not None:
                        hub.poke(new)
                return new, written
        raise BrokerError("conflict", f"questionnaire: {questionnaire_id} is changing too fast; try again")

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire:
        """The stored state, or ``unknown_questionnaire``."""
        state = await self.store.load(session_id, questionnaire_id)
        if state is None:
            raise BrokerError(
                "unknown_questionnaire",
                f"questionnaire: no questionnaire {questionnaire_id} in session {session_id}",
            )
        return state
