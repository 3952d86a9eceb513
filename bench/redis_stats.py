"""What redis-server did over a run: its own CPU and its commands, per questionnaire (a
library of bench/instructions.py and bench/run.py).

Two ``INFO`` readings (``cpu`` and ``commandstats``) around a run give redis-server's CPU
(user + system, every thread) and the calls of each command, the commands a script runs
counted as themselves (an EVALSHA that runs HSET and PEXPIRE counts 1 ``evalsha``, 1
``hset`` and 1 ``pexpire``). The brokers also talk to Redis on a clock (the revocation list
twice a second, presence), whatever the load: ``background`` measures that over an idle
window first, and ``per_questionnaire`` takes it out, so the figures are the questionnaires'
own. Command counts are deterministic where times are not: on a shared machine they are the
figures to compare.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import redis

# The bench's own readings: not the broker's work.
_OURS = frozenset({"info", "config|resetstat", "config"})


@dataclass
class Reading:
    at: float  # monotonic seconds
    cpu: float  # redis-server's user + system CPU seconds
    calls: dict[str, int] = field(default_factory=dict)  # command -> calls so far
    usec: dict[str, int] = field(default_factory=dict)  # command -> microseconds Redis spent in it


def read(url: str) -> Reading:
    client = redis.Redis.from_url(url)
    try:
        cpu = client.info("cpu")
        stats = client.info("commandstats")
    finally:
        client.close()
    calls = {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}
    usec = {name.removeprefix("cmdstat_"): int(value["usec"]) for name, value in stats.items()}
    return Reading(time.monotonic(), float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls, usec)


def delta(before: Reading, after: Reading) -> Reading:
    """What happened between two readings (``at``: the seconds between them)."""
    calls = {
        name: after.calls.get(name, 0) - before.calls.get(name, 0)
        for name in after.calls
        if name not in _OURS and after.calls.get(name, 0) != before.calls.get(name, 0)
    }
    usec = {name: after.usec.get(name, 0) - before.usec.get(name, 0) for name in calls}
    return Reading(after.at - before.at, after.cpu - before.cpu, calls, usec)


def background(url: str, seconds: float) -> Reading:
    """The commands and CPU of ``seconds`` with the brokers idle (their clocks' work)."""
    first = read(url)
    time.sleep(seconds)
    return delta(first, read(url))


def per_questionnaire(run: Reading, idle: Reading | None, questionnaires: int) -> dict[str, object]:
    """The run's figures per questionnaire, without the idle background's share of its time."""
    scale = run.at / idle.at if idle is not None and idle.at > 0 else 0.0
    calls: dict[str, float] = {}
    for name, count in run.calls.items():
        net = count - (idle.calls.get(name, 0) * scale if idle is not None else 0.0)
        if net > 0.005 * questionnaires:  # (a clock's command the idle window happened to miss)
            calls[name] = net / questionnaires
    cpu = run.cpu - (idle.cpu * scale if idle is not None else 0.0)
    scripts = calls.get("evalsha", 0.0) + calls.get("eval", 0.0)
    # Redis's own clock of its scripts (a script's time holds its commands'): steadier than
    # its CPU, which also holds reading and answering the connections.
    script_us = (run.usec.get("evalsha", 0) + run.usec.get("eval", 0)) / questionnaires
    return {
        "redis_cpu_us": max(cpu, 0.0) / questionnaires * 1e6,
        "script_us": script_us,
        "commands": sum(calls.values()),  # every command, a script's own commands included
        "scripts": scripts,
        "publishes": calls.get("publish", 0.0) + calls.get("spublish", 0.0),
        "calls": dict(sorted(calls.items(), key=lambda item: -item[1])),
        "background_per_s": {} if idle is None or idle.at <= 0 else {k: v / idle.at for k, v in idle.calls.items()},
    }


def render(figures: dict[str, object]) -> str:
    """The per-questionnaire table: CPU, totals, then each command's calls."""
    calls = figures["calls"]
    assert isinstance(calls, dict)
    lines = [
        f"redis-server CPU per questionnaire: {figures['redis_cpu_us']:,.0f} us, of which running scripts"
        f" {figures['script_us']:,.0f} us (times: noisy on a shared machine)",
        f"redis commands per questionnaire: {figures['commands']:.2f}"
        f" (scripts {figures['scripts']:.2f}, publishes {figures['publishes']:.2f})",
        "  command              calls per questionnaire",
    ]
    lines += [f"  {name:<20} {count:>8.2f}" for name, count in calls.items()]
    return "\n".join(lines)
