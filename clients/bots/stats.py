"""Counters and latency samples of a bots run: record, merge across processes, report.

Everything here is plain data so a worker process can ship its ``Stats`` to the parent as a
dict (``to_dict``/``from_dict``) and the parent can ``merge`` them. Latency samples are kept
exactly up to ``SAMPLE_CAP`` per metric and process, then by reservoir sampling (the maximum
is always exact).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

SAMPLE_CAP: Final = 200_000
MISMATCH_SAMPLES: Final = 20
SAMPLES_PER_CODE: Final = 3  # so that one common code (dropped sockets in a fault test) hides no other
VERIFY_MISMATCH: Final = "verify_mismatch"
RATE_LIMITED_CLOSES: Final = "rate_limited_closes"  # a counter: bots the broker closed for sending too fast

# metric key -> label in the table
METRICS: Final[dict[str, str]] = {
    "start_to_first_question": "start -> first question",
    "answer_to_next_question": "answer -> next question",
    "questionnaire": "whole questionnaire",
}
COUNTERS: Final = (
    "completed",
    "cancelled",
    "unavailable",
    "clarifications",
    "reconnects",
    "verified",
    "frames_in",
    "frames_out",
    "http_requests",
)


@dataclass
class Samples:
    values: list[float] = field(default_factory=list)
    seen: int = 0
    maximum: float = 0.0

    def add(self, value: float, rng: random.Random | None = None) -> None:
        self.seen += 1
        self.maximum = max(self.maximum, value)
        if len(self.values) < SAMPLE_CAP:
            self.values.append(value)
            return
        slot = (rng or random).randrange(self.seen)
        if slot < SAMPLE_CAP:
            self.values[slot] = value

    def merge(self, other: Samples) -> None:
        self.values.extend(other.values)
        self.seen += other.seen
        self.maximum = max(self.maximum, other.maximum)

    def summary(self) -> dict[str, float | int | None]:
        ordered = sorted(self.values)
        return {
            "count": self.seen,
            "p50": percentile(ordered, 50),
            "p90": percentile(ordered, 90),
            "p99": percentile(ordered, 99),
            "max": self.maximum if self.seen else None,
        }


def percentile(ordered: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not ordered:
        return None
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass
class Stats:
    counters: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latency: dict[str, Samples] = field(default_factory=lambda: {key: Samples() for key in METRICS})
    mismatches: list[str] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    elapsed: float = 0.0  # wall seconds of the load phase (max over processes)
    cpu: list[float] = field(default_factory=list)  # CPU seconds used by each load process

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def error(self, code: str, detail: str | None = None) -> None:
        self.errors[code] += 1
        if detail is None:
            return
        if code == VERIFY_MISMATCH:
            if len(self.mismatches) < MISMATCH_SAMPLES:
                self.mismatches.append(detail)
        else:
            self._sample(f"{code}: {detail}")

    def _sample(self, sample: str) -> None:
        code = sample.partition(":")[0]
        if len(self.error_samples) < MISMATCH_SAMPLES and (
            sum(1 for kept in self.error_samples if kept.partition(":")[0] == code) < SAMPLES_PER_CODE
        ):
            self.error_samples.append(sample)

    def observe(self, metric: str, seconds: float) -> None:
        self.latency[metric].add(seconds)

    @property
    def done(self) -> int:
        return self.counters["completed"] + self.counters["cancelled"] + self.counters["unavailable"]

    @property
    def error_total(self) -> int:
        return sum(self.errors.values())

    # --- across processes ----------------------------------------------------------

    def merge(self, other: Stats) -> None:
        self.counters.update(other.counters)
        self.errors.update(other.errors)
        for key, samples in other.latency.items():
            self.latency.setdefault(key, Samples()).merge(samples)
        self.mismatches.extend(other.mismatches[: max(0, MISMATCH_SAMPLES - len(self.mismatches))])
        for sample in other.error_samples:
            self._sample(sample)
        self.elapsed = max(self.elapsed, other.elapsed)
        self.cpu.extend(other.cpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counters": dict(self.counters),
            "errors": dict(self.errors),
            "latency": {k: {"values": s.values, "seen": s.seen, "max": s.maximum} for k, s in self.latency.items()},
            "mismatches": self.mismatches,
            "error_samples": self.error_samples,
            "elapsed": self.elapsed,
            "cpu": self.cpu,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        stats = cls(
            counters=Counter(data["counters"]),
            errors=Counter(data["errors"]),
            mismatches=list(data["mismatches"]),
            error_samples=list(data["error_samples"]),
            elapsed=float(data["elapsed"]),
            cpu=list(data["cpu"]),
        )
        for key, raw in data["latency"].items():
            stats.latency[key] = Samples(list(raw["values"]), int(raw["seen"]), float(raw["max"]))
        return stats

    # --- reports -------------------------------------------------------------------

    def report(self, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """The machine-readable summary (``--json``). Latencies in milliseconds."""
        elapsed = self.elapsed or float("nan")
        frames = self.counters["frames_in"] + self.counters["frames_out"]
        latency: dict[str, Any] = {}
        for key in METRICS:
            summary = self.latency[key].summary()
            latency[key] = {
                name: (round(value * 1000.0, 3) if isinstance(value, float) else value)
                for name, value in summary.items()
            }
        return {
            "elapsed_s": round(self.elapsed, 3),
            "questionnaires": {
                "done": self.done,
                "completed": self.counters["completed"],
                "cancelled": self.counters["cancelled"],
                "unavailable": self.counters["unavailable"],
                "verified": self.counters["verified"],
            },
            "clarifications": self.counters["clarifications"],
            "reconnects": self.counters["reconnects"],
            "questionnaires_per_s": _rate(self.done, elapsed),
            "frames": {"in": self.counters["frames_in"], "out": self.counters["frames_out"]},
            "frames_per_s": _rate(frames, elapsed),
            "http_requests": self.counters["http_requests"],
            "latency_ms": latency,
            "errors": dict(sorted(self.errors.items())),
            "error_total": self.error_total,
            "verify_errors": self.errors[VERIFY_MISMATCH],
            "mismatch_samples": self.mismatches,
            "error_samples": self.error_samples,
            "load_cpu_s": [round(c, 3) for c in self.cpu],
            "config": config or {},
        }

    def table(self, config: dict[str, Any] | None = None) -> str:
        data = self.report(config)
        q = data["questionnaires"]
        lines = [
            f"qbroker bots: {q['done']} questionnaires in {data['elapsed_s']:.1f} s"
            + (f" ({_describe(config)})" if config else ""),
            f"  completed {q['completed']}  cancelled {q['cancelled']}  unavailable {q['unavailable']}  "
            f"verified {q['verified']}  clarifications {data['clarifications']}  reconnects {data['reconnects']}",
            f"  questionnaires/s  {_fmt(data['questionnaires_per_s'])}",
            f"  frames/s          {_fmt(data['frames_per_s'])}  ({data['frames']['in']} frames received by"
            f" the bots, {data['frames']['out']} sent)",
            "",
            f"  {'latency (ms)':<26}{'count':>8}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}",
        ]
        for key, label in METRICS.items():
            row = data["latency_ms"][key]
            lines.append(
                f"  {label:<26}{row['count']:>8}"
                + "".join(f"{_fmt(row[name]):>9}" for name in ("p50", "p90", "p99", "max"))
            )
        lines.append("")
        if data["errors"]:
            lines.append("  errors by code: " + ", ".join(f"{code} {n}" for code, n in data["errors"].items()))
        else:
            lines.append("  errors: none")
        for sample in data["mismatch_samples"][:5]:
            lines.append(f"    mismatch: {sample[:300]}")
        shown: set[str] = set()
        for sample in data["error_samples"]:  # the first of each code
            code = sample.partition(":")[0]
            if code not in shown:
                shown.add(code)
                lines.append(f"    error: {sample[:300]}")
        return "\n".join(lines)


def _rate(count: int, elapsed: float) -> float | None:
    if not elapsed or math.isnan(elapsed) or elapsed <= 0:
        return None
    return round(count / elapsed, 2)


def _fmt(value: float | int | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.2f}" if value < 1000 else f"{value:.0f}"


def _describe(config: dict[str, Any]) -> str:
    keys = ("processes", "sessions", "bots_per_session", "codec")
    return ", ".join(f"{k.replace('_', ' ')} {config[k]}" for k in keys if k in config)
