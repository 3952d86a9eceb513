"""The store contract: the memory store, Redis over fakeredis and a real redis-server pass the same tests.

The service cannot tell the stores apart, so every behaviour it relies on is asserted here
once and run against all three. Redis-only behaviour (key layout, the notice connection's
reconnect, an unreachable server) follows at the end. Times are passed in as ``now`` where
the interface takes them; retention is measured by the store's own clock and polled for
with a deadline.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import fakeredis
import msgpack
import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from broker.core import machine
from broker.core.actors import Actor, ClientInfo
from broker.core.events import Event, events_of, started
from broker.core.machine import Questionnaire
from broker.core.model import Question, StartInput, parse_tool_input
from broker.store.base import Head, Notice, Presence, Store, StoreUnavailable
from broker.store.memory import MemoryStore
from broker.store.redis import RedisStore, channel_for
from broker.store.redis import connections as redis_connections
from broker.store.redis import notices as redis_notices
from broker.store.redis import store as redis_store_module
from broker.store.redis import subscriptions as redis_subscriptions
from broker.store.redis.keys import inbox_shard, index_key
from tests.helpers.processes import RedisServer, redis_server
from tests.helpers.samples import new_sid as new_session
from tests.helpers.waiting import eventually

# At the dependency floors too: redis-py's and hiredis's oldest releases on a real redis-server.
pytestmark = pytest.mark.floors

NOW = 1_700_000_000.0
DEADLINE = 5.0  # seconds any awaited event may take


def _questions() -> tuple[Question, ...]:
    parsed = parse_tool_input(
        {
            "action": "start",
            "questions": [
                {
                    "id": "target",
                    "prompt": "Deploy where?",
                    "type": "single",
                    "options": [{"id": "staging"}, {"id": "production", "description": "careful"}],
                },
                {
                    "id": "checks",
                    "label": "Checks",
                    "prompt": "Which checks must pass?",
                    "type": "multi",
                    "options": [{"id": "unit"}, {"id": "e2e"}, {"id": "lint"}],
                    "minSelections": 1,
                    "maxSelections": 2,
                },
            ],
        }
    )
    assert isinstance(parsed, StartInput)
    return parsed.questions


QUESTIONS = _questions()


def new_questionnaire(session_id: str, questionnaire_id: str | None = None, now: float = NOW) -> Questionnaire:
    return machine.start(questionnaire_id or f"q-{uuid.uuid4().hex[:12]}", session_id, QUESTIONS, now)


def advanced(state: Questionnaire, command: machine.Command, now: float = NOW + 1) -> Questionnaire:
    return machine.apply(state, command, now)


def completed(state: Questionnaire) -> Questionnaire:
    state = advanced(state, machine.AnswerQuestion(state.id, state.step, "target", ("staging",)))
    return advanced(state, machine.AnswerQuestion(state.id, state.step, "checks", ("unit",)))


class Listener:
    """The handlers given to ``Store.start``: notices, reconnects and presence changes land
    in queues."""

    def __init__(self) -> None:
        self.notices: asyncio.Queue[Notice] = asyncio.Queue()
        self.reconnects: asyncio.Queue[None] = asyncio.Queue()
        self.presences: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    async def on_notice(self, notice: Notice) -> None:
        self.notices.put_nowait(notice)

    async def on_presence(self, session_id: str, clients: int) -> None:
        self.presences.put_nowait((session_id, clients))

    async def on_reconnect(self) -> None:
        self.reconnects.put_nowait(None)

    async def next_notice(self) -> Notice:
        return await asyncio.wait_for(self.notices.get(), DEADLINE)

    async def next_reconnect(self) -> None:
        await asyncio.wait_for(self.reconnects.get(), DEADLINE)


# --- backends -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@asynccontextmanager
async def raw_client(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[Redis]:
    """A fresh, empty Redis: its own fakeredis server, or the module's redis-server flushed
    (for "redis" and "redis-unix" alike: one server, on TCP and on its Unix socket)."""
    if kind == "fakeredis":
        client: Redis = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    else:
        server: RedisServer = request.getfixturevalue("real_redis")
        client = Redis.from_url(server.url)
        await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(params=["memory", "fakeredis", "redis", "redis-unix"])
async def store(request: pytest.FixtureRequest, listener: Listener) -> AsyncIterator[Store]:
    kind: str = request.param
    retention = 3600.0
    if kind == "memory":
        opened: Store = MemoryStore(retention)
        await opened.start(listener.on_notice, listener.on_reconnect, listener.on_presence)
        yield opened
        await opened.close()
        return
    async with raw_client(kind, request) as client:
        if kind == "fakeredis":
            opened = RedisStore("redis://fakeredis", retention, client=client)
        else:  # the store makes its own connection from the URL, as in production
            server: RedisServer = request.getfixturevalue("real_redis")
            opened = RedisStore(server.unix_url if kind == "redis-unix" else server.url, retention)
            assert opened._commands.wire is not None  # both served by the store's own wire, not redis-py
        await opened.start(listener.on_notice, listener.on_reconnect, listener.on_presence)
        try:
            yield opened
        finally:
            await opened.close()


@pytest.fixture(params=["fakeredis", "redis"])
async def redis_client(request: pytest.FixtureRequest) -> AsyncIterator[Redis]:
    async with raw_client(request.param, request) as client:
        yield client


@pytest.fixture
async def redis_store(redis_client: Redis, listener: Listener) -> AsyncIterator[RedisStore]:
    opened = RedisStore("redis://unused", 3600.0, client=redis_client)
    await opened.start(listener.on_notice, listener.on_reconnect, listener.on_presence)
    try:
        yield opened
    finally:
        await opened.close()


@asynccontextmanager
async def started_with_admin(
    server: RedisServer, listener: Listener, **options: Any
) -> AsyncIterator[tuple[RedisStore, Redis]]:
    """A store on ``server``, started with ``listener``, and a client of our own to poke Redis."""
    store = RedisStore(server.url, 3600.0, **options)
    await store.start(listener.on_notice, listener.on_reconnect)
    admin = Redis.from_url(server.url)
    try:
        yield store, admin
    finally:
        await admin.aclose()
        await store.close()


async def kill_pubsub_connections(admin: Redis) -> int:
    """Drop every pub/sub connection to Redis, as a failover would; how many there were."""
    return int(await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub"))  # type: ignore[no-untyped-call]  # (redis-py leaves it unannotated)


@pytest.fixture
def listener() -> Listener:
    return Listener()


# --- questionnaires -------------------------------------------------------------------


async def test_a_created_questionnaire_loads_back_intact(store: Store) -> None:
    sid = new_session()
    state = new_questionnaire(sid)
    state = advanced(state, machine.AnswerQuestion(state.id, 0, "target", (), other="Ünïcödé ✓ staging-2"))
    state = advanced(state, machine.Draft(state.id, state.step, ("e2e",), other="and smoke"))
    state = advanced(state, machine.Clarify(state.id, state.step, "What is e2e?"))
    state = advanced(state, machine.Resume(state.revision, "End to end."))

    assert await store.create(state) == state

    loaded = await store.load(sid, state.id)
    assert loaded == state
    assert loaded is not None and loaded.to_record() == state.to_record()


async def test_an_ended_questionnaire_loads_back_intact_and_is_what_its_idempotency_key_finds(
    store: Store,
) -> None:
    # (The memory store keeps an ended questionnaire packed: this is its way back.)
    sid = new_session()
    state = await store.create(new_questionnaire(sid), idempotency_key="retry-1")
    started = state
    state = advanced(state, machine.AnswerQuestion(state.id, 0, "target", (), other="Ünïcödé ✓ staging-2"))
    state = advanced(state, machine.Clarify(state.id, state.step, "What is e2e?"))
    state = advanced(state, machine.Resume(state.revision, "End to end."))
    ended = advanced(state, machine.AnswerQuestion(state.id, state.step, "checks", ("unit", "e2e")))
    assert ended.status == "completed"
    assert await store.commit(ended, started.version)

    loaded = await store.load(sid, ended.id)
    assert loaded == ended
    assert loaded is not None and loaded.to_record() == ended.to_record()
    assert await store.create(new_questionnaire(sid), idempotency_key="retry-1") == ended
    assert await store.queue(sid) == []
    assert await store.commit(advanced(started, machine.Abort()), started.version) is None  # stale
    assert await store.load(sid, ended.id) == ended


async def test_who_asked_is_kept_from_the_start_to_the_end(store: Store) -> None:
    sid = new_session()
    fresh = machine.start(f"q-{uuid.uuid4().hex[:12]}", sid, QUESTIONS, NOW, asked_by="build-agent")
    state = await store.create(fresh)
    loaded = await store.load(sid, state.id)
    assert loaded is not None and loaded.asked_by == "build-agent"
    ended = completed(loaded)
    assert await store.commit(ended, loaded.version)
    loaded = await store.load(sid, state.id)  # (the memory store keeps an ended one packed)
    assert loaded is not None and loaded.asked_by == "build-agent"
    assert (await store.head(sid)).state is None


async def test_loading_an_unknown_questionnaire_returns_none(store: Store) -> None:
    sid = new_session()
    await store.create(new_questionnaire(sid))

    assert await store.load(sid, "q-unknown") is None
    assert await store.load(new_session(), "q-unknown") is None


async def test_a_questionnaire_belongs_to_its_session_only(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))

    assert await store.load(new_session(), state.id) is None


async def test_create_with_a_used_idempotency_key_returns_the_first_questionnaire_as_it_is_now(
    store: Store,
) -> None:
    sid = new_session()
    first = await store.create(new_questionnaire(sid), idempotency_key="retry-1")
    drafted = advanced(first, machine.Draft(first.id, 0, ("staging",)))
    assert await store.compare_and_set(drafted, first.version)

    again = await store.create(new_questionnaire(sid), idempotency_key="retry-1")

    assert again == drafted
    assert await store.queue(sid) == [first.id]


async def test_an_idempotency_key_counts_within_its_session_only(store: Store) -> None:
    first = await store.create(new_questionnaire(new_session()), idempotency_key="retry-1")
    other_session = new_session()
    second = new_questionnaire(other_session)

    assert await store.create(second, idempotency_key="retry-1") == second
    assert await store.queue(other_session) == [second.id]
    assert second.id != first.id


async def test_create_without_an_idempotency_key_always_creates(store: Store) -> None:
    sid = new_session()
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))

    assert await store.queue(sid) == [first.id, second.id]


async def test_compare_and_set_on_the_current_version_replaces_the_state(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("production",)))

    assert await store.compare_and_set(drafted, expected_version=state.version)

    assert await store.load(sid, state.id) == drafted


async def test_compare_and_set_on_a_stale_version_changes_nothing(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    current = advanced(state, machine.Draft(state.id, 0, ("production",)))
    assert await store.compare_and_set(current, state.version)
    late = advanced(state, machine.AnswerQuestion(state.id, 0, "target", ("staging",)))

    assert not await store.compare_and_set(late, expected_version=state.version)

    assert await store.load(sid, state.id) == current
    assert await store.queue(sid) == [state.id]


async def test_compare_and_set_of_an_unknown_questionnaire_fails_and_stores_nothing(store: Store) -> None:
    sid = new_session()
    ghost = new_questionnaire(sid)
    drafted = advanced(ghost, machine.Draft(ghost.id, 0, ("staging",)))

    assert not await store.compare_and_set(drafted, ghost.version)

    assert await store.load(sid, ghost.id) is None
    assert await store.queue(sid) == []


async def test_of_concurrent_compare_and_sets_on_one_version_exactly_one_wins(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    contenders = [advanced(state, machine.Draft(state.id, 0, (), other=f"contender {n}")) for n in range(12)]

    results = await asyncio.gather(*(store.compare_and_set(c, state.version) for c in contenders))

    assert results.count(True) == 1
    assert await store.load(sid, state.id) == contenders[results.index(True)]


async def test_a_terminal_questionnaire_leaves_the_queue(store: Store) -> None:
    sid = new_session()
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))
    cancelled = advanced(first, machine.Cancel(first.id, first.step))

    assert await store.compare_and_set(cancelled, first.version)

    assert await store.queue(sid) == [second.id]
    assert await store.load(sid, first.id) == cancelled


async def test_a_suspended_questionnaire_stays_in_the_queue(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    suspended = advanced(state, machine.Clarify(state.id, 0, "Which staging?"))

    assert await store.compare_and_set(suspended, state.version)

    assert await store.queue(sid) == [state.id]


async def test_the_queue_is_first_in_first_out(store: Store) -> None:
    sid = new_session()
    ids = ["q-m", "q-a", "q-z", "q-b", "q-0"]  # creation order, deliberately not sorted
    for questionnaire_id in ids:
        await store.create(new_questionnaire(sid, questionnaire_id))

    assert await store.queue(sid) == ids
    assert await store.queue(new_session()) == []


async def test_shown_is_the_oldest_open_questionnaire(store: Store) -> None:
    sid = new_session()
    first = await store.create(new_questionnaire(sid, "q-2"))
    second = await store.create(new_questionnaire(sid, "q-1"))
    assert await store.shown(sid) == first

    assert await store.compare_and_set(completed(first), first.version)
    assert await store.shown(sid) == second

    aborted = advanced(second, machine.Abort())
    assert await store.compare_and_set(aborted, second.version)
    assert await store.shown(sid) is None


async def test_shown_of_a_session_without_questionnaires_is_none(store: Store) -> None:
    assert await store.shown(new_session()) is None


# --- presence -------------------------------------------------------------------------


async def test_presence_of_a_session_never_seen_is_empty(store: Store) -> None:
    assert await store.presence(new_session(), NOW) == Presence(0, None)


async def test_presence_counts_live_clients_and_lapses_each_after_its_ttl(store: Store) -> None:
    sid = new_session()
    await store.heartbeat(sid, "c-short", ttl=10, now=NOW)
    await store.heartbeat(sid, "c-long", ttl=20, now=NOW + 1)

    assert await store.presence(sid, NOW + 5) == Presence(2, NOW + 1)
    assert await store.presence(sid, NOW + 10) == Presence(1, NOW + 10)  # c-short lapsed at NOW + 10
    assert await store.presence(sid, NOW + 100) == Presence(0, NOW + 21)


async def test_a_heartbeat_keeps_a_client_alive(store: Store) -> None:
    sid = new_session()
    await store.heartbeat(sid, "c-1", ttl=10, now=NOW)
    await store.heartbeat(sid, "c-1", ttl=10, now=NOW + 8)

    assert await store.presence(sid, NOW + 15) == Presence(1, NOW + 8)


async def test_leave_removes_the_client_and_updates_last_seen(store: Store) -> None:
    sid = new_session()
    await store.heartbeat(sid, "c-1", ttl=30, now=NOW)
    await store.heartbeat(sid, "c-2", ttl=30, now=NOW)

    await store.leave(sid, "c-1", now=NOW + 3)

    assert await store.presence(sid, NOW + 4) == Presence(1, NOW + 3)


async def test_leave_of_a_client_not_connected_changes_nothing(store: Store) -> None:
    sid = new_session()
    await store.heartbeat(sid, "c-1", ttl=30, now=NOW)

    await store.leave(sid, "c-unknown", now=NOW + 3)

    assert await store.presence(sid, NOW + 4) == Presence(1, NOW)


async def test_presence_counts_per_session(store: Store) -> None:
    sid, other = new_session(), new_session()
    await store.heartbeat(sid, "c-1", ttl=30, now=NOW)

    assert await store.presence(other, NOW) == Presence(0, None)


# --- inbox sockets -------------------------------------------------------------------
# (never the scope "*" here: the stores of this module share one Redis, and it would hold
# every session of every other test)


async def test_no_inbox_socket_ever_covered_a_new_session(store: Store) -> None:
    assert await store.inbox_until(new_session()) is None


async def test_an_inbox_heartbeat_holds_the_sessions_its_scopes_cover_until_its_ttl(store: Store) -> None:
    sid = new_session()
    pattern = sid[: len(sid) // 2] + "*"
    await store.inbox_heartbeat([pattern], ttl=15, now=NOW)
    assert await store.inbox_until(sid) == NOW + 15
    assert await store.inbox_until(new_session()) is None  # a session the pattern does not cover


async def test_the_latest_heartbeat_of_every_covering_scope_counts(store: Store) -> None:
    sid = new_session()
    await store.inbox_heartbeat([sid + "*", sid], ttl=15, now=NOW)
    await store.inbox_heartbeat([sid[:-4] + "*"], ttl=15, now=NOW + 5)
    await store.inbox_heartbeat([sid], ttl=15, now=NOW - 100)  # a late, older beat changes nothing
    assert await store.inbox_until(sid) == NOW + 20


# --- claims ---------------------------------------------------------------------------


async def test_a_name_is_claimed_once_and_by_the_first_caller_only(store: Store) -> None:
    sid = new_session()
    assert await store.claim(sid, "notify:q-1:started:1", ttl=60) is True
    assert await store.claim(sid, "notify:q-1:started:1", ttl=60) is False
    assert await store.claim(sid, "notify:q-1:idle:1", ttl=60) is True  # another name
    assert await store.claim(new_session(), "notify:q-1:started:1", ttl=60) is True  # another session


async def test_of_concurrent_claims_of_one_name_exactly_one_wins(store: Store) -> None:
    sid = new_session()
    taken = await asyncio.gather(*(store.claim(sid, "notify:q-1:idle:2", ttl=60) for _ in range(20)))
    assert taken.count(True) == 1


async def test_a_claim_can_be_taken_again_once_it_expired(store: Store) -> None:
    sid = new_session()
    assert await store.claim(sid, "once", ttl=0.05) is True
    assert await eventually(lambda: store.claim(sid, "once", ttl=60), "the claim to expire", timeout=5)


# --- notes ----------------------------------------------------------------------------


async def test_a_note_is_read_by_anyone_until_forgotten_or_expired(store: Store) -> None:
    sid = new_session()
    assert await store.noted(sid, "mcp-form:a") is None
    await store.note(sid, "mcp-form:a", "qb1.state", ttl=60)
    assert await store.noted(sid, "mcp-form:a") == "qb1.state"
    assert await store.noted(new_session(), "mcp-form:a") is None  # another session's
    await store.note(sid, "mcp-form:a", "qb1.newer", ttl=60)
    assert await store.noted(sid, "mcp-form:a") == "qb1.newer"
    await store.note(sid, "mcp-form:a", None, ttl=0)
    assert await store.noted(sid, "mcp-form:a") is None
    await store.note(sid, "brief", "gone soon", ttl=0.05)
    await eventually(lambda: _gone(store, sid, "brief"), "the note to expire", timeout=5)


async def _gone(store: Store, sid: str, name: str) -> bool:
    return await store.noted(sid, name) is None


# --- notifications --------------------------------------------------------------------


async def test_notices_reach_subscribed_sessions_only(store: Store, listener: Listener) -> None:
    watched, unwatched = new_session(), new_session()
    await store.subscribe(watched)

    await store.create(new_questionnaire(unwatched))
    state = await store.create(new_questionnaire(watched))

    # One ordered channel: had the unwatched session's notice been delivered, it came first.
    assert await listener.next_notice() == Notice(watched, state.id, 0)


async def test_every_successful_write_publishes_its_version(store: Store, listener: Listener) -> None:
    sid = new_session()
    await store.subscribe(sid)
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    late = advanced(state, machine.Draft(state.id, 0, ("production",)))

    assert await store.compare_and_set(drafted, state.version)
    assert not await store.compare_and_set(late, state.version)
    assert await store.compare_and_set(completed(drafted), drafted.version)

    assert [await listener.next_notice() for _ in range(3)] == [
        Notice(sid, state.id, 0),
        Notice(sid, state.id, 1),
        Notice(sid, state.id, 3),
    ]


async def test_an_idempotent_repeat_publishes_nothing(store: Store, listener: Listener) -> None:
    sid = new_session()
    await store.subscribe(sid)
    first = await store.create(new_questionnaire(sid), idempotency_key="k")
    await store.create(new_questionnaire(sid), idempotency_key="k")
    marker = await store.create(new_questionnaire(sid))

    assert await listener.next_notice() == Notice(sid, first.id, 0)
    assert await listener.next_notice() == Notice(sid, marker.id, 0)


async def test_an_unsubscribed_session_gets_no_more_notices(store: Store, listener: Listener) -> None:
    left, staying = new_session(), new_session()
    await store.subscribe(left)
    await store.subscribe(staying)
    await store.unsubscribe(left)

    await store.create(new_questionnaire(left))
    state = await store.create(new_questionnaire(staying))

    assert await listener.next_notice() == Notice(staying, state.id, 0)


async def test_a_subscription_to_outcomes_only_hears_only_writes_that_reached_one(
    store: Store, listener: Listener
) -> None:
    sid, marker_sid = new_session(), new_session()
    await store.subscribe(sid, outcomes_only=True)
    await store.subscribe(marker_sid)
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    assert await store.compare_and_set(drafted, state.version)
    clarify = advanced(drafted, machine.Clarify(state.id, 0, "Which staging?"))
    assert await store.compare_and_set(clarify, drafted.version)
    resumed = advanced(clarify, machine.Resume(1, "The EU one."))
    assert await store.compare_and_set(resumed, clarify.version)
    cancelled = advanced(resumed, machine.Abort())
    assert await store.compare_and_set(cancelled, resumed.version)
    marker = await store.create(new_questionnaire(marker_sid))  # (notices come in order)

    notices = [await listener.next_notice() for _ in range(3)]

    assert [(n.questionnaire_id, n.status) for n in notices] == [
        (state.id, "needs_clarification"),
        (state.id, "cancelled"),
        (marker.id, "in_progress"),
    ]


async def test_an_outcomes_only_subscription_ends_on_its_own(store: Store, listener: Listener) -> None:
    sid, marker_sid = new_session(), new_session()
    await store.subscribe(sid)
    await store.subscribe(sid, outcomes_only=True)
    await store.unsubscribe(sid, outcomes_only=True)
    await store.subscribe(marker_sid)
    state = await store.create(new_questionnaire(sid))
    assert await store.compare_and_set(advanced(state, machine.Abort()), state.version)
    marker = await store.create(new_questionnaire(marker_sid))  # (notices come in order)

    notices = [await listener.next_notice() for _ in range(3)]

    assert [(n.questionnaire_id, n.status) for n in notices] == [
        (state.id, "in_progress"),
        (state.id, "cancelled"),
        (marker.id, "in_progress"),
    ]
    assert listener.notices.empty()  # the outcome once: the other subscription is gone


async def test_subscribing_twice_delivers_each_notice_once(store: Store, listener: Listener) -> None:
    sid = new_session()
    await store.subscribe(sid)
    await store.subscribe(sid)
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))

    assert await listener.next_notice() == Notice(sid, first.id, 0)
    assert await listener.next_notice() == Notice(sid, second.id, 0)


# --- write numbers and what notices carry -----------------------------------------------


async def test_each_write_is_numbered_in_its_session(store: Store) -> None:
    sid, other = new_session(), new_session()
    await store.create(new_questionnaire(other))
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    redrafted = advanced(drafted, machine.Draft(state.id, 0, ("production",)))

    first = await store.commit(drafted, state.version)
    second = await store.commit(redrafted, drafted.version)

    assert first is not None and second is not None
    assert second.seq == first.seq + 1
    assert await store.head(sid) == Head(redrafted, second.seq)
    assert await store.write_counts([sid, new_session(), other]) == [second.seq, 0, 1]


async def test_a_refused_compare_and_set_is_not_numbered(store: Store) -> None:
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    [before] = await store.write_counts([sid])

    assert await store.commit(advanced(state, machine.Abort()), state.version + 1) is None

    assert await store.write_counts([sid]) == [before]


async def test_closing_a_questionnaire_says_which_comes_next(store: Store) -> None:
    sid = new_session()
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))
    drafted = advanced(second, machine.Draft(second.id, 0, ("staging",)))

    kept_open = await store.commit(drafted, second.version)
    closed_first = await store.commit(completed(first), first.version)
    closed_second = await store.commit(advanced(drafted, machine.Abort()), drafted.version)

    assert kept_open is not None and kept_open.head is None  # not said: the head did not move
    assert closed_first is not None and closed_first.head == Head(drafted, closed_first.seq)
    assert closed_second is not None and closed_second.head == Head(None, closed_second.seq)


async def test_notices_carry_the_status_number_and_state_of_each_write(store: Store, listener: Listener) -> None:
    sid = new_session()
    await store.subscribe(sid)
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))
    clarify = advanced(first, machine.Clarify(first.id, 0, "Which staging?"))
    assert await store.compare_and_set(clarify, first.version)
    cancelled = advanced(clarify, machine.Abort())
    assert await store.compare_and_set(cancelled, clarify.version)

    notices = [await listener.next_notice() for _ in range(4)]

    assert [(n.questionnaire_id, n.status) for n in notices] == [
        (first.id, "in_progress"),
        (second.id, "in_progress"),
        (first.id, "needs_clarification"),
        (first.id, "cancelled"),
    ]
    assert [n.seq for n in notices] == list(range(notices[0].seq, notices[0].seq + 4))
    assert [n.record.state() if n.record else None for n in notices] == [first, second, clarify, cancelled]
    assert [n.head for n in notices] == [None, None, None, Head(second, notices[3].seq)]


async def test_the_write_numbers_of_a_session_go_on_from_its_notices(store: Store, listener: Listener) -> None:
    sid = new_session()
    await store.subscribe(sid)
    state = await store.create(new_questionnaire(sid))
    notice = await listener.next_notice()

    assert await store.head(sid) == Head(state, notice.seq)
    written = await store.commit(advanced(state, machine.Abort()), state.version)
    assert written is not None and written.seq == notice.seq + 1


# --- events and history -----------------------------------------------------------------

AGENT = Actor("build-agent", "agent")
ALICE = Actor("alice", "client", ClientInfo("tui", "qbroker tui"))


async def start_recorded(store: Store, sid: str, *, key: str | None = None, now: float = NOW) -> Questionnaire:
    fresh = machine.start(f"q-{uuid.uuid4().hex[:12]}", sid, QUESTIONS, now, asked_by=AGENT.sub)
    return await store.create(fresh, key, (started(fresh, AGENT),))


async def write_recorded(
    store: Store, state: Questionnaire, command: machine.Command, by: Actor | None = ALICE, now: float = NOW + 1
) -> tuple[Questionnaire, tuple[Event, ...]]:
    new = machine.apply(state, command, now, by)
    recorded = events_of(state, new, by)
    assert await store.commit(new, state.version, events=recorded)
    return new, recorded


async def test_every_change_s_events_are_kept_in_order_and_drafts_add_none(store: Store) -> None:
    sid = new_session()
    state = await start_recorded(store, sid)
    expected = [started(state, AGENT)]
    for command, by in (
        (machine.AnswerQuestion(state.id, 0, "target", ("staging",)), ALICE),
        (machine.Draft(state.id, 1, ("unit",)), ALICE),
        (machine.Clarify(state.id, 1, "What is e2e?"), ALICE),
        (machine.Resume(1, "End to end."), AGENT),
        (machine.AnswerQuestion(state.id, 3, "checks", ("unit",)), ALICE),
    ):
        state, recorded = await write_recorded(store, state, command, by)
        expected.extend(recorded)

    kept = await store.events(sid, state.id)
    assert kept == expected
    assert [event.type for event in expected] == [
        "started",
        "answered",
        "clarification_requested",
        "resumed",
        "answered",
        "completed",
    ]
    assert (await store.load(sid, state.id)) == state  # (ended: the memory store keeps it packed)


async def test_a_lost_compare_and_set_appends_no_events(store: Store) -> None:
    sid = new_session()
    state = await start_recorded(store, sid)
    await write_recorded(store, state, machine.Draft(state.id, 0, ("staging",)))
    stale = machine.apply(state, machine.Abort(), NOW + 2, AGENT)
    assert not await store.commit(stale, state.version, events=events_of(state, stale, AGENT))
    assert await store.events(sid, state.id) == [started(state, AGENT)]


async def test_an_idempotent_repeat_of_a_start_adds_no_events(store: Store) -> None:
    sid = new_session()
    first = await start_recorded(store, sid, key="retry-1")
    assert await start_recorded(store, sid, key="retry-1") == first
    assert await store.events(sid, first.id) == [started(first, AGENT)]


async def test_the_events_of_an_unknown_questionnaire_are_none(store: Store) -> None:
    sid = new_session()
    await start_recorded(store, sid)
    assert await store.events(sid, "q-unknown") is None
    assert await store.events(new_session(), "q-unknown") is None


async def test_the_history_lists_a_session_s_questionnaires_newest_first_each_as_it_stands(store: Store) -> None:
    sid = new_session()
    cancelled = await start_recorded(store, sid, now=NOW)
    cancelled, _ = await write_recorded(store, cancelled, machine.Cancel(cancelled.id, 0), now=NOW + 5)
    waiting = await start_recorded(store, sid, now=NOW + 1)
    answering = await start_recorded(store, sid, now=NOW + 2)
    await start_recorded(store, new_session())  # another session's

    summaries = await store.history(sid, None, 10)

    assert [s.questionnaire_id for s in summaries] == [answering.id, waiting.id, cancelled.id]
    assert summaries[0].seq > summaries[1].seq > summaries[2].seq
    assert [s.to_wire() for s in summaries] == [
        {
            "id": answering.id,
            "status": "in_progress",
            "reason": None,
            "createdAt": NOW + 2,
            "endedAt": None,
            "askedBy": "build-agent",
            "questions": 2,
        },
        {
            "id": waiting.id,
            "status": "in_progress",
            "reason": None,
            "createdAt": NOW + 1,
            "endedAt": None,
            "askedBy": "build-agent",
            "questions": 2,
        },
        {
            "id": cancelled.id,
            "status": "cancelled",
            "reason": "user_cancelled",
            "createdAt": NOW,
            "endedAt": NOW + 5,
            "askedBy": "build-agent",
            "questions": 2,
        },
    ]


async def test_the_history_pages_from_before_a_questionnaire(store: Store) -> None:
    sid = new_session()
    ids = [(await start_recorded(store, sid)).id for _ in range(5)]

    first = await store.history(sid, None, 2)
    second = await store.history(sid, first[-1].seq, 2)
    third = await store.history(sid, second[-1].seq, 2)

    assert [s.questionnaire_id for s in first + second + third] == ids[::-1]
    assert await store.history(sid, third[-1].seq, 2) == []
    assert await store.history(sid, None, 0) == []
    assert await store.history(new_session(), None, 5) == []


async def test_events_and_the_history_entry_expire_with_their_questionnaire(store: Store) -> None:
    sid = new_session()
    state = await start_recorded(store, sid)
    assert len(await store.history(sid, None, 5)) == 1
    store.retention = 0.2  # (from its last write on: the cancel)
    await write_recorded(store, state, machine.Cancel(state.id, 0))

    async def gone() -> bool:
        return await store.events(sid, state.id) is None and await store.history(sid, None, 5) == []

    await eventually(gone, "the events and the history entry to expire")


# --- retention ------------------------------------------------------------------------


async def test_a_terminal_questionnaire_expires_after_the_retention(store: Store) -> None:
    sid = new_session()
    store.retention = 0.2
    state = await store.create(new_questionnaire(sid))
    cancelled = advanced(state, machine.Cancel(state.id, 0))
    assert await store.compare_and_set(cancelled, state.version)
    assert await store.load(sid, state.id) == cancelled

    async def gone() -> bool:
        return await store.load(sid, state.id) is None

    await eventually(gone, "the cancelled questionnaire to expire")


async def test_an_abandoned_open_questionnaire_expires_and_leaves_the_queue(store: Store) -> None:
    sid = new_session()
    store.retention = 0.2
    state = await store.create(new_questionnaire(sid))

    async def gone() -> bool:
        return await store.queue(sid) == [] and await store.load(sid, state.id) is None

    await eventually(gone, "the abandoned questionnaire to expire", timeout=2.0)
    assert await store.shown(sid) is None


async def test_an_expired_idempotency_key_creates_a_new_questionnaire(store: Store) -> None:
    sid = new_session()
    store.retention = 0.2
    first = await store.create(new_questionnaire(sid), idempotency_key="k")

    async def gone() -> bool:
        return await store.load(sid, first.id) is None

    await eventually(gone, "the first questionnaire to expire")
    second = new_questionnaire(sid)
    assert await store.create(second, idempotency_key="k") == second


async def test_the_store_answers_ping(store: Store) -> None:
    assert await store.ping()


# --- memory only ----------------------------------------------------------------------


async def test_the_memory_store_keeps_ended_questionnaires_packed_and_open_ones_live() -> None:
    # A week's retention of ended questionnaires, as bytes: little memory, and nothing the
    # cyclic collector has to walk (as live states they made most of its passes under load).
    store = MemoryStore()
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    kept = store._sessions[sid].questionnaires
    assert kept[state.id] is state  # open: commands start from it, so it stays as it is

    ended = completed(state)
    assert await store.commit(ended, state.version)

    packed = kept[ended.id]
    assert isinstance(packed, bytes) and not gc.is_tracked(packed)
    assert await store.load(sid, ended.id) == ended


# --- Redis only -----------------------------------------------------------------------


async def test_every_redis_key_carries_the_session_hash_tag(redis_store: RedisStore, redis_client: Redis) -> None:
    sid = "team.alpha:42-x"
    await redis_store.subscribe(sid)
    state = await redis_store.create(new_questionnaire(sid), idempotency_key="key:with{braces}")
    await redis_store.compare_and_set(advanced(state, machine.Draft(state.id, 0, ("staging",))), state.version)
    await redis_store.create(new_questionnaire(sid))
    await redis_store.heartbeat(sid, "c-1", ttl=30, now=NOW)
    await redis_store.heartbeat(sid, "c-2", ttl=30, now=NOW)
    await redis_store.leave(sid, "c-1", now=NOW + 1)
    await redis_store.presence(sid, NOW + 2)

    keys = [key.decode() async for key in redis_client.scan_iter(count=100)]
    own = [key for key in keys if key.startswith("qb:{" + sid + "}:")]

    assert len(own) >= 8  # 2 questionnaires, queue, seq, history, idempotency key, clients, seen
    # The one key sessions share: the inbox's index shard of the session's tenant (keys.py).
    assert set(keys) - set(own) == {index_key(inbox_shard(sid))}, keys


async def test_every_redis_key_expires(redis_store: RedisStore, redis_client: Redis) -> None:
    sid = new_session()
    state = await redis_store.create(new_questionnaire(sid), idempotency_key="k")
    await redis_store.compare_and_set(completed(state), state.version)
    await redis_store.create(new_questionnaire(sid))
    await redis_store.heartbeat(sid, "c-1", ttl=30, now=NOW)

    keys = [key async for key in redis_client.scan_iter(count=100)]
    index = index_key(inbox_shard(sid)).encode()

    assert keys
    for key in keys:
        if key != index:  # shared by a tenant's sessions: each leaves it when nothing of it is open
            assert await redis_client.pttl(key) > 0, key


async def test_a_session_leaves_the_inbox_index_when_nothing_of_it_is_open(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    redis_store._inbox_index.unindex_after = 0.01  # (some seconds after nothing is open: here at once)
    sid = new_session()
    first = await redis_store.create(new_questionnaire(sid))
    second = await redis_store.create(new_questionnaire(sid))
    index = index_key(inbox_shard(sid))
    await redis_store.compare_and_set(completed(first), first.version)
    await eventually(
        lambda: not redis_store._chores and not redis_store._inbox_index.emptied, what="the index's upkeep"
    )
    assert await redis_client.zscore(index, sid) == 0  # one still open

    await redis_store.compare_and_set(completed(second), second.version)

    await eventually(lambda: _not_indexed(redis_client, index, sid), what="the session to leave the index")


async def _not_indexed(client: Redis, index: str, sid: str) -> bool:
    return await client.zscore(index, sid) is None


async def test_a_retried_write_keeps_its_events_once(redis_store: RedisStore) -> None:
    """A script run again (its first reply lost) finds its own write and appends nothing;
    a create run again writes the same events again, not twice."""
    sid = new_session()
    fresh = machine.start("q-retried", sid, QUESTIONS, NOW, asked_by="build-agent")
    first = (started(fresh, AGENT),)
    await redis_store.create(fresh, None, first)
    await redis_store.create(fresh, None, first)
    answered = machine.apply(fresh, machine.AnswerQuestion(fresh.id, 0, "target", ("staging",)), NOW + 1, ALICE)
    recorded = events_of(fresh, answered, ALICE)
    assert await redis_store.compare_and_set(answered, fresh.version, recorded)
    assert await redis_store.compare_and_set(answered, fresh.version, recorded)
    assert await redis_store.events(sid, fresh.id) == [*first, *recorded]


async def test_the_history_lets_go_of_expired_questionnaires_it_passes(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_session()
    gone, kept = await start_recorded(redis_store, sid), await start_recorded(redis_store, sid)
    await redis_client.delete("qb:{" + sid + "}:q:" + gone.id, "qb:{" + sid + "}:ev:" + gone.id)  # as expiry would

    assert [s.questionnaire_id for s in await redis_store.history(sid, None, 5)] == [kept.id]
    assert await redis_client.zrange("qb:{" + sid + "}:history", 0, -1) == [kept.id.encode()]


async def test_the_events_and_history_keys_expire_with_the_retention(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_session()
    state = await start_recorded(redis_store, sid)
    await write_recorded(redis_store, state, machine.AnswerQuestion(state.id, 0, "target", ("staging",)))
    base = "qb:{" + sid + "}:"
    for key in (base + "q:" + state.id, base + "history"):
        assert 0 < await redis_client.pttl(key) <= 3600 * 1000, key
    assert not await redis_client.exists(base + "ev:" + state.id)  # (its events: fields of its hash)


async def test_a_retried_compare_and_set_reports_its_own_write(redis_store: RedisStore) -> None:
    sid = new_session()
    state = await redis_store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    rival = advanced(state, machine.Draft(state.id, 0, ("production",)))

    assert await redis_store.compare_and_set(drafted, state.version)
    assert await redis_store.compare_and_set(drafted, state.version)  # the retry of a lost reply
    assert not await redis_store.compare_and_set(rival, state.version)
    assert await redis_store.load(sid, state.id) == drafted


async def test_large_write_numbers_travel_intact_in_notices(
    redis_store: RedisStore, redis_client: Redis, listener: Listener
) -> None:
    sid = new_session()
    await redis_store.subscribe(sid)
    await redis_client.set("qb:{" + sid + "}:seq", 2**40 + 255)  # every byte of the uint 64 used
    state = await redis_store.create(new_questionnaire(sid))
    assert await redis_store.compare_and_set(advanced(state, machine.Abort()), state.version)

    notices = [await listener.next_notice() for _ in range(2)]

    assert [n.seq for n in notices] == [2**40 + 256, 2**40 + 257]


async def test_the_notice_of_its_own_write_gives_a_store_the_state_it_wrote(
    redis_store: RedisStore, redis_client: Redis, listener: Listener
) -> None:
    sid = new_session()
    await redis_store.subscribe(sid)
    other_process = RedisStore("redis://unused", 3600.0, client=redis_client)
    ours = await redis_store.create(new_questionnaire(sid))
    theirs = await other_process.create(new_questionnaire(sid))

    notices = [await listener.next_notice() for _ in range(2)]

    assert [n.record.state() if n.record else None for n in notices] == [ours, theirs]
    assert notices[0].record is not None and notices[0].record.state() is ours  # not decoded again
    assert notices[1].record is not None and notices[1].record.state() is not theirs  # decoded
    assert not redis_store._own_writes.states  # the notice took its state with it


async def followed_and_created(store: RedisStore, listener: Listener) -> tuple[str, Questionnaire]:
    """A new session ``store`` follows, with a questionnaire created in it (its notice heard)."""
    sid = new_session()
    await store.subscribe(sid)
    state = await store.create(new_questionnaire(sid))
    assert await listener.next_notice() == Notice(sid, state.id, 0)
    return sid, state


async def test_a_write_its_writer_shows_is_not_told_back_to_its_process_but_to_every_other(
    redis_store: RedisStore, redis_client: Redis, listener: Listener
) -> None:
    """As on the memory store: the writer shows it and wakes its own waiting calls itself.
    Its notice still goes out (other processes need it) and is dropped unread here."""
    sid, state = await followed_and_created(redis_store, listener)
    other_process = RedisStore("redis://unused", 3600.0, client=redis_client)
    async with redis_client.pubsub() as elsewhere:
        await elsewhere.subscribe(channel_for(sid))
        await elsewhere.get_message(timeout=1.0)  # (the subscription's confirmation)
        drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
        assert await redis_store.commit(drafted, state.version, shown_by_writer=True) is not None
        told = await elsewhere.get_message(timeout=2.0)
        assert told is not None and told["type"] == "message"  # published all the same
    # Not told here: the next notice is another process's write after it.
    theirs = advanced(drafted, machine.Draft(state.id, 0, ("production",)), now=NOW + 2)
    assert await other_process.compare_and_set(theirs, drafted.version)
    heard = await listener.next_notice()
    assert (heard.version, heard.record.state() if heard.record else None) == (theirs.version, theirs)
    assert not redis_store._own_writes.shown.get(channel_for(sid).encode())


async def test_a_shown_write_that_lost_the_race_leaves_the_winners_notice_to_be_told(
    redis_store: RedisStore, redis_client: Redis, listener: Listener
) -> None:
    """Same questionnaire, same version, same status: only the record tells them apart."""
    sid, state = await followed_and_created(redis_store, listener)
    other_process = RedisStore("redis://unused", 3600.0, client=redis_client)
    theirs = advanced(state, machine.Draft(state.id, 0, ("production",)))
    assert await other_process.compare_and_set(theirs, state.version)
    ours = advanced(state, machine.Draft(state.id, 0, ("staging",)), now=NOW + 2)
    assert await redis_store.commit(ours, state.version, shown_by_writer=True) is None
    heard = await listener.next_notice()
    assert (heard.version, heard.record.state() if heard.record else None) == (theirs.version, theirs)
    assert not redis_store._own_writes.shown.get(channel_for(sid).encode())


async def test_a_shown_write_too_large_for_its_notice_to_carry_is_told_back_all_the_same(
    redis_store: RedisStore, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its notice has no record to tell it from another process's write of the same version."""
    monkeypatch.setattr(redis_store_module, "NOTICE_STATE_LIMIT", 16)
    sid, state = await followed_and_created(redis_store, listener)
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    assert await redis_store.commit(drafted, state.version, shown_by_writer=True) is not None
    heard = await listener.next_notice()
    assert (heard.version, heard.record) == (drafted.version, None)


async def test_a_shown_write_whose_caller_fails_after_its_notice_was_dropped_has_this_process_look_again(
    redis_store: RedisStore, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write landed, its notice came back and was dropped unread, then the call failed
    (its reply lost): nobody showed it, so this process is told to read the session again."""
    sid, state = await followed_and_created(redis_store, listener)
    commands = redis_store._commands
    real_write = commands.write

    async def written_then_lost(*args: Any) -> Any:
        await real_write(*args)
        channel = channel_for(sid).encode()
        await eventually(lambda: not redis_store._own_writes.shown.get(channel) or None, "its notice dropped")
        raise RedisTimeoutError("the reply was lost")

    monkeypatch.setattr(commands, "write", written_then_lost)
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    with pytest.raises(StoreUnavailable):
        await redis_store.commit(drafted, state.version, shown_by_writer=True)
    assert await listener.next_notice() == Notice(sid, state.id, drafted.version)  # "look again"


async def test_a_store_keeps_a_write_of_its_own_only_when_its_notice_will_come(redis_client: Redis) -> None:
    store = RedisStore("redis://unused", 3600.0, client=redis_client)  # not started: reads no notice
    unfollowed, outcomes_only = new_session(), new_session()
    await store.subscribe(outcomes_only, outcomes_only=True)
    await store.create(new_questionnaire(unfollowed))
    opened = await store.create(new_questionnaire(outcomes_only))
    assert not store._own_writes.states  # nobody here follows these writes

    aborted = advanced(opened, machine.Abort())
    assert await store.compare_and_set(aborted, opened.version)

    assert [kept.state for kept in store._own_writes.states.values()] == [aborted]  # an outcome: its notice comes here
    await store.close()


async def test_a_store_keeps_only_its_latest_writes_whose_notices_did_not_come(
    redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_notices, "_OWN_RECORDS", 3)
    store = RedisStore("redis://unused", 3600.0, client=redis_client)  # not started: reads no notice
    sid = new_session()
    await store.subscribe(sid)
    states = [await store.create(new_questionnaire(sid)) for _ in range(5)]

    assert [kept.state for kept in store._own_writes.states.values()] == states[-3:]
    await store.close()


async def test_a_state_too_large_for_a_notice_travels_without_it(
    redis_store: RedisStore, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_store_module, "NOTICE_STATE_LIMIT", 16)
    sid = new_session()
    await redis_store.subscribe(sid)
    first = await redis_store.create(new_questionnaire(sid))
    await redis_store.create(new_questionnaire(sid))
    assert await redis_store.compare_and_set(advanced(first, machine.Abort()), first.version)

    notices = [await listener.next_notice() for _ in range(3)]

    assert [(n.status, n.record) for n in notices] == [
        ("in_progress", None),
        ("in_progress", None),
        ("cancelled", None),
    ]
    assert notices[2].head is None  # the next head is too large as well: not said
    assert notices[2].seq == notices[0].seq + 2


async def test_malformed_and_older_notices_do_not_stop_the_listener(
    redis_store: RedisStore, redis_client: Redis, listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    sid = new_session()
    await redis_store.subscribe(sid)
    channel = channel_for(sid)
    for junk in (
        b"\xc1 not msgpack",
        msgpack.packb([sid, "q-x"]),
        msgpack.packb({"sid": sid}),
        msgpack.packb([sid, "q-x", "7"]),
        msgpack.packb([sid, "q-x", 7, "in_progress", 12, -1, None]),  # record and number of the wrong types
        msgpack.packb([sid, "q-x", 8, "in_progress", b"\xc1", 3, b"\xc1"]),  # records that do not decode
    ):
        await redis_client.publish(channel, junk)
    await redis_client.publish(channel, msgpack.packb([sid, "q-old", 3]))  # an older broker's notice
    state = await redis_store.create(new_questionnaire(sid))

    wrong_types = await listener.next_notice()
    undecodable = await listener.next_notice()
    older = await listener.next_notice()
    current = await listener.next_notice()

    assert (wrong_types, wrong_types.status, wrong_types.record) == (Notice(sid, "q-x", 7), None, None)
    assert (undecodable.status, undecodable.seq, undecodable.head) == ("in_progress", 3, None)
    assert undecodable.record is not None
    with pytest.raises(Exception):  # noqa: B017 - whatever msgpack raises; the service reads instead
        undecodable.record.state()
    assert (older, older.status, older.seq) == (Notice(sid, "q-old", 3), None, 0)
    assert current == Notice(sid, state.id, 0) and current.status == "in_progress"
    assert "malformed notice" in caplog.text


async def test_a_redis_store_refuses_a_client_that_decodes_responses() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            RedisStore("redis://fakeredis", 60.0, client=client)
    finally:
        await client.aclose()


async def test_a_lost_notice_connection_resubscribes_then_calls_on_reconnect(
    real_redis: RedisServer, listener: Listener
) -> None:
    async with started_with_admin(real_redis, listener) as (store, admin):
        sid = new_session()
        await store.subscribe(sid)

        assert await kill_pubsub_connections(admin) >= 1
        await listener.next_reconnect()

        # on_reconnect runs only once Redis confirmed the subscriptions again.
        state = await store.create(new_questionnaire(sid))
        assert await listener.next_notice() == Notice(sid, state.id, 0)
        assert listener.reconnects.empty()


async def test_a_session_subscribed_while_disconnected_is_subscribed_on_reconnect(
    real_redis: RedisServer, listener: Listener
) -> None:
    async with started_with_admin(real_redis, listener) as (store, admin):
        first, second = new_session(), new_session()
        await store.subscribe(first)
        await kill_pubsub_connections(admin)
        await store.subscribe(second)  # waits for the reconnect's confirmation if need be
        await listener.next_reconnect()

        state = await store.create(new_questionnaire(second))
        assert await listener.next_notice() == Notice(second, state.id, 0)


async def test_sharded_notices_use_ssubscribe_and_spublish(real_redis: RedisServer, listener: Listener) -> None:
    async with started_with_admin(real_redis, listener, sharded=True) as (store, admin):
        sid = new_session()
        await store.subscribe(sid)
        assert await admin.execute_command("PUBSUB", "SHARDNUMSUB", f"qb:{{{sid}}}:events") == [  # type: ignore[no-untyped-call]  # (redis-py leaves it unannotated)
            f"qb:{{{sid}}}:events".encode(),
            1,
        ]

        state = await store.create(new_questionnaire(sid))

        assert await listener.next_notice() == Notice(sid, state.id, 0)


async def test_every_method_raises_store_unavailable_when_redis_is_down(
    listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_subscriptions, "CONFIRM_TIMEOUT", 0.5)  # subscribe gives up sooner
    with redis_server() as server:
        store = RedisStore(server.url, 3600.0)
        await store.start(listener.on_notice, listener.on_reconnect)
        try:
            sid = new_session()
            state = await store.create(new_questionnaire(sid))
            await store.subscribe(sid)
            server.stop()

            calls: list[Callable[[], Awaitable[object]]] = [
                lambda: store.create(new_questionnaire(sid)),
                lambda: store.load(sid, state.id),
                lambda: store.compare_and_set(advanced(state, machine.Abort()), state.version),
                lambda: store.queue(sid),
                lambda: store.shown(sid),
                lambda: store.heartbeat(sid, "c-1", 30, NOW),
                lambda: store.leave(sid, "c-1", NOW),
                lambda: store.presence(sid, NOW),
                lambda: store.subscribe(new_session()),
            ]
            for call in calls:
                with pytest.raises(StoreUnavailable):
                    await asyncio.wait_for(call(), DEADLINE * 3)
            assert not await store.ping()
            await store.unsubscribe(sid)  # never fails: a new connection skips it anyway
        finally:
            await store.close()


async def test_ping_fails_while_the_notice_connection_cannot_subscribe(
    listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    """Readiness (``/readyz`` asks ``ping``) follows the notice connection too: without it a
    broker refuses every client, so a load balancer must not send it any. The log says why."""
    with redis_server() as server, SyncRedis(port=server.port) as admin:  # (typed commands)
        store = RedisStore(server.url, 3600.0)
        await store.start(listener.on_notice, listener.on_reconnect)
        try:
            await store.subscribe(new_session())
            assert await store.ping()
            admin.execute_command("ACL", "SETUSER", "default", "resetchannels")
            admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")

            async def refusal_logged() -> bool:
                return "lost (ResponseError: NOPERM" in caplog.text

            await eventually(refusal_logged, "the refusal in the log")
            assert not await store.ping()
            assert not store.notices_connected  # (the /metrics gauge)
            admin.execute_command("ACL", "SETUSER", "default", "allchannels")
            await eventually(store.ping, "ping to succeed once the notice connection is back")
            assert store.notices_connected
        finally:
            await store.close()


async def test_a_store_cannot_start_without_redis(listener: Listener) -> None:
    with redis_server() as server:
        url = server.url
    store = RedisStore(url, 3600.0)
    try:
        with pytest.raises(StoreUnavailable):
            await store.start(listener.on_notice, listener.on_reconnect)
    finally:
        await store.close()


@pytest.mark.parametrize("query", ["?db=0", "?db=0&socket_timeout=5"], ids=["own wire", "redis-py"])
async def test_a_unix_url_talks_to_redis_over_its_unix_socket(
    real_redis: RedisServer, listener: Listener, query: str
) -> None:
    """Every connection of a store on a unix:// URL, commands and notices, is on the socket:
    over the store's own wire for a plain URL, over redis-py for one with other options."""
    store = RedisStore(f"unix://{real_redis.unix_socket}{query}", 3600.0)
    assert (store._commands.wire is not None) == (query == "?db=0")
    admin = Redis.from_url(real_redis.url)
    earlier = {client["id"] for client in await admin.client_list()}  # (other tests' may linger)
    await store.start(listener.on_notice, listener.on_reconnect)
    try:
        sid = new_session()
        await store.subscribe(sid)
        state = await store.create(new_questionnaire(sid))
        assert await listener.next_notice() == Notice(sid, state.id, 0)
        assert await store.compare_and_set(advanced(state, machine.Abort()), state.version) is not None
        assert await store.ping()

        own = [client for client in await admin.client_list() if client["id"] not in earlier]
        assert len(own) >= 2  # commands and notices
        assert all(client["addr"].startswith("/") for client in own), own
    finally:
        await admin.aclose()
        await store.close()


async def test_fakeredis_going_away_raises_store_unavailable(listener: Listener) -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeAsyncRedis(server=server)
    store = RedisStore("redis://fakeredis", 3600.0, client=client)
    try:
        state = await store.create(new_questionnaire(new_session()))
        server.connected = False
        with pytest.raises(StoreUnavailable):
            await store.load(state.session_id, state.id)
        assert not await store.ping()
    finally:
        await store.close()
        await client.aclose()


async def test_a_failing_notice_handler_does_not_stop_later_notices(redis_client: Redis) -> None:
    delivered: asyncio.Queue[Notice] = asyncio.Queue()
    failures = 0

    async def on_notice(notice: Notice) -> None:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise RuntimeError("handler bug")
        delivered.put_nowait(notice)

    async def on_reconnect() -> None:
        pass

    store = RedisStore("redis://unused", 3600.0, client=redis_client)
    await store.start(on_notice, on_reconnect)
    try:
        sid = new_session()
        await store.subscribe(sid)
        await store.create(new_questionnaire(sid))
        second = await store.create(new_questionnaire(sid))

        assert await asyncio.wait_for(delivered.get(), DEADLINE) == Notice(sid, second.id, 0)
    finally:
        await store.close()


async def test_no_answer_or_clarification_text_reaches_the_logs(
    real_redis: RedisServer, listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with started_with_admin(real_redis, listener) as (store, admin):
        sid = new_session()
        await store.subscribe(sid)
        state = await store.create(new_questionnaire(sid))
        answered = advanced(state, machine.AnswerQuestion(state.id, 0, "target", (), other="SECRET-OTHER"))
        assert await store.compare_and_set(answered, state.version)
        clarify = advanced(answered, machine.Clarify(state.id, answered.step, "SECRET-REQUEST"))
        assert not await store.compare_and_set(clarify, state.version)  # a lost race
        await kill_pubsub_connections(admin)
        await listener.next_reconnect()
        assert await store.compare_and_set(clarify, answered.version)

    assert caplog.records  # the reconnect was logged
    assert "SECRET" not in caplog.text


async def test_the_scripts_survive_a_script_flush(real_redis: RedisServer, listener: Listener) -> None:
    """The store calls EVALSHA itself: NOSCRIPT (a flush, a restarted Redis) loads the script again."""
    async with started_with_admin(real_redis, listener) as (store, admin):
        sid = new_session()
        await store.subscribe(sid)
        state = await store.create(new_questionnaire(sid))
        assert await listener.next_notice() == Notice(sid, state.id, 0)
        await store.heartbeat(sid, "c-1", 30, NOW)
        for _ in range(2):
            await admin.script_flush()
            done = completed(state)
            written = await store.commit(done, state.version)
            assert written is not None and written.head == Head(None, written.seq)
            await admin.script_flush()
            state = await store.create(new_questionnaire(sid))
            assert await store.queue(sid) == [state.id]
            await admin.script_flush()
            assert await store.presence(sid, NOW) == Presence(1, NOW)


@pytest.mark.parametrize(
    "command",
    [
        ("EVALSHA", "a" * 40, 2, "qb:{s}:q:x", "qb:{s}:seq", 0, -7, 2**63 - 1, 1700000000.25, b"\x97\x00", "\u00e9"),
        ("SCRIPT LOAD", "return 1"),
        (b"CLIENT KILL", "TYPE", "pubsub"),
        ("SET", bytearray(b"k"), memoryview(b"v")),
        ("SET", "k", 2**70),
    ],
)
def test_commands_packed_in_c_are_the_bytes_redis_py_packs(command: tuple[EncodableT, ...]) -> None:
    python = Connection()
    fast = redis_connections._packing_in_c(Connection)()
    try:
        expected = b"".join(python.pack_command(*command))
    except DataError:  # a bytearray before redis-py 8.0: refused by both alike
        with pytest.raises(DataError):
            fast.pack_command(*command)
        return
    assert b"".join(fast.pack_command(*command)) == expected


def test_commands_packed_in_c_refuse_what_redis_py_refuses() -> None:
    fast = redis_connections._packing_in_c(Connection)()
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", True)
