"""``qbroker`` commands whose reader goes away (``qbroker mcp --print-tool | head -1``): they
exit quietly, with the status of a command ended by SIGPIPE, and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.processes import REPO_ROOT

SECRET = "pipe-test-secret-" + "x" * 32


@pytest.mark.parametrize(
    "args",
    [
        ["mcp", "--print-tool"],
        ["token", "--session", "s", "--role", "client", "--secret", SECRET],
    ],
)
def test_a_reader_gone_ends_the_command_quietly(args: list[str]) -> None:
    # The reading end is closed before the command writes: every write fails (EPIPE), as
    # when `head` has read its line, without a race on how much the pipe holds.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "qbroker", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=str(REPO_ROOT),
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141  # 128 + SIGPIPE


def test_a_broken_pipe_that_is_not_the_output_is_still_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A socket's BrokenPipeError (the output is fine: pytest captures it) is a real failure.
    import clients.mcp.server
    from qbroker.cli import main

    def run(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(clients.mcp.server, "run", run)
    with pytest.raises(BrokenPipeError):
        main(["mcp", "--print-tool"])
