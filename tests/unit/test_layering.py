"""The layers of docs/architecture.md, enforced on the source (parsed with ast, not imported).

Every module of ``broker/`` is in one layer, by the folder it is in (``LAYERS``); a new
module lands in its folder's layer and is held to its rules without a list to update:

- ``broker/`` never imports ``clients/`` or ``qbroker/``: the service does not know its clients.
- ``clients/`` imports only what a program on the other side of the wire may know of the
  broker: the pure core (the wire), the token claims and the settings.
- The inside of the service (``broker/service``, ``broker/store``, ``broker/notify``) never
  imports an edge (an HTTP or websocket endpoint, the app, the commands); ``store`` and
  ``notify`` do not import ``service`` either.
- The plumbing (``runtime``, ``tokens`` but its command), the websocket transport and the
  speed-ups import no edge: the server hands the transport its handshake.
- No import cycle anywhere in ``broker/``, nor in ``clients/``.
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
# Each module's layer: the first rule whose path (a folder, or a file) holds it.
LAYERS: tuple[tuple[str, str], ...] = (
    ("broker/core", "core"),
    ("broker/service", "service"),
    ("broker/store", "store"),
    ("broker/notify", "notify"),
    ("broker/runtime", "plumbing"),
    ("broker/tokens/command.py", "edge"),  # a command line, turned into calls
    ("broker/tokens", "plumbing"),  # the token checks the service owns
    ("broker/speedups", "speed-up"),
    ("broker/ws/transport.py", "transport"),
    ("broker/ws/frame_codec.py", "transport"),
    ("broker/ws/socket.py", "transport"),
    ("broker/ws", "edge"),
    ("broker/http", "edge"),
    ("broker/remote_mcp", "edge"),
    ("broker/app.py", "assembly"),
    ("broker/server.py", "assembly"),
    ("broker/__init__.py", "assembly"),
)
# What each layer may not import (by layer); "edge" and "assembly" may import anything of broker/.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "core": ("service", "store", "notify", "plumbing", "speed-up", "transport", "edge", "assembly"),
    "service": ("edge", "transport", "assembly"),
    "store": ("service", "notify", "edge", "transport", "assembly"),
    "notify": ("service", "edge", "transport", "assembly"),
    "plumbing": ("edge", "transport", "assembly"),
    "speed-up": ("edge", "transport", "assembly"),
    "transport": ("edge", "assembly"),
    "edge": (),
    "assembly": (),
}


def layer_of(path: Path) -> str:
    relative = path.relative_to(ROOT).as_posix()
    for prefix, layer in LAYERS:
        if relative == prefix or relative.startswith(prefix + "/"):
            return layer
    raise AssertionError(f"{relative} is in no layer: add its folder to LAYERS and docs/architecture.md")


def module_path(name: str, package: str = "broker") -> Path | None:
    """The file a dotted name imports (its module, or its package's __init__), None outside ``package``."""
    parts = name.split(".")
    while parts and parts[0] == package:
        base = ROOT.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        parts = parts[:-1]
    return None


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


def imported_files(path: Path, package: str = "broker") -> dict[Path, str]:
    """The files of ``package`` that ``path`` imports, each with a line that does. Its own
    packages' __init__ files are left out: Python imports them before ``path`` anyway."""
    found: dict[Path, str] = {}
    for line, name in imported_modules(path):
        target = module_path(name, package)
        if target is None or target == path:
            continue
        if target.name == "__init__.py" and path.is_relative_to(target.parent):
            continue
        found.setdefault(target, f"line {line}: {name}")
    return found


@pytest.mark.parametrize("path", sources("broker"), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_layer_imports_only_what_it_may(path: Path) -> None:
    forbidden = FORBIDDEN[layer_of(path)]
    wrong = [
        f"{where} (a {layer_of(target)} module)"
        for target, where in imported_files(path).items()
        if layer_of(target) in forbidden
    ]
    assert wrong == []


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of ``graph`` meets, as ``a -> b -> a``."""
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1: on the current trail, 2: done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, set())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*trail[trail.index(target) :], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


# Imports under TYPE_CHECKING count: a cycle of names only is still two modules that each
# need the other to be read.
@pytest.mark.parametrize("package", ["broker", "clients"])
def test_there_is_no_import_cycle(package: str) -> None:
    def name(path: Path) -> str:
        return path.relative_to(ROOT).as_posix()

    graph = {name(path): {name(target) for target in imported_files(path, package)} for path in sources(package)}
    assert find_cycles(graph) == []


def test_every_module_of_the_broker_is_in_a_layer() -> None:
    layers = {path.relative_to(ROOT).as_posix(): layer_of(path) for path in sources("broker")}
    assert layers["broker/ws/transport.py"] == "transport" and layers["broker/ws/session.py"] == "edge"
    assert layers["broker/tokens/claims.py"] == "plumbing" and layers["broker/tokens/command.py"] == "edge"
    assert {"core", "service", "store", "notify", "plumbing", "speed-up", "transport", "edge", "assembly"} == set(
        layers.values()
    )


def test_the_checker_finds_a_layer_crossing_and_a_cycle() -> None:
    assert module_path("broker.ws.session.ClientConnection") == ROOT / "broker" / "ws" / "session.py"
    assert module_path("broker.service") == ROOT / "broker" / "service" / "__init__.py"
    assert module_path("json") is None
    assert "edge" in FORBIDDEN[layer_of(ROOT / "broker" / "ws" / "transport.py")]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a -> b -> c -> a"]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_checker_sees_absolute_relative_and_from_imports(tmp_path: Path) -> None:
    assert ("broker.service" in {name for _, name in imported_modules(ROOT / "broker" / "ws" / "session.py")}) is True
    sample = ROOT / "broker" / "store" / "memory.py"
    assert any(name.startswith("broker.core") for _, name in imported_modules(sample))
