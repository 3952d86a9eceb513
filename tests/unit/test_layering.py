"""The layers of docs/architecture.md, enforced on the source (parsed with ast, not imported).

- ``broker/`` never imports ``clients/`` or ``qbroker/``: the service does not know its clients.
- ``clients/`` imports only what a program on the other side of the wire may know of the
  broker: the pure core (the wire), and the token and settings helpers.
- The inside of the service (``broker/service``, ``broker/store``, ``broker/notify``) never
  imports an edge (an HTTP or websocket adapter, the app, the commands); ``store`` and
  ``notify`` do not import ``service`` either.
- ``broker/core/`` has its own, stricter rule: tests/unit/test_core_is_pure.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What clients may import of broker/: the wire (core), minting tokens, the settings' names
# and the data dir's secret file (the bots read a local broker's generated secret).
CLIENTS_MAY_IMPORT = ("broker.core", "broker.tokens.claims", "broker.runtime.config")
# The edges: what turns a request, a socket or a command line into calls on the service.
EDGES = (
    "broker.http",
    "broker.ws",
    "broker.remote_mcp",
    "broker.app",
    "broker.server",
    "broker.tokens.command",
)
INSIDE = ("broker/service", "broker/store", "broker/notify")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module ``path`` imports, with its line (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found += [(node.lineno, module)]
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


@pytest.mark.parametrize("path", sources("broker"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_broker_never_imports_its_clients_or_the_command(path: Path) -> None:
    wrong = [f"line {line}: {name}" for line, name in imported_modules(path) if _within(name, ("clients", "qbroker"))]
    assert wrong == []


@pytest.mark.parametrize("path", sources("clients"), ids=lambda p: str(p.relative_to(ROOT)))
def test_clients_import_only_the_wire_and_tokens_of_the_broker(path: Path) -> None:
    wrong = [
        f"line {line}: {name}"
        for line, name in imported_modules(path)
        if _within(name, ("broker",)) and not _within(name, CLIENTS_MAY_IMPORT) and name != "broker"
    ]
    assert wrong == []


@pytest.mark.parametrize(
    "path", [path for folder in INSIDE for path in sources(folder)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_inside_of_the_service_never_imports_an_edge(path: Path) -> None:
    forbidden = EDGES if path.is_relative_to(ROOT / "broker" / "service") else (*EDGES, "broker.service")
    wrong = [f"line {line}: {name}" for line, name in imported_modules(path) if _within(name, forbidden)]
    assert wrong == []


def test_the_rules_reach_every_package_of_the_broker() -> None:
    checked = {path.parent.relative_to(ROOT).as_posix() for path in sources("broker")}
    assert {"broker/notify", "broker/remote_mcp", "broker/service", "broker/store/redis", "broker/core"} <= checked
    inside = {path.parent.relative_to(ROOT).as_posix() for folder in INSIDE for path in sources(folder)}
    assert {"broker/notify", "broker/service", "broker/store", "broker/store/redis"} <= inside


def test_the_checker_sees_absolute_relative_and_from_imports(tmp_path: Path) -> None:
    assert ("broker.service" in {name for _, name in imported_modules(ROOT / "broker" / "ws" / "session.py")}) is True
    sample = ROOT / "broker" / "store" / "memory.py"
    assert any(name.startswith("broker.core") for _, name in imported_modules(sample))
