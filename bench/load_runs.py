"""qbroker's load runs (a library of bench/run.py): ``qbroker bots`` against running brokers,
with the brokers' CPU and the bots' progress sampled alongside, and idle clients held open
to measure a server's memory per connection."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from floor_runs import start_echo_server
from procs import PY, REPO, child_env, cpu_seconds, machine_busy, rss_kib, steal_share, stop

# The think time of the paced runs (ms). Between round trips this far apart both processes
# go idle, and waking them costs more than the round trip itself: the paced echo floor is
# several times the back-to-back one, so each qbroker figure is compared with the echo
# measured the same way.
PACE = "5-10"
# Steal (the hypervisor running something else on this VM's cores) from this share of the
# cores' time up is noted beside a figure: the broker had less of the machine than it seemed.
STEAL_NOTE = 0.03
PROGRESS_RE = re.compile(r"\[bots\]\s+([\d.]+)s\s+done (\d+)")


@dataclass
class LoadResult:
    report: dict[str, Any]
    rate: float | None = None  # completed questionnaires/s over the steady window
    cpu_per_q: float | None = None  # broker CPU seconds per completed questionnaire (steady window)
    broker_util: list[float] = field(default_factory=list)  # per broker, cores busy in the window
    machine_util: float | None = None  # share of all cores busy in the window
    steal: float | None = None  # share of all cores' time the hypervisor took in the window
    bots_util: list[float] = field(default_factory=list)  # per load process, cores busy (whole run)
    window: float = 0.0
    notes: list[str] = field(default_factory=list)


def run_bots(urls: list[str], pids: list[int], args: list[str], timeout: float) -> LoadResult:
    """Run ``qbroker bots`` while sampling the brokers' CPU and the bots' progress."""
    command = [PY, "-m", "qbroker.cli", "bots", "--url", ",".join(urls), "--json", "--progress", *args]
    samples: list[tuple[float, list[float], tuple[float, float, float]]] = []
    progress: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.monotonic(), [cpu_seconds(p) for p in pids], machine_busy()))
            done.wait(0.25)

    process = subprocess.Popen(
        command, env=child_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def read_progress() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = PROGRESS_RE.search(line)
            if match:
                progress.append((time.monotonic(), int(match.group(2))))
            elif line.strip():
                sys.stderr.write("  bots: " + line)

    sampler = threading.Thread(target=sample, daemon=True)
    reader = threading.Thread(target=read_progress, daemon=True)
    sampler.start()
    reader.start()
    try:
        stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, _ = process.communicate()
    finally:
        if process.poll() is None:  # interrupted: no load left running behind the bench
            process.kill()
            process.wait(10)
    done.set()
    sampler.join(2)
    reader.join(2)
    try:
        report = json.loads(stdout)
    except ValueError:
        raise RuntimeError(f"qbroker bots printed no JSON (exit {process.returncode})") from None
    result = LoadResult(report)
    elapsed = report.get("elapsed_s") or 0.0
    result.bots_util = [c / elapsed for c in report.get("load_cpu_s", []) if elapsed]
    _steady_window(result, progress, samples)
    return result


def _steady_window(
    result: LoadResult,
    progress: list[tuple[float, int]],
    samples: list[tuple[float, list[float], tuple[float, float, float]]],
) -> None:
    """Figures over the middle of the run (10% -> 90% of the completions): no set-up, no drain."""
    if len(progress) < 3 or len(samples) < 3:
        return
    final = progress[-1][1]
    low = next(((t, d) for t, d in progress if d >= 0.1 * final), None)
    high = next(((t, d) for t, d in progress if d >= 0.9 * final), None)
    if low is None or high is None or high[0] - low[0] < 0.5:
        low, high = progress[0], progress[-1]
    t1, d1 = low
    t2, d2 = high
    if t2 <= t1 or d2 <= d1:
        return

    def at(t: float) -> tuple[list[float], tuple[float, float, float]]:
        best = min(samples, key=lambda s: abs(s[0] - t))
        return best[1], best[2]

    cpu1, m1 = at(t1)
    cpu2, m2 = at(t2)
    window = t2 - t1
    completed = d2 - d1
    result.window = window
    result.rate = completed / window
    result.cpu_per_q = sum(b - a for a, b in zip(cpu1, cpu2, strict=True)) / completed
    result.broker_util = [(b - a) / window for a, b in zip(cpu1, cpu2, strict=True)]
    busy, total = m2[0] - m1[0], m2[1] - m1[1]
    result.machine_util = busy / total if total else None
    result.steal = steal_share(m1, m2)


def latency_run(urls: list[str], pids: list[int], count: int, paced: bool) -> LoadResult:
    """One session answering back to back, as the echo floor's client does; or (``paced``)
    two sessions that think 5-10 ms before each action, beside the paced echo floor."""
    return run_bots(
        urls,
        pids,
        [
            "--sessions",
            "2" if paced else "1",
            "--count",
            str(count),
            "--think-time",
            PACE if paced else "0",
            "--questions",
            "3",
            "--duration",
            "300",
            "--processes",
            "1",
        ],
        timeout=600,
    )


def throughput_run(urls: list[str], pids: list[int], sessions: int, duration: float, processes: int) -> LoadResult:
    result = run_bots(
        urls,
        pids,
        [
            "--sessions",
            str(sessions),
            "--count",
            "10000000",
            "--duration",
            str(duration),
            "--think-time",
            "0",
            "--questions",
            "3",
            "--processes",
            str(processes),
            "--timeout",
            "120",
            "--wait",
            "60",
        ],
        timeout=duration + 300,
    )
    result.notes += _limit_notes(result)
    return result


def _limit_notes(result: LoadResult) -> list[str]:
    """What, other than the broker, limited a throughput run: the load generator, the
    machine as a whole, the hypervisor."""
    notes: list[str] = []
    nproc = os.cpu_count() or 1
    broker_max = max(result.broker_util, default=0.0)
    lg_max = max(result.bots_util, default=0.0)
    if broker_max < 0.85:
        if lg_max >= 0.85:
            notes.append(f"load generator limited: bots at {lg_max:.0%} of a core, broker {broker_max:.0%}")
        elif result.machine_util is not None and result.machine_util >= 0.9:
            notes.append(
                f"machine saturated ({result.machine_util:.0%} of {nproc} cores: bots {lg_max:.0%}/process, "
                f"broker {broker_max:.0%}); the load generator shares the cores"
            )
    if result.steal is not None and result.steal >= STEAL_NOTE:
        notes.append(f"the hypervisor took {result.steal:.0%} of the cores' time (steal)")
    return notes


def idle_memory(ws_url: str, pid: int, clients: int, processes: int, mode: str) -> dict[str, Any]:
    """RSS delta of ``pid`` per idle connected client, clients spread over ``processes``."""
    time.sleep(1.0)
    before = rss_kib(pid)
    holders = _start_holders(ws_url, clients, processes, mode)
    connected = failed = 0
    try:
        for holder in holders:
            assert holder.stdout is not None
            line = holder.stdout.readline()  # "READY ok failed" (bounded by the clients' own timeouts)
            parts = line.split()
            if len(parts) == 3 and parts[0] == "READY":
                connected += int(parts[1])
                failed += int(parts[2])
        time.sleep(3.0)  # let the broker settle (heartbeats, buffers)
        after = rss_kib(pid)
        holders_rss = sum(rss_kib(h.pid) for h in holders)
    finally:
        for holder in holders:
            with contextlib.suppress(Exception):
                assert holder.stdin is not None
                holder.stdin.close()
        for holder in holders:
            try:
                holder.wait(30)
            except subprocess.TimeoutExpired:
                holder.kill()
    per_client = (after - before) / connected if connected else None
    return {
        "clients": connected,
        "failed": failed,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_client": per_client,
        "client_processes_kib_per_client": holders_rss / connected if connected else None,
    }


def _start_holders(ws_url: str, clients: int, processes: int, mode: str) -> list[subprocess.Popen[str]]:
    """``processes`` runs of bench/idle_clients.py, ``clients`` connections between them."""
    per = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    holders = []
    prefix = f"idle-{os.urandom(3).hex()}"
    for i, n in enumerate(per):
        holders.append(
            subprocess.Popen(
                [
                    PY,
                    str(REPO / "bench" / "idle_clients.py"),
                    "--url",
                    ws_url,
                    "--count",
                    str(n),
                    "--mode",
                    mode,
                    "--prefix",
                    f"{prefix}-{i}",
                ],
                env=child_env(),
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    return holders


def bare_ws_memory(clients: int, processes: int) -> dict[str, Any]:
    port, server = start_echo_server()
    try:
        return idle_memory(f"ws://127.0.0.1:{port}", server.pid, clients, processes, "raw")
    finally:
        stop(server)
