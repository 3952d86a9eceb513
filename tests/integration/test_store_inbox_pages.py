"""The inbox's pages on every store: the index walked in id order (``Store.inbox_sessions``)
and a page of ``GET /v1/inbox`` read through it (broker/service/inbox_pages.py), which reads
the sessions it shows and a bounded look-ahead, never every session its scope covers.

The same ``store`` fixtures as test_store_contract.py (memory, Redis over fakeredis, a real
redis-server on TCP and on its Unix socket); test_redis_cluster.py runs these again on a
three-master Redis Cluster.
"""

# ruff: noqa: F811 - the contract's fixtures are imported by name, and tests take them as arguments
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from broker.core import inbox
from broker.core.inbox import PageKey, Row
from broker.service.inbox_pages import LOOK_AHEAD, read_page
from broker.store.base import SessionInbox, Store
from tests.helpers.samples import new_sid
from tests.helpers.waiting import eventually
from tests.integration.test_store_contract import (  # noqa: F401 - the fixtures, used by name
    NOW,
    Listener,
    completed,
    listener,
    new_questionnaire,
    real_redis,
    store,
)
from tests.integration.test_store_inbox import unindexing_at_once, upkeep_done


def new_tenant() -> str:
    return new_sid("pages")


@contextmanager
def sessions_read(store: Store) -> Iterator[list[str]]:
    """Every session id the store is asked to read the inbox entries of, while in the block."""
    read: list[str] = []
    reads = store.session_inboxes

    async def counted(session_ids: list[str], now: float) -> list[SessionInbox]:
        read.extend(session_ids)
        return await reads(session_ids, now)

    store.session_inboxes = counted  # type: ignore[method-assign]
    try:
        yield read
    finally:
        del store.session_inboxes


async def open_in(store: Store, session_ids: list[str], per_session: int = 1) -> list[str]:
    """A questionnaire (or ``per_session``) left open in each session; their ids."""
    created: list[str] = []
    for start in range(0, len(session_ids), 50):
        states = await asyncio.gather(
            *(
                store.create(new_questionnaire(sid))
                for sid in session_ids[start : start + 50]
                for _ in range(per_session)
            )
        )
        created += [state.id for state in states]
    return created


async def every_page(store: Store, scope: str, limit: int) -> list[list[Row]]:
    pages: list[list[Row]] = []
    after: PageKey | None = None
    while len(pages) < 1000:
        rows, after = await read_page(store, scope, after, limit, NOW)
        pages.append(rows)
        if after is None:
            return pages
        after = inbox.parse_cursor(inbox.cursor(after))  # (through the wire's form)
    raise AssertionError("the pages never ended")


def ids(rows: list[Row]) -> list[str]:
    return [entry.questionnaire_id for entry, _ in rows]


# --- the index, in id order -----------------------------------------------------------


async def test_the_index_lists_a_prefix_s_sessions_in_id_order_from_a_start(store: Store) -> None:
    tenant = new_tenant()
    names = ["b", "a", "c:1", "c", "d", "a:x"]
    await open_in(store, [f"{tenant}:{name}" for name in names])
    await open_in(store, [f"{new_tenant()}:a"])  # another tenant's
    every = sorted(f"{tenant}:{name}" for name in names)

    assert await store.inbox_sessions(f"{tenant}:", "", 100) == every
    assert await store.inbox_sessions(f"{tenant}:", "", 2) == every[:2]
    assert await store.inbox_sessions(f"{tenant}:", f"{tenant}:c", 3) == every[3:6]  # (the start included)
    assert await store.inbox_sessions(f"{tenant}:", f"{tenant}:c\0", 100) == every[4:]
    assert await store.inbox_sessions(f"{tenant}:c", "", 100) == [f"{tenant}:c", f"{tenant}:c:1"]
    assert await store.inbox_sessions(f"{tenant}:", "zzz", 100) == []
    assert await store.inbox_sessions(f"{tenant}:nothing", "", 100) == []


async def test_a_prefix_without_a_colon_and_no_prefix_merge_every_shard_in_order(store: Store) -> None:
    base = new_tenant()
    session_ids = [f"{base}{n}:s" for n in range(12)] + [f"{base}{n}" for n in range(12)]  # tenants over the shards
    await open_in(store, session_ids)

    assert await store.inbox_sessions(base, "", 100) == sorted(session_ids)
    assert await store.inbox_sessions(base, "", 5) == sorted(session_ids)[:5]
    assert await store.inbox_sessions(base, sorted(session_ids)[7], 4) == sorted(session_ids)[7:11]
    everywhere = await store.inbox_sessions("", base, 30)
    assert everywhere == sorted(everywhere) and everywhere[:24] == sorted(session_ids)


async def test_a_session_with_nothing_open_leaves_the_walk(store: Store) -> None:
    unindexing_at_once(store)
    tenant = new_tenant()
    first = await store.create(new_questionnaire(f"{tenant}:a"))
    await open_in(store, [f"{tenant}:b"])
    assert await store.compare_and_set(completed(first), first.version)

    async def gone() -> bool:
        return await store.inbox_sessions(f"{tenant}:", "", 10) == [f"{tenant}:b"]

    await eventually(gone, "the ended session to leave the index")
    await eventually(lambda: upkeep_done(store), what="the index's upkeep")


# --- pages ----------------------------------------------------------------------------


async def test_pages_cover_every_item_once_by_session(store: Store) -> None:
    tenant = new_tenant()
    session_ids = [f"{tenant}:{n:02d}" for n in range(23)]
    created = await open_in(store, session_ids, per_session=2)

    pages = await every_page(store, f"{tenant}:*", 5)

    shown = [row for page in pages for row in page]
    assert sorted(ids(shown)) == sorted(created) and len(shown) == 46
    assert [entry.session_id for entry, _ in shown] == sorted(session_ids * 2)
    assert all(len(page) == 5 for page in pages[:-1]) and 1 <= len(pages[-1]) <= 5
    whole, after = await read_page(store, f"{tenant}:*", None, 500, NOW)
    assert after is None and ids(whole) == ids(shown)


async def test_sessions_added_and_ended_between_pages(store: Store) -> None:
    unindexing_at_once(store)
    tenant = new_tenant()
    states = {}
    for n in range(10):
        states[n] = await store.create(new_questionnaire(f"{tenant}:{n * 10:03d}"))
    scope = f"{tenant}:*"

    first, after = await read_page(store, scope, None, 4, NOW)  # sessions 000..030
    assert [entry.session_id for entry, _ in first] == [f"{tenant}:{n * 10:03d}" for n in range(4)]
    assert after is not None
    # Meanwhile: a session after the cursor and one before it get a questionnaire, one
    # already shown and one not shown yet end.
    later = await store.create(new_questionnaire(f"{tenant}:055"))
    await store.create(new_questionnaire(f"{tenant}:005"))
    for n in (1, 7):
        assert await store.compare_and_set(completed(states[n]), states[n].version)
    rest: list[Row] = []
    while after is not None:
        page, after = await read_page(store, scope, inbox.parse_cursor(inbox.cursor(after)), 4, NOW)
        rest += page

    assert ids(rest) == [states[4].id, states[5].id, later.id, states[6].id, states[8].id, states[9].id]


async def test_a_page_after_the_last_item_of_a_session_with_more_goes_on_within_it(store: Store) -> None:
    tenant = new_tenant()
    created = await open_in(store, [f"{tenant}:a"], per_session=5) + await open_in(store, [f"{tenant}:b"])

    pages = await every_page(store, f"{tenant}:*", 2)

    assert [len(page) for page in pages] == [2, 2, 2] and sorted(ids(sum(pages, []))) == sorted(created)


async def test_a_token_for_one_session_pages_through_that_session(store: Store) -> None:
    tenant = new_tenant()
    created = await open_in(store, [f"{tenant}:a"], per_session=3)
    await open_in(store, [f"{tenant}:b"])

    pages = await every_page(store, f"{tenant}:a", 2)

    assert [len(page) for page in pages] == [2, 1] and sorted(ids(sum(pages, []))) == sorted(created)


async def test_a_page_at_five_thousand_sessions_reads_its_own_and_a_few_more(
    store: Store, request: pytest.FixtureRequest
) -> None:
    if request.node.callspec.params["store"] == "fakeredis":
        pytest.skip("fakeredis's pool has too few connections for a page's reads (the real redis-server runs it)")
    tenant = new_tenant()
    session_ids = [f"{tenant}:{n:04d}" for n in range(5000)]
    created = await open_in(store, session_ids)
    limit = 100

    with sessions_read(store) as read:
        first, after = await read_page(store, f"{tenant}:*", None, limit, NOW)
    assert len(first) == limit and after is not None
    assert len(read) <= limit + 1 + LOOK_AHEAD, len(read)
    assert len(set(read)) == len(read)  # (each read once)

    with sessions_read(store) as read:
        second, _ = await read_page(store, "*", inbox.parse_cursor(inbox.cursor(after)), limit, NOW)
    assert len(read) <= limit + 1 + LOOK_AHEAD, len(read)
    assert ids(second) == created[limit : 2 * limit]  # (created in id order)
