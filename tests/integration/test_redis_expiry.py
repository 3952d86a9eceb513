"""When the Redis store's writes renew the expiry of their keys (scripts/expiry.lua): only
once it is due (less than 7/8 of the retention left, or more than the whole retention), and
then the questionnaire's keys and its session's together, so the session's outlive it.

The same ``redis_store`` fixture as test_store_contract.py (fakeredis and a real redis-server).
"""

# ruff: noqa: F811 - the contract's fixtures are imported by name, and tests take them as arguments
from __future__ import annotations

from redis.asyncio import Redis

from broker.core import machine
from broker.core.events import events_of
from broker.store.redis import RedisStore
from tests.helpers.samples import new_sid
from tests.integration.test_store_contract import (  # noqa: F401 - the fixtures, used by name
    ALICE,
    advanced,
    completed,
    listener,
    new_questionnaire,
    real_redis,
    redis_client,
    redis_store,
)

RETENTION_MS = 3600 * 1000  # the fixture's retention


def keys_of(sid: str, qid: str) -> dict[str, str]:
    base = "qb:{" + sid + "}:"
    names = ("queue", "seq", "history")
    return {"q": base + "q:" + qid} | {name: base + name for name in names}


async def set_every_ttl(client: Redis, keys: dict[str, str], ms: int) -> None:
    for key in keys.values():
        await client.pexpire(key, ms)


async def ttls(client: Redis, keys: dict[str, str]) -> dict[str, int]:
    return {name: int(await client.pttl(key)) for name, key in keys.items()}


async def test_a_write_with_its_expiry_far_off_leaves_every_ttl_as_it_is(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_sid("expiry")
    state = await redis_store.create(new_questionnaire(sid), events=())
    keys = keys_of(sid, state.id)
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)))
    assert await redis_store.compare_and_set(drafted, state.version)
    await set_every_ttl(redis_client, keys, RETENTION_MS - 60_000)  # a minute gone: not due
    answered = advanced(drafted, machine.AnswerQuestion(state.id, 0, "target", ("staging",)), 2)

    assert await redis_store.compare_and_set(answered, drafted.version)

    assert all(
        RETENTION_MS - 70_000 < ttl <= RETENTION_MS - 60_000 for ttl in (await ttls(redis_client, keys)).values()
    )


async def test_a_write_whose_expiry_is_due_renews_the_questionnaire_and_its_session_together(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_sid("expiry")
    state = await redis_store.create(new_questionnaire(sid))
    keys = keys_of(sid, state.id)
    await redis_client.hset(keys["q"], "x", "0")  # its expiry, as the scripts keep it: long past due
    await set_every_ttl(redis_client, keys, 1000)

    assert await redis_store.compare_and_set(completed(state), state.version)

    left = await ttls(redis_client, keys)
    del left["queue"]  # (its questionnaire ended: gone from it, and it was empty)
    assert all(RETENTION_MS - 10_000 < ttl <= RETENTION_MS for ttl in left.values()), left


async def test_a_questionnaire_created_in_a_session_expires_no_later_than_the_session_s_keys(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_sid("expiry")
    first = await redis_store.create(new_questionnaire(sid))
    session = keys_of(sid, first.id)
    await set_every_ttl(redis_client, {k: session[k] for k in ("queue", "seq", "history")}, RETENTION_MS - 60_000)

    second = await redis_store.create(new_questionnaire(sid))

    left = await ttls(redis_client, keys_of(sid, second.id))
    assert left["q"] <= left["seq"] + 1000, left  # (+ the time between the two readings)
    assert left["seq"] > RETENTION_MS * 7 // 8  # (not due: as the first create left it)


async def test_a_draft_leaves_the_inbox_entry_and_an_answer_moves_it(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_sid("expiry")
    state = await redis_store.create(new_questionnaire(sid))
    questionnaire = keys_of(sid, state.id)["q"]
    created = await redis_client.hget(questionnaire, "i")
    drafted = advanced(state, machine.Draft(state.id, 0, ("staging",)), 5)

    assert await redis_store.compare_and_set(drafted, state.version)
    assert await redis_client.hget(questionnaire, "i") == created

    answered = advanced(drafted, machine.AnswerQuestion(state.id, 0, "target", ("staging",)), 6)
    assert await redis_store.compare_and_set(answered, drafted.version)
    assert await redis_client.hget(questionnaire, "i") != created


async def test_the_first_events_of_an_older_broker_s_questionnaire_expire_with_it(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    """A questionnaire an older broker created keeps its events in a list (no n in its hash):
    they go on there, and a list that is new expires with the questionnaire."""
    sid = new_sid("expiry")
    state = await redis_store.create(new_questionnaire(sid), events=())
    keys = keys_of(sid, state.id)
    await redis_client.hdel(keys["q"], "n")  # (as an older broker's create left it)
    answered = advanced(state, machine.AnswerQuestion(state.id, 0, "target", ("staging",)))
    assert await redis_store.compare_and_set(answered, state.version, events=events_of(state, answered, ALICE))

    listed = "qb:{" + sid + "}:ev:" + state.id
    events, questionnaire = await redis_client.pttl(listed), await redis_client.pttl(keys["q"])
    assert events > 0 and abs(events - questionnaire) < 1000


async def test_a_start_drops_an_expired_history_entry_behind_a_live_one(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    sid = new_sid("expiry")
    kept = await redis_store.create(new_questionnaire(sid))
    gone = await redis_store.create(new_questionnaire(sid))
    await redis_client.delete(keys_of(sid, gone.id)["q"])  # as its expiry would

    newest = await redis_store.create(new_questionnaire(sid))

    history = await redis_client.zrange(keys_of(sid, kept.id)["history"], 0, -1)
    assert history == [kept.id.encode(), newest.id.encode()]


async def test_a_heartbeat_renews_its_clients_key_once_an_eighth_of_its_lifetime(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    """Not on every beat: when a client arrives, and when its beat is the first of a new
    eighth of the lifetime (3600 s here: every 450 s by the clock)."""
    sid = new_sid("expiry")
    clients = "qb:{" + sid + "}:clients"
    start = 450.0 * 4_000_000 + 10  # (10 s into an eighth)
    await redis_store.heartbeat(sid, "c-1", ttl=500, now=start)
    assert await redis_client.pttl(clients) > RETENTION_MS - 10_000  # arrived

    await redis_client.pexpire(clients, 1_000_000)
    await redis_store.heartbeat(sid, "c-1", ttl=500, now=start + 5)
    await redis_store.heartbeat(sid, "c-1", ttl=500, now=start + 435)
    assert await redis_client.pttl(clients) <= 1_000_000  # the same eighth

    await redis_store.heartbeat(sid, "c-1", ttl=500, now=start + 440)
    assert await redis_client.pttl(clients) > RETENTION_MS - 10_000  # the next one
