"""``qbroker``: the one command-line entry point.

Each subcommand lives in the module that owns the concept (the broker's ``serve`` and
``token`` here and in ``broker.server``; ``ask``/``resume`` in ``clients.agent``; ``tui`` in
``clients.tui``; ``mcp`` in ``clients.mcp``; ``bots`` in ``clients.bots``). A subcommand
module exposes ``configure(parser)`` to declare its flags and ``run(args) -> int`` to do
the work; heavy imports happen inside ``run`` so that ``qbroker --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

# name -> (module, one-line help). Order is the order shown by --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("broker.server", "run the broker (HTTP agent API, websocket clients, web page)"),
    "token": ("broker.auth", "mint a signed token for an agent or a client"),
    "ask": ("clients.agent_cli", "start a questionnaire from a tool-input file and wait for the outcome"),
    "resume": ("clients.agent_cli", "resume a questionnaire after a clarification request"),
    "tui": ("clients.tui", "answer questionnaires in the terminal"),
    "mcp": ("clients.mcp", "serve the questionnaire tool to an MCP host over stdio"),
    "bots": ("clients.bots", "load-test a broker with scripted websocket bots"),
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
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a subcommand still being built
            if exc.name != module_name:
                raise
            continue
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        configure = getattr(module, f"configure_{name}", None) or module.configure
        configure(sub)
        run = getattr(module, f"run_{name}", None) or module.run
        sub.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 1
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
