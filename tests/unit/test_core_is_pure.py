"""The import rule of the Sans-I/O core, enforced on the source (parsed with ast, not imported).

The core modules may not import an event loop, a web framework, a store client, a server or
a clock: every transport drives the same pure code, and time is always passed in as ``now``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE_DIR = Path(__file__).resolve().parents[2] / "broker" / "core"
CORE = tuple(sorted(path.stem for path in CORE_DIR.glob("*.py") if path.stem != "__init__"))

FORBIDDEN_MODULES = frozenset(
    {
        "asyncio",
        "anyio",
        "trio",
        "threading",
        "socket",
        "selectors",
        "starlette",
        "redis",
        "uvicorn",
        "websockets",
        "httpx",
        "time",
        "datetime",
        "random",
        "uuid",
        "os",
        "logging",
    }
)
CLOCK_CALLS = frozenset({"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "now", "utcnow", "today"})


def violations(source: str) -> list[str]:
    """Every forbidden import or clock read in ``source``, as readable strings."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            # a relative import: resolve it against the core package
            names = [f"broker.core.{node.module}" if node.module else "broker.core"]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in CLOCK_CALLS:
                found.append(f"line {node.lineno}: clock read .{func.attr}()")
            if isinstance(func, ast.Name) and func.id in {"__import__", "import_module"}:
                found.append(f"line {node.lineno}: dynamic import")
        for name in names:
            assert isinstance(node, ast.Import | ast.ImportFrom)  # names come from imports only
            root = name.split(".")[0]
            if root in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: imports {name}")
            elif root in ("broker", "clients", "qbroker") and name.removeprefix("broker.core.") not in CORE:
                found.append(f"line {node.lineno}: imports {name}, which is not core")
    return found


def test_the_core_is_the_package_broker_core() -> None:
    assert {"errors", "model", "machine", "results", "frames", "availability"} <= set(CORE)


@pytest.mark.parametrize("name", [*CORE, "__init__"])
def test_the_core_module_imports_no_io_and_reads_no_clock(name: str) -> None:
    path = CORE_DIR / f"{name}.py"
    assert violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio",
        "import asyncio.tasks",
        "from starlette.websockets import WebSocket",
        "import redis.asyncio as redis",
        "from uvicorn import run",
        "import websockets",
        "import time",
        "from time import monotonic",
        "from datetime import datetime",
        "x = clock.now()",
        "x = loop.time()",
        "from broker.service import Service",
        "from . import store",
        "from .ws import handler",
        "import clients.tui.app",
        "m = __import__('asyncio')",
        "def f():\n    import asyncio\n",
    ],
)
def test_the_checker_catches_a_forbidden_import_or_clock_read(source: str) -> None:
    assert violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import json",
        "import msgpack",
        "from dataclasses import dataclass, replace",
        "from broker.core.errors import BrokerError",
        "from broker.core.machine import Questionnaire",
        "from .model import Question",
        "def apply(state, command, now):\n    return now + 1\n",
    ],
)
def test_the_checker_lets_pure_code_through(source: str) -> None:
    assert violations(source) == []
