"""The options every client command of the agent side takes: ``--url`` and ``--session``, with
their environment defaults, and ``--retries``."""

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


def add_retries(parser: argparse.ArgumentParser) -> None:
    from clients.agent.sdk import DEFAULT_RETRIES

    parser.add_argument(
        "--retries",
        type=int,
        default=DEFAULT_RETRIES,
        help="retries of each request on a transient failure: the broker unreachable, or 429/502/503/504"
        f" (503 store_unavailable while its Redis restarts); with backoff, the default {DEFAULT_RETRIES}"
        " rides out ~10-20 s",
    )
