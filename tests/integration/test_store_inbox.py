"""The store contract's inbox part: every store keeps the same entries, index and watch.

The same ``store`` fixtures as test_store_contract.py (memory, Redis over fakeredis, a real
redis-server on TCP and on its Unix socket); test_redis_cluster.py runs these again on a
three-master Redis Cluster. Sessions are named as a tenant's (``<tenant>:<name>``), the
shape the index shards by.
"""

# ruff: noqa: F811 - the contract's fixtures are imported by name, and tests take them as arguments
from __future__ import annotations

import asyncio

from broker.core import inbox, machine
from broker.core.inbox import Entry
from broker.store.base import Notice, SessionInbox, Store
from broker.store.redis import RedisStore
from tests.helpers.samples import new_sid
from tests.helpers.waiting import eventually
from tests.integration.test_store_contract import (  # noqa: F401 - the fixtures, used by name
    DEADLINE,
    NOW,
    Listener,
    advanced,
    completed,
    listener,
    new_questionnaire,
    real_redis,
    store,
)


def new_tenant() -> str:
    return new_sid("tenant")


def unindexing_at_once(store: Store) -> None:
    """A Redis store takes a session with nothing open out of the index some seconds later
    (inbox_index.py): here at once."""
    if isinstance(store, RedisStore):
        store._inbox_index.unindex_after = 0.01


def upkeep_done(store: Store) -> bool:
    """No removal from the index is on its way (a Redis store's, beside its writes)."""
    if not isinstance(store, RedisStore):
        return True
    return not store._chores and not store._inbox_index.emptied


async def one_session(store: Store, session_id: str) -> SessionInbox:
    (found,) = await store.session_inboxes([session_id], NOW)
    return found


async def entries_of(store: Store, session_id: str) -> dict[str, Entry]:
    return {entry.questionnaire_id: entry for entry in (await one_session(store, session_id)).entries}


async def next_presence(listener: Listener, session_id: str) -> int:
    """The next presence change of ``session_id`` (a store may tell others' too)."""
    while True:
        told, clients = await asyncio.wait_for(listener.presences.get(), DEADLINE)
        if told == session_id:
            return clients


async def next_notice_of(listener: Listener, session_id: str) -> Notice:
    while True:
        notice = await listener.next_notice()
        if notice.session_id == session_id:
            return notice


# --- a session's entries ------------------------------------------------------------


async def test_an_open_questionnaire_has_its_entry_in_its_session_s_inbox(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))

    found = await one_session(store, sid)

    assert found.entries == (inbox.entry_of(state),)
    assert found.seq == 1
    assert found.clients == 0


async def test_a_session_s_inbox_counts_its_live_clients(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    await store.create(new_questionnaire(sid))
    await store.heartbeat(sid, "c-1", ttl=30, now=NOW)
    await store.heartbeat(sid, "c-2", ttl=5, now=NOW)

    assert (await one_session(store, sid)).clients == 2
    (later,) = await store.session_inboxes([sid], NOW + 10)  # c-2's heartbeat lapsed
    assert later.clients == 1


async def test_a_session_never_seen_has_an_empty_inbox(store: Store) -> None:
    sid = f"{new_tenant()}:nothing"
    assert await store.session_inboxes([sid], NOW) == [SessionInbox(sid, (), 0, 0)]


async def test_inboxes_come_back_in_the_order_asked(store: Store) -> None:
    tenant = new_tenant()
    sids = [f"{tenant}:{n}" for n in range(5)]
    for sid in sids[::2]:
        await store.create(new_questionnaire(sid))
    found = await store.session_inboxes(sids, NOW)
    assert [s.session_id for s in found] == sids
    assert [len(s.entries) for s in found] == [1, 0, 1, 0, 1]


async def test_an_answer_moves_the_entry_and_a_draft_does_not(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)), now=NOW + 5)
    assert await store.compare_and_set(drafted, state.version)
    assert (await entries_of(store, sid))[state.id] == inbox.entry_of(state)  # updatedAt unmoved

    answered = advanced(drafted, machine.AnswerQuestion(state.id, 0, "target", ("staging",)), now=NOW + 9)
    assert await store.compare_and_set(answered, drafted.version)
    entry = (await entries_of(store, sid))[state.id]
    assert (entry.index, entry.label, entry.updated_at, entry.step) == (1, "Checks", NOW + 9, 1)


async def test_a_clarification_request_and_its_resume_move_the_entry(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))
    asked = advanced(state, machine.Clarify(state.id, 0, "which staging?"), now=NOW + 3)
    assert await store.compare_and_set(asked, state.version)
    assert (await entries_of(store, sid))[state.id].status == "needs_clarification"

    resumed = advanced(asked, machine.Resume(asked.revision, "the EU one"), now=NOW + 4)
    assert await store.compare_and_set(resumed, asked.version)
    entry = (await entries_of(store, sid))[state.id]
    assert (entry.status, entry.updated_at) == ("in_progress", NOW + 4)


async def test_an_ended_questionnaire_leaves_its_session_s_inbox(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))
    assert set(await entries_of(store, sid)) == {first.id, second.id}

    assert await store.compare_and_set(completed(first), first.version)
    assert set(await entries_of(store, sid)) == {second.id}

    cancelled = advanced(second, machine.Cancel(second.id, 0))
    assert await store.compare_and_set(cancelled, second.version)
    assert await entries_of(store, sid) == {}


async def test_a_refused_compare_and_set_leaves_the_entry(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))
    stale = advanced(state, machine.AnswerQuestion(state.id, 0, "target", ("staging",)))
    assert await store.compare_and_set(stale, state.version)
    late = advanced(state, machine.Cancel(state.id, 0))
    assert not await store.compare_and_set(late, state.version)
    assert (await entries_of(store, sid))[state.id] == inbox.entry_of(stale)


async def test_an_idempotent_repeat_keeps_one_entry(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    first = await store.create(new_questionnaire(sid), idempotency_key="k")
    await store.create(new_questionnaire(sid), idempotency_key="k")
    assert list(await entries_of(store, sid)) == [first.id]


async def test_an_abandoned_open_questionnaire_leaves_its_session_s_inbox(store: Store) -> None:
    sid = f"{new_tenant()}:build"
    store.retention = 0.2
    await store.create(new_questionnaire(sid))

    async def gone() -> bool:
        return await entries_of(store, sid) == {}

    await eventually(gone, "the abandoned questionnaire to leave the inbox", timeout=3.0)


# --- the index ----------------------------------------------------------------------


async def test_the_index_finds_the_sessions_with_open_questionnaires_under_a_prefix(store: Store) -> None:
    alice, bob = new_tenant(), new_tenant()
    for sid in (f"{alice}:build", f"{alice}:review", f"{bob}:build"):
        await store.create(new_questionnaire(sid))
    await store.heartbeat(f"{alice}:idle", "c-1", ttl=30, now=NOW)  # a session with nothing asked

    assert sorted(await store.open_sessions(f"{alice}:")) == [f"{alice}:build", f"{alice}:review"]
    assert await store.open_sessions(f"{alice}:rev") == [f"{alice}:review"]
    assert await store.open_sessions(f"{bob}:") == [f"{bob}:build"]
    assert await store.open_sessions(f"{bob}:nothing") == []


async def test_a_prefix_without_a_colon_and_no_prefix_look_everywhere(store: Store) -> None:
    alice = new_tenant()
    twin = alice + "x"  # another tenant whose name starts with alice's
    for sid in (f"{alice}:build", f"{twin}:build", alice):
        await store.create(new_questionnaire(sid))

    assert sorted(await store.open_sessions(alice)) == sorted([f"{alice}:build", f"{twin}:build", alice])
    assert {f"{alice}:build", f"{twin}:build", alice} <= set(await store.open_sessions(""))


async def test_a_session_leaves_the_index_when_its_last_questionnaire_ends(store: Store) -> None:
    unindexing_at_once(store)
    tenant = new_tenant()
    sid = f"{tenant}:build"
    first = await store.create(new_questionnaire(sid))
    second = await store.create(new_questionnaire(sid))
    assert await store.compare_and_set(completed(first), first.version)
    await eventually(lambda: upkeep_done(store), what="the index's upkeep")
    assert await store.open_sessions(f"{tenant}:") == [sid]

    assert await store.compare_and_set(completed(second), second.version)

    async def gone() -> bool:
        return await store.open_sessions(f"{tenant}:") == []

    await eventually(gone, "the session to leave the index")


async def test_a_session_asked_again_after_it_left_the_index_is_found_again(store: Store) -> None:
    unindexing_at_once(store)
    tenant = new_tenant()
    sid = f"{tenant}:build"
    first = await store.create(new_questionnaire(sid))
    assert await store.compare_and_set(completed(first), first.version)
    second = await store.create(new_questionnaire(sid))

    async def indexed() -> bool:  # (whatever the order of the removal and the second create)
        return await store.open_sessions(f"{tenant}:") == [sid]

    await eventually(indexed, "the session to be in the index")
    await eventually(lambda: upkeep_done(store), what="the index's upkeep")
    assert await store.open_sessions(f"{tenant}:") == [sid]
    assert list(await entries_of(store, sid)) == [second.id]


# --- watching a prefix --------------------------------------------------------------


async def test_a_watched_prefix_hears_of_every_questionnaire_created_under_it(store: Store, listener: Listener) -> None:
    tenant = new_tenant()
    await store.watch_inbox(f"{tenant}:")
    state = await store.create(new_questionnaire(f"{tenant}:build"))

    notice = await next_notice_of(listener, f"{tenant}:build")

    assert notice == Notice(f"{tenant}:build", state.id, 0)
    assert notice.status == "in_progress" and notice.seq == 1
    assert notice.record is not None and notice.record.state() == state


async def test_a_watched_prefix_hears_every_change_of_who_is_connected(store: Store, listener: Listener) -> None:
    tenant = new_tenant()
    sid = f"{tenant}:build"
    await store.watch_inbox(f"{tenant}:")

    await store.heartbeat(sid, "c-1", ttl=30, now=NOW)
    assert await next_presence(listener, sid) == 1
    await store.heartbeat(sid, "c-2", ttl=5, now=NOW)
    assert await next_presence(listener, sid) == 2
    await store.heartbeat(sid, "c-1", ttl=30, now=NOW + 1)  # a beat of one already there: no change
    await store.leave(sid, "c-1", now=NOW + 2)
    assert await next_presence(listener, sid) == 1
    await store.presence(sid, NOW + 10)  # c-2 lapsed: seen when someone looks
    assert await next_presence(listener, sid) == 0


async def test_a_client_back_after_its_heartbeat_lapsed_counts_as_arriving(store: Store, listener: Listener) -> None:
    tenant = new_tenant()
    sid = f"{tenant}:build"
    await store.watch_inbox(f"{tenant}:")
    await store.heartbeat(sid, "c-1", ttl=5, now=NOW)
    assert await next_presence(listener, sid) == 1
    await store.heartbeat(sid, "c-1", ttl=5, now=NOW + 10)
    assert await next_presence(listener, sid) == 1


async def test_a_watch_lasts_until_as_many_unwatches(store: Store, listener: Listener) -> None:
    tenant = new_tenant()
    await store.watch_inbox(f"{tenant}:")
    await store.watch_inbox(f"{tenant}:")
    await store.unwatch_inbox(f"{tenant}:")
    state = await store.create(new_questionnaire(f"{tenant}:a"))
    assert (await next_notice_of(listener, f"{tenant}:a")).questionnaire_id == state.id

    await store.unwatch_inbox(f"{tenant}:")
    await store.create(new_questionnaire(f"{tenant}:b"))
    marker = f"{tenant}:marker"  # a session subscribed to: its notice comes after any of b's
    await store.subscribe(marker)
    await store.create(new_questionnaire(marker))
    assert (await listener.next_notice()).session_id == marker


async def test_watching_every_session_hears_every_create(store: Store, listener: Listener) -> None:
    await store.watch_inbox("")
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))
    assert (await next_notice_of(listener, sid)).questionnaire_id == state.id


async def test_watching_a_prefix_without_a_colon_hears_creates_of_every_tenant_it_starts(
    store: Store, listener: Listener
) -> None:
    await store.watch_inbox("tenant")
    sid = f"{new_tenant()}:build"
    state = await store.create(new_questionnaire(sid))
    assert (await next_notice_of(listener, sid)).questionnaire_id == state.id


async def test_a_subscribed_session_s_create_under_a_watched_prefix_arrives_at_most_twice(
    store: Store, listener: Listener
) -> None:
    tenant = new_tenant()
    sid = f"{tenant}:build"
    await store.watch_inbox(f"{tenant}:")
    await store.subscribe(sid)
    state = await store.create(new_questionnaire(sid))
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    assert await store.compare_and_set(drafted, state.version)

    heard = [await listener.next_notice()]
    while heard[-1].version != 1:  # (Notice defines ==, and msgspec's != is identity)
        heard.append(await listener.next_notice())
    assert heard[0] == Notice(sid, state.id, 0)
    assert 1 <= heard.count(Notice(sid, state.id, 0)) <= 2
    assert set(heard) == {Notice(sid, state.id, 0), Notice(sid, state.id, 1)}
