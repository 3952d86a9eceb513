"""What retention costs on Redis: memory per retained questionnaire, and a run that shows
memory flat under a steady load once the retention is reached (not a test).

    python bench/retention.py [--counts 10000,100000] [--per-session 10] [--json FILE]
    python bench/retention.py --steady 600 --retention 60 [--brokers 3] [--sessions 100]

The first form writes questionnaires straight through the Redis store (no broker: the
figure is Redis's, not the writer's) into a fresh redis-server, in the bench's shape (3
single-choice questions of 4 options, each write with its events, as the brokers record
them), and reads ``used_memory`` before and after each count: per retained questionnaire,

- ended: its state, its events and its history entry (what a completed questionnaire
  leaves for the retention);
- open: the same plus its inbox entry and its place in the queue (one asked, not answered).

The second form is the flat-memory run: ``--brokers`` brokers on one redis-server with
``QBROKER_RETENTION=--retention``, ``qbroker bots`` completing questionnaires for
``--steady`` seconds without pause, and ``used_memory`` sampled every 10 s, with what it
holds: the data, the clients' buffers (notices a broker has not read yet) and the keys; the
data must stop growing once the retention is reached (a questionnaire written then is the
oldest kept). It prints the samples and the data's growth over the second half of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import redis

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import load_runs  # noqa: E402 - bench/load_runs.py: qbroker bots runs
import procs  # noqa: E402 - bench/procs.py: the bench's process helpers

from broker.core import machine  # noqa: E402
from broker.core.actors import Actor, ClientInfo  # noqa: E402
from broker.core.events import events_of, started  # noqa: E402
from broker.core.machine import Questionnaire  # noqa: E402
from broker.core.model import Question, StartInput, parse_tool_input  # noqa: E402
from broker.store.redis import RedisStore  # noqa: E402

AGENT = Actor("bench-agent", "agent")
CLIENT = Actor("bench-client", "client", ClientInfo("bots", "qbroker bots"))
WEEK = 7 * 24 * 3600.0
CONCURRENCY = 64  # writes in flight (one connection: the store pipelines them)
SAMPLE_EVERY = 10.0  # seconds between used_memory samples of the steady run


def bench_questions() -> tuple[Question, ...]:
    """The bench's shape: 3 single-choice questions of 4 options."""
    questions = [
        {
            "id": f"q{i}",
            "prompt": f"Question {i} of the bench: which one?",
            "type": "single",
            "options": [{"id": f"option-{j}"} for j in range(4)],
        }
        for i in range(3)
    ]
    parsed = parse_tool_input({"action": "start", "questions": questions})
    assert isinstance(parsed, StartInput)
    return parsed.questions


async def retain(store: RedisStore, questions: tuple[Question, ...], sid: str, answered: bool) -> None:
    """One questionnaire, created with its events and (``answered``) taken to completion."""
    now = time.time()
    state: Questionnaire = machine.start(f"q-{uuid.uuid4().hex[:12]}", sid, questions, now, asked_by=AGENT.sub)
    await store.create(state, None, (started(state, AGENT),))
    for index in range(len(questions) if answered else 0):
        command = machine.AnswerQuestion(state.id, state.step, f"q{index}", ("option-1",))
        new = machine.apply(state, command, now + index + 1, CLIENT)
        assert await store.compare_and_set(new, state.version, events_of(state, new, CLIENT))
        state = new


async def fill(url: str, count: int, per_session: int, answered: bool, offset: int) -> None:
    store = RedisStore(url, WEEK)
    questions = bench_questions()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with gate:
            await retain(
                store, questions, f"retained-{'ended' if answered else 'open'}-{(offset + i) // per_session}", answered
            )

    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await store.close()


def used_memory(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def memory_sample(url: str) -> dict[str, int]:
    """used_memory, and what it holds: the data (used_memory_dataset), the clients' buffers
    (mem_clients_normal: a broker that reads its notices late leaves them there), the keys;
    and the questionnaires' writes so far (INCR: each write script counts one)."""
    client = redis.Redis.from_url(url)
    try:
        memory = client.info("memory")
        keys = int(client.dbsize())
        writes = int(client.info("commandstats").get("cmdstat_incr", {}).get("calls", 0))
    finally:
        client.close()
    return {
        "used": int(memory["used_memory"]),
        "dataset": int(memory["used_memory_dataset"]),
        "clients": int(memory["mem_clients_normal"]),
        "keys": keys,
        "writes": writes,
    }


def per_retained(samples: list[tuple[float, dict[str, int]]], retention: float) -> list[float | None]:
    """The data's bytes per questionnaire written within the last retention (4 writes each:
    the bench's create and three answers), at each sample: flat when memory follows the
    load, whatever the machine let the load be."""
    ratios: list[float | None] = []
    for at, sample in samples:
        before = [s for t, s in samples if t <= at - retention]
        written = (sample["writes"] - before[-1]["writes"]) / 4 if before else 0
        ratios.append(sample["dataset"] / written if written > 0 else None)
    return ratios


def measure(counts: list[int], per_session: int) -> dict[str, Any]:
    """Bytes of used_memory per retained questionnaire, ended and open, at each count."""
    figures: dict[str, Any] = {"per_session": per_session}
    for answered in (True, False):
        kind = "ended" if answered else "open"
        with procs.redis_server() as url:
            if url is None:
                raise SystemExit("retention: redis-server is not on PATH")
            base, done = used_memory(url), 0
            for count in counts:
                print(f"[retention] {kind}: {count} questionnaires", file=sys.stderr, flush=True)
                asyncio.run(fill(url, count - done, per_session, answered, done))
                done = count
                figures.setdefault(kind, {})[str(count)] = (used_memory(url) - base) / count
    return figures


def steady(seconds: float, retention: float, broker_count: int, sessions: int) -> dict[str, Any]:
    """The flat-memory run: used_memory every SAMPLE_EVERY seconds under a steady load."""
    samples: list[tuple[float, dict[str, int]]] = []
    with procs.redis_server() as url:
        if url is None:
            raise SystemExit("retention: redis-server is not on PATH")
        with procs.brokers(broker_count, url, settings={"QBROKER_RETENTION": str(retention)}) as started_brokers:
            urls = [b.url for b in started_brokers]
            pids = [b.pid for b in started_brokers]
            args = ["--sessions", str(sessions), "--duration", str(seconds)]
            args += ["--think-time", "0", "--questions", "3", "--processes", "2"]
            began = time.monotonic()
            result: list[load_runs.LoadResult] = []
            bots = threading.Thread(target=lambda: result.append(load_runs.run_bots(urls, pids, args, seconds + 300)))
            bots.start()
            while bots.is_alive():
                samples.append((time.monotonic() - began, memory_sample(url)))
                bots.join(SAMPLE_EVERY)
            report = result[0].report if result else {}
    # The data's growth over the second half (the clients' buffers come and go with how far
    # behind the brokers read their notices on a saturated machine: not what is retained).
    half = [sample["dataset"] for at, sample in samples if at >= max(retention, seconds / 2)]
    ratios = per_retained(samples, retention)
    kept = [ratio for (at, _), ratio in zip(samples, ratios, strict=True) if ratio is not None and at >= seconds / 2]
    return {
        "per_retained": ratios,
        "per_retained_second_half": (min(kept), max(kept)) if kept else None,
        "retention_s": retention,
        "seconds": seconds,
        "questionnaires": report.get("questionnaires", {}).get("verified"),
        "errors": report.get("error_total"),
        "samples": samples,
        "growth_after_retention_bytes": (half[-1] - half[0]) if len(half) > 1 else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="10000,100000", help="retained questionnaires to measure at")
    parser.add_argument("--per-session", type=int, default=10, help="questionnaires per session (default 10)")
    parser.add_argument("--steady", type=float, default=None, help="seconds of the flat-memory run instead")
    parser.add_argument("--retention", type=float, default=60.0, help="QBROKER_RETENTION of the flat-memory run")
    parser.add_argument("--brokers", type=int, default=3, help="brokers of the flat-memory run (default 3)")
    parser.add_argument("--sessions", type=int, default=100, help="bots' sessions of the flat-memory run")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.steady is not None:
        figures = steady(args.steady, args.retention, args.brokers, args.sessions)
        print("       at   used_memory   dataset   clients' buffers     keys   data per questionnaire of the retention")
        for (at, sample), ratio in zip(figures["samples"], figures["per_retained"], strict=True):
            print(
                f"  {at:>6.0f} s  {sample['used'] / 1e6:>8.2f} MB  {sample['dataset'] / 1e6:>7.2f} MB"
                f"  {sample['clients'] / 1e6:>10.2f} MB  {sample['keys']:>9,}"
                + ("" if ratio is None else f"  {ratio:>8,.0f} bytes")
            )
        growth = figures["growth_after_retention_bytes"]
        print(f"questionnaires {figures['questionnaires']}, errors {figures['errors']}")
        print("the data's growth over the second half: " + ("-" if growth is None else f"{growth / 1e6:+.2f} MB"))
    else:
        counts = sorted(int(c) for c in args.counts.split(","))
        figures = measure(counts, args.per_session)
        print(f"Redis memory per retained questionnaire ({args.per_session} per session; used_memory delta):")
        for kind in ("ended", "open"):
            for count, per in figures[kind].items():
                print(f"  {kind:<6} {int(count):>8,} retained: {per:>7,.0f} bytes each")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
