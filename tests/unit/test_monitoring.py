"""deploy/monitoring: the Prometheus alert rules pass their own unit tests under ``promtool
test rules`` (Debian's prometheus package), and every metric the rules and the Grafana
dashboard ask for is one the broker exports (broker/runtime/metrics.py), so that a renamed metric
cannot leave a panel blank or an alert silent."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.runtime.metrics import Metrics
from tests.helpers.processes import need

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULES = MONITORING / "alerts.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
# What Prometheus itself provides beside the broker's own series.
PROMETHEUS_OWN = {"up"}
# The alerts docs/operations.md promises an operator.
ALERTS = {
    "QbrokerNoReadyBroker",
    "QbrokerStoreUnavailable",
    "QbrokerNotificationsGivenUp",
    "QbrokerAnswerLatencyHigh",
    "QbrokerWebsocketRefusalsSpiking",
}


def _promtool() -> str:
    promtool = shutil.which("promtool")
    need(promtool is not None, "promtool is not installed (apt-get install prometheus)")
    assert promtool is not None
    return promtool


def exported_series() -> set[str]:
    """Every series name the broker's /metrics can carry (a histogram's three included)."""
    names: set[str] = set()
    for line in Metrics().render().decode().splitlines():
        match = re.fullmatch(r"# TYPE (\w+) (\w+)", line)
        if match is None:
            continue
        name, kind = match.groups()
        names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


def metrics_in(expr: str) -> set[str]:
    """The series names a PromQL expression selects (identifiers followed by a selector or
    a range, or standing alone before an operator), without functions and keywords."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "{}", without_strings)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{|\[)", without_labels))
    names |= set(re.findall(r"\b(qbroker_[a-zA-Z0-9_]+)\b", without_labels))
    return names


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _panels(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside rows included."""
    found = []
    for panel in node.get("panels", []):
        found.append(panel)
        found += _panels(panel)
    return found


def test_the_alert_rules_are_valid_and_pass_their_unit_tests() -> None:
    promtool = _promtool()
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"], cwd=MONITORING, capture_output=True, text=True, timeout=120
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_an_operator_needs_is_there_and_unit_tested() -> None:
    assert {rule["alert"] for rule in _rules()} == ALERTS
    tests = yaml.safe_load((MONITORING / "alerts.test.yml").read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert fired == ALERTS  # each one is shown to fire, not only to stay quiet


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: str(rule["alert"]))
def test_every_alert_reads_metrics_the_broker_exports(rule: dict[str, Any]) -> None:
    used = metrics_in(rule["expr"])
    assert any(name.startswith("qbroker_") for name in used), used
    assert used <= exported_series() | PROMETHEUS_OWN, used - exported_series()


def test_every_dashboard_panel_reads_metrics_the_broker_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = _panels(dashboard)
    assert len(panels) >= 10
    exported = exported_series()
    for panel in panels:
        expressions = [target["expr"] for target in panel.get("targets", [])]
        assert expressions, f"panel {panel['title']!r} has no query"
        for expr in expressions:
            used = metrics_in(expr)
            assert any(name.startswith("qbroker_") for name in used), (panel["title"], expr)
            assert used <= exported | PROMETHEUS_OWN, (panel["title"], used - exported)


def test_the_metric_check_would_see_a_renamed_metric() -> None:
    assert metrics_in('histogram_quantile(0.99, sum by (le) (rate(qbroker_x_bucket{type="a"}[5m])))') == {
        "qbroker_x_bucket"
    }
    assert metrics_in("sum(up{job='q'} * on(instance) group_left() qbroker_y)") >= {"up", "qbroker_y"}
    assert "qbroker_client_connections" in exported_series()
    assert "qbroker_commit_seconds_bucket" in exported_series()
    assert "qbroker_renamed_away" not in exported_series()
