"""Orchestration: the one place where the pure core meets the store and the connections.

The HTTP and websocket adapters call ``Broker``; ``Broker`` loads a state from the store,
runs the core's transition, writes the result back by compare-and-set (retrying on a lost
race, which re-runs the transition against the newer state), and lets every interested
connection know.

Cross-process convergence: each process keeps a ``SessionHub`` per session it serves
(connected clients, waiting agent calls). The store publishes a notice after every write;
a hub that hears one re-reads the session and pushes what changed. Because a notice only
says "look again", a missed one costs nothing but time: hubs also re-read on a periodic
reconciliation tick and after the notification channel reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker import availability, frames, machine, results
from broker.config import Config
from broker.errors import BrokerError
from broker.frames import Codec
from broker.machine import Command, Questionnaire
from broker.metrics import Metrics
from broker.model import Question, ResumeInput
from broker.store.base import Notice, Store, StoreUnavailable

log = logging.getLogger("qbroker.service")

# A lost compare-and-set means another process changed the state first; the command is
# re-run against the newer state. More losses in a row than this is a conflict storm.
MAX_CAS_ATTEMPTS = 16
# How long a session hub with no clients and no waiting agent call keeps its subscription.
HUB_LINGER = 30.0


class Connection(Protocol):
    """What the service needs from a connected client (implemented by broker.ws)."""

    client_id: str
    session_id: str
    codec: Codec

    def deliver(self, frame: Encoded) -> None:
        """Queue an already-encoded frame for sending; never blocks."""


class Encoded:
    """One server frame, serialized at most once per codec however many clients get it."""

    __slots__ = ("frame", "_json", "_msgpack")

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self._json: str | bytes | None = None
        self._msgpack: str | bytes | None = None

    def data(self, codec: Codec) -> str | bytes:
        if codec == "json":
            if self._json is None:
                self._json = frames.encode(self.frame, "json")
            return self._json
        if self._msgpack is None:
            self._msgpack = frames.encode(self.frame, "msgpack")
        return self._msgpack


@dataclass
class SessionHub:
    """This process's view of one session: its local clients and waiting agent calls."""

    session_id: str
    clients: dict[str, Connection] = field(default_factory=dict)
    waiters: int = 0
    # Clients between hello and joining ``clients``: they keep the hub (and its
    # subscription) alive, so the last client leaving meanwhile cannot orphan it.
    joining: int = 0
    # The state of the questionnaire the local clients were last shown (None: idle). It
    # is a cache: commands start from it and compare-and-set on its version, so the
    # common case costs one store round trip; a lost race re-reads the store.
    shown: Questionnaire | None = None
    subscribed: bool = False
    idle_since: float | None = None  # monotonic time it lost its last client/waiter
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def shown_id(self) -> str | None:
        return self.shown.id if self.shown is not None else None

    @property
    def interested(self) -> bool:
        return bool(self.clients) or self.waiters > 0 or self.joining > 0

    def poke(self) -> None:
        """Wake every waiting agent call: something in this session changed."""
        if self.waiters == 0:
            return  # nobody holds the event: no need for a fresh one
        event, self.changed = self.changed, asyncio.Event()
        event.set()

    def broadcast(self, frame: dict[str, Any]) -> None:
        encoded = Encoded(frame)
        for connection in list(self.clients.values()):
            connection.deliver(encoded)


class Broker:
    def __init__(self, config: Config, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.hubs: dict[str, SessionHub] = {}
        self.shutting_down = asyncio.Event()
        self.metrics = Metrics()
        self._tasks: list[asyncio.Task[None]] = []

    # --- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        await self.store.start(self._on_notice, self._on_reconnect)
        self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="qbroker-reconcile"))
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name="qbroker-heartbeat"))

    def begin_shutdown(self) -> None:
        """Stop waiting: agent calls in flight answer 202 at once so they re-attach elsewhere."""
        self.shutting_down.set()
        for hub in self.hubs.values():
            hub.poke()

    async def stop(self) -> None:
        self.begin_shutdown()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        now = self.clock()
        for hub in list(self.hubs.values()):
            for client_id in list(hub.clients):
                with contextlib.suppress(StoreUnavailable, Exception):
                    await self.store.leave(hub.session_id, client_id, now)
        await self.store.close()

    # --- agent side ------------------------------------------------------------------

    async def start_questionnaire(
        self, session_id: str, questions: tuple[Question, ...], idempotency_key: str | None, wait: float
    ) -> tuple[int, dict[str, Any]]:
        now = self.clock()
        fresh = machine.start(str(uuid.uuid4()), session_id, questions, now)
        stored = await self.store.create(fresh, idempotency_key)
        if stored.id == fresh.id:
            self.metrics.started.inc()
            log.info(
                "questionnaire started",
                extra={"session": session_id, "questionnaire": stored.id, "questions": len(questions)},
            )
        else:
            log.info(
                "idempotent start re-attached",
                extra={"session": session_id, "questionnaire": stored.id},
            )
        return await self.wait_for_outcome(session_id, stored.id, wait)

    async def resume(self, session_id: str, resume: ResumeInput, wait: float) -> tuple[int, dict[str, Any]]:
        state = await self.update(session_id, resume.questionnaire_id, machine.Resume.from_input(resume))
        log.info(
            "questionnaire resumed",
            extra={"session": session_id, "questionnaire": state.id, "revision": state.revision},
        )
        return await self.wait_for_outcome(session_id, state.id, wait)

    async def abort(self, session_id: str, questionnaire_id: str) -> tuple[int, dict[str, Any]]:
        try:
            state = await self.update(session_id, questionnaire_id, machine.Abort())
            log.info("questionnaire aborted", extra={"session": session_id, "questionnaire": state.id})
        except BrokerError as exc:
            if exc.code != "questionnaire_closed":
                raise
            state = await self._load(session_id, questionnaire_id)
        return 200, results.tool_result(state)

    async def wait_for_outcome(self, session_id: str, questionnaire_id: str, wait: float) -> tuple[int, dict[str, Any]]:
        """200 with the tool result as soon as there is an outcome; 202 when ``wait`` runs out."""
        hub = self._hub(session_id)
        hub.waiters += 1
        try:
            # Inside the try: a subscription Redis never confirms raises StoreUnavailable
            # (a 503), and the waiter must not stay counted, or the hub would never go.
            await self._ensure_subscribed(hub)
            deadline = time.monotonic() + wait
            while True:
                changed = hub.changed  # taken before the read, so no change slips between
                state = await self._load(session_id, questionnaire_id)
                if state.is_outcome:
                    return 200, results.tool_result(state)
                state, due_at = await self._enforce_availability(state)
                if state.is_outcome:
                    return 200, results.tool_result(state)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.shutting_down.is_set():
                    return 202, results.pending(state)
                timeout = min(remaining, self.config.reconcile_interval)
                if due_at is not None:
                    timeout = min(timeout, max(0.0, due_at - self.clock()) + 0.01)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):  # cheaper than wait_for: no extra task
                        await changed.wait()
        finally:
            hub.waiters -= 1
            await self._release(hub)

    async def _enforce_availability(self, state: Questionnaire) -> tuple[Questionnaire, float | None]:
        """Mark ``state`` unavailable if nobody is there; else say when to look again."""
        if state.status != "in_progress":
            return state, None
        now = self.clock()
        presence = await self.store.presence(state.session_id, now)
        due = availability.deadline(
            state,
            presence.clients,
            presence.last_seen,
            client_wait=self.config.client_wait,
            reconnect_grace=self.config.reconnect_grace,
        )
        if due is None or now < due.at:
            return state, None if due is None else due.at
        try:
            state = await self.update(state.session_id, state.id, machine.MarkUnavailable(due.reason))
            log.info(
                "questionnaire unavailable",
                extra={"session": state.session_id, "questionnaire": state.id, "reason": due.reason},
            )
        except BrokerError:
            state = await self._load(state.session_id, state.id)  # something else closed it
        return state, None

    # --- client side -----------------------------------------------------------------

    async def join(self, connection: Connection) -> None:
        """A client said a valid hello: count it present and show it the current state."""
        hub = self._hub(connection.session_id)
        now = self.clock()
        hub.joining += 1
        try:
            # Presence is checked before this client counts, so a questionnaire whose grace
            # ran out while nobody was there is closed rather than shown again.
            for questionnaire_id in await self.store.queue(connection.session_id):
                state = await self.store.load(connection.session_id, questionnaire_id)
                if state is not None:
                    await self._enforce_availability(state)
            await self.store.heartbeat(connection.session_id, connection.client_id, self._presence_ttl, now)
            await self._ensure_subscribed(hub)
            connection.deliver(Encoded(frames.welcome(connection.client_id, connection.session_id)))
            await self.refresh(hub, newcomer=connection)
        finally:
            hub.joining -= 1
            if connection.client_id not in hub.clients:
                await self._release(hub)  # the join failed (store unavailable): drop an empty hub
        self.metrics.connections.inc()
        log.info("client joined", extra={"session": connection.session_id, "client": connection.client_id})

    async def leave(self, connection: Connection) -> None:
        hub = self.hubs.get(connection.session_id)
        if hub is None or hub.clients.pop(connection.client_id, None) is None:
            return
        self.metrics.connections.dec()
        with contextlib.suppress(StoreUnavailable):
            await self.store.leave(connection.session_id, connection.client_id, self.clock())
        await self._release(hub)
        log.info("client left", extra={"session": connection.session_id, "client": connection.client_id})

    async def command(self, connection: Connection, frame: frames.CommandFrame) -> None:
        """Run a client command; on refusal send an ``error`` (and a fresh view if stale)."""
        hub = self._hub(connection.session_id)
        with self.metrics.timed(self.metrics.frame_timer[frames.frame_type(frame)]):
            await self._command(hub, connection, frame)

    async def _command(self, hub: SessionHub, connection: Connection, frame: frames.CommandFrame) -> None:
        session_id = connection.session_id
        command = frame.command
        try:
            if hub.shown_id != command.questionnaire_id:
                await self.refresh(hub)  # our view may be behind another process's
            known = hub.shown
            if known is None or known.id != command.questionnaire_id:
                raise BrokerError(
                    "stale_step",
                    f"questionnaire {command.questionnaire_id} is not the one being shown",
                )
            new = await self.update(session_id, command.questionnaire_id, command, known=known)
        except BrokerError as exc:
            self.metrics.errors.labels(exc.code).inc()
            connection.deliver(Encoded(frames.error(exc.code, exc.message, frame.ref)))
            if exc.code == "stale_step":
                await self.refresh(hub)
                connection.deliver(Encoded(frames.view(hub.shown)))
            log.debug(
                "client command refused",
                extra={"session": session_id, "client": connection.client_id, "code": exc.code},
            )
            return
        await self.refresh(hub, hint=new)

    # --- state changes ---------------------------------------------------------------

    async def update(
        self, session_id: str, questionnaire_id: str, command: Command, known: Questionnaire | None = None
    ) -> Questionnaire:
        """Load, transition, compare-and-set; re-run on a lost race. Raises BrokerError.

        ``known`` (a recently seen state) saves the first load; if it is out of date the
        compare-and-set fails and the loop continues from the store's state.
        """
        for _ in range(MAX_CAS_ATTEMPTS):
            cached = known is not None
            state = known if known is not None else await self._load(session_id, questionnaire_id)
            known = None
            try:
                new = machine.apply(state, command, self.clock())
            except BrokerError:
                if cached:
                    continue  # judge the command against the store's state, not a cache
                raise
            with self.metrics.timed(self.metrics.commit_seconds):
                written = await self.store.compare_and_set(new, state.version)
            if written:
                if new.is_outcome:
                    self.metrics.outcomes.labels(new.status, new.cancellation_reason or "").inc()
                hub = self.hubs.get(session_id)
                if hub is not None:
                    hub.poke()
                return new
        raise BrokerError("conflict", f"questionnaire {questionnaire_id} is changing too fast; try again")

    async def _load(self, session_id: str, questionnaire_id: str) -> Questionnaire:
        state = await self.store.load(session_id, questionnaire_id)
        if state is None:
            raise BrokerError(
                "unknown_questionnaire",
                f"questionnaire: no questionnaire {questionnaire_id} in session {session_id}",
            )
        return state

    # --- fan-out ---------------------------------------------------------------------

    async def refresh(
        self, hub: SessionHub, newcomer: Connection | None = None, hint: Questionnaire | None = None
    ) -> None:
        """Bring local clients up to date with the store, pushing only what they have not seen.

        ``hint`` is a state this process just wrote or was notified of: when it is still the
        shown questionnaire, it is shown without reading the store. ``newcomer`` (a client
        that just said hello) gets the current view and joins the hub under the same lock,
        so it sees every later change exactly once.
        """
        if not hub.clients and not hub.joining and newcomer is None:
            return
        async with hub.lock:
            # Checked again under the lock: a client joining meanwhile has been added.
            if not hub.clients and newcomer is None:
                return
            previous = hub.shown
            shown: Questionnaire | None
            if hint is not None and previous is not None and hint.id == previous.id and not hint.is_terminal:
                # A hint older than what is shown is a late notice: keep the newer state.
                shown = previous if hint.version <= previous.version else hint
            else:
                shown = await self.store.shown(hub.session_id)
            if hub.clients and not _same_view(previous, shown):
                if previous is not None and (shown is None or shown.id != previous.id):
                    ended = hint if hint is not None and hint.id == previous.id else None
                    ended = ended or await self.store.load(hub.session_id, previous.id)
                    if ended is not None and ended.is_terminal:
                        hub.broadcast(frames.closed(ended))
                hub.broadcast(frames.view(shown))
            hub.shown = shown
            if newcomer is not None:
                newcomer.deliver(Encoded(frames.view(shown)))
                hub.clients[newcomer.client_id] = newcomer

    async def _on_notice(self, notice: Notice) -> None:
        hub = self.hubs.get(notice.session_id)
        if hub is None:
            return
        hub.poke()
        shown = hub.shown
        if shown is not None and shown.id == notice.questionnaire_id and shown.version >= notice.version:
            return  # already showing this write (usually our own)
        if not hub.clients and not hub.joining:
            return  # only agent calls wait here; poke() woke them
        hint = None
        if shown is not None and shown.id == notice.questionnaire_id:
            hint = await self.store.load(notice.session_id, notice.questionnaire_id)
        await self.refresh(hub, hint=hint)

    async def _on_reconnect(self) -> None:
        log.warning("notification channel reconnected; re-reading every session")
        await self._refresh_all()

    async def _refresh_all(self) -> None:
        await self._drop_idle_hubs()
        for hub in list(self.hubs.values()):
            hub.poke()
            with contextlib.suppress(StoreUnavailable):
                await self.refresh(hub)

    async def _reconcile_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.reconcile_interval)
            try:
                await self._refresh_all()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("reconciliation failed")

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            now = self.clock()
            for hub in list(self.hubs.values()):
                for client_id in list(hub.clients):
                    try:
                        await self.store.heartbeat(hub.session_id, client_id, self._presence_ttl, now)
                    except StoreUnavailable:
                        log.warning("heartbeat failed: store unavailable")
                    except Exception:  # noqa: BLE001
                        log.exception("heartbeat failed")

    @property
    def _presence_ttl(self) -> float:
        return self.config.heartbeat_interval * 3

    # --- hubs ------------------------------------------------------------------------

    def _hub(self, session_id: str) -> SessionHub:
        hub = self.hubs.get(session_id)
        if hub is None:
            hub = self.hubs[session_id] = SessionHub(session_id)
        hub.idle_since = None
        return hub

    async def _ensure_subscribed(self, hub: SessionHub) -> None:
        if not hub.subscribed:
            hub.subscribed = True
            await self.store.subscribe(hub.session_id)

    async def _release(self, hub: SessionHub) -> None:
        """Note that ``hub`` lost its last client or waiter; the reconcile loop drops it later.

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
        if hub.subscribed:
            with contextlib.suppress(StoreUnavailable):
                await self.store.unsubscribe(hub.session_id)

    def local_clients(self, session_id: str) -> int:
        hub = self.hubs.get(session_id)
        return len(hub.clients) + hub.joining if hub else 0  # joining: a burst of hellos counts too


def _same_view(before: Questionnaire | None, after: Questionnaire | None) -> bool:
    if before is None or after is None:
        return before is after
    return before.id == after.id and before.version == after.version
