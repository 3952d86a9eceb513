"""Real processes for integration and end-to-end tests: brokers, redis-server, their
environment, ports and tokens; and ``need``, the skip convention for a missing program.

Everything here talks to 127.0.0.1 only and every wait has a deadline.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import jwt
import pytest
import redis as redis_py
from prometheus_client.parser import text_string_to_metric_families

from broker.tokens.claims import Role, mint_token
from tests.helpers import workers
from tests.helpers.waiting import wait_until

TEST_SECRET = "qbroker-test-secret-0123456789abcdef"
REPO_ROOT = Path(__file__).resolve().parents[2]


def require_all() -> bool:
    """CI sets QBROKER_REQUIRE_ALL=1: a missing tool is then a failure, not a skip."""
    return os.environ.get("QBROKER_REQUIRE_ALL") == "1"


def need(condition: bool, reason: str) -> None:
    if condition:
        return
    if require_all():
        pytest.fail(f"{reason} (QBROKER_REQUIRE_ALL=1 forbids skipping)")
    pytest.skip(reason)


# Ports for the servers tests start, one block per xdist worker in 10000-19999 (the ports
# 10000 above them, 20000-29999, are left for a Redis Cluster node's bus port). Not the
# kernel's pick (bind to port 0): that comes from the ephemeral range (32768 and up), which
# also gives outgoing connections their source ports, so between a test picking a port and
# its server binding it another worker's connection could take it. Each worker walks its own
# block from a random place (two runs on one machine rarely walk the same ports) and skips a
# port that anything holds, even in TIME_WAIT.
PORTS = range(10_000, 20_000)
_next_port: Iterator[int] | None = None


def _port_block() -> range:
    size = len(PORTS) // workers.count()
    first = PORTS.start + (workers.index() % workers.count()) * size
    return range(first, first + size)


def bindable(port: int) -> bool:
    """Nothing holds 127.0.0.1:``port`` (no listener, no connection, nothing in TIME_WAIT)."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing holds, from this worker's block (free until someone takes it)."""
    global _next_port
    block = _port_block()
    if _next_port is None:
        start = random.randrange(len(block))
        _next_port = itertools.cycle([*block[start:], *block[:start]])
    for _ in range(len(block)):
        port = next(_next_port)
        if bindable(port):
            return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1}")


def port_open(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def token(sid: str, role: Role, ttl: float | None = None, *, sub: str | None = None) -> str:
    return mint_token(TEST_SECRET, sid, role, ttl, sub=sub)


def revoked_token(base_url: str, sid: str, role: Role = "client") -> str:
    """A token for ``sid``, revoked on the broker at ``base_url`` (POST /v1/revocations with an
    admin token) before anybody uses it."""
    doomed = token(sid, role)
    response = httpx.post(
        f"{base_url}/v1/revocations",
        json={"jti": jwt.decode(doomed, options={"verify_signature": False})["jti"]},
        headers={"Authorization": f"Bearer {token('*', 'admin', 600, sub='ops')}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return doomed


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    unix_socket: str  # the same server on its Unix socket

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.unix_socket}?db=0"

    def calls(self, command: str) -> int:
        """How many ``command`` commands (e.g. ``"hget"``) this server has run so far."""
        with redis_py.Redis(host="127.0.0.1", port=self.port, socket_timeout=5) as client:
            stats = client.info("commandstats")
        return int(stats.get(f"cmdstat_{command.lower()}", {}).get("calls", 0))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def redis_server_command(binary: str, port: int, directory: str, *extra: str) -> list[str]:
    """redis-server on 127.0.0.1:``port`` that keeps nothing on disk (its files go to ``directory``);
    ``extra`` options come last, so they win."""
    keep_nothing = ["--save", "", "--appendonly", "no", "--dir", directory]
    return [binary, "--port", str(port), "--bind", "127.0.0.1", *keep_nothing, *extra]


@contextmanager
def redis_server(*extra: str) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    need(binary is not None, "redis-server is not installed")
    assert binary is not None
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qbroker-redis-") as tmp:
        process = subprocess.Popen(
            redis_server_command(
                binary, port, tmp, "--unixsocket", f"{tmp}/redis.sock", "--unixsocketperm", "700", *extra
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisServer(port, process, f"{tmp}/redis.sock")
        try:
            wait_until(lambda: port_open(port), what="redis-server to listen")
            yield server
        finally:
            server.stop()


@dataclass
class BrokerProcess:
    """``qbroker serve`` in a child process. ``log`` collects its stdout+stderr."""

    port: int
    env: dict[str, str]
    data_dir: str
    process: subprocess.Popen[bytes] | None = None
    log_path: str = ""
    extra_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        self.log_path = os.path.join(self.data_dir, f"broker-{self.port}-{time.monotonic_ns()}.log")
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed by the child's exit
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qbroker.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *self.extra_args,
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(REPO_ROOT),
        )
        log.close()
        process = self.process

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"broker exited with {process.returncode}:\n{self.log()}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_until(ready, timeout=timeout, interval=0.05, what="the broker to be ready")
        except AssertionError:
            self.stop()
            raise RuntimeError(f"broker did not become ready:\n{self.log()}") from None
        return self

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def logged(self, message: str, **fields: object) -> int:
        """How many of this broker's JSON log lines say ``message`` with these ``fields``."""
        count = 0
        for line in self.log().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(entry, dict)
                and entry.get("msg") == message
                and all(entry.get(key) == value for key, value in fields.items())
            ):
                count += 1
        return count

    def metric(self, name: str, **labels: str) -> float:
        """One sample of this broker's /metrics: ``name`` (as exposed, e.g. with ``_total``)
        with exactly ``labels``; 0 when the broker has not exposed it yet."""
        return metric(httpx.get(f"{self.url}/metrics", timeout=5).text, name, **labels)

    def kill(self) -> None:
        """SIGKILL: the process dies without any cleanup."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if not self.process:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def metric(exposition: str, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` in a Prometheus text ``exposition`` (0 if absent)."""
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def broker_env(data_dir: str, redis_url: str | None = None, **settings: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env.update(
        QBROKER_SECRET=TEST_SECRET,
        QBROKER_DATA_DIR=data_dir,
        QBROKER_LOG_LEVEL="debug",
        PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    if redis_url:
        env["QBROKER_REDIS_URL"] = redis_url
    for key, value in settings.items():
        env[f"QBROKER_{key.upper()}"] = str(value)
    return env


@contextmanager
def broker(redis_url: str | None = None, *, port: int | None = None, **settings: object) -> Iterator[BrokerProcess]:
    """A running broker; ``settings`` become QBROKER_* variables (client_wait=1 -> QBROKER_CLIENT_WAIT=1)."""
    with tempfile.TemporaryDirectory(prefix="qbroker-test-") as data_dir:
        process = BrokerProcess(port or free_port(), broker_env(data_dir, redis_url, **settings), data_dir)
        process.start()
        try:
            yield process
        finally:
            process.stop()
