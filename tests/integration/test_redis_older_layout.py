"""What an older broker left in Redis is read as before, during a rolling update: a
questionnaire's events in a list of their own (``qb:{sid}:ev:<id>``) and its inbox entry in
the session's inbox hash (``qb:{sid}:inbox``), rather than fields of its own hash.

The same ``redis_store`` fixture as test_store_contract.py (fakeredis and a real redis-server).
"""

# ruff: noqa: F811 - the contract's fixtures are imported by name, and tests take them as arguments
from __future__ import annotations

from redis.asyncio import Redis

from broker.core import machine
from broker.core.events import events_of, started
from broker.core.machine import Questionnaire
from broker.store.records import pack_event
from broker.store.redis import RedisStore
from tests.helpers.samples import new_sid
from tests.integration.test_store_contract import (  # noqa: F401 - the fixtures, used by name
    AGENT,
    ALICE,
    NOW,
    QUESTIONS,
    listener,
    real_redis,
    redis_client,
    redis_store,
)


def _names(state: Questionnaire) -> tuple[str, str]:
    base = "qb:{" + state.session_id + "}:"
    return base + "q:" + state.id, base + "ev:" + state.id


async def test_an_older_broker_s_questionnaire_keeps_its_events_in_its_list(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    fresh = machine.start("q-older", new_sid("older"), QUESTIONS, NOW, asked_by=AGENT.sub)
    first = started(fresh, AGENT)
    await redis_store.create(fresh, None, ())
    questionnaire, listed = _names(fresh)
    await redis_client.hdel(questionnaire, "n")  # as an older broker's create left it: its events
    await redis_client.rpush(listed, pack_event(first))  # in a list of their own

    answered = machine.apply(fresh, machine.AnswerQuestion(fresh.id, 0, "target", ("staging",)), NOW + 1, ALICE)
    recorded = events_of(fresh, answered, ALICE)
    assert await redis_store.compare_and_set(answered, fresh.version, recorded)

    assert await redis_store.events(fresh.session_id, fresh.id) == [first, *recorded]
    assert await redis_client.llen(listed) == 1 + len(recorded)
    [summary] = await redis_store.history(fresh.session_id, None, 5)
    assert (summary.first, summary.last) == (first, recorded[-1])


async def test_events_an_older_broker_appended_are_read_in_their_time_order(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    fresh = machine.start("q-mixed", new_sid("older"), QUESTIONS, NOW, asked_by=AGENT.sub)
    first = started(fresh, AGENT)
    await redis_store.create(fresh, None, (first,))
    answered = machine.apply(fresh, machine.AnswerQuestion(fresh.id, 0, "target", ("staging",)), NOW + 1, ALICE)
    older = events_of(fresh, answered, ALICE)
    _, listed = _names(fresh)
    await redis_client.hset(_names(fresh)[0], mapping={"v": answered.version})  # an older broker's write
    await redis_client.rpush(listed, *[pack_event(event) for event in older])
    done = machine.apply(answered, machine.AnswerQuestion(fresh.id, 1, "checks", ("unit",)), NOW + 2, ALICE)
    newer = events_of(answered, done, ALICE)
    assert await redis_store.compare_and_set(done, answered.version, newer)

    assert await redis_store.events(fresh.session_id, fresh.id) == [first, *older, *newer]
    [summary] = await redis_store.history(fresh.session_id, None, 5)
    assert (summary.first, summary.last) == (first, newer[-1])


async def test_an_older_broker_s_inbox_entry_is_read_until_its_questionnaire_ends(
    redis_store: RedisStore, redis_client: Redis
) -> None:
    fresh = machine.start("q-older-inbox", new_sid("older"), QUESTIONS, NOW, asked_by=AGENT.sub)
    sid = fresh.session_id
    await redis_store.create(fresh, None, ())
    questionnaire, _ = _names(fresh)
    inbox = "qb:{" + sid + "}:inbox"
    entry = await redis_client.hget(questionnaire, "i")
    await redis_client.hdel(questionnaire, "i")  # as an older broker kept it: in the inbox hash
    await redis_client.hset(inbox, fresh.id, entry)

    [read] = await redis_store.session_inboxes([sid], NOW)
    assert [e.questionnaire_id for e in read.entries] == [fresh.id]

    done = machine.apply(fresh, machine.AnswerQuestion(fresh.id, 0, "target", ("staging",)), NOW + 1, ALICE)
    done = machine.apply(done, machine.AnswerQuestion(fresh.id, 1, "checks", ("unit",)), NOW + 2, ALICE)
    assert await redis_store.compare_and_set(done, fresh.version)
    assert not await redis_client.hexists(inbox, fresh.id)
    [read] = await redis_store.session_inboxes([sid], NOW)
    assert read.entries == ()


async def test_an_ended_questionnaire_keeps_no_inbox_entry(redis_store: RedisStore, redis_client: Redis) -> None:
    fresh = machine.start("q-ended", new_sid("older"), QUESTIONS, NOW, asked_by=AGENT.sub)
    await redis_store.create(fresh, None, ())
    done = machine.apply(fresh, machine.AnswerQuestion(fresh.id, 0, "target", ("staging",)), NOW + 1, ALICE)
    done = machine.apply(done, machine.AnswerQuestion(fresh.id, 1, "checks", ("unit",)), NOW + 2, ALICE)
    assert await redis_store.compare_and_set(done, fresh.version)

    assert await redis_client.hget(_names(fresh)[0], "i") == b""
