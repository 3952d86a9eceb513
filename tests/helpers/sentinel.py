"""Redis with Sentinel on 127.0.0.1, for the failover tests: one master, one replica and three
sentinels (Debian's redis-server and redis-sentinel), all password-protected, on free ports.

The sentinels notice a dead master after ``DOWN_AFTER_MS`` and promote the replica. A master
that is killed comes back (``restart``) only once the promotion is done, as a supervisor
would bring it back: the sentinels then make it a replica of the new master. (Back any
sooner, empty as it keeps nothing on disk, it would be the master still, and its replica
would copy its emptiness.)
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis as redis_py

from tests.helpers.processes import free_port, need, port_open, redis_server_command
from tests.helpers.waiting import wait_until

MASTER_NAME = "qbroker-test"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
PASSWORD = "data-password-5d1c"
SENTINEL_PASSWORD = "sentinel-password-8a3e"


@dataclass
class Node:
    port: int
    command: list[str]
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: port_open(self.port), what=f"redis on {self.port} to listen")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last words to the replica."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@dataclass
class SentinelGroup:
    data: list[Node]  # [the first master, its replica]
    sentinels: list[Node] = field(default_factory=list)

    @property
    def setting(self) -> str:
        """QBROKER_REDIS_SENTINELS."""
        return ",".join(f"127.0.0.1:{node.port}" for node in self.sentinels)

    def master_port(self) -> int:
        """The master's port as the first sentinel that answers says."""
        for node in self.sentinels:
            try:
                with redis_py.Redis(port=node.port, password=SENTINEL_PASSWORD, socket_timeout=2) as sentinel:
                    host, port = sentinel.sentinel_get_master_addr_by_name(MASTER_NAME)
                    return int(port)
            except redis_py.RedisError:
                continue
        raise AssertionError("no sentinel answers")

    def node(self, port: int) -> Node:
        (found,) = [node for node in self.data if node.port == port]
        return found

    def client(self) -> redis_py.Redis:
        """A client of the current master."""
        return redis_py.Redis(port=self.master_port(), password=PASSWORD, socket_timeout=5)

    def wait_for_promotion(self, old_master: int, timeout: float = 30.0) -> int:
        """The sentinels name another master; returns its port."""
        return wait_until(
            lambda: (port := self.master_port()) != old_master and port,
            timeout=timeout,
            interval=0.1,
            what="a promotion",
        )

    def wait_for_replica(self, timeout: float = 30.0) -> None:
        """The master has a replica that is in sync (``WAIT 1`` can be met again)."""

        def synced() -> bool:
            with self.client() as master:
                info = master.info("replication")
            return int(info.get("connected_slaves", 0)) >= 1 and info.get("slave0", {}).get("state") == "online"

        wait_until(synced, timeout=timeout, interval=0.2, what="the master to have an online replica")


def _sentinel_conf(port: int, master_port: int, directory: Path) -> Path:
    path = directory / f"sentinel-{port}.conf"
    path.write_text(
        f"port {port}\n"
        "bind 127.0.0.1\n"
        f"dir {directory}\n"
        f"requirepass {SENTINEL_PASSWORD}\n"
        f"sentinel sentinel-pass {SENTINEL_PASSWORD}\n"
        f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
        f"sentinel auth-pass {MASTER_NAME} {PASSWORD}\n"
        f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
        f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
        f"sentinel parallel-syncs {MASTER_NAME} 1\n"
    )
    return path


@contextmanager
def sentinel_group() -> Iterator[SentinelGroup]:
    server, sentinel = shutil.which("redis-server"), shutil.which("redis-sentinel")
    need(server is not None and sentinel is not None, "redis-server or redis-sentinel is not installed")
    assert server is not None and sentinel is not None
    with tempfile.TemporaryDirectory(prefix="qbroker-sentinel-") as tmp:
        directory = Path(tmp)
        secured = ("--requirepass", PASSWORD, "--masterauth", PASSWORD)
        master_port, replica_port = free_port(), free_port()
        master = Node(master_port, redis_server_command(server, master_port, tmp, *secured))
        replica = Node(
            replica_port,
            redis_server_command(server, replica_port, tmp, *secured, "--replicaof", "127.0.0.1", str(master_port)),
        )
        group = SentinelGroup([master, replica])
        try:
            master.start()
            replica.start()
            for _ in range(3):
                port = free_port()
                group.sentinels.append(Node(port, [sentinel, str(_sentinel_conf(port, master_port, directory))]))
                group.sentinels[-1].start()
            group.wait_for_replica()
            yield group
        finally:
            for node in [*group.sentinels, *group.data]:
                node.stop()
