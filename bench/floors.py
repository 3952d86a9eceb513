"""The floors qbroker is measured against, each side in its own process (run by bench/run.py).

    python bench/floors.py ws-server --port P          a bare `websockets` echo server
        [--redis-write URL]                            ... that first writes each message to Redis
    python bench/floors.py ws-client --port P -n N     N sequential echo round trips -> JSON
        [--pace 5-10]                                  ... with a random 5-10 ms pause before each
    python bench/floors.py redis-client --url U -n N   N sequential redis-py GET round trips -> JSON
    python bench/floors.py wake -n N                   N one-byte round trips between two processes -> JSON
    python bench/floors.py python-work -n N            N runs of a fixed pure-Python loop -> JSON

``wake`` is what any round trip between two processes costs here before any work: one
process writes a byte to the other over a socketpair and waits for it to come back (each
side sleeps in the kernel until the other writes). On a VM, waking a process on a core that
has gone idle can cost far more than the work; the echo floor pays two such wake-ups per
round trip, qbroker on Redis four (client -> broker -> Redis -> broker -> client).

``python-work`` is how fast this machine runs Python at the moment: a fixed loop of the kind
of work the broker does between system calls (small dicts, string formatting, function
calls), no I/O. The broker's CPU figures scale with it; the floors above, mostly the
kernel's work, do not. On a shared VM it moves within seconds.

Both sides run on uvloop (as qbroker's bots do) with compression off (as the bots connect).
The payload is the size of a typical ``question`` frame, so framing costs are comparable.

``--redis-write`` makes the echo server store every message in Redis (one script call through
the broker's own pipelined connection, ``broker.speedups.redis_wire``) before echoing it: the
least any broker that commits an answer before showing the next question can do on this
machine, with no parsing, no state and no fan-out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import socket
import sys
import time
from pathlib import Path
from typing import Any

PAYLOAD = json.dumps(
    {
        "type": "question",
        "questionnaireId": "0f9a3c1e-1111-2222-3333-444455556666",
        "revision": 0,
        "step": 1,
        "index": 1,
        "total": 3,
        "question": {
            "id": "q2",
            "label": "Question 2",
            "prompt": "What about q2?",
            "type": "single",
            "options": [{"id": f"o{i}", "label": f"Option {i}"} for i in range(1, 5)],
            "allowOther": True,
        },
        "draft": None,
        "progress": [{"questionId": f"q{i}", "label": f"Question {i}", "state": "pending"} for i in range(1, 4)],
        "clarifications": [],
    }
)
WARMUP = 200


def _run(coro: Any) -> Any:
    try:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)


def summarize(samples: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples)

    def pct(p: float) -> float:  # nearest rank, in milliseconds
        rank = max(1, math.ceil(p / 100.0 * len(ordered)))
        return ordered[min(rank, len(ordered)) - 1] * 1000.0

    return {"n": len(ordered), "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": ordered[-1] * 1000.0}


# A write like the broker's commit, minus its checks: store the message, count, publish.
WRITE_SCRIPT = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], ARGV[1])
return 1
"""


async def ws_server(port: int, redis_url: str | None = None) -> None:
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    write: Any = None
    if redis_url:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from broker.speedups.redis_wire import RedisWire

        wire = RedisWire.from_url(redis_url, connect_timeout=2.0, timeout=5.0)
        assert wire is not None
        sha = (await wire.execute("SCRIPT", "LOAD", WRITE_SCRIPT)).decode()

        async def write(message: Any) -> None:
            await wire.execute("EVALSHA", sha, 3, "bench:msg", "bench:seq", "bench:events", message)

    async def echo(ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):  # idle clients just drop at the end
            async for message in ws:
                if write is not None:
                    await write(message)
                await ws.send(message)

    async with serve(echo, "127.0.0.1", port, compression=None, ping_interval=20, max_size=1 << 20):
        print("READY", flush=True)
        await asyncio.sleep(3600)  # the parent terminates this process


async def ws_client(port: int, n: int, pace: tuple[float, float] | None = None) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    samples: list[float] = []
    rng = random.Random(1)
    async with connect(f"ws://127.0.0.1:{port}/", compression=None, ping_interval=None) as ws:
        for i in range(WARMUP + n):
            if pace is not None:
                await asyncio.sleep(rng.uniform(*pace) / 1000.0)
            t0 = time.perf_counter()
            await ws.send(PAYLOAD)
            await ws.recv()
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
    return summarize(samples)


def wake_round_trips(n: int) -> dict[str, Any]:
    """Blocking one-byte round trips with a forked child: no event loop, no protocol."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child echoes until the parent closes its end
        ours.close()
        while data := theirs.recv(1):
            theirs.sendall(data)
        os._exit(0)
    theirs.close()
    samples: list[float] = []
    try:
        for i in range(WARMUP + n):
            t0 = time.perf_counter()
            ours.sendall(b"x")
            ours.recv(1)
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
    finally:
        ours.close()
        os.waitpid(child, 0)
    return summarize(samples)


def python_work(n: int) -> dict[str, Any]:
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        _fixed_loop()
        samples.append(time.perf_counter() - t0)
    return summarize(samples)


def _fixed_loop() -> int:
    total = 0
    for i in range(20_000):
        item: dict[str, Any] = {"id": f"o{i}", "label": "Option", "n": i}
        total += len(item["id"]) + _step(item)
    return total


def _step(item: dict[str, Any]) -> int:
    return int(item["n"]) & 7


async def redis_client(url: str, n: int) -> dict[str, Any]:
    import redis.asyncio as redis

    client = redis.Redis.from_url(url)
    try:
        await client.set("bench:floor", PAYLOAD)
        samples: list[float] = []
        for i in range(WARMUP + n):
            t0 = time.perf_counter()
            await client.get("bench:floor")
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
    finally:
        await client.aclose()
    return summarize(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("ws-server", "ws-client", "redis-client", "wake", "python-work"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--url", default="")
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--pace", default=None, help="ws-client: pause LOW-HIGH ms before each round trip")
    parser.add_argument("--redis-write", default=None, help="ws-server: write each message to this Redis first")
    args = parser.parse_args()
    if args.redis_write and not args.redis_write.startswith("redis://127.0.0.1:"):
        print("floors: only a local redis (redis://127.0.0.1:PORT)", file=sys.stderr)
        return 2
    if args.mode == "ws-server":
        _run(ws_server(args.port, args.redis_write))
        return 0
    if args.mode == "wake":
        result = wake_round_trips(args.n)
    elif args.mode == "python-work":
        result = python_work(args.n)
    elif args.mode == "ws-client":
        pace = None
        if args.pace:
            low, _, high = args.pace.partition("-")
            pace = (float(low), float(high or low))
        result = _run(ws_client(args.port, args.n, pace))
    else:
        if not args.url.startswith("redis://127.0.0.1:"):
            print("floors: only a local redis (redis://127.0.0.1:PORT)", file=sys.stderr)
            return 2
        result = _run(redis_client(args.url, args.n))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
