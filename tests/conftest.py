"""Fixtures for every level of the suite: unit, integration and e2e.

What tests call rather than request (processes, clients, samples, waiting) is in
``tests/helpers/``. A test that needs a program the machine may lack (redis-server,
chromium, tmux, nginx) calls ``tests.helpers.processes.need``: a skip, or a failure under
QBROKER_REQUIRE_ALL=1.

The suite runs on pytest-xdist's workers (docs/testing.md); the tests marked ``heavy`` (tens
of seconds each) come first in the order the workers are handed tests, so that each starts
as soon as a worker is free instead of several finishing the run one after another.
"""

from __future__ import annotations

import signal
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.samples import new_sid

# Hypothesis fails an example that runs over 200 ms, and a test whose data comes slowly: on
# workers sharing busy cores that measures the machine, not the code. Off for every property
# test, as the slow ones already had it.
settings.register_profile("qbroker", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("qbroker")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # (a stable sort)


@pytest.fixture
def sid() -> str:
    """A fresh session id: tests isolate themselves by session, never by broker."""
    return new_sid()


@pytest.fixture(autouse=True)
def _ctrl_c_reaches_the_programs_tests_start() -> Iterator[None]:
    """Every program a test starts inherits its worker's SIGINT disposition and signal mask:
    a test that leaves SIGINT ignored or blocked makes the worker's later programs deaf to
    Ctrl-C (the `qbroker ask` Ctrl-C tests then wait in vain). Put it back, and name the test."""
    yield
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if handler is not signal.default_int_handler or blocked:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        warnings.warn(f"the test left SIGINT {'blocked' if blocked else handler!r}; put back", stacklevel=1)
