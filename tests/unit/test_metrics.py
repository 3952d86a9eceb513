"""Lock-free metrics: the /metrics text must read as prometheus_client's own metric objects wrote it."""

from __future__ import annotations

import math

import pytest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from broker.runtime.metrics import _LATENCY_BUCKETS, CONTENT_TYPE, Metrics

FRAME_TYPES = ("hello", "ping", "draft", "answer", "clarify", "cancel")
LES = ("0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1.0", "+Inf")

Key = tuple[str, frozenset[tuple[str, str]]]


def samples(metrics: Metrics) -> dict[Key, float]:
    text = metrics.render().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[Key, float], name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def buckets(found: dict[Key, float], name: str, **labels: str) -> list[float]:
    return [value(found, f"{name}_bucket", le=le, **labels) for le in LES]


def test_fresh_metrics_expose_the_names_prometheus_client_objects_did() -> None:
    # Rendered from the prometheus_client Counter/Gauge/Histogram implementation this replaced.
    families = {(f.name, f.type) for f in text_string_to_metric_families(Metrics().render().decode())}
    assert families == {
        ("qbroker_agent_calls_waiting", "gauge"),
        ("qbroker_client_connections", "gauge"),
        ("qbroker_client_frames", "counter"),
        ("qbroker_client_frames_created", "gauge"),
        ("qbroker_commit_seconds", "histogram"),
        ("qbroker_commit_seconds_created", "gauge"),
        ("qbroker_errors", "counter"),
        ("qbroker_frame_handling_seconds", "histogram"),
        ("qbroker_frame_handling_seconds_created", "gauge"),
        ("qbroker_questionnaire_outcomes", "counter"),
        ("qbroker_questionnaires_started", "counter"),
        ("qbroker_questionnaires_started_created", "gauge"),
        ("qbroker_websocket_closes", "counter"),
        ("qbroker_store_notices_connected", "gauge"),
        ("qbroker_store_reconnects", "counter"),
        ("qbroker_store_reconnects_created", "gauge"),
        # Added since: notifications (broker/notify/dispatch.py)
        ("qbroker_notifications", "counter"),
        ("qbroker_notifications_queued", "gauge"),
        ("qbroker_inbox_connections", "gauge"),
        ("qbroker_inbox_sessions", "gauge"),
        ("qbroker_inbox_rereads", "counter"),
        ("qbroker_inbox_rereads_created", "gauge"),
        # Added since: tokens (broker/tokens/checks.py)
        ("qbroker_revocations", "gauge"),
        ("qbroker_jwks_fetches", "counter"),
    }
    assert {name for name, _ in samples(Metrics())} == {
        "qbroker_agent_calls_waiting",
        "qbroker_client_connections",
        "qbroker_client_frames_created",
        "qbroker_client_frames_total",
        "qbroker_commit_seconds_bucket",
        "qbroker_commit_seconds_count",
        "qbroker_commit_seconds_created",
        "qbroker_commit_seconds_sum",
        "qbroker_frame_handling_seconds_bucket",
        "qbroker_frame_handling_seconds_count",
        "qbroker_frame_handling_seconds_created",
        "qbroker_frame_handling_seconds_sum",
        "qbroker_questionnaires_started_created",
        "qbroker_questionnaires_started_total",
        "qbroker_store_notices_connected",
        "qbroker_store_reconnects_created",
        "qbroker_notifications_queued",
        "qbroker_store_reconnects_total",
        "qbroker_inbox_connections",
        "qbroker_inbox_sessions",
        "qbroker_inbox_rereads_created",
        "qbroker_inbox_rereads_total",
        "qbroker_revocations",
    }


def test_help_texts_and_types_are_kept() -> None:
    text = Metrics().render().decode()
    assert "# HELP qbroker_client_connections Client websockets open on this process\n" in text
    assert "# HELP qbroker_agent_calls_waiting Agent calls waiting on this process for an outcome\n" in text
    assert "# TYPE qbroker_questionnaires_started_total counter\n" in text
    assert "# HELP qbroker_questionnaire_outcomes_total Outcomes reached by commands this process ran\n" in text
    assert "# HELP qbroker_client_frames_total Client frames received\n" in text
    assert "# HELP qbroker_frame_handling_seconds Time from receiving a client command frame to its fan-out\n" in text
    assert "# TYPE qbroker_frame_handling_seconds histogram\n" in text
    assert "# HELP qbroker_commit_seconds Store compare-and-set latency\n" in text
    assert "# HELP qbroker_errors_total Errors returned to agents and clients\n" in text
    assert "# HELP qbroker_websocket_closes_total Websockets closed by the broker\n" in text
    assert 'qbroker_commit_seconds_bucket{le="1.0"} 0.0\n' in text
    assert CONTENT_TYPE == CONTENT_TYPE_LATEST


def test_bound_frame_types_show_up_at_zero() -> None:
    found = samples(Metrics())
    for t in FRAME_TYPES:
        assert value(found, "qbroker_client_frames_total", type=t) == 0
        assert buckets(found, "qbroker_frame_handling_seconds", type=t) == [0.0] * len(LES)
        assert value(found, "qbroker_frame_handling_seconds_count", type=t) == 0
        assert value(found, "qbroker_frame_handling_seconds_sum", type=t) == 0
    assert value(found, "qbroker_commit_seconds_count") == 0


def test_counters_gauge_and_labelled_children() -> None:
    m = Metrics()
    m.started.inc()
    m.started.inc()
    m.connections.inc()
    m.connections.inc()
    m.connections.dec()
    m.outcomes.labels("completed", "").inc()
    m.outcomes.labels("cancelled", "agent").inc()
    m.outcomes.labels("cancelled", "agent").inc()
    m.frame_count["answer"].inc()
    m.frames.labels("answer").inc()  # the bound child and labels() are the same child
    m.errors.labels("stale_step").inc()
    m.closes.labels("4400").inc(3)

    found = samples(m)
    assert value(found, "qbroker_questionnaires_started_total") == 2
    assert value(found, "qbroker_client_connections") == 1
    assert value(found, "qbroker_questionnaire_outcomes_total", status="completed", reason="") == 1
    assert value(found, "qbroker_questionnaire_outcomes_total", status="cancelled", reason="agent") == 2
    assert value(found, "qbroker_client_frames_total", type="answer") == 2
    assert value(found, "qbroker_client_frames_total", type="ping") == 0
    assert value(found, "qbroker_errors_total", code="stale_step") == 1
    assert value(found, "qbroker_websocket_closes_total", code="4400") == 3
    # Children made on first use carry a creation time, as prometheus_client's did.
    assert value(found, "qbroker_errors_created", code="stale_step") > 0
    assert ("qbroker_errors_total", frozenset({("code", "bad_frame")})) not in found


def test_histogram_buckets_are_cumulative_with_sum_and_count() -> None:
    m = Metrics()
    observed = [0.0001, 0.0002, 0.0003, 0.001, 0.3, 5.0]
    for seconds in observed:
        m.frame_timer["answer"].observe(seconds)

    found = samples(m)
    got = buckets(found, "qbroker_frame_handling_seconds", type="answer")
    # 0.0001 and 0.001 sit exactly on bounds and count there (``le``); 5.0 is only in +Inf.
    assert got == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 6]
    assert got == sorted(got)
    assert got[-1] == value(found, "qbroker_frame_handling_seconds_count", type="answer") == len(observed)
    assert value(found, "qbroker_frame_handling_seconds_sum", type="answer") == pytest.approx(sum(observed))
    assert value(found, "qbroker_frame_handling_seconds_count", type="draft") == 0
    assert m.frame_timer["answer"].count == len(observed)


@pytest.mark.parametrize("index", range(len(_LATENCY_BUCKETS)))
def test_an_observation_on_a_bound_falls_in_that_bucket(index: int) -> None:
    m = Metrics()
    m.commit_seconds.observe(_LATENCY_BUCKETS[index])
    got = buckets(samples(m), "qbroker_commit_seconds")
    assert got == [0.0] * index + [1.0] * (len(LES) - index)


def test_observations_above_every_bound_count_only_in_inf() -> None:
    m = Metrics()
    m.commit_seconds.observe(1.0000001)
    m.commit_seconds.observe(math.inf)
    found = samples(m)
    assert buckets(found, "qbroker_commit_seconds") == [0.0] * (len(LES) - 1) + [2.0]
    assert value(found, "qbroker_commit_seconds_count") == 2


def test_two_instances_do_not_share_values() -> None:
    a, b = Metrics(), Metrics()
    a.started.inc()
    a.connections.inc()
    a.errors.labels("x").inc()
    a.frame_timer["answer"].observe(0.01)
    a.commit_seconds.observe(0.01)

    found = samples(b)
    assert value(found, "qbroker_questionnaires_started_total") == 0
    assert value(found, "qbroker_client_connections") == 0
    assert ("qbroker_errors_total", frozenset({("code", "x")})) not in found
    assert value(found, "qbroker_frame_handling_seconds_count", type="answer") == 0
    assert value(found, "qbroker_commit_seconds_count") == 0
    assert a.registry is not b.registry


def test_misuse_is_refused_like_prometheus_client() -> None:
    m = Metrics()
    with pytest.raises(ValueError):
        m.outcomes.labels("completed")
    with pytest.raises(ValueError):
        m.started.inc(-1)
