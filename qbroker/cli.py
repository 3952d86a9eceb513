"""``qbroker``: the one command-line entry point, and its table of subcommands.

Each subcommand lives in the module that owns the concept: ``serve`` in ``broker.server``,
``token`` in ``broker.tokens.command``, ``ask``/``resume`` in ``clients.agent.cli``, ``tui`` in
``clients.tui.app``, ``mcp`` in ``clients.mcp.server``, ``bots`` in ``clients.bots.cli``. A
subcommand module exposes ``configure(parser)`` to declare its flags and ``run(args) -> int``
to do the work; heavy imports happen inside ``run`` so that ``qbroker --help`` stays fast.
A reader that goes away (``| head``) ends any of them quietly, here, with status 141.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from clients.web import ROOT as WEB_ROOT

# name -> (module, one-line help). Order is the order shown by --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("broker.server", "run the broker (HTTP agent API, websocket clients, web page)"),
    "token": ("broker.tokens.command", "mint a signed token (agent, client or admin), or revoke tokens"),
    "ask": ("clients.agent.cli", "start a questionnaire from a tool-input file and wait for the outcome"),
    "resume": ("clients.agent.cli", "resume a questionnaire after a clarification request"),
    "tui": ("clients.tui.app", "answer questionnaires in the terminal"),
    "mcp": ("clients.mcp.server", "serve the questionnaire tool to an MCP host over stdio"),
    "bots": ("clients.bots.cli", "load-test a broker with scripted websocket bots"),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1, not argparse's 2: ``qbroker ask`` reserves 2 for
    "needs clarification", and scripts must never mistake a typo for that."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="qbroker",
        description="qbroker: a real-time dialog broker that lets AI agents ask people structured questions.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        configure = getattr(module, f"configure_{name}", None) or module.configure
        configure(sub)
        run = getattr(module, f"run_{name}", None) or module.run
        sub.set_defaults(_run=run)
    # The broker serves the browser page; it is handed the folder (it never imports clients/).
    subparsers.choices["serve"].set_defaults(web_dir=WEB_ROOT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 1
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()  # here: a reader gone while the last lines were buffered is caught too
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # a socket's, not the output's: a real error
        return _quiet_exit()
    return code


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe nobody reads any more (poll says POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced, closed, or not a file (io.UnsupportedOperation)
        return False
    if not hasattr(select, "poll"):  # no poll (Windows): the standard recipe's assumption
        return True
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poll.poll(0))


def _quiet_exit() -> int:
    """Whoever read the output stopped (``qbroker mcp --print-tool | head -1``): exit quietly,
    as a command killed by SIGPIPE does. Standard output now points at /dev/null, or Python's
    own flush at exit would print a second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
