"""The broker's settings: the Redis deployment ones (QBROKER_REDIS_CLUSTER, the per-write
durability waits) and the checks that stop a broker in one line before it listens."""

from __future__ import annotations

import re

import pytest

from broker.runtime.config import Config
from broker.store import open_store
from broker.store.memory import MemoryStore


def test_redis_settings_default_to_a_single_redis_without_waits() -> None:
    config = Config.from_env({})
    assert (config.redis_cluster, config.redis_wait_replicas, config.redis_wait_aof) == (False, 0, False)
    assert config.redis_wait_timeout == 2.0


def test_redis_settings_come_from_the_environment() -> None:
    config = Config.from_env(
        {
            "QBROKER_REDIS_CLUSTER": "1",
            "QBROKER_REDIS_WAIT_REPLICAS": "2",
            "QBROKER_REDIS_WAIT_AOF": "yes",
            "QBROKER_REDIS_WAIT_TIMEOUT": "0.5",
        }
    )
    assert (config.redis_cluster, config.redis_wait_replicas, config.redis_wait_aof) == (True, 2, True)
    assert config.redis_wait_timeout == 0.5


@pytest.mark.parametrize("raw", ["0", "false", "off", "no", ""])
def test_a_flag_can_be_switched_off(raw: str) -> None:
    assert Config.from_env({"QBROKER_REDIS_CLUSTER": raw}).redis_cluster is False


def test_a_flag_that_is_neither_on_nor_off_stops_the_broker_with_its_name() -> None:
    with pytest.raises(SystemExit, match="QBROKER_REDIS_CLUSTER"):
        Config.from_env({"QBROKER_REDIS_CLUSTER": "sometimes"})


@pytest.mark.parametrize(
    ("env", "overrides", "says"),
    [
        ({}, {"port": 99999}, "between 1 and 65535, got 99999"),
        ({"QBROKER_PORT": "0"}, {}, "between 1 and 65535, got 0"),
        ({}, {"redis_url": "notaurl"}, "must start with redis://, rediss://, unix://, got 'notaurl'"),
        ({"QBROKER_REDIS_URL": "http://127.0.0.1:6379"}, {}, "got 'http://127.0.0.1:6379'"),
        (
            {"QBROKER_REDIS_URL": "redis://127.0.0.1:6379/abc"},
            {},
            "the Redis URL's database must be a number, got 'abc'",
        ),
        ({"QBROKER_HEARTBEAT_INTERVAL": "0"}, {}, "QBROKER_HEARTBEAT_INTERVAL must be above 0, got 0"),
        ({"QBROKER_RECONCILE_INTERVAL": "0"}, {}, "QBROKER_RECONCILE_INTERVAL must be above 0, got 0"),
        ({"QBROKER_RATE_LIMIT": "-1"}, {}, "QBROKER_RATE_LIMIT must be above 0, got -1"),
        ({"QBROKER_RETENTION": "0"}, {}, "QBROKER_RETENTION must be above 0, got 0"),
        ({"QBROKER_HELLO_TIMEOUT": "0"}, {}, "QBROKER_HELLO_TIMEOUT must be above 0, got 0"),
        ({"QBROKER_REDIS_WAIT_TIMEOUT": "0"}, {}, "QBROKER_REDIS_WAIT_TIMEOUT must be above 0, got 0"),
        ({"QBROKER_CLIENT_WAIT": "-1"}, {}, "QBROKER_CLIENT_WAIT must be 0 or more, got -1"),
        ({"QBROKER_RECONNECT_GRACE": "-5"}, {}, "QBROKER_RECONNECT_GRACE must be 0 or more, got -5"),
        ({"QBROKER_SHUTDOWN_GRACE": "-1"}, {}, "QBROKER_SHUTDOWN_GRACE must be 0 or more, got -1"),
        ({"QBROKER_REDIS_WAIT_REPLICAS": "-1"}, {}, "QBROKER_REDIS_WAIT_REPLICAS must be 0 or more, got -1"),
        ({"QBROKER_RATE_BURST": "0.5"}, {}, "QBROKER_RATE_BURST must be 1 or more, got 0.5"),
        (
            {"QBROKER_PUSH_SUBSCRIBE_PER_MINUTE": "0"},
            {},
            "QBROKER_PUSH_SUBSCRIBE_PER_MINUTE must be above 0, got 0",
        ),
        ({"QBROKER_PUSH_SUBSCRIBE_BURST": "0"}, {}, "QBROKER_PUSH_SUBSCRIBE_BURST must be 1 or more, got 0"),
        ({"QBROKER_MAX_CONNECTIONS_PER_SESSION": "0"}, {}, "QBROKER_MAX_CONNECTIONS_PER_SESSION must be 1 or more"),
        ({"QBROKER_LOG_LEVEL": "verbose"}, {}, "QBROKER_LOG_LEVEL must be one of debug, info, warning, error"),
        ({"QBROKER_LOG_FORMAT": "txt"}, {}, "QBROKER_LOG_FORMAT must be auto, json or text, got 'txt'"),
    ],
)
def test_a_setting_out_of_range_stops_the_broker_in_one_line(
    env: dict[str, str], overrides: dict[str, object], says: str
) -> None:
    with pytest.raises(SystemExit, match=re.escape(says)):
        Config.from_env(env, **overrides)


def test_without_a_redis_url_the_store_is_the_memory_store() -> None:
    assert isinstance(open_store(None, 60.0), MemoryStore)


@pytest.mark.parametrize("setting", [{"cluster": True}, {"wait_replicas": 1}, {"wait_aof": True}])
def test_redis_settings_without_a_redis_url_are_refused(setting: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="need a Redis URL"):
        open_store(None, 60.0, **setting)  # type: ignore[arg-type]


def test_waits_on_a_redis_cluster_are_refused_before_any_connection() -> None:
    from broker.store.redis import RedisStore

    with pytest.raises(ValueError, match="not supported on a Redis Cluster"):
        RedisStore("redis://127.0.0.1:1", 60.0, cluster=True, wait_replicas=1)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"QBROKER_CLIENT_WAIT": "0"}, ("client_wait", 0.0)),  # a start no one is there for ends at once
        ({"QBROKER_RECONNECT_GRACE": "0"}, ("reconnect_grace", 0.0)),
        ({"QBROKER_LOG_FORMAT": "TEXT"}, ("log_format", "text")),
        ({"QBROKER_LOG_FORMAT": " json "}, ("log_format", "json")),
        ({"QBROKER_LOG_FORMAT": ""}, ("log_format", "auto")),
        ({"QBROKER_LOG_LEVEL": " Warning "}, ("log_level", "warning")),
        ({"QBROKER_REDIS_URL": "redis://127.0.0.1:6379/2"}, ("redis_url", "redis://127.0.0.1:6379/2")),
    ],
)
def test_settings_at_their_bounds_are_taken(env: dict[str, str], expected: tuple[str, object]) -> None:
    name, value = expected
    assert getattr(Config.from_env(env), name) == value


def test_the_defaults_are_the_documented_ones() -> None:
    """docs/protocol.md's and docs/operations.md's defaults, exactly: the black-box timer tests
    (test_protocol_timeout_defaults.py) can only bound them within a window."""
    from broker.http import agent_api

    config = Config.from_env({})
    assert (config.client_wait, config.reconnect_grace, config.hello_timeout) == (5.0, 30.0, 10.0)
    assert (config.rate_limit, config.rate_burst) == (50.0, 100.0)
    assert config.retention == 7 * 24 * 3600.0
    assert config.max_frame_bytes == 64 * 1024
    assert config.max_connections_per_session == 64
    assert (config.heartbeat_interval, config.reconcile_interval, config.shutdown_grace) == (5.0, 2.0, 10.0)
    assert (config.log_level, config.log_format) == ("info", "auto")
    assert agent_api.DEFAULT_WAIT == 30.0


# --- Redis behind Sentinel ---------------------------------------------------------------


def test_sentinel_settings_come_from_the_environment() -> None:
    config = Config.from_env(
        {
            "QBROKER_REDIS_SENTINELS": "10.0.0.1:26379, sentinel-b:26380,[::1]:26381",
            "QBROKER_REDIS_SENTINEL_MASTER": "qbroker",
            "QBROKER_REDIS_PASSWORD": "data-secret",
            "QBROKER_REDIS_SENTINEL_PASSWORD": "sentinel-secret",
            "QBROKER_REDIS_WAIT_REPLICAS": "1",
        }
    )
    assert config.redis_sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26380), ("::1", 26381))
    assert (config.redis_sentinel_master, config.redis_password) == ("qbroker", "data-secret")
    assert config.redis_sentinel_password == "sentinel-secret"
    assert config.redis_url is None and config.redis_wait_replicas == 1
    assert "data-secret" not in repr(config) and "sentinel-secret" not in repr(config)  # (nor in anything printing it)


def test_the_sentinel_master_name_defaults_to_sentinels_own_default() -> None:
    config = Config.from_env({"QBROKER_REDIS_SENTINELS": "127.0.0.1:26379"})
    assert config.redis_sentinel_master == "mymaster"
    assert (config.redis_password, config.redis_sentinel_password) == (None, None)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"QBROKER_REDIS_SENTINELS": "127.0.0.1"},
            "qbroker: QBROKER_REDIS_SENTINELS must be host:port pairs separated by commas, got '127.0.0.1'",
        ),
        ({"QBROKER_REDIS_SENTINELS": "a:1,b:port"}, "QBROKER_REDIS_SENTINELS must be host:port pairs"),
        ({"QBROKER_REDIS_SENTINELS": ":26379"}, "got ':26379'"),
        ({"QBROKER_REDIS_SENTINELS": "a:70000"}, "got 'a:70000'"),
        (
            {"QBROKER_REDIS_SENTINELS": "a:26379", "QBROKER_REDIS_URL": "redis://a:6379/0"},
            "qbroker: set QBROKER_REDIS_URL or QBROKER_REDIS_SENTINELS, not both",
        ),
        (
            {"QBROKER_REDIS_SENTINELS": "a:26379", "QBROKER_REDIS_CLUSTER": "1"},
            "a Redis Cluster is not reached through QBROKER_REDIS_SENTINELS",
        ),
        (
            {"QBROKER_REDIS_URL": "redis://a:6379/0", "QBROKER_REDIS_PASSWORD": "x"},
            "QBROKER_REDIS_PASSWORD is for QBROKER_REDIS_SENTINELS (with QBROKER_REDIS_URL, the password goes in the URL",
        ),
        ({"QBROKER_REDIS_SENTINEL_PASSWORD": "x"}, "QBROKER_REDIS_SENTINEL_PASSWORD is for QBROKER_REDIS_SENTINELS"),
    ],
)
def test_a_bad_sentinel_setting_stops_the_broker_in_one_line(env: dict[str, str], says: str) -> None:
    with pytest.raises(SystemExit, match=re.escape(says)) as stopped:
        Config.from_env(env)
    assert "\n" not in str(stopped.value)


def test_sentinels_make_a_redis_store_that_asks_them_for_the_master() -> None:
    from redis.asyncio import Redis
    from redis.asyncio.sentinel import SentinelConnectionPool

    from broker.store.redis import RedisStore

    store = open_store(
        None, 60.0, sentinels=(("127.0.0.1", 1),), sentinel_master="m", password="pw", sentinel_password="spw"
    )
    assert isinstance(store, RedisStore)
    client = store._client
    assert isinstance(client, Redis)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "m"
    assert pool.connection_kwargs["password"] == "pw"
    assert store.eager_safe is False  # (every call goes through redis-py, which times its reads in a task)


def test_a_redis_url_and_sentinels_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        open_store("redis://127.0.0.1:1/0", 60.0, sentinels=(("127.0.0.1", 1),))
