"""qbroker's benchmark: one run, floors and qbroker side by side, on this machine.

    python bench/run.py [--quick] [--record docs/benchmarks.md [--note TEXT]] [--profile DIR] [--no-redis]
                        [--redis-wait-replicas]

Measures, in one run:

- the floors: a bare ``websockets`` echo round trip (server and client in separate
  processes; back to back, and paced like the paced latency run), a bare redis-py round
  trip against a redis-server started here, and a round trip between two processes with
  no work at all (what waking a process costs on this machine);
- qbroker on the memory store (one broker) and on Redis (two brokers: every session's agent
  on one, its bots on the other): answer -> next question and start -> first question
  latency (back to back, and paced); completed questionnaires/s with 100 and 1,000 concurrent
  sessions (``qbroker bots`` in several processes, no think time); broker CPU time per
  completed 3-question questionnaire (utime+stime from /proc/<pid>/stat of the broker
  processes over the steady part of the run, divided by the questionnaires completed in
  it); resident memory per idle connected client with 10,000 clients (broker RSS delta,
  clients spread over several processes), beside the same figure for a bare websockets
  server.

With ``--redis-wait-replicas`` the redis-server gets a replica, and the Redis runs are made
twice, side by side: as always, then with ``QBROKER_REDIS_WAIT_REPLICAS=1`` (each commit
then waits for ``WAIT 1``: what acknowledging only replicated answers costs).

It prints a table with each figure, its ratio to the floor and its target, and a
note wherever the load generator (or the machine as a whole), not the broker, limited a
figure. Every child process is ours, talks to 127.0.0.1 only, and is stopped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

# The bench's own modules, beside this file (the script's folder is first on sys.path).
from floor_runs import redis_floor
from inbox_page import kept_inbox
from page import markdown
from procs import describe_machine, machine_busy, raise_nofile, redis_server, steal_share
from suites import Settings, measure_floors, runs, say, store_suite
from table import REDIS_WAIT, STORES, build_rows, render


def main() -> int:
    args = _parser().parse_args()
    settings = _settings(args)
    nofile = raise_nofile(settings.clients * 2 + 1000)
    if nofile < settings.clients + 500:
        say(f"RLIMIT_NOFILE is {nofile}: not enough for {settings.clients} clients")
        return 1
    machine = describe_machine()
    started = time.time()
    busy_at_start = machine_busy()
    results: dict[str, Any] = {"machine": machine, "settings": settings.__dict__, "floors": measure_floors(settings)}
    _measure_stores(results, settings, args)
    steal = steal_share(busy_at_start, machine_busy())
    machine["steal"] = "-" if steal is None else f"{steal:.1%} of the cores' time over the run"
    rows = build_rows(results)
    duration = time.time() - started
    print()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()))
    print(render(rows, markdown=False))
    print(f"\n(bench took {duration:.0f} s; {'quick' if args.quick else 'full'} run)")
    if args.record:
        # (bench/inbox.py's section of the page, if it has one, is kept as it is)
        args.record.write_text(markdown(results, rows, args.note, args.quick, duration) + kept_inbox(args.record))
        say(f"recorded in {args.record}")
    bad = sum(run.report["verify_errors"] for store in STORES if (suite := results.get(store)) for run in runs(suite))
    return 1 if bad else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, 2,000 idle clients (a smoke test)")
    parser.add_argument("--record", type=Path, default=None, help="write the run as markdown to this file")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy raw profiles of the brokers during the throughput runs, into this directory",
    )
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis runs")
    parser.add_argument(
        "--redis-wait-replicas",
        action="store_true",
        help="give Redis a replica and run the Redis suite again with QBROKER_REDIS_WAIT_REPLICAS=1, side by side",
    )
    parser.add_argument("--note", default="", help="a remark recorded with the run (e.g. that the machine was busy)")
    parser.add_argument("--clients", type=int, default=None, help="idle clients for the memory figure (default 10000)")
    parser.add_argument("--bot-processes", type=int, default=2, help="load-generator processes (default 2)")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return Settings(
        latency_count=120 if args.quick else 600,
        # Five rounds, not three: one round caught in a swing of this machine's speed then
        # moves the median far less (a three-round median was once set by such a round).
        latency_rounds=2 if args.quick else 5,
        round_count=60 if args.quick else 200,
        duration=6.0 if args.quick else 20.0,
        clients=args.clients or (2000 if args.quick else 10000),
        client_processes=2 if args.quick else 4,
        bot_processes=args.bot_processes,
        echo_n=1000 if args.quick else 5000,
    )


def _measure_stores(results: dict[str, Any], settings: Settings, args: argparse.Namespace) -> None:
    """The Redis GET floor, then each store's suite (Redis's only if redis-server is here)."""
    with redis_server(replica=args.redis_wait_replicas) as redis_url:
        if redis_url:
            say("floor: redis-py round trip")
            results["floors"]["redis"] = redis_floor(redis_url, settings.echo_n)
        results["memory"] = store_suite("memory", None, settings, args.profile)
        if redis_url and not args.no_redis:
            try:
                results["redis"] = store_suite("redis", redis_url, settings, args.profile)
                if args.redis_wait_replicas:  # the same runs, each commit then WAIT 1 (no idle figure)
                    wait = {"QBROKER_REDIS_WAIT_REPLICAS": "1"}
                    results[REDIS_WAIT] = store_suite(REDIS_WAIT, redis_url, settings, args.profile, wait, idle=False)
            except Exception as exc:  # the memory figures still count
                say(f"redis runs failed: {exc}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # its brokers, servers and bots were stopped on the way out
        print("\n[bench] interrupted: nothing recorded", file=sys.stderr)
        sys.exit(130)
