"""The Codex CLI as a test drives it: the real ``codex`` from npm, at the version
tests/tools/codex/package-lock.json pins (cached, ``tests.helpers.npm``), offline against a
scripted Responses API (``tests.helpers.fake_model.ScriptedResponses``), with a broker's MCP endpoint as
its one MCP server.

``CodexHome(tmp, model, server, modules)`` is a throwaway Codex world: ``CODEX_HOME`` (its
``config.toml`` names the scripted model as a ``wire_api = "responses"`` provider and the
broker as MCP server ``qbroker``: its endpoint, ``over_http``, or ``qbroker mcp``,
``over_stdio``), ``HOME`` and ``TMPDIR``, all under ``tmp``, so nothing of the machine's own
Codex set-up is read or written. Codex's plugins are disabled: the only thing it
reaches is the scripted model and the broker.

``home.exec(prompt)`` runs ``codex exec --json`` to its end and returns its JSON events.
``home.app_server(*flags)`` starts ``codex app-server`` (JSON-RPC over stdio) under an
``AppServer`` driver: ``request`` a method, ``start_thread``, ``run_turn`` on a prompt, answer the server's own
requests with a handler (``mcpServer/elicitation/request``: the MCP form), ``wait_for`` a
notification. Every process is started in a session of its own and killed with its group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.helpers.fake_model import ScriptedResponses
from tests.helpers.npm import npm_install
from tests.helpers.processes import REPO_ROOT
from tests.helpers.waiting import first_arrival

CODEX_PACKAGE = REPO_ROOT / "tests" / "tools" / "codex"
PROVIDER = "scripted"
SERVER = "qbroker"
NAMESPACE = f"mcp__{SERVER}"  # where Codex puts an MCP server's tools for the model
# Codex's plugins fetch a catalogue and remote plugins at start-up: off, to stay offline.
OFFLINE = ("--disable", "plugins", "--disable", "remote_plugin")
# What Codex wraps around an MCP tool's text before the model reads it.
WRAPPER = re.compile(r"\AWall time: [0-9.]+ seconds\nOutput:\n")

Json = dict[str, Any]


def codex_modules() -> Path:
    """The ``node_modules`` of tests/tools/codex's lockfile: the launcher and the native binary."""
    return npm_install(CODEX_PACKAGE)


def codex_cli(modules: Path) -> Path:
    return modules / "@openai" / "codex" / "bin" / "codex.js"


def tool_output(item: Json) -> str:
    """The tool's own text in a ``function_call_output`` Codex sent the model, without the
    wall-time header Codex puts first (a part of its own, or the string's first lines)."""
    output = item["output"]
    if isinstance(output, list):
        texts = [str(part.get("text", "")) for part in output]
        assert texts and WRAPPER.match(texts[0] + "\n"), f"not Codex's tool-output header: {texts[:1]!r}"
        return "".join(texts[1:])
    match = WRAPPER.match(output)
    assert match, f"not Codex's tool-output header: {output[:200]!r}"
    return str(output[match.end() :])


@dataclass(frozen=True)
class McpServer:
    """How Codex reaches the broker: the lines of its ``[mcp_servers.qbroker]`` table, and
    the environment Codex needs for them (a token it reads from a variable)."""

    lines: str
    env: dict[str, str] = field(default_factory=dict)


# Every way of reaching the broker ends its table so: the tool called without asking, and a
# call allowed to wait as long as the person takes.
CALLS = 'default_tools_approval_mode = "approve"\ntool_timeout_sec = 3600\n'


def over_http(url: str, token: str, *, token_from: Literal["header", "env"] = "header") -> McpServer:
    """The broker's own MCP endpoint ``url``; the token written as a header, or read from
    ``QBROKER_TOKEN``."""
    if token_from == "header":
        return McpServer(f'url = "{url}"\nhttp_headers = {{ Authorization = "Bearer {token}" }}\n{CALLS}')
    return McpServer(f'url = "{url}"\nbearer_token_env_var = "QBROKER_TOKEN"\n{CALLS}', {"QBROKER_TOKEN": token})


def over_stdio(broker_url: str, session: str, token: str) -> McpServer:
    """``qbroker mcp`` (this tree's, under this Python) as a command Codex starts, bridging to
    the broker at ``broker_url``; the token passed on from Codex's own environment."""
    env = f'{{ QBROKER_URL = "{broker_url}", QBROKER_SESSION = "{session}", PYTHONPATH = "{REPO_ROOT}" }}'
    command = f'command = "{sys.executable}"\nargs = ["-m", "qbroker.cli", "mcp"]\n'
    return McpServer(f'{command}env = {env}\nenv_vars = ["QBROKER_TOKEN"]\n{CALLS}', {"QBROKER_TOKEN": token})


def config_toml(model_url: str, server: McpServer, features: tuple[str, ...] = ()) -> str:
    """Codex's config.toml: the scripted model as the provider, the broker as MCP server
    ``qbroker``, ``features`` turned on (as ``--enable`` does)."""
    turned_on = "".join(f"{feature} = true\n" for feature in features)
    return f"""\
model = "{PROVIDER}"
model_provider = "{PROVIDER}"

[model_providers.{PROVIDER}]
name = "Scripted model"
base_url = "{model_url}"
wire_api = "responses"
env_key = "SCRIPTED_MODEL_KEY"

[mcp_servers.{SERVER}]
{server.lines}""" + (f"\n[features]\n{turned_on}" if features else "")


@dataclass
class CodexHome:
    tmp: Path
    model: ScriptedResponses
    server: McpServer
    modules: Path
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for folder in ("codex", "home", "tmp", "work"):
            (self.tmp / folder).mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(config_toml(self.model.base_url, self.server, self.features))

    @property
    def codex_home(self) -> Path:
        return self.tmp / "codex"

    @property
    def cwd(self) -> Path:
        return self.tmp / "work"

    def env(self) -> dict[str, str]:
        """Codex's environment: nothing of the machine's but ``PATH``."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp / "home"),
            "CODEX_HOME": str(self.codex_home),
            "TMPDIR": str(self.tmp / "tmp"),
            "SCRIPTED_MODEL_KEY": "scripted-model-key",
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
        }
        return env | self.server.env

    def command(self, *args: str) -> list[str]:
        return ["node", str(codex_cli(self.modules)), *args]

    async def spawn(self, *args: str, stdin: int) -> asyncio.subprocess.Process:
        """``codex ARGS`` (offline) in a process group of its own, its output piped."""
        command = self.command(args[0], *OFFLINE, *args[1:])
        return await asyncio.create_subprocess_exec(
            *command,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(),
            cwd=self.cwd,
            start_new_session=True,
            limit=64 * 1024 * 1024,  # a turn's notifications carry whole tool results
        )

    async def exec(self, prompt: str, *flags: str, timeout: float = 120.0) -> CodexExec:
        """``codex exec --json PROMPT`` to its end (killed past ``timeout``)."""
        args = ("exec", "--json", "--skip-git-repo-check", "--ephemeral", *flags, prompt)
        process = await self.spawn(*args, stdin=subprocess.DEVNULL)
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            raise AssertionError(f"codex exec did not end within {timeout}s") from None
        finally:
            kill_group(process)  # the native binary too, and anything it left behind
        events = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
        return CodexExec(process.returncode or 0, events, stderr.decode("utf-8", "replace"))

    async def app_server(self, *flags: str) -> AppServer:
        """``codex app-server`` on stdio, initialized (``initialize`` then ``initialized``)."""
        process = await self.spawn("app-server", *flags, stdin=subprocess.PIPE)
        server = AppServer(process, self.cwd)
        server.reader = asyncio.create_task(server.read())
        await server.request("initialize", {"clientInfo": {"name": "qbroker-tests", "version": "1"}})
        await server.notify("initialized")
        return server


def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL to the process group the test started: the node launcher and the native
    binary it runs (which may outlive the launcher)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class CodexExec:
    returncode: int
    events: list[Json]
    stderr: str

    def items(self, kind: str) -> list[Json]:
        """The completed items of ``kind`` (``mcp_tool_call``, ``agent_message``, ...)."""
        return [e["item"] for e in self.events if e.get("type") == "item.completed" and e["item"].get("type") == kind]

    def summary(self) -> str:
        return f"exit {self.returncode}\nevents: {json.dumps(self.events)[-6000:]}\nstderr: {self.stderr[-3000:]}"


Handler = Callable[[Json], Awaitable[Json]]


@dataclass
class AppServer:
    """A JSON-RPC driver of ``codex app-server``: one JSON message a line, both ways."""

    process: asyncio.subprocess.Process
    cwd: Path
    notifications: list[Json] = field(default_factory=list)
    server_requests: list[Json] = field(default_factory=list)
    handlers: dict[str, Handler] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    stderr: str = ""
    _pending: dict[int, asyncio.Future[Json]] = field(default_factory=dict)
    _answering: set[asyncio.Task[None]] = field(default_factory=set)  # handlers at work (held: tasks are weak)
    _next_id: int = 0
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, message: Json) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def notify(self, method: str, params: Json | None = None) -> None:
        await self.send({"method": method, **({"params": params} if params is not None else {})})

    async def request(self, method: str, params: Json, timeout: float = 60.0) -> Json:
        """``method``'s result; a JSON-RPC error fails the test."""
        self._next_id += 1
        key = self._next_id
        self._pending[key] = asyncio.get_running_loop().create_future()
        await self.send({"id": key, "method": method, "params": params})
        try:
            reply = await asyncio.wait_for(self._pending[key], timeout)
        finally:
            self._pending.pop(key, None)
        assert "error" not in reply, f"{method} failed: {reply['error']}\n{self.summary()}"
        result: Json = reply["result"]
        return result

    async def read(self) -> None:
        assert self.process.stdout is not None and self.process.stderr is not None
        errors = asyncio.create_task(self.process.stderr.read())
        async for raw in self.process.stdout:
            message = json.loads(raw)
            if "method" not in message:  # a reply to one of ours
                future = self._pending.get(message.get("id"))
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message:  # a request of the server's: a handler answers it
                self.server_requests.append(message)
                self._answering.add(task := asyncio.get_running_loop().create_task(self._answer(message)))
                task.add_done_callback(self._answering.discard)
            else:
                self.notifications.append(message)
            self._arrived.set()
        self.stderr = (await errors).decode("utf-8", "replace")
        self._arrived.set()

    async def _answer(self, request: Json) -> None:
        handler = self.handlers.get(request["method"])
        if handler is None:
            reply: Json = {"error": {"code": -32601, "message": f"the test answers no {request['method']}"}}
        else:
            reply = {"result": await handler(request["params"])}
        await self.send({"id": request["id"], **reply})

    async def start_thread(self, **params: Any) -> str:
        """A new ephemeral thread; forms go to this driver (approval policy on-request)."""
        defaults = {"cwd": str(self.cwd), "approvalPolicy": "on-request", "sandbox": "read-only", "ephemeral": True}
        result = await self.request("thread/start", {**defaults, **params})
        return str(result["thread"]["id"])

    async def mcp_ready(self, thread: str, timeout: float = 60.0) -> None:
        """Wait until the thread's MCP server ``qbroker`` is up: a turn started before has no
        tool of it to offer the model (a command server takes a moment to start)."""
        await self.wait_for(
            "mcpServer/startupStatus/updated",
            lambda p: (p["threadId"], p["name"], p["status"]) == (thread, SERVER, "ready"),
            what="MCP server qbroker ready",
            timeout=timeout,
        )

    async def run_turn(self, thread: str, prompt: str, timeout: float = 120.0) -> Json:
        """Start a turn on ``prompt`` and wait for its ``turn/completed``; the turn."""
        started = await self.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": prompt}]})
        turn_id = started["turn"]["id"]
        done = await self.wait_for(
            "turn/completed", lambda p: p["turn"]["id"] == turn_id, what="the turn's end", timeout=timeout
        )
        turn: Json = done["turn"]
        return turn

    async def wait_for(
        self, method: str, where: Callable[[Json], bool] = lambda _: True, *, what: str, timeout: float = 60.0
    ) -> Json:
        """The params of the first notification ``method`` (seen so far or to come) ``where`` accepts."""
        message = await first_arrival(
            self.notifications,
            lambda m: m["method"] == method and where(m.get("params", {})),
            self._arrived,
            self.reader,
            program="codex app-server",
            what=what,
            timeout=timeout,
            summary=self.summary,
        )
        params: Json = message.get("params", {})
        return params

    def completed(self, kind: str) -> list[Json]:
        """The completed thread items of ``kind`` (``mcpToolCall``, ``agentMessage``, ...)."""
        return [
            m["params"]["item"]
            for m in self.notifications
            if m["method"] == "item/completed" and m["params"]["item"].get("type") == kind
        ]

    async def close(self) -> None:
        """End the app server: stdin closed, then its process group killed if it lingers."""
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), 5)
        kill_group(self.process)
        await self.process.wait()
        if self.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reader, 10)

    def summary(self) -> str:
        methods = ", ".join(str(m.get("method")) for m in self.notifications[-40:])
        errors = [json.dumps(m["params"])[:600] for m in self.notifications if m["method"] == "error"]
        return f"notifications: {methods}\nerrors: {errors}\nstderr: {self.stderr[-3000:]}"
