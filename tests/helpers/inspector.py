"""The MCP Inspector's CLI, driven as a person at a terminal drives it: one
``mcp-inspector --cli URL --transport http --header "Authorization: Bearer ..." --method ...``
per request, its JSON output read back.

The Inspector (``@modelcontextprotocol/inspector``) is pinned by the lockfile in
``tests/tools/mcp-inspector/`` and installed by the tests' own set-up (``tests/helpers/npm.py``:
a cached ``npm ci``; a skip without Node/npm, a failure under QBROKER_REQUIRE_ALL=1).
Its ``engines`` field asks for Node 22; its CLI runs on the Node 20 this project has, which
these tests check every run.

Each run gets a ``HOME`` of its own (the CLI keeps a catalog and OAuth state there) and no
standard input. With ``QBROKER_MCP_TRANSCRIPT=<file>`` set, the runs a test marks are written
to that file as a terminal transcript (the token shown as ``$QBROKER_TOKEN``): how the one in
docs/agents.md was made.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.helpers.npm import npm_install
from tests.helpers.processes import REPO_ROOT, need

PACKAGE: Final = REPO_ROOT / "tests" / "tools" / "mcp-inspector"
RUN_TIMEOUT: Final = 60.0
TRANSCRIPT_ENV: Final = "QBROKER_MCP_TRANSCRIPT"
# What a transcript shows of a long text (the tool's description and schema).
SHOWN_CHARS: Final = 160

# The CLI's exit codes (its --help and docs): 0 a result, 3 authentication, 5 a tool error.
EXIT_OK: Final = 0
EXIT_AUTH: Final = 3
EXIT_TOOL_ERROR: Final = 5


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> Any:
        """The JSON object the CLI printed on stdout (``--format json``)."""
        return json.loads(self.stdout)

    @property
    def error(self) -> Any:
        """The JSON error envelope the CLI printed on stderr (its last line)."""
        return json.loads(self.stderr.strip().splitlines()[-1])


@dataclass
class Transcript:
    """Commands, their output and what the person did, as one terminal session."""

    path: Path | None
    token: str = ""
    lines: list[str] = field(default_factory=list)
    # An argument as the transcript shows it (what a shell expands to the same text).
    aliases: dict[str, str] = field(default_factory=dict)

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def command(self, run: Run, during: str | None = None) -> None:
        """The command line, what happened while it waited (``during``), and its output."""
        shown = [self.aliases.get(arg) or _quoted(self._hide(arg)) for arg in run.argv]
        self.lines.append("$ " + " ".join(shown))
        if during is not None:
            self.note(during)
        if run.stdout.strip():
            self.lines.append(json.dumps(_shortened(run.output), indent=2, ensure_ascii=False))
        if run.returncode != EXIT_OK:
            self.lines.append(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "")
            self.lines.append(f"(exit status {run.returncode})")

    def _hide(self, arg: str) -> str:
        return arg.replace(self.token, "$QBROKER_TOKEN") if self.token else arg

    def write(self) -> None:
        if self.path is not None:
            self.path.write_text("\n".join(self.lines) + "\n")


def _quoted(arg: str) -> str:
    """``arg`` as a shell would need it, in double quotes where it holds ``$QBROKER_TOKEN``."""
    if "$QBROKER_TOKEN" in arg:
        return f'"{arg}"'
    return shlex.quote(arg)


def _shortened(value: Any) -> Any:
    """``value`` with long texts cut (a transcript shows the shape, not the whole schema)."""
    if isinstance(value, dict):
        if "inputSchema" in value:
            value = {**value, "inputSchema": {"...": "the tool input's JSON Schema (docs/protocol.md)"}}
        if isinstance(value.get("questions"), list) and "questionnaireId" in value:
            value = {**value, "questions": [f"... the {len(value['questions'])} questions as asked ..."]}
        return {key: _shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item) for item in value]
    if isinstance(value, str) and len(value) > SHOWN_CHARS and "\n" in value and value.startswith("Ask the user"):
        return value[:SHOWN_CHARS] + " ..."
    return value


class Inspector:
    """The installed CLI, run with an isolated ``HOME``."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home
        self.transcript = Transcript(Path(os.environ[TRANSCRIPT_ENV]) if os.environ.get(TRANSCRIPT_ENV) else None)

    async def run(self, url: str, token: str, *method: str, record: bool = False, during: str | None = None) -> Run:
        """``mcp-inspector --cli URL --transport http --header ... --format json METHOD...``."""
        argv = ["--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {token}", *method]
        argv += ["--format", "json"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QBROKER_", "MCP_", "npm_"))}
        env.update(HOME=str(self.home), NO_COLOR="1")
        process = await asyncio.create_subprocess_exec(
            str(self.binary),
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=str(self.home),
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode is not None
        run = Run(["npx", "@modelcontextprotocol/inspector", *argv], process.returncode, out.decode(), err.decode())
        if record:
            self.transcript.token = token
            self.transcript.command(run, during)
        return run

    async def tools_list(self, url: str, token: str, *extra: str, record: bool = False) -> Run:
        return await self.run(url, token, "--method", "tools/list", *extra, record=record)

    async def tools_call(
        self,
        url: str,
        token: str,
        arguments: dict[str, Any],
        *extra: str,
        record: bool = False,
        during: str | None = None,
    ) -> Run:
        """``tools/call`` of the questionnaire tool with ``arguments`` as one JSON object."""
        method = ["--method", "tools/call", "--tool-name", "questionnaire", "--tool-args-json", json.dumps(arguments)]
        return await self.run(url, token, *method, *extra, record=record, during=during)


def installed_inspector(home: Path) -> Inspector:
    """The pinned Inspector, installed from its lockfile (cached after the first run)."""
    modules = npm_install(PACKAGE)
    binary = modules / ".bin" / "mcp-inspector"
    need(binary.exists(), f"the MCP Inspector's CLI is not in {modules} after npm ci")
    return Inspector(binary, home)
