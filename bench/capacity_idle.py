"""What an idle connected client costs, per second: the broker's CPU and Redis's CPU and
commands (the presence heartbeat, one per client every QBROKER_HEARTBEAT_INTERVAL), the
"per idle client" rows of docs/capacity.md (not a test).

    python bench/capacity_idle.py [--clients 2000] [--seconds 30] [--store redis|memory]

One redis-server, one broker on it (or one on the memory store), ``--clients`` idle clients (bench/idle_clients.py, one
session each); once they are all connected, ``--seconds`` of nothing else: the broker's CPU
(/proc), redis-server's CPU and each command's calls (INFO, bench/redis_stats.py) over that
window, per client and second.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import procs  # noqa: E402 - bench/procs.py: the bench's process helpers
import redis_stats  # noqa: E402 - bench/redis_stats.py: redis-server's CPU and commands

READY_WITHIN = 300.0  # seconds for every client to connect


def measure(clients: int, seconds: float, store: str) -> dict[str, object]:
    procs.raise_nofile(clients * 2 + 256)
    with procs.redis_server() as url:
        if url is None:
            raise SystemExit("capacity_idle: redis-server is not on PATH")
        with procs.brokers(1, url if store == "redis" else None) as started:
            broker = started[0]
            holder = subprocess.Popen(
                [procs.PY, str(BENCH / "idle_clients.py"), "--url", broker.ws_url, "--count", str(clients)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=procs.child_env(),
                text=True,
            )
            try:
                assert holder.stdout is not None
                ready = holder.stdout.readline().split()  # READY <ok> <failed>, once all tried
                if len(ready) != 3 or ready[0] != "READY":
                    raise SystemExit(f"capacity_idle: the clients did not connect ({ready!r})")
                time.sleep(10.0)  # (every client's first beats, the joins' upkeep)
                cpu, first = procs.cpu_seconds(broker.pid), redis_stats.read(url)
                time.sleep(seconds)
                window = redis_stats.delta(first, redis_stats.read(url))
                broker_cpu = procs.cpu_seconds(broker.pid) - cpu
            finally:
                if holder.stdin is not None:
                    holder.stdin.close()
                procs.stop(holder)
    connected = int(ready[1])
    per = connected * window.at
    return {
        "clients": connected,
        "failed": int(ready[2]),
        "seconds": window.at,
        "broker_cpu_us_per_client_s": broker_cpu / per * 1e6,
        "redis_cpu_us_per_client_s": window.cpu / per * 1e6,
        "redis_commands_per_client_s": sum(window.calls.values()) / per,
        "calls_per_client_s": {name: count / per for name, count in sorted(window.calls.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--store", choices=("redis", "memory"), default="redis")
    args = parser.parse_args()
    figures = measure(args.clients, args.seconds, args.store)
    print(f"{figures['clients']} idle clients ({figures['failed']} failed), {figures['seconds']:.0f} s:")
    for name in ("broker_cpu_us_per_client_s", "redis_cpu_us_per_client_s", "redis_commands_per_client_s"):
        value = figures[name]
        assert isinstance(value, float)
        print(f"  {name:<30} {value:>8.2f}")
    calls = figures["calls_per_client_s"]
    assert isinstance(calls, dict)
    for name, count in calls.items():
        print(f"    {name:<28} {count:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
