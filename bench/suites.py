"""The bench's phases (a library of bench/run.py): the floors, then each store's suite of
qbroker runs (latency rounds beside their own echo, paced latency, throughput, idle
memory), each phase announced on stderr as it starts."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis_stats
from floor_runs import python_floor, wake_floor, ws_echo_floor
from load_runs import PACE, LoadResult, bare_ws_memory, idle_memory, latency_run, throughput_run
from procs import brokers, machine_busy, steal_share


@dataclass
class Settings:
    latency_count: int  # questionnaires of the paced latency run
    latency_rounds: int  # back-to-back latency rounds (the figure is their median)
    round_count: int  # questionnaires per back-to-back round
    duration: float
    clients: int
    client_processes: int
    bot_processes: int
    echo_n: int


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def measure_floors(settings: Settings) -> dict[str, Any]:
    """The floors that need no Redis (the Redis GET floor is measured beside its server)."""
    floors: dict[str, Any] = {}
    say("floor: process wake-up round trip")
    floors["wake"] = wake_floor(settings.echo_n)
    say("floor: pure-Python work")
    floors["python_work"] = python_floor()
    say("floor: websockets echo round trip")
    floors["ws_echo"] = ws_echo_floor(settings.echo_n)
    say(f"floor: websockets echo round trip, paced {PACE} ms")
    floors["ws_echo_paced"] = ws_echo_floor(settings.echo_n // 4, pace=PACE)
    say(f"floor: bare websockets server with {settings.clients} idle clients")
    floors["bare_ws_memory"] = bare_ws_memory(settings.clients, settings.client_processes)
    return floors


def store_suite(
    name: str,
    redis_url: str | None,
    settings: Settings,
    profile_dir: Path | None,
    broker_settings: dict[str, str] | None = None,
    idle: bool = True,
) -> dict[str, Any]:
    """One store's runs; ``broker_settings``: more QBROKER_* variables for its brokers;
    ``idle``: also the memory per idle client (a long run that a setting of the commit
    path does not change)."""
    count = 2 if redis_url else 1
    out: dict[str, Any] = {}
    with brokers(count, redis_url, settings=broker_settings) as procs:
        urls = [b.url for b in procs]
        pids = [b.pid for b in procs]
        out["latency_rounds"] = _latency_rounds(name, urls, pids, redis_url, settings)
        say(f"{name}: latency ({settings.latency_count} questionnaires, paced {PACE} ms)")
        out["latency_paced"] = latency_run(urls, pids, settings.latency_count, paced=True)
        for sessions in (100, 1000):
            say(f"{name}: throughput, {sessions} sessions, {settings.duration:g}s, {settings.bot_processes} bot procs")
            out[f"tp{sessions}_python"] = python_floor()  # the speed the CPU figure was taken at
            profiler = _start_profile(profile_dir, f"{name}-{sessions}", pids, settings.duration) if profile_dir else []
            before = redis_stats.read(redis_url) if redis_url else None
            out[f"tp{sessions}"] = throughput_run(urls, pids, sessions, settings.duration, settings.bot_processes)
            done = out[f"tp{sessions}"].report.get("questionnaires", {}).get("done") or 0
            if redis_url and before is not None and done:
                # What redis-server did for them (its CPU, each command's calls): bench/redis_stats.py
                after = redis_stats.delta(before, redis_stats.read(redis_url))
                out[f"tp{sessions}_redis"] = redis_stats.per_questionnaire(after, None, done)
            for p in profiler:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(60)
    if not idle:
        return out
    # A fresh broker (the client-side one on Redis) for memory: no leftovers from the load.
    with brokers(1, redis_url) as procs:
        say(f"{name}: {settings.clients} idle clients over {settings.client_processes} processes")
        out["memory"] = idle_memory(
            procs[0].ws_url, procs[0].pid, settings.clients, settings.client_processes, "qbroker"
        )
    return out


def _latency_rounds(
    name: str, urls: list[str], pids: list[int], redis_url: str | None, settings: Settings
) -> list[dict[str, Any]]:
    """This machine's speed drifts within minutes: the back-to-back latency is measured in
    rounds, each right after an echo (and, on Redis, an echo that writes to Redis), and each
    round's figures are compared with its own echo."""
    rounds, per_round = settings.latency_rounds, settings.round_count
    out: list[dict[str, Any]] = []
    for i in range(rounds):
        say(f"{name}: latency round {i + 1}/{rounds}: echo, then {per_round} questionnaires back to back")
        before = machine_busy()
        echo = ws_echo_floor(settings.echo_n // rounds)
        write_echo = ws_echo_floor(settings.echo_n // rounds, redis_write=redis_url) if redis_url else None
        run = latency_run(urls, pids, per_round, paced=False)
        steal = steal_share(before, machine_busy())
        out.append({"echo": echo, "write_echo": write_echo, "run": run, "steal": steal})
    return out


def _start_profile(
    directory: Path | None, label: str, pids: list[int], duration: float
) -> list[subprocess.Popen[bytes]]:
    spy = shutil.which("py-spy")
    if directory is None or spy is None:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    procs = []
    for i, pid in enumerate(pids):
        target = directory / f"{label}-broker{i}.txt"
        procs.append(
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--nonblocking",
                    "--duration",
                    str(max(2, int(duration * 0.8))),
                    "-o",
                    str(target),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs


def runs(suite: dict[str, Any]) -> list[LoadResult]:
    """Every bots run of one store's suite."""
    rounds: list[LoadResult] = [r["run"] for r in suite["latency_rounds"]]
    return rounds + [suite[key] for key in ("latency_paced", "tp100", "tp1000")]
