"""Prometheus metrics, served at ``/metrics``. Labels are codes and statuses, never ids or texts.

Each ``Broker`` owns its own registry, so several apps in one process (tests) do not clash.

No locks: every update happens on the broker's single event-loop thread and ``/metrics`` is
rendered on that same loop, so an update and a render never interleave. prometheus_client's own
metric objects take a mutex per ``inc()`` and two per ``observe()``, microseconds per frame.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

# Sub-millisecond to seconds: a commit is ~0.1 ms on memory, ~0.3 ms on a local Redis.
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Counter:
    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()  # exposed as ``_created``, as prometheus_client does

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class Gauge:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class Histogram:
    """Per-bucket (not cumulative) counts; the render accumulates them."""

    __slots__ = ("bounds", "counts", "sum", "created")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is above every bound: only in +Inf
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # bisect_left puts a value equal to a bound in that bound's bucket: Prometheus buckets are ``le``.
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount

    @property
    def count(self) -> int:
        return sum(self.counts)


_Child = TypeVar("_Child", Counter, Gauge, Histogram)


class _Family(Generic[_Child]):
    """One metric name and its children by label values; an unlabelled metric is the child ``labels()``."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.children: dict[tuple[str, ...], _Child] = {}

    def labels(self, *values: str) -> _Child:
        child = self.children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            child = self.children[values] = self._new_child()
        return child

    def _new_child(self) -> _Child:
        raise NotImplementedError

    def describe(self) -> Metric:
        """The empty family: its type and name, for the registry's clash check."""
        raise NotImplementedError

    def collect(self) -> Metric:
        raise NotImplementedError


class CounterFamily(_Family[Counter]):
    def _new_child(self) -> Counter:
        return Counter()

    def describe(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Metric:
        family = self.describe()
        for values, child in self.children.items():
            family.add_metric(values, child.value, created=child.created)
        return family


class GaugeFamily(_Family[Gauge]):
    def _new_child(self) -> Gauge:
        return Gauge()

    def describe(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Metric:
        family = self.describe()
        for values, child in self.children.items():
            family.add_metric(values, child.value)
        return family


class HistogramFamily(_Family[Histogram]):
    def __init__(
        self, name: str, documentation: str, labelnames: tuple[str, ...] = (), *, buckets: tuple[float, ...]
    ) -> None:
        super().__init__(name, documentation, labelnames)
        self.buckets = buckets
        # The ``le`` texts prometheus_client's own Histogram writes (``1.0``, not ``1``).
        self._les: list[str] = [floatToGoString(b) for b in buckets] + ["+Inf"]  # type: ignore[no-untyped-call]

    def _new_child(self) -> Histogram:
        return Histogram(self.buckets)

    def describe(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Metric:
        family = self.describe()
        for values, child in self.children.items():
            cumulative = accumulate(child.counts)  # the last (+Inf) total is the count
            family.add_metric(values, list(zip(self._les, cumulative, strict=True)), child.sum)
            # HistogramMetricFamily takes no ``created``; the exposition moves this sample to its own gauge.
            family.samples.append(
                Sample(f"{self.name}_created", dict(zip(self.labelnames, values, strict=True)), child.created)
            )
        return family


_AnyFamily = _Family[Counter] | _Family[Gauge] | _Family[Histogram]
_F = TypeVar("_F", CounterFamily, GaugeFamily, HistogramFamily)


class _Collector:
    """The registry's one collector: turns the families' plain numbers into exposition samples."""

    def __init__(self, families: list[_AnyFamily]) -> None:
        self._families = families

    def describe(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.describe()

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.collect()


class Metrics:
    def __init__(self) -> None:
        self._families: list[_AnyFamily] = []
        self.connections = self._declare(
            GaugeFamily("qbroker_client_connections", "Client websockets open on this process")
        ).labels()
        self.agent_calls = self._declare(
            GaugeFamily("qbroker_agent_calls_waiting", "Agent calls waiting on this process for an outcome")
        ).labels()
        self.started = self._declare(
            CounterFamily("qbroker_questionnaires_started_total", "Questionnaires started through this process")
        ).labels()
        self.outcomes = self._declare(
            CounterFamily(
                "qbroker_questionnaire_outcomes_total",
                "Outcomes reached by commands this process ran",
                ("status", "reason"),
            )
        )
        self.frames = self._declare(CounterFamily("qbroker_client_frames_total", "Client frames received", ("type",)))
        self.frame_seconds = self._declare(
            HistogramFamily(
                "qbroker_frame_handling_seconds",
                "Time from receiving a client command frame to its fan-out",
                ("type",),
                buckets=_LATENCY_BUCKETS,
            )
        )
        self.commit_seconds = self._declare(
            HistogramFamily("qbroker_commit_seconds", "Store compare-and-set latency", buckets=_LATENCY_BUCKETS)
        ).labels()
        self.errors = self._declare(
            CounterFamily("qbroker_errors_total", "Errors returned to agents and clients", ("code",))
        )
        self.closes = self._declare(
            CounterFamily("qbroker_websocket_closes_total", "Websockets closed by the broker", ("code",))
        )
        self.notices_connected = self._declare(
            GaugeFamily(
                "qbroker_store_notices_connected",
                "1 while this process hears other processes' writes (Redis pub/sub is up), else 0",
            )
        ).labels()
        self.store_reconnects = self._declare(
            CounterFamily(
                "qbroker_store_reconnects_total",
                "Times the notice connection to the store came back after a loss (each re-reads every session)",
            )
        ).labels()
        self.notifications = self._declare(
            CounterFamily(
                "qbroker_notifications_total",
                "Notifications by kind and result: sent; retried (an attempt failed, another follows);"
                " failed (given up); dropped (the queue was full); skipped (the questionnaire"
                " ended or was answered meanwhile)",
                ("kind", "result"),
            )
        )
        self.notifications_queued = self._declare(
            GaugeFamily(
                "qbroker_notifications_queued",
                "Notifications on this process not yet delivered or given up (queued, in flight, waiting to retry)",
            )
        ).labels()
        self.revocations = self._declare(
            GaugeFamily("qbroker_revocations", "Token revocations in force, as this process last read them")
        ).labels()
        self.jwks_fetches = self._declare(
            CounterFamily(
                "qbroker_jwks_fetches_total",
                "Fetches of the identity provider's JWKS (QBROKER_JWKS_URL) by result: ok or error",
                ("result",),
            )
        )

        self.inbox_connections = self._declare(
            GaugeFamily("qbroker_inbox_connections", "Inbox websockets open on this process")
        ).labels()
        self.inbox_sessions = self._declare(
            GaugeFamily("qbroker_inbox_sessions", "Sessions this process follows for its inbox websockets")
        ).labels()
        self.inbox_rereads = self._declare(
            CounterFamily(
                "qbroker_inbox_rereads_total",
                "Sessions read again for the inbox websockets (a notice missed, too large, or a reconnect)",
            )
        ).labels()

        # Children bound once, so every frame type shows up (at zero) and a frame skips the dict lookup.
        types = ("hello", "ping", "draft", "answer", "clarify", "cancel")
        self.frame_count = {t: self.frames.labels(t) for t in types}
        self.frame_timer = {t: self.frame_seconds.labels(t) for t in types}

        self.registry = CollectorRegistry()
        self.registry.register(_Collector(self._families))

    def _declare(self, family: _F) -> _F:
        self._families.append(family)  # exposition order is declaration order
        return family

    def render(self) -> bytes:
        return generate_latest(self.registry)
