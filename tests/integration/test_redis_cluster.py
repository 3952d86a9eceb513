"""qbroker on a real three-master Redis Cluster (Redis 7: sharded pub/sub).

The test starts three ``redis-server --cluster-enabled yes`` processes on free ports, joins
them with ``redis-cli --cluster create`` and waits for ``cluster_state:ok``. Then:

- the store contract (every test of test_store_contract.py and test_store_revocations.py
  that only needs ``store`` and ``listener``) runs against a ``RedisStore(cluster=True)``;
- sessions' keys land on different masters, each session wholly on one, and each session's
  notice subscription sits on the master that owns its slot;
- a notice connection that drops, and a session whose slot migrates to another master, are
  subscribed again (then ``on_reconnect`` runs) and notices flow;
- two ``qbroker serve`` processes complete questionnaires for sessions spread over all three
  masters, the person on one process and the agent on the other, so every step crosses
  processes through the shard that holds the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
import redis

from broker.store.base import Notice, Store
from broker.store.redis import RedisStore, channel_for
from broker.store.redis.keys import INBOX_SHARDS, inbox_channel, inbox_shard, index_key
from tests.helpers.clients import ScriptedClient
from tests.helpers.inbox import InboxClient, every_page
from tests.helpers.processes import bindable, broker, free_port, need, redis_server_command, token
from tests.helpers.samples import new_sid as new_session
from tests.helpers.samples import single, start_body
from tests.helpers.waiting import eventually, wait_until
from tests.integration import test_store_contract as contract
from tests.integration import test_store_inbox as inbox_contract
from tests.integration import test_store_inbox_pages as inbox_pages_contract
from tests.integration import test_store_push as push_contract
from tests.integration import test_store_revocations as revocations_contract
from tests.integration.test_store_contract import Listener, new_questionnaire

pytestmark = pytest.mark.redis

MASTERS = 3


# --- a local cluster ------------------------------------------------------------------


def _cluster_ports(count: int) -> list[int]:
    """Free ports whose cluster bus port (port + 10000) is free too (free_port keeps those
    10000 above its ports for them)."""
    ports: list[int] = []
    for _ in range(500):
        port = free_port()
        if port not in ports and bindable(port + 10000):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError("no free ports for a local Redis Cluster")


@dataclass
class LocalCluster:
    ports: list[int]  # the masters
    processes: dict[int, subprocess.Popen[bytes]]
    replica: int | None = None  # a replica of the first master, when asked for

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def admin(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

    def owner_of(self, key: str) -> int:
        """The port of the master that serves ``key``'s slot (asking a live master)."""
        for port in self.ports:
            if self.processes[port].poll() is None:
                with self.admin(port) as admin:
                    slot = int(admin.execute_command("CLUSTER", "KEYSLOT", key))
                    for start, end, master, *_ in admin.execute_command("CLUSTER", "SLOTS"):
                        if int(start) <= slot <= int(end):
                            return int(master[1])
        raise AssertionError(f"slot of {key!r} is not served")

    def kill(self, port: int) -> None:
        self.processes[port].kill()
        self.processes[port].wait(10)


def _server_version() -> tuple[int, ...]:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10).stdout
    version = out.split("v=")[1].split()[0] if "v=" in out else "0"
    return tuple(int(part) for part in version.split(".")[:2])


def _healthy(cluster: LocalCluster, ports: list[int], nodes: int) -> bool:
    for port in ports:
        with cluster.admin(port) as admin:
            info = admin.execute_command("CLUSTER", "INFO").decode()
            if "cluster_state:ok" not in info or f"cluster_known_nodes:{nodes}" not in info:
                return False
            if len(admin.execute_command("CLUSTER", "SLOTS")) < MASTERS:
                return False
    return True


def _redis_cli(*args: str) -> None:
    done = subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@contextlib.contextmanager
def local_cluster(with_replica: bool = False) -> Iterator[LocalCluster]:
    """Three masters (and, ``with_replica``, a replica of the first) on free local ports."""
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    need(shutil.which("redis-cli") is not None, "redis-cli is not installed")
    need(_server_version() >= (7, 0), "Redis Cluster sharded pub/sub needs redis-server 7")
    all_ports = _cluster_ports(MASTERS + (1 if with_replica else 0))
    with tempfile.TemporaryDirectory(prefix="qbroker-cluster-") as tmp:
        cluster = LocalCluster(all_ports[:MASTERS], {}, all_ports[MASTERS] if with_replica else None)
        try:
            for port in all_ports:
                options = ("--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf")
                cluster.processes[port] = subprocess.Popen(
                    redis_server_command("redis-server", port, tmp, *options, "--cluster-node-timeout", "2000"),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            for port in all_ports:
                wait_until(lambda p=port: not bindable(p), what=f"redis-server on {port}")
            _redis_cli(
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in cluster.ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            )
            wait_until(
                lambda: _healthy(cluster, cluster.ports, MASTERS),
                timeout=30,
                interval=0.1,
                what="cluster_state:ok on every node",
            )
            if cluster.replica is not None:
                with cluster.admin(cluster.ports[0]) as admin:
                    first = admin.execute_command("CLUSTER", "MYID").decode()
                _redis_cli(
                    "--cluster",
                    "add-node",
                    f"127.0.0.1:{cluster.replica}",
                    f"127.0.0.1:{cluster.ports[0]}",
                    "--cluster-slave",
                    "--cluster-master-id",
                    first,
                )
                wait_until(
                    lambda: _healthy(cluster, all_ports, MASTERS + 1),
                    timeout=30,
                    interval=0.1,
                    what="the replica to join",
                )
                with cluster.admin(cluster.replica) as admin:
                    wait_until(
                        lambda: admin.info("replication").get("master_link_status") == "up",
                        timeout=30,
                        what="the replica to sync",
                    )
            yield cluster
        finally:
            for process in cluster.processes.values():
                if process.poll() is None:
                    process.terminate()
            for process in cluster.processes.values():
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster() as started:
        yield started


class CheckingListener(Listener):
    """A ``Listener`` that can record, at the moment ``on_reconnect`` runs, what ``check`` says."""

    check: Callable[[], bool] | None = None
    checked: list[bool]

    async def on_reconnect(self) -> None:
        if self.check is not None:
            self.checked.append(await asyncio.to_thread(self.check))
        await super().on_reconnect()


@pytest.fixture
def listener() -> CheckingListener:
    listener = CheckingListener()
    listener.checked = []
    return listener


@pytest.fixture
async def store(cluster: LocalCluster, listener: Listener) -> AsyncIterator[Store]:
    opened = RedisStore(cluster.url, 3600.0, cluster=True)
    await opened.start(listener.on_notice, listener.on_reconnect, listener.on_presence)
    try:
        yield opened
    finally:
        await opened.close()


def sessions_on_every_master(cluster: LocalCluster, per_master: int, prefix: str) -> dict[int, list[str]]:
    """Session ids, ``per_master`` of them on each master (by their channel's slot)."""
    spread: dict[int, list[str]] = {port: [] for port in cluster.ports}
    for n in range(1000):
        sid = f"{prefix}-{n}"
        owner = spread[cluster.owner_of(channel_for(sid))]
        if len(owner) < per_master:
            owner.append(sid)
        if all(len(sids) == per_master for sids in spread.values()):
            return spread
    raise AssertionError("could not spread sessions over the masters")


# --- the store contract, on the cluster ------------------------------------------------

# Every contract test that needs nothing but a ``store`` (and its ``listener``) runs here
# again, against this module's cluster-backed ``store`` fixture (the revocations' too: their
# keys share one slot of their own; and the inbox's part; and push subscriptions').
for _module in (contract, revocations_contract, inbox_contract, inbox_pages_contract, push_contract):
    for _name, _test in inspect.getmembers(_module, inspect.iscoroutinefunction):
        if _name.startswith("test_") and set(inspect.signature(_test).parameters) <= {"store", "listener"}:
            globals()[_name] = _test
del _module, _name, _test


# --- sharding -------------------------------------------------------------------------


async def test_sessions_keys_and_subscriptions_spread_over_the_masters(
    cluster: LocalCluster, store: RedisStore
) -> None:
    spread = sessions_on_every_master(cluster, 2, "spread")
    for sids in spread.values():
        for sid in sids:
            await store.subscribe(sid)
            await store.create(new_questionnaire(sid), idempotency_key="k")
            await store.heartbeat(sid, "c-1", ttl=30, now=contract.NOW)

    for port, sids in spread.items():
        with cluster.admin(port) as admin:
            keys = {key.decode() for key in admin.scan_iter(match="qb:{spread-*", count=1000)}
            channels = {c.decode() for c in admin.execute_command("PUBSUB", "SHARDCHANNELS", "qb:{spread-*")}
        # Each master holds exactly its own sessions' keys, all of them (questionnaire,
        # queue, seq, history, idempotency key, clients, seen), and their notice subscriptions.
        assert {key.split("}")[0] + "}" for key in keys} == {"qb:{" + sid + "}" for sid in sids}
        assert len(keys) == 7 * len(sids)
        assert channels == {channel_for(sid) for sid in sids}


async def test_a_notice_written_on_each_master_reaches_the_subscriber(
    cluster: LocalCluster, store: RedisStore, listener: Listener
) -> None:
    spread = sessions_on_every_master(cluster, 1, "notice")
    sids = [sid for sids in spread.values() for sid in sids]
    for sid in sids:
        await store.subscribe(sid)

    created = {sid: await store.create(new_questionnaire(sid)) for sid in sids}

    received = {await listener.next_notice() for _ in sids}
    assert received == {Notice(sid, state.id, 0) for sid, state in created.items()}


async def test_a_dropped_notice_connection_resubscribes_then_calls_on_reconnect(
    cluster: LocalCluster, store: RedisStore, listener: Listener
) -> None:
    # Several sessions on each master: their channels sit in different slots, which one
    # SSUBSCRIBE cannot take together.
    spread = sessions_on_every_master(cluster, 3, f"dropped-{uuid.uuid4().hex[:8]}")
    for sid in (sid for sids in spread.values() for sid in sids):
        await store.subscribe(sid)
    victim = cluster.ports[0]
    with cluster.admin(victim) as admin:
        assert admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1

    await listener.next_reconnect()

    with cluster.admin(victim) as admin:
        assert len(admin.execute_command("PUBSUB", "SHARDCHANNELS", "qb:{dropped-*")) == 3
    created = {sid: await store.create(new_questionnaire(sid)) for sids in spread.values() for sid in sids}
    received = {await listener.next_notice() for _ in created}
    assert received == {Notice(sid, state.id, 0) for sid, state in created.items()}


def _slot_is_empty(cluster: LocalCluster, key: str) -> bool:
    with cluster.admin(cluster.owner_of(key)) as admin:
        slot = int(admin.execute_command("CLUSTER", "KEYSLOT", key))
        return int(admin.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)) == 0


def _move_slot(cluster: LocalCluster, key: str, to_port: int) -> None:
    """Hand ``key``'s slot (holding no keys) to the master on ``to_port``."""
    with cluster.admin(to_port) as target:
        slot = int(target.execute_command("CLUSTER", "KEYSLOT", key))
        target_id = target.execute_command("CLUSTER", "MYID").decode()
    source_port = cluster.owner_of(key)
    with cluster.admin(source_port) as source:
        assert source.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    for port in [to_port, source_port, *(p for p in cluster.ports if p not in (to_port, source_port))]:
        with cluster.admin(port) as admin:
            admin.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    wait_until(lambda: cluster.owner_of(key) == to_port, what="the slot to move")


async def test_a_write_on_a_cluster_passes_every_key_it_touches(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster checks the keys passed (and moves a call whose slot moved) before it runs a
    script: a write names none of its own keys inside it (one Redis passes one: write_keys.lua)."""
    passed: list[list[bytes]] = []
    write = store._commands.write

    async def recorded(script: Any, keys: list[bytes], *rest: Any) -> Any:
        passed.append(list(keys))
        return await write(script, keys, *rest)

    monkeypatch.setattr(store._commands, "write", recorded)
    sid = new_session()
    state = await store.create(new_questionnaire(sid))
    assert await store.compare_and_set(contract.completed(state), state.version)
    base = f"qb:{{{sid}}}:".encode()
    touched = [base + b"q:" + state.id.encode(), base + b"queue", base + b"seq", base + b"inbox"]
    touched += [base + b"ev:" + state.id.encode(), base + b"history"]
    assert passed == [touched, touched]


async def test_a_session_whose_slot_moves_is_subscribed_on_its_new_master(
    cluster: LocalCluster, store: RedisStore, listener: CheckingListener
) -> None:
    moving = next(sid for sid in (new_session() for _ in range(100)) if _slot_is_empty(cluster, channel_for(sid)))
    channel = channel_for(moving)
    before = cluster.owner_of(channel)
    after = next(port for port in cluster.ports if port != before)
    spread = sessions_on_every_master(cluster, 1, f"moves-{uuid.uuid4().hex[:8]}")
    staying, already_there = spread[before][0], spread[after][0]
    for sid in (moving, staying, already_there):
        await store.subscribe(sid)

    def subscribed_on_the_new_master() -> bool:
        with cluster.admin(after) as admin:
            return bool(admin.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1)

    listener.check = subscribed_on_the_new_master
    await asyncio.to_thread(_move_slot, cluster, channel, after)

    # Redis drops the subscription on the old master; the store re-reads the slot map,
    # subscribes on the new one, and only then asks the service to re-read. (The old
    # master's connection reconnects too, and says so: several re-reads may come.)
    for _ in range(MASTERS + 1):
        await listener.next_reconnect()
        if listener.checked[-1]:
            break
    else:
        raise AssertionError(f"no re-read once the subscription was on the new master: {listener.checked}")
    created = {sid: await store.create(new_questionnaire(sid)) for sid in (moving, staying, already_there)}
    received = {await listener.next_notice() for _ in created}
    assert received == {Notice(sid, state.id, 0) for sid, state in created.items()}


@pytest.mark.heavy
async def test_after_a_failover_sessions_are_subscribed_on_the_promoted_replica() -> None:
    with local_cluster(with_replica=True) as cluster:
        assert cluster.replica is not None
        failing = cluster.ports[0]
        spread = sessions_on_every_master(cluster, 1, "failover")
        listener = Listener()
        store = RedisStore(cluster.url, 3600.0, cluster=True)
        await store.start(listener.on_notice, listener.on_reconnect)
        try:
            for sids in spread.values():
                await store.subscribe(sids[0])
            moving = spread[failing][0]

            cluster.kill(failing)  # the replica takes over after the node timeout (2 s)

            async def promoted() -> bool:
                with cluster.admin(cluster.replica) as admin:  # type: ignore[arg-type]
                    subscribed = admin.execute_command("PUBSUB", "SHARDNUMSUB", channel_for(moving))
                return bool(subscribed[1] == 1)

            await eventually(promoted, "the promoted replica to carry the subscription", timeout=30)
            await asyncio.wait_for(listener.reconnects.get(), 10)  # ... and the service re-reads
            created = {sids[0]: await store.create(new_questionnaire(sids[0])) for sids in spread.values()}
            received: set[Notice] = set()
            while len(received) < len(created):
                received.add(await asyncio.wait_for(listener.notices.get(), 10))
            assert received == {Notice(sid, state.id, 0) for sid, state in created.items()}
        finally:
            await store.close()


# --- two brokers on the cluster ----------------------------------------------------------

QUESTIONS = [
    {
        "id": "target",
        "prompt": "Deploy where?",
        "type": "single",
        "options": [{"id": "staging"}, {"id": "production"}],
    },
    {
        "id": "checks",
        "prompt": "Which checks must pass?",
        "type": "multi",
        "options": [{"id": "unit"}, {"id": "e2e"}, {"id": "lint"}],
        "minSelections": 1,
    },
]


async def _questionnaire(client_ws: str, agent_url: str, sid: str, n: int) -> dict[str, Any]:
    async with (
        ScriptedClient.connect(client_ws, sid, token(sid, "client")) as person,
        httpx.AsyncClient(
            base_url=agent_url, headers={"Authorization": f"Bearer {token(sid, 'agent')}"}, timeout=30
        ) as agent,
    ):
        await person.wait_for("idle")
        start = asyncio.create_task(
            agent.post(f"/v1/sessions/{sid}/questionnaire?wait=25", json={"action": "start", "questions": QUESTIONS})
        )
        closed = await person.answer_all(
            {"target": ["production" if n % 2 else "staging"], "checks": {"selected": ["e2e"], "other": f"run {n}"}},
            timeout=20,
        )
        assert closed["status"] == "completed"
        response = await asyncio.wait_for(start, 30)
        assert response.status_code == 200, response.text
        return cast(dict[str, Any], response.json())


async def _all_sessions(client_ws: str, agent_url: str, sids: list[str]) -> list[dict[str, Any]]:
    return await asyncio.gather(*(_questionnaire(client_ws, agent_url, sid, n) for n, sid in enumerate(sids)))


def test_two_brokers_complete_questionnaires_for_sessions_on_every_master(cluster: LocalCluster) -> None:
    spread = sessions_on_every_master(cluster, 2, "served")
    sids = [sid for sids in spread.values() for sid in sids]
    with broker(cluster.url, redis_cluster=1) as people_side, broker(cluster.url, redis_cluster=1) as agent_side:
        results = asyncio.run(_all_sessions(people_side.ws_url, agent_side.url, sids))
        logs = people_side.log() + agent_side.log()

    for n, result in enumerate(results):
        assert result["details"]["status"] == "completed"
        assert result["details"]["answers"] == [
            {"questionId": "target", "selectedOptionIds": ["production" if n % 2 else "staging"]},
            {"questionId": "checks", "selectedOptionIds": ["e2e"], "other": f"run {n}"},
        ]
    assert "run 1" not in logs  # answer texts never reach the logs
    for port, sids_there in spread.items():
        with cluster.admin(port) as admin:
            keys = {key.decode().split("}")[0] + "}" for key in admin.scan_iter(match="qb:{served-*", count=1000)}
        assert keys == {"qb:{" + sid + "}" for sid in sids_there}


# --- the inbox's index ------------------------------------------------------------------


async def test_the_inbox_index_is_sharded_over_every_master_and_a_tenant_stays_on_one(
    cluster: LocalCluster, store: RedisStore
) -> None:
    owners = {cluster.owner_of(index_key(shard)) for shard in range(INBOX_SHARDS)}
    assert owners == set(cluster.ports)  # no one key (or node) for every tenant

    tenants = {f"tenant{n}" for n in range(40)}
    assert len({inbox_shard(f"{tenant}:x") for tenant in tenants}) > 3
    tenant = f"acme{uuid.uuid4().hex[:6]}"
    sids = [f"{tenant}:{n}" for n in range(12)]
    assert len({cluster.owner_of(channel_for(sid)) for sid in sids}) > 1  # its sessions spread...
    for sid in sids:
        await store.create(new_questionnaire(sid))
    shard_key = index_key(inbox_shard(f"{tenant}:"))
    with cluster.admin(cluster.owner_of(shard_key)) as admin:  # ...its index does not
        members = {member.decode() for member in admin.zrange(shard_key, 0, -1)}
    assert {member for member in members if member.startswith(f"{tenant}:")} == set(sids)
    assert sorted(await store.open_sessions(f"{tenant}:")) == sorted(sids)
    found = await store.session_inboxes(sids, contract.NOW)
    assert all(len(one.entries) == 1 for one in found)


async def test_a_watched_prefix_hears_creates_and_presence_from_sessions_on_every_master(
    cluster: LocalCluster, store: RedisStore, listener: Listener
) -> None:
    tenant = f"w{uuid.uuid4().hex[:6]}"
    sids = [f"{tenant}:{n}" for n in range(9)]
    assert len({cluster.owner_of(channel_for(sid)) for sid in sids}) == MASTERS
    await store.watch_inbox(f"{tenant}:")
    with cluster.admin(cluster.owner_of(inbox_channel(inbox_shard(f"{tenant}:")))) as admin:
        assert inbox_channel(inbox_shard(f"{tenant}:")).encode() in admin.execute_command("PUBSUB", "SHARDCHANNELS")

    created = {await store.create(new_questionnaire(sid)) for sid in sids}
    heard = {(await listener.next_notice()).questionnaire_id for _ in sids}
    assert heard == {state.id for state in created}

    await store.heartbeat(sids[0], "c-1", ttl=30, now=contract.NOW)
    assert await asyncio.wait_for(listener.presences.get(), contract.DEADLINE) == (sids[0], 1)


async def _inbox_across_brokers(people_ws: str, agent_url: str, inbox_ws: str, inbox_url: str, tenant: str) -> None:
    sids = [f"{tenant}:{n}" for n in range(6)]
    pattern = token(f"{tenant}:*", "client")
    async with InboxClient.connect_inbox(inbox_ws, pattern) as watching:
        ids: dict[str, str] = {}
        for sid in sids:
            async with httpx.AsyncClient(timeout=30) as http:
                reply = await http.post(
                    f"{agent_url}/v1/sessions/{sid}/questionnaire?wait=0",
                    json=start_body(single(), single("second")),
                    headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
                )
            ids[sid] = reply.json()["questionnaireId"]
            await watching.item(ids[sid], index=0)
        listed = await every_page(inbox_url, pattern, 4)
        assert {item["questionnaireId"] for item in listed} == set(ids.values())
        for sid in sids:  # answered on the people's broker: seen at once on the inbox's
            async with ScriptedClient.connect(people_ws, sid, token(sid, "client")) as person:
                await person.answer(await person.wait_for("question"), ["staging"])
                await watching.item(ids[sid], index=1, timeout=1.0 + 1.0)  # (within a second, and a join)
                await person.answer(await person.wait_for("question", where=lambda f: f["index"] == 1), ["staging"])
                assert (await watching.removed(ids[sid]))["status"] == "completed"
        assert watching.items == {}


def test_an_inbox_on_one_broker_follows_sessions_on_every_master_answered_on_another(cluster: LocalCluster) -> None:
    tenant = f"inbox{uuid.uuid4().hex[:6]}"
    assert len({cluster.owner_of(channel_for(f"{tenant}:{n}")) for n in range(6)}) == MASTERS
    with broker(cluster.url, redis_cluster=1) as people_side, broker(cluster.url, redis_cluster=1) as inbox_side:
        asyncio.run(
            _inbox_across_brokers(people_side.ws_url, people_side.url, inbox_side.ws_url, inbox_side.url, tenant)
        )
