"""Fixtures for every level of the suite: unit, integration and e2e.

What tests call rather than request (processes, clients, samples, waiting) is in
``tests/helpers/``. A test that needs a program the machine may lack (redis-server,
chromium, tmux, nginx) calls ``tests.helpers.processes.need``: a skip, or a failure under
QBROKER_REQUIRE_ALL=1.
"""

from __future__ import annotations

import pytest

from tests.helpers.samples import new_sid


@pytest.fixture
def sid() -> str:
    """A fresh session id: tests isolate themselves by session, never by broker."""
    return new_sid()
