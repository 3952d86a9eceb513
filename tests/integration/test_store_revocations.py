"""The store contract for revocations (``Store.revoke`` / ``Store.revocations``): the memory
store, Redis over fakeredis and a real redis-server (and, in test_redis_cluster.py, a Redis
Cluster, one store shared by the tests: each names its own tokens and holders) keep them alike."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from redis import Redis as SyncRedis

from broker.core.revocations import Revocation
from broker.store.base import Notice, Store, StoreUnavailable
from broker.store.memory import MemoryStore
from broker.store.redis import RedisStore
from broker.store.redis.keys import REVOCATIONS_KEYS
from tests.helpers.processes import RedisServer
from tests.integration import test_store_contract as contract

# The contract's fixtures: ``store`` runs each test on every store.
store, listener, real_redis = contract.store, contract.listener, contract.real_redis

NOW = 1_700_000_000.0


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def test_the_list_is_read_once_until_it_changes(store: Store) -> None:
    first = await store.revocations(None)
    assert first is not None
    assert await store.revocations(first[0]) is None  # unchanged: nothing to read
    assert await store.revocations(first[0]) is None


async def test_a_revocation_changes_the_version_and_is_read_back_exactly(store: Store) -> None:
    before = await store.revocations(None)
    assert before is not None
    by_id = Revocation(uuid.uuid4().hex, None, NOW + 0.123, NOW + 86400.5)
    by_holder = Revocation(None, unique("alice@example.com"), NOW + 1.001, NOW + 3 * 86400)
    await store.revoke(by_id, NOW)
    await store.revoke(by_holder, NOW + 1)
    after = await store.revocations(before[0])
    assert after is not None and after[0] != before[0]
    assert by_id in after[1] and by_holder in after[1]
    assert await store.revocations(after[0]) is None


async def test_revoking_a_holder_again_keeps_one_revocation_with_the_later_times(store: Store) -> None:
    bob = unique("bob")
    await store.revoke(Revocation(None, bob, NOW, NOW + 100), NOW)
    await store.revoke(Revocation(None, bob, NOW + 5, NOW + 50), NOW + 5)
    read = await store.revocations(None)
    assert read is not None
    assert [r for r in read[1] if r.sub == bob] == [Revocation(None, bob, NOW + 5, NOW + 100)]


async def test_revocations_whose_time_is_up_are_dropped_at_the_next_revocation(store: Store) -> None:
    short, long, carol = unique("short"), unique("long"), unique("carol")
    await store.revoke(Revocation(short, None, NOW, NOW + 10), NOW)
    await store.revoke(Revocation(long, None, NOW, NOW + 1000), NOW)
    await store.revoke(Revocation(None, carol, NOW + 20, NOW + 1000), NOW + 20)
    read = await store.revocations(None)
    assert read is not None
    keys = {r.key for r in read[1]}
    assert f"j:{short}" not in keys and {f"j:{long}", f"s:{carol}"} <= keys


async def test_a_jti_and_a_sub_of_the_same_name_are_two_revocations(store: Store) -> None:
    same = unique("same")
    await store.revoke(Revocation(same, None, NOW, NOW + 10), NOW)
    await store.revoke(Revocation(None, same, NOW, NOW + 10), NOW)
    read = await store.revocations(None)
    assert read is not None and {f"j:{same}", f"s:{same}"} <= {r.key for r in read[1]}


async def test_a_name_with_spaces_and_colons_round_trips(store: Store) -> None:
    odd = Revocation(None, unique("Alice Smith: ops (EU)"), NOW, NOW + 10)
    await store.revoke(odd, NOW)
    read = await store.revocations(None)
    assert read is not None and odd in read[1]


def test_the_revocation_keys_share_one_slot_that_no_session_can_have() -> None:
    tags = {key.split("{")[1].split("}")[0] for key in REVOCATIONS_KEYS}
    assert tags == {"!revocations"}  # "!" is not in the session-id alphabet


async def test_on_redis_the_revocations_live_under_their_own_hash_tag(real_redis: RedisServer) -> None:
    opened = RedisStore(real_redis.url, 3600.0)
    try:
        await opened.revoke(Revocation("tagged", None, NOW, NOW + 10), NOW)
        with SyncRedis.from_url(real_redis.url) as admin:
            assert admin.hget(REVOCATIONS_KEYS[0], "j:tagged") is not None
            assert admin.get(REVOCATIONS_KEYS[1]) is not None
    finally:
        await opened.close()


async def test_the_memory_store_reads_back_the_revocations_of_its_data_dir(tmp_path: Path) -> None:
    path = tmp_path / "revocations"
    kept = Revocation(None, "dave", NOW, NOW + 100)
    first = MemoryStore(3600.0, path)
    await first.start(ignore_notice, ignore_reconnect)
    await first.revoke(kept, NOW)
    await first.close()
    assert path.stat().st_mode & 0o777 == 0o600
    again = MemoryStore(3600.0, path)
    await again.start(ignore_notice, ignore_reconnect)
    read = await again.revocations(None)
    assert read is not None and read[1] == [kept]
    await again.close()


async def test_a_memory_store_whose_revocations_are_damaged_does_not_start(tmp_path: Path) -> None:
    path = tmp_path / "revocations"
    path.write_bytes(b"\xc1 not msgpack")
    with pytest.raises(StoreUnavailable, match="revocations .* are damaged"):
        await MemoryStore(3600.0, path).start(ignore_notice, ignore_reconnect)


async def ignore_notice(notice: Notice) -> None:
    pass


async def ignore_reconnect() -> None:
    pass
