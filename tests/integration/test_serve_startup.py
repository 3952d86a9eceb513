"""``qbroker serve`` when it cannot start: a taken port, a Redis that does not answer, a bad
port or Redis URL. It says so in one line, exits non-zero, and never claims first that it
is listening (the banner, with its tokens, comes only once the port is bound and the store
answered)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
import redis
import yaml

from tests.helpers.processes import REPO_ROOT, BrokerProcess, RedisServer, broker_env, free_port, redis_server

BANNER = "qbroker listening on"


@pytest.fixture
def data_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="qbroker-startup-") as path:
        yield path


def serve(data_dir: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    env = broker_env(data_dir)
    del env["QBROKER_SECRET"]  # the case with the most to print: the generated secret's tokens
    return subprocess.run(
        [sys.executable, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1", *args],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_banner_comes_once_the_broker_listens(data_dir: str) -> None:
    env = broker_env(data_dir)
    del env["QBROKER_SECRET"]
    process = BrokerProcess(free_port(), env, data_dir).start()
    try:
        log = process.log()
        assert log.index("Uvicorn running on") < log.index(f"{BANNER} {process.url}"), log
    finally:
        process.stop()


def test_a_taken_port_exits_3_without_the_banner(data_dir: str) -> None:
    first = BrokerProcess(free_port(), broker_env(data_dir), data_dir).start()
    try:
        second = serve(data_dir, "--port", str(first.port))
    finally:
        first.stop()
    output = second.stdout + second.stderr
    assert second.returncode == 3, output
    assert second.stderr == (
        f"qbroker serve: 127.0.0.1:{first.port} is already in use; pick another with --port or QBROKER_PORT\n"
    )
    assert BANNER not in output and "token=" not in output


def test_an_unreachable_redis_exits_3_in_one_line_without_the_banner(data_dir: str) -> None:
    nobody = free_port()  # nothing listens there
    result = serve(data_dir, "--port", str(free_port()), "--redis-url", f"redis://127.0.0.1:{nobody}")
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert (
        f"qbroker cannot start: redis store: start failed: ConnectionError: Error connecting to 127.0.0.1:{nobody}"
        in output
    )
    assert "Traceback" not in output
    assert BANNER not in output and "token=" not in output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "99999"], "qbroker: the port must be between 1 and 65535, got 99999"),
        (["--redis-url", "notaurl"], "qbroker: the Redis URL must start with redis://, rediss://, unix://"),
    ],
)
def test_a_bad_port_or_redis_url_exits_1_in_one_line(data_dir: str, args: list[str], says: str) -> None:
    result = serve(data_dir, *args)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(says) and result.stderr.count("\n") == 1, result.stderr


def shipped_placeholders() -> list[str]:
    """Every QBROKER_SECRET value the k8s manifests carry."""
    values = []
    for path in sorted((REPO_ROOT / "deploy" / "k8s").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            values += [v for k, v in (document.get("stringData") or {}).items() if k == "QBROKER_SECRET"]
    return values


@pytest.mark.parametrize(
    ("secret", "says"),
    [
        ("x", "qbroker serve: the token secret is 1 bytes; use at least 32"),
        ("s" * 31, "qbroker serve: the token secret is 31 bytes; use at least 32"),
        *(
            (shipped, "qbroker serve: QBROKER_SECRET is a placeholder from an example")
            for shipped in shipped_placeholders()
        ),
        ("change-me-to-a-long-random-string", "qbroker serve: QBROKER_SECRET is a placeholder from an example"),
    ],
)
def test_a_short_or_placeholder_secret_is_refused_in_one_line(data_dir: str, secret: str, says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        env=broker_env(data_dir, secret=secret),
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(says) and result.stderr.count("\n") == 1, result.stderr
    assert BANNER not in result.stdout


def test_a_32_byte_secret_is_enough(data_dir: str) -> None:
    process = BrokerProcess(free_port(), broker_env(data_dir, secret="s" * 32), data_dir).start()
    try:
        assert "token secret" not in process.log()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def guarded_redis() -> Iterator[RedisServer]:
    """A Redis with a password, and a user ``noticeless`` who may use every key and command
    but no pub/sub channel (what a new ACL user gets by default on Redis 7)."""
    with redis_server("--requirepass", "guarded") as server:
        with redis.Redis(port=server.port, password="guarded") as admin:
            admin.execute_command("ACL", "SETUSER", "noticeless", "on", ">pw", "~*", "+@all", "resetchannels")
        yield server


@pytest.mark.parametrize(
    ("credentials", "database", "says"),
    [
        ("", "0", "start failed: AuthenticationError: NOAUTH Authentication required."),
        (
            "noticeless:pw@",
            "0",
            "start failed: Redis refused: NOPERM this user has no permissions to access one of the channels",
        ),
        (":guarded@", "99", "start failed: Redis refused: ERR DB index is out of range"),
    ],
    ids=["no password", "no channel rights", "no such database"],
)
def test_a_redis_that_refuses_what_the_broker_needs_exits_3_in_one_line(
    data_dir: str, guarded_redis: RedisServer, credentials: str, database: str, says: str
) -> None:
    url = f"redis://{credentials}127.0.0.1:{guarded_redis.port}/{database}"
    result = serve(data_dir, "--port", str(free_port()), "--redis-url", url)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert f"qbroker cannot start: redis store: {says}" in output
    assert "Traceback" not in output
    assert BANNER not in output and "token=" not in output


def test_without_a_secret_on_redis_the_broker_warns_and_never_prints_the_redis_password(
    data_dir: str, guarded_redis: RedisServer
) -> None:
    env = broker_env(data_dir, redis_url=f"redis://127.0.0.1:{guarded_redis.port}/0?password=guarded")
    del env["QBROKER_SECRET"]
    process = BrokerProcess(free_port(), env, data_dir).start()
    try:
        log = process.log()
    finally:
        process.stop()
    assert f"store: redis (redis://127.0.0.1:{guarded_redis.port}/0?password=***)" in log
    assert "guarded" not in log
    assert "warning: no QBROKER_SECRET with a Redis store" in log


@pytest.mark.parametrize(("appendonly", "warned"), [("no", True), ("yes", False)])
def test_serve_warns_at_start_when_its_redis_keeps_no_aof(data_dir: str, appendonly: str, warned: bool) -> None:
    with redis_server("--appendonly", appendonly) as server:
        process = BrokerProcess(free_port(), broker_env(data_dir, server.url), data_dir).start()
        try:
            log = process.log()  # (the store starts before the broker listens)
        finally:
            process.stop()
        assert ("redis persistence (AOF) is off" in log) is warned, log
