"""Optional per-write durability: WAIT (QBROKER_REDIS_WAIT_REPLICAS) and WAITAOF (QBROKER_REDIS_WAIT_AOF).

Against a real primary with a real replica: a commit returns once the replica has it; a
commit no replica acknowledges in time raises ``StoreUnavailable`` (the write stands, the
broker just never confirms it). WAITAOF needs Redis 7.2: on an older server the store
refuses to start with a clear message (and ``qbroker serve`` exits); on 7.2+ a commit with
``appendonly yes`` is fsynced before it returns.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
import redis

from broker.core import machine
from broker.store.base import StoreUnavailable
from broker.store.redis import RedisStore
from tests.helpers.clients import ScriptedClient
from tests.helpers.processes import RedisServer, broker, redis_server, token
from tests.helpers.samples import new_sid as new_session
from tests.helpers.waiting import wait_until
from tests.integration.test_store_contract import Listener, advanced, new_questionnaire

pytestmark = pytest.mark.redis


def _server_version() -> tuple[int, ...]:
    if shutil.which("redis-server") is None:
        return (0,)  # the tests below then fail or skip through support.need
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10).stdout
    version = out.split("v=")[1].split()[0] if "v=" in out else "0"
    return tuple(int(part) for part in version.split(".")[:2])


def _info(server: RedisServer, field: str) -> str:
    with redis.Redis(port=server.port, socket_timeout=5) as admin:
        return str(admin.info("replication").get(field))


def _replica_online(primary: RedisServer) -> bool:
    with redis.Redis(port=primary.port, socket_timeout=5) as admin:
        replica = admin.info("replication").get("slave0")
        return isinstance(replica, dict) and replica.get("state") == "online"


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    with redis_server("--repl-diskless-sync-delay", "0") as primary, redis_server() as replica:
        with redis.Redis(port=replica.port, socket_timeout=5) as admin:
            admin.execute_command("REPLICAOF", "127.0.0.1", primary.port)
        wait_until(lambda: _info(replica, "master_link_status") == "up", timeout=15, what="the replica to sync")
        wait_until(lambda: _info(primary, "connected_slaves") == "1", timeout=15, what="the primary to see it")
        # "Connected" is not yet "online": until the primary says so, WAIT counts no one.
        wait_until(lambda: _replica_online(primary), timeout=15, what="the primary to count the replica online")
        yield primary, replica


async def test_with_wait_replicas_a_commit_returns_once_the_replica_has_it(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica
    store = RedisStore(primary.url, 3600.0, wait_replicas=1, wait_timeout=5.0)
    await store.start(Listener().on_notice, Listener().on_reconnect)
    on_replica = RedisStore(replica.url, 3600.0)
    try:
        sid = new_session()
        state = await store.create(new_questionnaire(sid))
        assert await on_replica.load(sid, state.id) == state  # no polling: WAIT returned
        answered = advanced(state, machine.AnswerQuestion(state.id, 0, "target", ("production",)))
        assert await store.compare_and_set(answered, state.version)
        assert await on_replica.load(sid, state.id) == answered
    finally:
        await store.close()
        await on_replica.close()


async def test_a_commit_no_replica_acknowledges_raises_store_unavailable_but_stands(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica
    store = RedisStore(primary.url, 3600.0, wait_replicas=1, wait_timeout=1.0)
    await store.start(Listener().on_notice, Listener().on_reconnect)
    try:
        sid = new_session()
        state = await store.create(new_questionnaire(sid))
        replica.stop()
        await asyncio.to_thread(wait_until, lambda: _info(primary, "connected_slaves") == "0", 15.0)
        answered = advanced(state, machine.AnswerQuestion(state.id, 0, "target", ("staging",)))

        with pytest.raises(StoreUnavailable, match="WAIT"):
            await store.compare_and_set(answered, state.version)

        # Redis cannot un-write: the state is there; the broker just never confirmed it.
        assert await store.load(sid, state.id) == answered
        # A lost race writes nothing, so there is nothing to wait for.
        assert not await store.compare_and_set(advanced(state, machine.Abort()), state.version)
    finally:
        await store.close()


@pytest.mark.skipif(_server_version() >= (7, 2), reason="the server has WAITAOF")
async def test_wait_aof_on_a_server_older_than_7_2_refuses_to_start() -> None:
    with redis_server() as server:
        store = RedisStore(server.url, 3600.0, wait_aof=True)
        try:
            with pytest.raises(StoreUnavailable, match=r"QBROKER_REDIS_WAIT_AOF needs Redis 7\.2"):
                await store.start(Listener().on_notice, Listener().on_reconnect)
        finally:
            await store.close()


@pytest.mark.skipif(_server_version() >= (7, 2), reason="the server has WAITAOF")
def test_qbroker_serve_with_wait_aof_on_an_old_server_exits_with_the_reason() -> None:
    with redis_server() as server, pytest.raises(RuntimeError, match=r"needs Redis 7\.2"):  # noqa: SIM117
        with broker(server.url, redis_wait_aof=1):
            pass


@pytest.mark.skipif(_server_version() < (7, 2), reason="WAITAOF needs redis-server 7.2 or later")
async def test_wait_aof_fsyncs_each_commit_before_it_returns() -> None:
    with redis_server("--appendonly", "yes", "--appendfsync", "everysec") as server:
        store = RedisStore(server.url, 3600.0, wait_aof=True, wait_timeout=5.0)
        await store.start(Listener().on_notice, Listener().on_reconnect)
        try:
            sid = new_session()
            state = await store.create(new_questionnaire(sid))
            cancelled = advanced(state, machine.Cancel(state.id, 0))
            assert await store.compare_and_set(cancelled, state.version)
            assert await store.load(sid, state.id) == cancelled
        finally:
            await store.close()


async def _answer_once(base: str, ws_base: str) -> dict[str, Any]:
    sid = new_session()
    async with (
        ScriptedClient.connect(ws_base, sid, token(sid, "client")) as person,
        httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token(sid, 'agent')}"}, timeout=30
        ) as agent,
    ):
        await person.wait_for("idle")
        body = {
            "action": "start",
            "questions": [{"id": "go", "prompt": "Go?", "type": "single", "options": [{"id": "yes"}, {"id": "no"}]}],
        }
        start = asyncio.create_task(agent.post(f"/v1/sessions/{sid}/questionnaire?wait=20", json=body))
        await person.answer_all({"go": ["yes"]})
        response = await asyncio.wait_for(start, 25)
        assert response.status_code == 200, response.text
        return cast(dict[str, Any], response.json())


def test_qbroker_serve_with_wait_replicas_completes_a_questionnaire(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, _ = primary_and_replica
    with broker(primary.url, redis_wait_replicas=1, redis_wait_timeout=5) as process:
        result = asyncio.run(_answer_once(process.url, process.ws_url))
    assert result["details"]["answers"] == [{"questionId": "go", "selectedOptionIds": ["yes"]}]
