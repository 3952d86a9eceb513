"""A terminal a test drives: one detached tmux server with one pane running a program.

``Terminal`` starts the program in its own tmux server (a unique ``-L`` socket whose file
lives in the test's temporary directory, killed in ``close``), presses keys with
``send-keys`` and waits, with a deadline, for the text it expects on the captured screen;
the ``terminal`` fixture gives a test one (skipped, or failed under QBROKER_REQUIRE_ALL=1,
without tmux). Pi's TUI runs in one too (tests/helpers/pi.py, ``PiTerminal``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.processes import REPO_ROOT, need
from tests.helpers.waiting import wait_until

WIDTH, HEIGHT = 80, 24


class Terminal:
    """One detached tmux server with one pane (80x24 unless set) running a command."""

    def __init__(self, tmp: Path) -> None:
        self.binary = shutil.which("tmux") or "tmux"
        self.socket = f"qbroker-tui-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.conf = tmp / "tmux.conf"
        # No status line (the pane gets all 24 rows); keep a finished pane to read its status.
        self.conf.write_text("set -g status off\nset -g remain-on-exit on\nset -g history-limit 100\n")
        # The server's socket lives in the test's temporary directory, removed with it.
        self.env = _tmux_env(tmp)
        self.status_file = tmp / "exit-status"
        self.output_file = tmp / "output"
        self.started = False
        self.width, self.height = WIDTH, HEIGHT  # set before start() for another size

    def tmux(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            [self.binary, "-u", "-L", self.socket, "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=self.env,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def start(
        self, argv: list[str], env: dict[str, str] | None = None, *, cwd: Path = REPO_ROOT, inherit_env: bool = True
    ) -> None:
        """Run ``argv`` in the pane, in ``cwd``, with ``env`` added to the test's environment
        (``inherit_env=False``: ``env`` alone, for a program kept apart from the machine's
        settings); its exit status goes to a file (see ``exit_status``)."""
        settings = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONPATH": str(REPO_ROOT), **(env or {})}
        command = ("env " if inherit_env else "env -i ") + " ".join(
            f"{k}={shlex.quote(v)}" for k, v in settings.items()
        )
        command += " " + " ".join(shlex.quote(a) for a in argv)
        command += f"; echo $? > {shlex.quote(str(self.status_file))}"
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            "-c",
            str(cwd),
            command,
        )
        self.started = True
        # Everything the program writes, escape sequences included, for the restore checks.
        self.tmux("pipe-pane", "-t", "main", f"cat >> {shlex.quote(str(self.output_file))}")

    def screen(self, *, ansi: bool = False) -> str:
        args = ["capture-pane", "-p", "-t", "main"]
        if ansi:
            args[2:2] = ["-e", "-N"]  # colours, and trailing (coloured) spaces kept
        return self.tmux(*args)

    def wait_for(self, *texts: str, timeout: float = 15.0) -> str:
        def shown() -> str | None:
            screen = self.screen()
            return screen if all(t in screen for t in texts) else None

        try:
            return str(wait_until(shown, timeout=timeout, interval=0.05, what=f"screen to show {texts}"))
        except AssertionError:
            raise AssertionError(f"screen never showed {texts}; it shows:\n{self.screen()}") from None

    def wait_gone(self, text: str, timeout: float = 15.0) -> str:
        def gone() -> str | None:
            screen = self.screen()
            return screen if text not in screen else None

        return str(wait_until(gone, timeout=timeout, interval=0.05, what=f"{text!r} to disappear"))

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "main", "-l", text)

    def pane(self, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", "main", fmt).strip()

    def exit_status(self, timeout: float = 10.0) -> int:
        """The program's exit status (tmux's own pane_dead_status can lag: it reaps late)."""

        def finished() -> str | None:
            try:
                text = self.status_file.read_text().strip()
            except FileNotFoundError:
                return None
            return text or None

        return int(wait_until(finished, timeout=timeout, what="the program to exit"))

    def output(self) -> str:
        return self.output_file.read_text(errors="replace") if self.output_file.exists() else ""

    def history(self) -> str:
        """The whole pane, scrollback included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "main")

    def close(self) -> None:
        if self.started:
            self.tmux("kill-server", check=False)


def _tmux_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env.update(
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        TERM="xterm-256color",
        TMUX_TMPDIR=str(tmp),
    )
    return env


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    need(shutil.which("tmux") is not None, "tmux is not installed")
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        term = Terminal(Path(tmp))
        try:
            yield term
        finally:
            term.close()
