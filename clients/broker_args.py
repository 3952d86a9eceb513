"""The ``--url`` and ``--session`` every client command takes, with their environment defaults."""

from __future__ import annotations

import argparse
import os


def add_url_and_session(parser: argparse.ArgumentParser, session_help: str, *, required: bool = True) -> None:
    """``--url`` (default ``$QBROKER_URL``) and ``--session`` (default ``$QBROKER_SESSION``);
    ``required``: a usage error when neither the flag nor its variable is set."""
    url, session = os.environ.get("QBROKER_URL"), os.environ.get("QBROKER_SESSION")
    parser.add_argument(
        "--url",
        default=url,
        required=required and url is None,
        help="the broker's base URL, e.g. http://127.0.0.1:8700 (default: $QBROKER_URL)",
    )
    parser.add_argument(
        "--session",
        default=session,
        required=required and session is None,
        help=f"{session_help} (default: $QBROKER_SESSION)",
    )
