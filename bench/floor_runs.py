"""The floors' runs (a library of bench/run.py): each starts bench/floors.py's sides in
processes of their own and returns what its client measured (a JSON report)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from procs import PY, REPO, child_env, free_port, stop, wait_port


def start_echo_server(redis_write: str | None = None) -> tuple[int, subprocess.Popen[str]]:
    """The bare websockets echo server of bench/floors.py, listening on a free port (with
    ``redis_write``, writing each message to that Redis before echoing it)."""
    port = free_port()
    server = subprocess.Popen(
        [PY, str(REPO / "bench" / "floors.py"), "ws-server", "--port", str(port)]
        + (["--redis-write", redis_write] if redis_write else []),
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    if not wait_port(port, 15):
        stop(server)
        raise RuntimeError("echo server did not start")
    return port, server


def ws_echo_floor(n: int, pace: str | None = None, redis_write: str | None = None) -> dict[str, Any]:
    port, server = start_echo_server(redis_write)
    try:
        return _floor_client(["ws-client", "--port", str(port), "-n", str(n)] + (["--pace", pace] if pace else []))
    finally:
        stop(server)


def python_floor(n: int = 30) -> dict[str, Any]:
    """How fast the machine runs Python right now (bench/floors.py python-work)."""
    return _floor_client(["python-work", "-n", str(n)])


def wake_floor(n: int) -> dict[str, Any]:
    return _floor_client(["wake", "-n", str(n)])


def redis_floor(url: str, n: int) -> dict[str, Any]:
    return _floor_client(["redis-client", "--url", url, "-n", str(n)])


def _floor_client(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [PY, str(REPO / "bench" / "floors.py"), *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(json.loads(out.stdout))
