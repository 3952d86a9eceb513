"""The Dockerfile's HEALTHCHECK command (run here with the local Python) against a real broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import cast

from tests.helpers.processes import REPO_ROOT, broker, free_port


def _healthcheck() -> list[str]:
    text = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    match = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])", text)
    assert match, "deploy/Dockerfile has no exec-form HEALTHCHECK"
    command = cast(list[str], json.loads(match.group(1)))
    assert command[0] == "python"
    return command


def _run(port: int) -> int:
    env = {**os.environ, "QBROKER_PORT": str(port)}
    return subprocess.run(_healthcheck(), env=env, capture_output=True, timeout=15).returncode


def test_the_image_healthcheck_passes_on_a_live_broker_and_fails_without_one() -> None:
    with broker() as process:
        assert _run(process.port) == 0
    assert _run(free_port()) != 0
