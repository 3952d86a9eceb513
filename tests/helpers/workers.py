"""Which pytest-xdist worker this process is, for what each worker keeps to itself.

The suite runs under pytest-xdist (pyproject.toml's ``addopts``). Each worker is a process
with a session of its own, so session- and module-scoped fixtures (brokers, redis-server,
Chromium) are already one per worker, and temporary directories, tmux sockets and Pi homes
have random names. What a worker does need to be told is its share of what all of them draw
from on one machine: ports (``tests.helpers.processes.free_port``). A run without xdist
(``-n0``) is worker 0 of 1.
"""

from __future__ import annotations

import os


def index() -> int:
    """This worker's number: 0 for ``gw0`` (and for a run without workers), 1 for ``gw1``..."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def count() -> int:
    """How many workers this run has (1 without xdist)."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1
