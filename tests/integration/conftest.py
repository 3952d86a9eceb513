"""Fixtures for the black-box docs/protocol.md suite (test_protocol_*.py).

``deployment`` is parametrized: ``memory`` (one ``qbroker serve`` on the embedded store)
and ``redis`` (two processes on one real redis-server; the agent talks to the first, clients
connect to the second). Both are session-scoped: tests isolate themselves by session id.
``fast_deployment`` is the same with short timers and a small rate limit, for the tests
that need them. ``live`` is a broker of the module's own (the clients' tests: the SDK,
``qbroker ask``, ``qbroker mcp``). ``sid``, a fresh session id, is tests/conftest.py's.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.helpers.processes import BrokerProcess, broker, need, redis_server
from tests.helpers.protocol import DEPLOYMENT_KINDS, Agent, BackgroundProbes, Deployment, start_deployment

# client_wait / reconnect_grace / hello_timeout in seconds; rate_limit frames per second.
FAST_SETTINGS: dict[str, object] = {
    "client_wait": 1,
    "reconnect_grace": 2,
    "hello_timeout": 1,
    "rate_limit": 2,
    "rate_burst": 6,
    "allowed_origins": "https://App.Example.test/",  # (as an operator may write it)
}


@pytest.fixture(scope="session")
def protocol_redis_url() -> Iterator[str]:
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    try:
        importlib.import_module("broker.store.redis")
    except ImportError as exc:
        pytest.fail(f"the redis deployment needs broker/store/redis/, which does not import: {exc}")
    with redis_server() as server:
        yield server.url


def _redis_url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("protocol_redis_url") if request.param == "redis" else None


@pytest.fixture(scope="session", params=DEPLOYMENT_KINDS)
def deployment(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    with start_deployment(request.param, _redis_url(request)) as started:
        yield started


@pytest.fixture(scope="session", params=DEPLOYMENT_KINDS)
def fast_deployment(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    with start_deployment(request.param, _redis_url(request), **FAST_SETTINGS) as started:
        yield started


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    """A broker of the module's own on the memory store; client_wait=1: a questionnaire
    started with nobody connected is unavailable after 1 s."""
    with broker(client_wait=1) as process:
        yield process


@pytest.fixture
async def agent(deployment: Deployment, sid: str) -> AsyncIterator[Agent]:
    async with Agent(deployment.agent_url, sid) as client:
        yield client


@pytest.fixture(scope="session")
def default_timer_probes(request: pytest.FixtureRequest) -> Iterator[dict[str, BackgroundProbes]]:
    """Background measurements of the default timers (test_protocol_timeout_defaults.py), for
    every deployment kind its selected tests name, all started at the first of those tests: the
    30 s they take then run side by side. Those tests are one xdist group, so that one worker
    measures; the scheduler hands a group out before the single tests, so that its 30 s
    overlap the rest of the suite."""
    kinds = sorted(
        {
            item.callspec.params["deployment_kind"]
            for item in request.session.items
            if hasattr(item, "callspec") and "deployment_kind" in item.callspec.params
        }
    )
    runs = {kind: BackgroundProbes(kind).start() for kind in kinds}
    yield runs
    for run in runs.values():
        run.close()
