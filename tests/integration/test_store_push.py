"""The store contract for browser push subscriptions: memory, fakeredis, a real redis-server
(test_redis_cluster.py runs these again on a Redis Cluster).

A subscription is kept under a scope and found for every session that scope covers, until
it expires; one per endpoint and scope; at most ``limit`` per scope, those due first going.
It keeps its token's ``jti`` and ``iat`` (checked against revocations at send time); one
kept before they were recorded still loads, without them.
"""

from __future__ import annotations

import uuid

import msgspec
from redis.asyncio import Redis

from broker.core.push import PushSubscription
from broker.store.base import Store
from broker.store.redis.keys import push_keys
from tests.integration import test_store_contract as contract
from tests.integration.test_store_contract import Listener

# The contract's fixtures: every store, fresh for each test.
store, listener, real_redis = contract.store, contract.listener, contract.real_redis
redis_client, redis_store = contract.redis_client, contract.redis_store

NOW = 1_700_000_000.0
P256DH = "B" + "A" * 86
AUTH = "A" * 22


def subscription(
    scope: str, device: str = "phone", *, expires: float = NOW + 3600, created: float = NOW
) -> PushSubscription:
    return PushSubscription(
        endpoint=f"https://fcm.googleapis.com/fcm/send/{device}-{scope}",
        p256dh=P256DH,
        auth=AUTH,
        scope=scope,
        sub="alice",
        created=created,
        expires=expires,
    )


def _scope() -> str:
    return f"push-{uuid.uuid4().hex[:10]}"


async def test_a_subscription_is_found_for_the_sessions_its_scope_covers(store: Store, listener: Listener) -> None:
    team = _scope()
    exact = subscription(f"{team}:build")
    pattern = subscription(f"{team}:*", "laptop")
    await store.add_push_subscription(exact, limit=5)
    await store.add_push_subscription(pattern, limit=5)
    assert sorted(s.endpoint for s in await store.push_subscriptions(f"{team}:build", NOW)) == sorted(
        [exact.endpoint, pattern.endpoint]
    )
    assert await store.push_subscriptions(f"{team}:deploy", NOW) == [pattern]
    assert await store.push_subscriptions(f"{team}x:build", NOW) == []
    assert await store.has_push_subscription(f"{team}:deploy", NOW)
    assert not await store.has_push_subscription(_scope(), NOW)


async def test_a_star_subscription_covers_every_session(store: Store, listener: Listener) -> None:
    everything = subscription("*", uuid.uuid4().hex)
    await store.add_push_subscription(everything, limit=5)
    try:
        assert everything in await store.push_subscriptions(_scope(), NOW)
    finally:
        assert await store.remove_push_subscription("*", everything.endpoint)


async def test_posting_the_same_endpoint_again_replaces_it(store: Store, listener: Listener) -> None:
    scope = _scope()
    await store.add_push_subscription(subscription(scope), limit=5)
    renewed = subscription(scope, expires=NOW + 7200, created=NOW + 10)
    await store.add_push_subscription(renewed, limit=5)
    assert await store.push_subscriptions(scope, NOW + 3600) == [renewed]


async def test_an_expired_subscription_is_not_found(store: Store, listener: Listener) -> None:
    scope = _scope()
    await store.add_push_subscription(subscription(scope, expires=NOW + 60), limit=5)
    assert len(await store.push_subscriptions(scope, NOW + 59)) == 1
    assert await store.push_subscriptions(scope, NOW + 60) == []
    assert not await store.has_push_subscription(scope, NOW + 61)


async def test_removing_forgets_only_that_endpoint_under_that_scope(store: Store, listener: Listener) -> None:
    scope = _scope()
    phone, laptop = subscription(scope, "phone"), subscription(scope, "laptop")
    wider = subscription(f"{scope[:-2]}*", "phone")
    for kept in (phone, laptop, wider):
        await store.add_push_subscription(kept, limit=5)
    assert await store.remove_push_subscription(scope, phone.endpoint)
    assert not await store.remove_push_subscription(scope, phone.endpoint)
    assert not await store.remove_push_subscription(_scope(), laptop.endpoint)
    assert sorted(s.endpoint for s in await store.push_subscriptions(scope, NOW)) == sorted(
        [laptop.endpoint, wider.endpoint]
    )


async def test_a_scope_keeps_at_most_limit_the_ones_due_first_going(store: Store, listener: Listener) -> None:
    scope = _scope()
    for number in range(4):
        await store.add_push_subscription(subscription(scope, f"d{number}", expires=NOW + 1000 - number), limit=3)
    kept = {s.endpoint.split("/")[-1].split("-")[0] for s in await store.push_subscriptions(scope, NOW)}
    assert kept == {"d0", "d1", "d3"}  # d2 went: due first but for d3, the one just posted
    # A newcomer due sooner than all of them is kept all the same: the others' first goes.
    await store.add_push_subscription(subscription(scope, "late", expires=NOW + 10), limit=3)
    kept = {s.endpoint.split("/")[-1].split("-")[0] for s in await store.push_subscriptions(scope, NOW)}
    assert kept == {"late", "d0", "d1"}


async def test_a_subscription_keeps_its_token_s_jti_and_iat(store: Store, listener: Listener) -> None:
    scope = _scope()
    kept = msgspec.structs.replace(subscription(scope), jti="a1b2c3", iat=NOW - 5.25)
    await store.add_push_subscription(kept, limit=5)
    (found,) = await store.push_subscriptions(scope, NOW)
    assert (found.jti, found.sub, found.iat) == ("a1b2c3", "alice", NOW - 5.25)


async def test_a_subscription_kept_before_jti_and_iat_were_recorded_still_loads(
    redis_store: Store, redis_client: Redis
) -> None:
    scope = _scope()
    old = subscription(scope)
    # As the first web push version packed it: a map without "jti" and "iat".
    fields = {name: getattr(old, name) for name in ("endpoint", "p256dh", "auth", "scope", "sub", "created", "expires")}
    subscriptions, expiries = push_keys(scope)
    await redis_client.hset(subscriptions, old.id, msgspec.msgpack.encode(fields))
    await redis_client.zadd(expiries, {old.id: old.expires})
    (found,) = await redis_store.push_subscriptions(scope, NOW)
    assert found == old and (found.jti, found.iat) == (None, None)
