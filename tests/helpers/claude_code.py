"""Claude Code as a test drives it: the real ``claude`` from npm, in print mode, offline,
against a scripted Anthropic Messages API (``tests.helpers.fake_model.ScriptedAnthropic``)
and the broker's MCP endpoint.

``claude_binary()`` installs Claude Code at the version ``tests/tools/claude-code``'s
lockfile pins (cached, ``tests.helpers.npm``) and returns its native program. The npm
package ships that program in a per-platform optional dependency
(``@anthropic-ai/claude-code-linux-x64``, ...); its own ``bin/claude.exe`` is a placeholder
that a postinstall script overwrites with a copy. Install scripts are not run
(``npm ci --ignore-scripts``), so the tests run the platform package's program directly:
the very file the postinstall would copy.

``ClaudeHome(tmp, model, binary)`` is a throwaway Claude Code world (``HOME``, the working
folder, ``TMPDIR``, all under ``tmp``): nothing of the machine's own set-up is read or
written. ``home.run(prompt, mcp_url, token)`` runs ``claude -p`` with the qbroker server
configured by ``--mcp-config`` (``type: http``, the bearer token as a header) and only the
questionnaire tool allowed, and returns its JSON result. ``home.answer_forms(replies)``
installs an ``Elicitation`` hook (``tests/helpers/elicitation_hook.py``) that answers the
forms the broker puts into Claude Code, one scripted reply per form (without a hook, print
mode dismisses every form: ``cancel``); ``home.forms()`` are the forms it was given.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tests.helpers.fake_model import ScriptedAnthropic
from tests.helpers.npm import npm_install
from tests.helpers.processes import REPO_ROOT, need

PACKAGE: Final = REPO_ROOT / "tests" / "tools" / "claude-code"
SERVER: Final = "qbroker"
# How Claude Code names an MCP server's tool for the model: mcp__<server>__<tool>.
TOOL: Final = f"mcp__{SERVER}__questionnaire"
RUN_TIMEOUT: Final = 120.0
HOOK: Final = REPO_ROOT / "tests" / "helpers" / "elicitation_hook.py"

_ARCHES: Final = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def claude_binary() -> Path:
    """The native ``claude`` of the pinned package for this machine."""
    modules = npm_install(PACKAGE)
    arch = _ARCHES.get(platform.machine().lower(), platform.machine().lower())
    system = platform.system().lower()
    binary = modules / "@anthropic-ai" / f"claude-code-{system}-{arch}" / "claude"
    need(binary.exists(), f"Claude Code ships no program for {system}-{arch} ({binary} is missing)")
    return binary


@dataclass
class ClaudeRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> dict[str, Any]:
        """The JSON result ``--output-format json`` prints at the end."""
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed

    def summary(self) -> str:
        return f"claude exited {self.returncode}\nstdout: {self.stdout[-3000:]}\nstderr: {self.stderr[-3000:]}"


@dataclass
class ClaudeHome:
    tmp: Path
    model: ScriptedAnthropic
    binary: Path

    def __post_init__(self) -> None:
        for folder in ("home", "tmp", "work"):
            (self.tmp / folder).mkdir(parents=True, exist_ok=True)

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    @property
    def cwd(self) -> Path:
        return self.tmp / "work"

    def env(self, **extra: str) -> dict[str, str]:
        """Claude Code's environment: nothing of the machine's but ``PATH``. Offline: the
        scripted model as the API, no telemetry or other traffic, and MCP tools straight in
        the model's tool list (no tool search)."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp / "tmp"),
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": self.model.origin,
            "ANTHROPIC_API_KEY": "scripted-model-key",
            "ENABLE_TOOL_SEARCH": "false",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            **extra,
        }

    def settings(self, settings: dict[str, Any]) -> None:
        """The user's ``~/.claude/settings.json`` (hooks, for one)."""
        folder = self.home / ".claude"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(settings, indent=2))

    @property
    def hook_folder(self) -> Path:
        return self.tmp / "forms"

    def answer_forms(self, replies: list[dict[str, Any]]) -> None:
        """Answer the forms of the coming runs with ``replies``, in order (the hook's format)."""
        self.hook_folder.mkdir(exist_ok=True)
        (self.hook_folder / "replies.json").write_text(json.dumps(replies))
        command = shlex.join([sys.executable, str(HOOK), str(self.hook_folder)])
        self.settings({"hooks": {"Elicitation": [{"hooks": [{"type": "command", "command": command}]}]}})

    def forms(self) -> list[dict[str, Any]]:
        """What the hook was given for each form, in order (``requested_schema``, ``message``, ...)."""
        path = self.hook_folder / "forms.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def go(self, name: str) -> None:
        """Let a reply that waits for ``name`` (``waitFor``) go."""
        (self.hook_folder / name).touch()

    @staticmethod
    def mcp_config(url: str, token: str) -> str:
        """``--mcp-config``'s JSON: the broker's endpoint over HTTP, the token as a header."""
        server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
        return json.dumps({"mcpServers": {SERVER: server}})

    async def run(
        self, prompt: str, url: str, token: str, *, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT
    ) -> ClaudeRun:
        """``claude -p PROMPT`` to its end, with only the questionnaire tool allowed."""
        argv = [
            str(self.binary),
            "-p",
            prompt,
            "--output-format",
            "json",
            "--mcp-config",
            self.mcp_config(url, token),
            "--strict-mcp-config",
            "--allowedTools",
            TOOL,
        ]
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=env or self.env(),
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            raise AssertionError(f"claude did not end within {timeout}s:\n{err.decode()[-3000:]}") from None
        assert process.returncode is not None
        return ClaudeRun(argv, process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
