"""The Pi coding agent as a test drives it: the real ``pi`` from npm, offline, against a
scripted model (``tests.helpers.fake_model``), with the qbroker extension.

``pi_modules()`` installs Pi at the version ``clients/pi/package-lock.json`` pins (cached,
``tests.helpers.npm``). ``PiHome(tmp, model)`` is a throwaway Pi world: ``HOME``,
``PI_CODING_AGENT_DIR`` (its ``models.json`` declares the scripted model as an
``openai-completions`` provider) and ``TMPDIR``, all under ``tmp``, so nothing of the
machine's own Pi set-up is read or written. ``home.start(...)`` runs pi with no stdin (or a
pipe, in RPC mode) and collects its JSON event stream; success is judged on those events
(``tool_execution_end``'s ``isError``), not on pi's exit status. ``PiTerminal`` runs the
interactive pi in a tmux pane of its own, for what only its TUI shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.fake_model import ScriptedModel
from tests.helpers.npm import npm_install
from tests.helpers.processes import REPO_ROOT, need
from tests.helpers.terminal import Terminal
from tests.helpers.waiting import eventually, first_arrival, scaled

PI_PACKAGE = REPO_ROOT / "clients" / "pi"
EXTENSION = PI_PACKAGE / "questionnaire.ts"
PROVIDER = "scripted"

Event = dict[str, Any]


def pi_modules() -> Path:
    """The ``node_modules`` of clients/pi's lockfile: Pi, its TypeScript loader, tsc."""
    return npm_install(PI_PACKAGE)


def pi_cli(modules: Path) -> Path:
    return modules / "@mariozechner" / "pi-coding-agent" / "dist" / "cli.js"


# Pi without what a test does not need: no skills, prompt templates, themes or context
# files, no built-in tools, no session file, no network at start-up. (Extensions are not
# discovered either when a test names its own.)
QUIET = [
    "--offline",
    "--no-session",
    "--no-skills",
    "--no-prompt-templates",
    "--no-themes",
    "--no-context-files",
    "--no-builtin-tools",
]


@dataclass
class PiHome:
    tmp: Path
    model: ScriptedModel
    modules: Path

    def __post_init__(self) -> None:
        for folder in ("home", "agent", "tmp", "work"):
            (self.tmp / folder).mkdir(parents=True, exist_ok=True)
        provider = {
            "baseUrl": self.model.base_url,
            "api": "openai-completions",
            "apiKey": "scripted-model-key",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": self.model.model_id, "name": "Scripted model", "reasoning": False, "input": ["text"]}],
        }
        (self.agent_dir / "models.json").write_text(json.dumps({"providers": {PROVIDER: provider}}, indent=2))

    def package(self) -> Path:
        """clients/pi as a user has it after ``npm install`` in it (its dependency ``ws``
        beside it, for Node 20's missing WebSocket): a copy whose ``node_modules`` is the
        installed lockfile's; returns its extension."""
        folder = self.tmp / "qbroker-pi"
        if not folder.exists():
            folder.mkdir()
            for source in PI_PACKAGE.iterdir():
                if source.suffix in (".ts", ".json"):
                    shutil.copy2(source, folder / source.name)
            (folder / "node_modules").symlink_to(self.modules, target_is_directory=True)
        return folder / EXTENSION.name

    @property
    def agent_dir(self) -> Path:
        return self.tmp / "agent"

    @property
    def cwd(self) -> Path:
        return self.tmp / "work"

    def env(self, **qbroker: str) -> dict[str, str]:
        """Pi's environment: nothing of the machine's but ``PATH``; ``qbroker`` are
        QBROKER_* settings (``url=...`` -> QBROKER_URL)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp / "home"),
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "TMPDIR": str(self.tmp / "tmp"),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
        }
        env.update({f"QBROKER_{key.upper()}": value for key, value in qbroker.items()})
        return env

    def run_command(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
        """``pi ARGS`` to completion (``install``, ``list``): its output; fails on an error exit."""
        result = subprocess.run(
            ["node", str(pi_cli(self.modules)), *args],
            env=env or self.env(),
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, (
            f"pi {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
        return result.stdout + result.stderr

    def command(self, *, extensions: Sequence[Path] = (EXTENSION,)) -> list[str]:
        """pi's command line, without a mode or a prompt (interactive, as it stands)."""
        args = ["node", str(pi_cli(self.modules)), *QUIET, "--model", f"{PROVIDER}/{self.model.model_id}"]
        if extensions:
            args.append("--no-extensions")
        for extension in extensions:
            args += ["-e", str(extension)]
        return args

    async def start(
        self,
        prompt: str | None,
        *,
        env: dict[str, str],
        extensions: Sequence[Path] = (EXTENSION,),
        rpc: bool = False,
    ) -> PiRun:
        """Run pi on ``prompt`` in JSON print mode (or RPC mode, prompt sent on stdin), with
        ``extensions`` (none: those pi discovers, installed packages included)."""
        args = self.command(extensions=extensions)
        args += ["--mode", "rpc"] if rpc else ["--mode", "json", "-p", str(prompt)]
        process = await asyncio.create_subprocess_exec(
            *args,
            stdin=subprocess.PIPE if rpc else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.cwd,
            limit=64 * 1024 * 1024,  # an agent_end event carries the whole conversation
        )
        run = PiRun(process, args)
        run.reader = asyncio.create_task(run.read())
        if rpc and prompt is not None:
            await run.send({"type": "prompt", "message": prompt})
        return run


@dataclass
class PiRun:
    process: asyncio.subprocess.Process
    args: list[str]
    events: list[Event] = field(default_factory=list)
    stderr: str = ""
    reader: asyncio.Task[None] | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self) -> None:
        assert self.process.stdout is not None and self.process.stderr is not None
        errors = asyncio.create_task(self.process.stderr.read())
        async for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"type": "unparsed", "line": line}
            self.events.append(event)
            self._arrived.set()
        self.stderr = (await errors).decode("utf-8", "replace")
        self._arrived.set()

    async def send(self, command: dict[str, Any]) -> None:
        """An RPC command on pi's stdin."""
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(command) + "\n").encode())
        await self.process.stdin.drain()

    async def wait_for(self, match: Callable[[Event], bool], what: str, timeout: float = 30.0) -> Event:
        """The first event (seen so far or to come) that ``match`` accepts."""
        return await first_arrival(
            self.events,
            match,
            self._arrived,
            self.reader,
            program="pi",
            what=what,
            timeout=timeout,
            summary=self.summary,
        )

    async def finish(self, timeout: float = 30.0) -> list[Event]:
        """Wait for pi to exit on its own (killing it past ``timeout``); its events."""
        timeout = scaled(timeout)
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"pi did not exit within {timeout}s:\n{self.summary()}") from None
        if self.reader is not None:
            await asyncio.wait_for(self.reader, scaled(10))
        return self.events

    async def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        self.process.send_signal(sig)
        await self.finish(timeout)
        assert self.process.returncode is not None
        return self.process.returncode

    async def close(self) -> None:
        """Make sure pi is gone (teardown)."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader

    def of_type(self, kind: str) -> list[Event]:
        return [event for event in self.events if event.get("type") == kind]

    def summary(self) -> str:
        kinds = ", ".join(str(event.get("type")) for event in self.events[-40:])
        return f"events: {kinds}\nstderr: {self.stderr[-3000:]}"


class PiDialogs:
    """A scripted person at Pi's dialogs in RPC mode: each ``extension_ui_request`` (select,
    input, confirm) is found on pi's event stream and answered on its stdin, once."""

    def __init__(self, run: PiRun) -> None:
        self.run = run
        self.taken: set[str] = set()

    async def next(
        self, method: str = "select", where: Callable[[Event], bool] = lambda _: True, timeout: float = 30.0
    ) -> Event:
        """The first request of ``method`` not taken yet that ``where`` accepts (taking it)."""
        request = await self.run.wait_for(
            lambda e: (
                e.get("type") == "extension_ui_request"
                and e.get("method") == method
                and e.get("id") not in self.taken
                and where(e)
            ),
            f"a {method} dialog",
            timeout,
        )
        self.taken.add(str(request["id"]))
        return request

    async def choose(self, request: Event, starts_with: str) -> str:
        """Answer a select with its one option that starts with ``starts_with``."""
        options = [o for o in request["options"] if o.startswith(starts_with)]
        assert len(options) == 1, f"{starts_with!r} is not one option of {request['options']}"
        await self.respond(request, value=options[0])
        return str(options[0])

    async def respond(self, request: Event, **answer: Any) -> None:
        """``value=...``, ``confirmed=...`` or ``cancelled=True`` (Esc)."""
        await self.run.send({"type": "extension_ui_response", "id": request["id"], **answer})

    def requests(self, method: str = "select") -> list[Event]:
        return [e for e in self.run.of_type("extension_ui_request") if e.get("method") == method]


class PiTerminal:
    """Interactive pi in a detached 120x40 tmux pane (a ``Terminal``, its server under
    ``home``'s folder, pi's environment its own alone), for what only Pi's TUI shows: the
    tool's renderers, its keys. Its waits are async: the test's broker and model share the loop."""

    def __init__(
        self, home: PiHome, qbroker: dict[str, str], prompt: str, *, extensions: Sequence[Path] = (EXTENSION,)
    ) -> None:
        need(shutil.which("tmux") is not None, "tmux is not installed")
        self.terminal = Terminal(home.tmp)
        self.terminal.width, self.terminal.height = 120, 40
        settings = {**home.env(**qbroker), "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        del settings["NO_COLOR"]
        self.terminal.start([*home.command(extensions=extensions), prompt], settings, cwd=home.cwd, inherit_env=False)

    def screen(self, *, ansi: bool = False) -> str:
        return self.terminal.tmux("capture-pane", "-p", "-J", *(["-e"] if ansi else []), "-t", "main")

    async def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        """The screen, once it shows every one of ``texts``."""

        def shows() -> str | None:
            screen = self.screen()
            return screen if all(t in screen for t in texts) else None

        try:
            return str(await eventually(shows, timeout=timeout, interval=0.1))
        except AssertionError:
            raise AssertionError(f"pi never showed {texts}; it shows:\n{self.screen()}") from None

    def keys(self, *keys: str) -> None:
        self.terminal.keys(*keys)

    def close(self) -> None:
        self.terminal.close()
