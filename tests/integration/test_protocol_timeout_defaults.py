"""docs/protocol.md's default timers, on a deployment started without timer settings:
``wait`` 30 s, hello within 10 s, QBROKER_CLIENT_WAIT 5 s, QBROKER_RECONNECT_GRACE 30 s.

Measuring them takes 30 s of wall time, so the ``default_timer_probes`` fixture
(conftest.py) starts a dedicated default-settings deployment per kind with background probes
at the first of these tests, and they only collect the measurements. They are one xdist
group: one worker measures, once.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.helpers.processes import need
from tests.helpers.protocol import DEPLOYMENT_KINDS, BackgroundProbes

pytestmark = [pytest.mark.parametrize("deployment_kind", DEPLOYMENT_KINDS), pytest.mark.xdist_group("default-timers")]


def _probe(probes: dict[str, BackgroundProbes], kind: str, name: str) -> dict[str, Any]:
    if kind == "redis":
        need(shutil.which("redis-server") is not None, "redis-server is not installed")
    result = probes[kind].result(name)
    assert "error" not in result, result
    return result


def test_wait_defaults_to_30_seconds(default_timer_probes: dict[str, BackgroundProbes], deployment_kind: str) -> None:
    """A POST without ``wait``, a client connected and nobody answering: 202 after ~30 s."""
    result = _probe(default_timer_probes, deployment_kind, "wait_default")
    assert result["status"] == 202, result
    assert 28.5 <= result["elapsed"] <= 40, result


def test_hello_is_due_within_10_seconds(
    default_timer_probes: dict[str, BackgroundProbes], deployment_kind: str
) -> None:
    result = _probe(default_timer_probes, deployment_kind, "hello_timeout")
    assert result["code"] == 4408, result
    assert 9 <= result["elapsed"] <= 15, result


def test_client_wait_defaults_to_5_seconds(
    default_timer_probes: dict[str, BackgroundProbes], deployment_kind: str
) -> None:
    result = _probe(default_timer_probes, deployment_kind, "client_wait")
    assert result["status"] == 200, result
    assert result["body"]["details"]["cancellationReason"] == "ui_unavailable", result
    assert 4.5 <= result["elapsed"] <= 10, result


def test_reconnect_grace_defaults_to_30_seconds(
    default_timer_probes: dict[str, BackgroundProbes], deployment_kind: str
) -> None:
    result = _probe(default_timer_probes, deployment_kind, "reconnect_grace")
    assert result["status"] == 200, result
    assert result["body"]["details"]["cancellationReason"] == "ui_error", result
    assert 28.5 <= result["elapsed"] <= 40, result
