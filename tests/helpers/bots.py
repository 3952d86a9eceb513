"""``qbroker bots`` as the fault tests run it: the mixed load (every kind of question, both
codecs, clarifications, cancellations, reconnects) and what its ``--json`` report must show
once a fault (a broker restarted, a Redis master killed) has passed under it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def mixed_load_command(urls: Sequence[str], *, seed: int, sessions: int, seconds: int) -> list[str]:
    """The bots' command line: ``sessions`` sessions of two bots each for ``seconds``."""
    return [
        sys.executable, "-m", "qbroker.cli", "bots", "--json", "--seed", str(seed),
        "--url", ",".join(urls),
        "--sessions", str(sessions), "--bots", "2", "--codec", "mixed",
        "--questions", "5", "--options", "6", "--multi-share", "0.4", "--other-share", "0.2",
        "--think-time", "5-40", "--clarify-rate", "0.2", "--cancel-rate", "0.1",
        "--reconnect-churn", "0.05", "--duration", str(seconds), "--timeout", "60", "--wait", "10",
    ]  # fmt: skip


def read_report(out: Path, err: Path) -> dict[str, Any]:
    """The ``--json`` report the bots wrote to ``out`` (their stderr, ``err``, if there is none)."""
    report: dict[str, Any] = json.loads(out.read_text() or "{}")
    assert report, f"no --json report; stderr:\n{err.read_text()[-3000:]}"
    return report


def assert_nothing_lost_or_altered(report: dict[str, Any], tolerated: tuple[str, ...], summary: str) -> None:
    """0 wrong: every result the agent got is what the bots answered. 0 lost: every
    questionnaire ended (none given up on, none ``unavailable``) and was verified, the
    cancellations too. No error but those the fault may cost (codes starting with ``tolerated``)."""
    done = report["questionnaires"]
    assert report["verify_errors"] == 0 and report["mismatch_samples"] == [], summary
    assert done["unavailable"] == 0, summary
    assert done["done"] == done["completed"] + done["cancelled"] and done["done"] > 0, summary
    assert done["verified"] == done["done"], summary
    untolerated = {code: n for code, n in report["errors"].items() if not code.startswith(tolerated)}
    assert untolerated == {}, summary
