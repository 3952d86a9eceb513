"""The options every client command of the agent side takes: ``--url`` and ``--session``, with
their environment defaults, and ``--retries``."""

from __future__ import annotations

import argparse
import os


def add_url_and_session(
    parser: argparse.ArgumentParser, session_help: str, *, required: bool = True, session_required: bool | None = None
) -> None:
    """``--url`` (default ``$QBROKER_URL``) and ``--session`` (default ``$QBROKER_SESSION``);
    ``required``: a usage error when neither the flag nor its variable is set
    (``session_required``, when given, says it for ``--session`` alone)."""
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
        required=(required if session_required is None else session_required) and session is None,
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


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {raw!r}")
    return value


def add_client_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client-wait",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long a new questionnaire waits for the person to open the session before it ends"
        " unavailable (the broker's ?clientWait=, up to its QBROKER_MAX_CLIENT_WAIT; default: the"
        " broker's, 5 s, or 15 minutes where notifications may bring the person)",
    )
