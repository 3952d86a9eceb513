"""Where an answer's time goes inside the broker: a stage-by-stage breakdown (not a test).

    python bench/answer_path.py [--store memory|redis] [--count 300]

Starts a broker (on Redis: a redis-server of its own and two brokers, the agent's and the
clients'), runs ``qbroker bots`` with one session answering back to back, and prints, for
the broker the bots are connected to, the time between consecutive points of the answer ->
next question path: its p50 and p99, and its median over the slowest 1% of answers (where
the tail's time goes):

    frame bytes arrive      uvicorn hands the socket's bytes to the websocket protocol
    frame received          the websocket frame is parsed (WebsocketConnection.received)
    handler runs            the connection's worker task starts on it
    command begins          the frame is decoded and parsed (Broker.command)
    state machine done      machine.apply returned the new state
    commit returned         the store acknowledged the write (memory: at once; Redis: a script)
    fan-out begins          Fanout.follow_write
    frame written           the next question's frame is on the socket (after the last
                            answer: the questionnaire's closed and the next view, one write)

On Redis it then prints Redis's own time per call of each command the run used (INFO
commandstats): how much of "commit returned" the script spends inside Redis.

Each point is a wrapper around one broker function that records ``perf_counter_ns()``; the
wrappers cost ~1 us each (measured on 2026-12-02 on an Intel Xeon VM), so the total is a
little above the real figure. The breakdown is
what the bench's ratios cannot show: which part of an answer is the broker's own work, and
which the store's round trip. It patches the broker's internals by name: a renamed function
makes it fail loudly rather than measure the wrong thing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import procs  # noqa: E402 - bench/procs.py: the bench's process helpers

from clients.bots.stats import percentile  # noqa: E402

# (label, module, class or None, function) in the order an answer passes them.
POINTS = [
    ("frame bytes arrive", "broker.ws.transport", "ClientSocket", "data_received"),
    ("frame received", "broker.ws.connection", "WebsocketConnection", "received"),
    ("handler runs", "broker.ws.connection", "WebsocketConnection", "_work"),
    ("command begins", "broker.service", "Broker", "command"),
    ("state machine done", None, None, "apply"),
    ("commit returned", None, None, "commit"),
    ("fan-out begins", "broker.service.fanout", "Fanout", "follow_write"),
    ("frame written", "broker.ws.transport", "ClientSocket", "write_frame"),
]


def install_probes(dump_to: Path) -> None:
    """In the broker process: wrap each point's function; SIGUSR1 writes the samples."""
    import asyncio
    import importlib

    from broker.core import machine

    clock = time.perf_counter_ns
    stamps: dict[str, int] = {}
    samples: list[dict[str, int]] = []

    def before(label: str, function: Any) -> Any:
        if asyncio.iscoroutinefunction(function):

            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                stamps[label] = clock()
                return await function(*args, **kwargs)

            return timed_async

        def timed(*args: Any, **kwargs: Any) -> Any:
            stamps[label] = clock()
            return function(*args, **kwargs)

        return timed

    for label, module_name, class_name, name in POINTS:
        if label == "state machine done":
            apply = machine.apply  # (the module broker.service.writes calls it through)

            def applied(*args: Any, _apply: Any = apply, **kwargs: Any) -> Any:
                state = _apply(*args, **kwargs)
                stamps["state machine done"] = clock()
                return state

            setattr(machine, "apply", applied)  # noqa: B010 - a patch, by name: mypy cannot type it otherwise
        elif label == "commit returned":
            store_class = _store_class()
            commit = store_class.commit

            async def committed(*args: Any, _commit: Any = commit, **kwargs: Any) -> Any:
                written = await _commit(*args, **kwargs)
                stamps["commit returned"] = clock()
                return written

            setattr(store_class, "commit", committed)  # noqa: B010 - a patch, by name: mypy cannot type it otherwise
        elif label == "frame written":
            owner = getattr(importlib.import_module(str(module_name)), str(class_name))

            def after_write(write: Any) -> Any:
                def written(self: Any, *args: Any) -> None:
                    write(self, *args)
                    stamps["frame written"] = clock()
                    if all(point[0] in stamps for point in POINTS):
                        samples.append(dict(stamps))
                    stamps.clear()

                return written

            # The last answer of a questionnaire ends with its ``closed`` and the next view,
            # in one write of two frames (write_frames): that write ends its path.
            owner.write_frame = after_write(owner.write_frame)
            owner.write_frames = after_write(owner.write_frames)
        else:
            owner = getattr(importlib.import_module(str(module_name)), str(class_name))
            setattr(owner, name, before(label, getattr(owner, name)))

    def dump(*_: Any) -> None:
        dump_to.write_text(json.dumps(samples))

    signal.signal(signal.SIGUSR1, dump)


def _store_class() -> type[Any]:
    """The store class the broker will use: Redis when it is given a Redis URL."""
    from broker.store.memory import MemoryStore
    from broker.store.redis import RedisStore

    return RedisStore if os.environ.get("QBROKER_REDIS_URL") else MemoryStore


def serve(port: int, dump_to: Path) -> None:
    install_probes(dump_to)
    from qbroker.cli import main

    sys.argv = ["qbroker", "serve", "--host", "127.0.0.1", "--port", str(port)]
    main()


def report(samples: list[dict[str, int]]) -> None:
    """Each stage's p50 and p99, and its median over the slowest 1% of whole paths: where
    the tail's time goes, beside where the typical answer's does."""
    labels = [point[0] for point in POINTS]
    first, last = labels[0], labels[-1]
    slowest = sorted(samples, key=lambda s: s[last] - s[first])[-max(1, len(samples) // 100) :]

    def row(name: str, since: str, until: str) -> float:
        typical = _gaps(samples, since, until)
        tail = _at(_gaps(slowest, since, until), 50)
        print(f"  {name:<20} {_at(typical, 50):8.1f} {_at(typical, 99):8.1f} {tail:11.1f}")
        return _at(typical, 50)

    print(f"{len(samples)} answers; time from the previous point, in microseconds")
    print(f"  {'':<20} {'p50':>8} {'p99':>8} {'slowest 1%':>11}")
    total = sum(row(label, previous, label) for previous, label in zip(labels, labels[1:], strict=False))
    row("whole path", first, last)
    print(f"  (the stages' p50s sum to {total:.1f})")


def _gaps(samples: list[dict[str, int]], since: str, until: str) -> list[float]:
    """The time from point ``since`` to point ``until`` of each answer, in us, sorted."""
    return sorted((s[until] - s[since]) / 1000 for s in samples if s[until] >= s[since])


def _at(ordered: list[float], pct: float) -> float:
    value = percentile(ordered, pct)
    return float("nan") if value is None else value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=("memory", "redis"), default="memory")
    parser.add_argument("--count", type=int, default=300, help="questionnaires (3 answers each)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the broker process
    parser.add_argument("--dump", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.dump)
        return 0
    with tempfile.TemporaryDirectory(prefix="qbroker-answer-path-") as tmp, procs.redis_server() as redis_url:
        if args.store == "redis" and redis_url is None:
            print("answer_path: --store redis needs redis-server on PATH", file=sys.stderr)
            return 2
        env = procs.child_env(
            QBROKER_DATA_DIR=tmp,
            QBROKER_LOG_LEVEL="warning",
            QBROKER_RATE_LIMIT="1000000",
            QBROKER_RATE_BURST="1000000",
        )
        if args.store == "redis":
            env["QBROKER_REDIS_URL"] = str(redis_url)
        dump = Path(tmp) / "samples.json"
        probed_port, agent_port = procs.free_port(), procs.free_port()
        processes = [
            subprocess.Popen(
                [procs.PY, __file__, "--serve", str(probed_port), "--dump", str(dump)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
        urls = [f"http://127.0.0.1:{probed_port}"]
        if args.store == "redis":  # the agent's calls go to a second broker, as in the bench
            processes.append(
                subprocess.Popen(
                    [procs.PY, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1", "--port", str(agent_port)],
                    env=env,
                    cwd=procs.REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            urls.insert(0, f"http://127.0.0.1:{agent_port}")
        try:
            for port in (probed_port, agent_port) if args.store == "redis" else (probed_port,):
                if not procs.wait_port(port, 30):
                    print("answer_path: a broker did not start", file=sys.stderr)
                    return 1
            time.sleep(0.5)
            bots = subprocess.run(
                [procs.PY, "-m", "qbroker.cli", "bots", "--url", ",".join(urls), "--sessions", "1"]
                + ["--count", str(args.count), "--think-time", "0", "--questions", "3", "--json"],
                env=env,
                cwd=procs.REPO,
                capture_output=True,
                text=True,
                timeout=600,
            )
            latency = json.loads(bots.stdout)["latency_ms"]["answer_to_next_question"]
            processes[0].send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 10
            while not dump.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            samples = json.loads(dump.read_text())
            inside_redis = _redis_command_times(str(redis_url)) if args.store == "redis" else {}
        finally:
            for process in processes:
                procs.stop(process)
    print(
        f"store: {args.store}; answer -> next question at the bots:"
        f" p50 {latency['p50']:.3f} ms, p99 {latency['p99']:.3f} ms"
    )
    report(samples)
    for command, (calls, usec) in sorted(inside_redis.items(), key=lambda item: -item[1][0] * item[1][1]):
        print(f"  inside Redis: {command:<10} {usec:6.1f} us per call ({calls} calls)")
    return 0


def _redis_command_times(url: str) -> dict[str, tuple[int, float]]:
    """Redis's own time per call of each command the run used (INFO commandstats): how much
    of the commit stage the script spends inside Redis, apart from the round trip."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    times = {name.removeprefix("cmdstat_"): (int(s["calls"]), float(s["usec_per_call"])) for name, s in stats.items()}
    return {name: value for name, value in times.items() if value[0] >= 100}


if __name__ == "__main__":
    sys.exit(main())
