"""``Broker``: what the HTTP and websocket adapters call, and what it is made of.

Every command (an agent's call, a client's frame) runs the same way: its questionnaire's
state is loaded from the store (or taken from what the session's hub shows), the core's
transition runs on it, and the result is written back by compare-and-set, re-run against
the newer state on a lost race (``Writer``); then every interested connection is told, on
this process at once and on the others through the store's notices (``Fanout``). An agent
call then waits for an outcome (``AgentWaits``); background loops catch up on missed
notices and keep this process's clients present (``Background``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from broker.core import frames, host_form, machine, repeats, results
from broker.core.actors import Actor
from broker.core.errors import BrokerError, invalid
from broker.core.events import started
from broker.core.machine import Questionnaire
from broker.core.model import Question, ResumeInput
from broker.runtime.config import Config
from broker.runtime.hosts import AllowedHosts
from broker.runtime.metrics import Metrics
from broker.runtime.rate_limits import KeyedBuckets
from broker.service.fanout import Fanout
from broker.service.hubs import Connection, Encoded, SessionHub
from broker.service.inbox import InboxFeed
from broker.service.loops import Background, presence_ttl
from broker.service.waits import AgentWaits
from broker.service.writes import Writer
from broker.store.base import Store, StoreUnavailable
from broker.tokens.checks import Tokens

if TYPE_CHECKING:
    from broker.notify.config import Route
    from broker.notify.triggers import Notifier

log = logging.getLogger("qbroker.service")

# Writes one host form's reply may take: one per question, and the races lost on the way.
MAX_HOST_WRITES = 64

# A random UUID's version (4) and variant (RFC 4122) bits, as ``uuid.uuid4`` sets them.
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (4 << 76) | (0x8000 << 48)


def new_questionnaire_id() -> str:
    """A new questionnaire's id: ``str(uuid.uuid4())``, spelled here at a tenth of its cost
    (``uuid.UUID`` checks its arguments at length; a start has little other work of its own)."""
    digits = "%032x" % ((int.from_bytes(os.urandom(16), "big") & _UUID4_CLEAR) | _UUID4_SET)
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class Broker:
    """The broker of one process: its life cycle, the agent API's calls, client commands."""

    def __init__(
        self,
        config: Config,
        store: Store,
        clock: Callable[[], float] = time.time,
        routes: Sequence[Route] = (),
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.shutting_down = asyncio.Event()
        self.allowed_hosts = AllowedHosts(config)  # what every request's Host must be
        # The reads' (the inbox's, the record's) per-token limits: QBROKER_READS_PER_MINUTE.
        self.read_limits = KeyedBuckets(config.reads_per_minute / 60, config.reads_burst)
        self.metrics = Metrics()
        self.tokens = Tokens(config, store, clock, self.metrics)
        self.fanout = Fanout(store, self.metrics, clock)
        self.hubs: dict[str, SessionHub] = self.fanout.hubs  # the fan-out's dict itself, not a copy
        self.writer = Writer(store, self.metrics, clock, self.hubs)
        self.waits = AgentWaits(config, store, clock, self.fanout, self.writer, self.shutting_down)
        # Notifications (broker/notify/): only with routes; fed moments, it never waits on them.
        self.notifier: Notifier | None = None
        if routes:
            from broker.notify.triggers import Notifier  # (its HTTP and SMTP clients only when used)

            self.notifier = Notifier(
                config, store, self.metrics, routes, self.hubs, clock, revoked=self.tokens.revoked_ids
            )
        self.inbox = InboxFeed(store, self.fanout, self.metrics, clock, heartbeat_ttl=presence_ttl(config))
        self.background = Background(config, store, clock, self.fanout, self.inbox)

    # --- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        self.waits.loop = asyncio.get_running_loop()
        await self.store.start(self.fanout.on_notice, self._on_reconnect, self.inbox.on_presence)
        await self.tokens.start()
        self.background.start()
        if self.notifier is not None:
            await self.notifier.start()

    async def _on_reconnect(self) -> None:
        await self.fanout.on_reconnect()
        await self.inbox.on_reconnect()

    @property
    def waiting_agent_calls(self) -> int:
        """Agent calls waiting here for an outcome, read off the hubs when asked (a scrape)."""
        return sum(hub.waiters for hub in self.hubs.values())

    def render_metrics(self) -> bytes:
        self.metrics.agent_calls.value = self.waiting_agent_calls
        self.metrics.notices_connected.value = 1 if self.store.notices_connected else 0
        return self.metrics.render()

    def begin_shutdown(self) -> None:
        """Stop waiting: agent calls in flight answer 202 at once so they re-attach elsewhere."""
        self.shutting_down.set()
        for hub in self.hubs.values():
            hub.poke()

    async def stop(self) -> None:
        self.begin_shutdown()
        await self.background.stop()
        if self.notifier is not None:
            await self.notifier.stop()
        await self.tokens.stop()
        await self.inbox.close()
        now = self.clock()
        for hub in list(self.hubs.values()):
            for client_id in list(hub.clients):
                with contextlib.suppress(StoreUnavailable, Exception):
                    await self.store.leave(hub.session_id, client_id, now)
        await self.store.close()

    # --- agent side ------------------------------------------------------------------

    def first_client_wait(self, session_id: str, asked: float | None = None) -> float | None:
        """How long a new questionnaire of ``session_id`` waits for a first client, when
        not the broker's QBROKER_CLIENT_WAIT (None): what the agent ``asked`` for, else
        QBROKER_NOTIFY_CLIENT_WAIT where a route may bring the person."""
        if asked is not None:
            return asked
        if self.notifier is not None and self.notifier.covers(session_id):
            return self.config.notify_client_wait
        return None

    async def start_questionnaire(
        self,
        session_id: str,
        questions: tuple[Question, ...],
        idempotency_key: str | None,
        wait: float,
        client_wait: float | None = None,
        *,
        asked_by: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """``client_wait``: the agent's own wait for a first client (None: the broker's);
        ``asked_by``: the ``sub`` of the agent's token (kept with the questionnaire)."""
        own_wait = self.first_client_wait(session_id, client_wait)
        if (
            client_wait is None
            and own_wait is not None
            and self.notifier is not None
            and not await self.notifier.may_bring_someone(session_id, self.clock())
        ):
            own_wait = None  # (web push routes only, and no device subscribed: nobody will come)

        async def write() -> Questionnaire:
            fresh = machine.start(
                new_questionnaire_id(), session_id, questions, self.clock(), asked_by=asked_by, client_wait=own_wait
            )
            stored = await self.store.create(fresh, idempotency_key, (started(fresh, Actor(asked_by, "agent")),))
            if stored.id == fresh.id:
                self._started(stored)
            elif stored.questions != questions:
                # The key names another questionnaire: a retry repeats its call, so this is
                # a reused key, and handing back the other one would answer the wrong questions.
                raise invalid(
                    f"the Idempotency-Key was already used in this session for questionnaire {stored.id},"
                    " whose questions differ; a retry must repeat the same questions (use a new key"
                    " for a new questionnaire)"
                )
            else:
                log.info(
                    "idempotent start re-attached",
                    extra={"session": session_id, "questionnaire": stored.id},
                )
            return stored

        return await self.waits.write_and_wait(session_id, write, wait)

    async def start_or_reattach(
        self,
        session_id: str,
        questions: tuple[Question, ...],
        wait: float,
        *,
        asked_by: str | None = None,
        client_wait: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """A start whose caller sends no key (the MCP endpoint, the agent API's
        ``reattach=true``): it re-attaches to the questionnaire that an identical earlier
        start made while that one is still open, and starts a new one otherwise (the chain of
        keys of ``core/repeats.py``). ``client_wait``: as for ``start_questionnaire``."""
        own_wait = self.first_client_wait(session_id, client_wait)

        def fresh() -> Questionnaire:
            return machine.start(
                new_questionnaire_id(), session_id, questions, self.clock(), asked_by=asked_by, client_wait=own_wait
            )

        async def write() -> Questionnaire:
            key = repeats.first_key(session_id, asked_by, questions)
            for _ in range(repeats.MAX_LINKS):
                new = fresh()
                stored = await self.store.create(new, key, (started(new, Actor(asked_by, "agent")),))
                if stored.id == new.id:
                    self._started(stored)
                    return stored
                if not stored.is_terminal and stored.questions == questions:
                    log.info("repeated start re-attached", extra={"session": session_id, "questionnaire": stored.id})
                    return stored
                key = repeats.next_key(key, stored.id)
            # As many ended questionnaires with these very questions as the chain may walk:
            # this one starts with no key (a retry of it would ask again).
            new = fresh()
            stored = await self.store.create(new, None, (started(new, Actor(asked_by, "agent")),))
            self._started(stored)
            return stored

        return await self.waits.write_and_wait(session_id, write, wait)

    def _started(self, state: Questionnaire) -> None:
        self.metrics.started.inc()
        if self.notifier is not None:
            self.notifier.started(state)  # (queued: never waits)
        if log.isEnabledFor(logging.INFO):  # (the fields gathered only for a line written)
            log.info(
                "questionnaire started",
                extra={"session": state.session_id, "questionnaire": state.id, "questions": len(state.questions)},
            )

    async def resume(
        self, session_id: str, resume: ResumeInput, wait: float, *, sub: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """``sub``: the agent token's, for the record of who resumed."""

        async def write() -> Questionnaire:
            state = await self.writer.update(
                session_id, resume.questionnaire_id, machine.Resume.from_input(resume), by=Actor(sub, "agent")
            )
            if self.notifier is not None:
                self.notifier.resumed(state)  # (queued: never waits)
            log.info(
                "questionnaire resumed",
                extra={"session": session_id, "questionnaire": state.id, "revision": state.revision},
            )
            return state

        return await self.waits.write_and_wait(session_id, write, wait)

    async def resume_or_reattach(
        self, session_id: str, resume: ResumeInput, wait: float, *, sub: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """A resume whose caller cannot tell a retry from a first attempt (the MCP endpoint):
        when this very resume (same revision, same response) was already applied, the
        refusal a second application earns gives way to waiting for the outcome again."""
        try:
            return await self.resume(session_id, resume, wait, sub=sub)
        except BrokerError as exc:
            if exc.code not in ("stale_revision", "not_awaiting_clarification", "questionnaire_closed"):
                raise
            state = await self.writer.load(session_id, resume.questionnaire_id)
            applied = any(
                earlier.revision == resume.revision and earlier.response == resume.clarification_response.strip()
                for earlier in state.clarifications
            )
            if not applied:
                raise
            log.info("repeated resume re-attached", extra={"session": session_id, "questionnaire": state.id})
        return await self.wait_for_outcome(session_id, resume.questionnaire_id, wait)

    async def abort(
        self, session_id: str, questionnaire_id: str, *, sub: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """``sub``: the agent token's, for the record of who aborted."""
        try:
            state = await self.writer.update(  # (logged there)
                session_id, questionnaire_id, machine.Abort(), by=Actor(sub, "agent")
            )
        except BrokerError as exc:
            if exc.code != "questionnaire_closed":
                raise
            state = await self.writer.load(session_id, questionnaire_id)
        return 200, results.tool_result(state)

    async def wait_for_outcome(self, session_id: str, questionnaire_id: str, wait: float) -> tuple[int, dict[str, Any]]:
        """200 with the tool result as soon as there is an outcome; 202 when ``wait`` runs out."""
        return await self.waits.wait_for_outcome(session_id, questionnaire_id, wait)

    # --- an MCP host's own form ------------------------------------------------------

    async def session_open_in_a_client(self, session_id: str) -> bool:
        """Whether a qbroker client has ``session_id`` open: connected now, on any process,
        or gone less than the reconnect grace ago (it may be coming back), or an inbox
        socket covering it."""
        now = self.clock()
        presence = await self.store.presence(session_id, now)
        if presence.clients or (
            presence.last_seen is not None and now < presence.last_seen + self.config.reconnect_grace
        ):
            return True
        inbox_until = await self.store.inbox_until(session_id)
        return inbox_until is not None and now < inbox_until

    async def ask_in_host(self, session_id: str, questionnaire_id: str) -> Questionnaire:
        """Mark the questionnaire as asked in a host's form (it is not closed for want of a
        client while one asks it); its state then, which a form shows when in progress."""
        for _ in range(MAX_HOST_WRITES):
            state = await self.writer.load(session_id, questionnaire_id)
            if state.status != "in_progress" or state.in_host_since is not None:
                return state
            try:
                return await self.writer.update(session_id, questionnaire_id, machine.AskInHost(state.step), state)
            except BrokerError as exc:
                if exc.code != "stale_step":
                    raise
        raise BrokerError("conflict", f"questionnaire: {questionnaire_id} is changing too fast; try again")

    async def answer_in_host(
        self, session_id: str, questionnaire_id: str, reply: host_form.FormReply, by: Actor
    ) -> Questionnaire:
        """Apply a host form's accepted ``reply``, one command at a time, each by the same
        compare-and-set as a client's, from the state as it is then: what a client gave
        meanwhile stands, and nothing is applied twice. The host is then done with it."""
        for _ in range(MAX_HOST_WRITES):
            state = await self.writer.load(session_id, questionnaire_id)
            command = host_form.next_command(state, reply)
            if command is None:
                break
            try:
                await self.writer.update(session_id, questionnaire_id, command, state, by=by)
            except BrokerError as exc:
                if exc.code != "stale_step":
                    raise
                log.info("host answer raced", extra={"session": session_id, "questionnaire": questionnaire_id})
        return await self.leave_host(session_id, questionnaire_id)

    async def leave_host(self, session_id: str, questionnaire_id: str) -> Questionnaire:
        """The host's form is done with the questionnaire (answered, declined, dismissed):
        from now on, the usual rules for clients decide whether it waits."""
        state = await self.writer.load(session_id, questionnaire_id)
        if state.in_host_since is None or state.is_terminal:
            return state
        try:
            return await self.writer.update(session_id, questionnaire_id, machine.LeaveHost(), state)
        except BrokerError as exc:
            if exc.code != "questionnaire_closed":
                raise
            return await self.writer.load(session_id, questionnaire_id)

    # --- client side -----------------------------------------------------------------

    async def join(self, connection: Connection) -> None:
        """A client said a valid hello: count it present and show it the current state."""
        hub = self.fanout.hub(connection.session_id)
        now = self.clock()
        hub.joining += 1
        try:
            # Presence is checked before this client counts, so a questionnaire whose grace
            # ran out while nobody was there is closed rather than shown again.
            for questionnaire_id in await self.store.queue(connection.session_id):
                state = await self.store.load(connection.session_id, questionnaire_id)
                if state is not None:
                    await self.waits.enforce_availability(state)
            await self.store.heartbeat(connection.session_id, connection.client_id, presence_ttl(self.config), now)
            await self.fanout.ensure_subscribed(hub, every_write=True)
            connection.deliver(Encoded(frames.welcome(connection.client_id, connection.session_id)))
            await self.fanout.refresh(hub, newcomer=connection)
        finally:
            hub.joining -= 1
            if connection.client_id not in hub.clients:
                self.fanout.release(hub)  # the join failed (store unavailable): drop an empty hub
        self.metrics.connections.inc()
        # Joins and leaves are debug: one of each per connection would drown the info log;
        # qbroker_client_connections counts them.
        log.debug("client joined", extra={"session": connection.session_id, "client": connection.client_id})

    async def leave(self, connection: Connection) -> None:
        hub = self.hubs.get(connection.session_id)
        if hub is None or hub.clients.pop(connection.client_id, None) is None:
            return
        self.metrics.connections.dec()
        with contextlib.suppress(StoreUnavailable):
            await self.store.leave(connection.session_id, connection.client_id, self.clock())
        if not hub.clients:
            hub.poke()  # waiting agent calls recompute when nobody-is-there runs out
        self.fanout.release(hub)
        log.debug("client left", extra={"session": connection.session_id, "client": connection.client_id})

    def local_clients(self, session_id: str) -> int:
        hub = self.hubs.get(session_id)
        return len(hub.clients) + hub.joining if hub else 0  # joining: a burst of hellos counts too

    async def command(self, connection: Connection, frame: frames.CommandFrame) -> None:
        """Run a client command; on refusal send an ``error`` (and a fresh view if stale).
        (One coroutine, timed as a whole: it runs for every answer.)"""
        began = time.perf_counter()
        try:
            session_id = connection.session_id
            hub = self.fanout.hub(session_id)
            command = frame.command
            try:
                if hub.shown_id != command.questionnaire_id:
                    await self.fanout.refresh(hub)  # our view may be behind another process's
                known = hub.shown
                if known is None or known.id != command.questionnaire_id:
                    raise BrokerError(
                        "stale_step",
                        f"questionnaire {command.questionnaire_id} is not the one being shown",
                    )
                new, written = await self.writer.write(
                    session_id,
                    command.questionnaire_id,
                    command,
                    known=known,
                    shown_by_writer=True,
                    by=connection.actor,
                )
            except BrokerError as exc:
                self.metrics.errors.labels(exc.code).inc()
                connection.deliver(Encoded(frames.error(exc.code, exc.message, frame.ref)))
                if exc.code == "stale_step":
                    await self.fanout.refresh(hub)
                    connection.deliver(Encoded(frames.view(hub.shown)))
                log.debug(
                    "client command refused",
                    extra={"session": session_id, "client": connection.client_id, "code": exc.code},
                )
                return
            if not self.fanout.followed_at_once(hub, new, written):
                await self.fanout.follow_write(hub, new, written)
            if hub.watchers:
                self.inbox.observe(new, written.seq)
        finally:
            self.metrics.frame_timer[frames.frame_type(frame)].observe(time.perf_counter() - began)
