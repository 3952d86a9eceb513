"""``Notifier``: what the service tells the notification routes, and when (broker/core/reminders.py).

The service calls ``started`` and ``resumed`` right after such a write, on the agent's call:
they only queue the moment (``put_nowait``) and return; nothing on that path waits for a
store read, a claim or a delivery. A few tasks then take each moment: they look at who is
there (the store's presence, any broker), and when nobody is, claim the moment in the store
once per route (``reminders.claim_name``; of several brokers, one wins) and keep the
notification in the store for delivery (deliveries.py), which some broker's dispatcher
takes.

``idle`` needs no call: every ``tick`` the notifier looks at the sessions whose clients are
connected to this process (the fan-out's hubs) and, for a question shown and left alone for
a route's ``after`` seconds, claims and sends the same way. Every broker with a client of
the session looks; the claim makes it one notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Final, Protocol

import jwt

from broker.core import reminders
from broker.core.machine import Questionnaire
from broker.core.reminders import Trigger
from broker.notify.channel import Channel, IsRevoked, never_revoked
from broker.notify.channels import build_channel
from broker.notify.config import DEFAULT_AFTER, Route
from broker.notify.deliveries import DeliveryQueue
from broker.notify.dispatch import Dispatcher
from broker.notify.notification import Notification, QuestionText
from broker.notify.posting import http_client
from broker.runtime.config import Config
from broker.runtime.metrics import Metrics
from broker.runtime.tasks import stop_tasks
from broker.store.base import Store, StoreUnavailable
from broker.tokens.claims import mint_token

log = logging.getLogger("qbroker.notify")

LINK_TOKEN_TTL: Final = 3600  # a link's client token: one session, one hour
LINK_SUB_PREFIX: Final = "notify-route-"  # a link token's holder when its route names none
# Notification ids: a UUID made from the claim, the same on every broker and every retry.
_IDS: Final = uuid.UUID("6f1d7c52-3b8e-4a39-9c57-2f4d1f0b7a10")
_MOMENT_TASKS: Final = 4


def link_token(secret: str, route: Route, session_id: str) -> str:
    """The client token a route's link carries: that one session, one hour, held by the
    route's ``link_sub`` (the person it reaches) or else by the route itself
    (``notify-route-<N>``), so that ``qbroker token revoke --sub`` reaches it."""
    holder = route.link_sub or f"{LINK_SUB_PREFIX}{route.index}"
    return mint_token(secret, session_id, "client", ttl=LINK_TOKEN_TTL, sub=holder)


class ShownHere(Protocol):
    """What the notifier reads of a session hub (broker/service/hubs.py's ``SessionHub``):
    the clients connected to this process and the questionnaire they were shown."""

    @property
    def clients(self) -> Sized: ...

    @property
    def shown(self) -> Questionnaire | None: ...


class Notifier:
    """The routes of one broker process, fed by its service (``start`` .. ``stop``)."""

    def __init__(
        self,
        config: Config,
        store: Store,
        metrics: Metrics,
        routes: Sequence[Route],
        hubs: Mapping[str, ShownHere],
        clock: Callable[[], float],
        revoked: IsRevoked = never_revoked,
    ) -> None:
        self.config = config
        self.revoked = revoked  # the broker's revocation check, for devices subscribed with a token
        self.store = store
        self.clock = clock
        self.hubs = hubs  # the fan-out's own dict: the sessions with clients here
        self.http = http_client(config.notify_timeout)
        self.channels: tuple[Channel, ...] = tuple(
            build_channel(route, http=self.http, store=store, config=config, revoked=revoked) for route in routes
        )
        self.dispatcher = Dispatcher(
            metrics,
            queue_size=config.notify_queue_size,
            retry_delay=config.notify_retry_delay,
            still_wanted=self._still_wanted,
        )
        self.deliveries = DeliveryQueue(
            store,
            {channel.route.index: channel for channel in self.channels},
            self.dispatcher,
            visibility=config.notify_visibility,
        )
        self.metrics = metrics
        self._moments: asyncio.Queue[tuple[Trigger, Questionnaire]] = asyncio.Queue(config.notify_queue_size)
        self._tasks: list[asyncio.Task[None]] = []
        # Per session here: the questionnaire shown, since when (idle counts from then at
        # the earliest), and the idle claims this process already made for it.
        self._shown: dict[str, tuple[str, float, set[int]]] = {}
        after = min((channel.route.after for channel in self.channels), default=DEFAULT_AFTER)
        self.tick = min(max(after / 4, 0.25), 5.0)

    # --- what the service calls ------------------------------------------------------

    @property
    def push_key(self) -> str | None:
        """The key a browser subscribes to pushes with (None: no route pushes to browsers)."""
        return next((c.subscription_key for c in self.channels if c.subscription_key is not None), None)

    def covers(self, session_id: str) -> bool:
        """Whether a route would tell people of this session's questionnaires."""
        return any(channel.route.covers(session_id) for channel in self.channels)

    async def may_bring_someone(self, session_id: str, now: float) -> bool:
        """Whether a notice may bring a person to this session: a route covers it, and when
        the only such routes are web push, a device is subscribed for it with a token not
        revoked since (else nobody would hear of it, and a long wait for a first client would
        only delay ``ui_unavailable``)."""
        covering = self._covering(session_id)
        if any(channel.kind != "webpush" for channel in covering):
            return True
        if not covering:
            return False
        return any(
            not self.revoked(subscription.jti, subscription.sub, subscription.iat)
            for subscription in await self.store.push_subscriptions(session_id, now)
        )

    def started(self, state: Questionnaire) -> None:
        """A questionnaire was just created (never waits)."""
        self._moment("started", state)

    def resumed(self, state: Questionnaire) -> None:
        """The agent just answered a clarification (never waits)."""
        self._moment("resumed", state)

    # --- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        self.dispatcher.start()
        self.deliveries.start()
        for number in range(_MOMENT_TASKS):
            self._tasks.append(asyncio.create_task(self._take_moments(), name=f"qbroker-notify-moments-{number}"))
        self._tasks.append(asyncio.create_task(self._idle_loop(), name="qbroker-notify-idle"))
        self._tasks.append(asyncio.create_task(self._check_routes(), name="qbroker-notify-check"))

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        self._tasks.clear()
        await self.deliveries.stop()
        await self.dispatcher.stop()
        for channel in self.channels:
            with contextlib.suppress(Exception):
                await channel.close()
        await self.http.aclose()

    # --- started and resumed ---------------------------------------------------------

    def _moment(self, trigger: Trigger, state: Questionnaire) -> None:
        if not self.covers(state.session_id):
            return
        try:
            self._moments.put_nowait((trigger, state))
        except asyncio.QueueFull:
            for channel in self._covering(state.session_id):
                self.metrics.notifications.labels(channel.kind, "dropped").inc()
            log.warning(
                "notification dropped: the queue of moments is full",
                extra={"session": state.session_id, "questionnaire": state.id, "trigger": trigger},
            )

    async def _take_moments(self) -> None:
        while True:
            trigger, state = await self._moments.get()
            try:
                presence = await self.store.presence(state.session_id, self.clock())
                if presence.clients == 0:  # someone connected sees it already
                    await self._claim_and_send(trigger, state, self._covering(state.session_id))
            except StoreUnavailable:
                log.warning(
                    "notification not sent: store unavailable",
                    extra={"session": state.session_id, "questionnaire": state.id, "trigger": trigger},
                )
            except Exception:  # a bug, logged: the next moments still go
                log.exception("notification failed", extra={"session": state.session_id, "trigger": trigger})

    # --- idle ------------------------------------------------------------------------

    async def _idle_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self.look_for_idle()
            except StoreUnavailable:
                pass  # the next tick looks again
            except Exception:  # the loop must survive anything
                log.exception("looking for idle questions failed")

    async def look_for_idle(self) -> None:
        """Claim and send an ``idle`` notice for every question shown here and left alone."""
        now = self.clock()
        for session_id in list(self._shown):
            hub = self.hubs.get(session_id)
            if hub is None or not hub.clients:
                del self._shown[session_id]
        for session_id, hub in list(self.hubs.items()):
            shown = hub.shown
            if not hub.clients or shown is None or not self.covers(session_id):
                continue
            seen = self._shown.get(session_id)
            if seen is None or seen[0] != shown.id:
                seen = self._shown[session_id] = (shown.id, now, set())
            _, since, claimed = seen
            due = [
                channel
                for channel in self._covering(session_id)
                if channel.route.index not in claimed and reminders.is_idle(shown, since, channel.route.after, now)
            ]
            if not due:
                continue
            state = await self.store.load(session_id, shown.id)  # what the hub shows may be behind
            if state is None or state.version != shown.version:
                continue  # something changed: the hub hears of it, and idle counts again
            claimed.update(channel.route.index for channel in due)
            await self._claim_and_send("idle", state, due)

    # --- claiming and building -------------------------------------------------------

    def _covering(self, session_id: str) -> list[Channel]:
        return [channel for channel in self.channels if channel.route.covers(session_id)]

    async def _claim_and_send(self, trigger: Trigger, state: Questionnaire, channels: Sequence[Channel]) -> None:
        for channel in channels:
            name = reminders.claim_name(state, trigger, channel.route.index)
            if not await self.store.claim(state.session_id, name, self.store.retention):
                continue  # another broker (or an earlier look here) has it
            await self.deliveries.put(channel.route.index, self.notification(channel.route, trigger, state, name))

    def notification(self, route: Route, trigger: Trigger, state: Questionnaire, name: str) -> Notification:
        """What ``route`` is told: ids, who asked, the count, the waiting question (unless
        the route leaves it out) and the link; never answers, Other or clarification texts."""
        question = reminders.waiting_question(state) if route.include_prompt else None
        link = f"{self.config.link_base()}/#session={state.session_id}"
        link_jti = None
        if self.config.sign_in() is not None:
            # People sign in: the link carries no token, and names the question to open after.
            link += f"&questionnaire={state.id}"
        elif route.link_token:
            token = link_token(self.config.secret or "", route, state.session_id)
            link += f"&token={token}"
            link_jti = str(jwt.decode(token, options={"verify_signature": False})["jti"])
        return Notification(
            id=str(uuid.uuid5(_IDS, f"{state.session_id}/{name}")),
            trigger=trigger,
            session_id=state.session_id,
            questionnaire_id=state.id,
            asked_by=state.asked_by,
            questions=len(state.questions),
            question=None if question is None else QuestionText(question.label, question.prompt),
            link=link,
            at=self.clock(),
            link_jti=link_jti,
        )

    async def _still_wanted(self, note: Notification) -> bool:
        try:
            state = await self.store.load(note.session_id, note.questionnaire_id)
        except StoreUnavailable:
            return True  # cannot tell: better a notice too many than one missing
        return state is not None and reminders.wanted(state)

    async def _check_routes(self) -> None:
        """Each route's start-up check: a warning for one that cannot be reached now."""
        for channel in self.channels:
            try:
                warning = await channel.check()
            except Exception as exc:  # a check must never stop the broker
                warning = f"check failed ({type(exc).__name__})"
            if warning:
                log.warning(
                    f"notification route unreachable at start-up: {warning}",
                    extra={"route": channel.route.index, "kind": channel.kind, "sessions": channel.route.sessions},
                )
