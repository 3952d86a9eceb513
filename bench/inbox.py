"""The inbox at scale: one run, floors and qbroker side by side (docs/benchmarks.md, "The inbox").

    python bench/inbox.py [--quick] [--record docs/benchmarks.md [--note TEXT]]

Three brokers over one redis-server, started here. It opens 10,000 questionnaires across
5,000 sessions (250 tenants, ``t000:*`` .. ``t249:*``, of 20 sessions with 2 questionnaires
each, started by agents with ``wait=0`` so that they stay open), connects 1,000 inbox
websockets (4 per tenant, each with a client token for its tenant's pattern, spread over the
brokers: 990 held by a child process, 10 by this one), and then measures:

- ``GET /v1/inbox`` with a tenant's pattern (20 sessions, 40 questionnaires), one request
  at a time on a kept-alive connection, a random tenant and broker each time: p50 and p99,
  beside two floors measured in the same run: ``GET /healthz`` on the same brokers (the
  HTTP round trip with no work), and a bare redis-py GET round trip;
- an answer's propagation: in 5 live sessions (one in each of 5 tenants), a person on one
  broker answers a 20-question questionnaire back to back; the session's own clients on the
  two other brokers and two of the tenant's inbox sockets, also on those two brokers, time
  the arrival of the next ``question`` and of the ``inbox_item`` that says so, from the
  moment the answer left. The target: the inbox sockets' p50 at most 1.5x the own clients'.
  Beside them, the websocket echo floor.

Arrival times are taken when the frame's bytes reach the client's socket (its
``data_received``), not when a task gets round to it, so that four receivers in one process
do not time each other's scheduling. Every child process is ours, talks to 127.0.0.1 only,
and is stopped at the end. ``--quick`` makes everything ten times smaller (a smoke test).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The bench's own modules, beside this file (the script's folder is first on sys.path).
import procs
from floor_runs import redis_floor, ws_echo_floor
from floors import summarize
from inbox_page import record, render

sys.path.insert(0, str(procs.REPO))

from broker.tokens.claims import mint_token  # noqa: E402
from tests.helpers.samples import single  # noqa: E402

TENANTS, SESSIONS, PER_SESSION, SOCKETS_PER_TENANT = 250, 20, 2, 4
LIVE_TENANTS, QUESTIONS = 5, 20
GET_TARGET_P50, GET_TARGET_P99, RATIO_TARGET = 5.0, 20.0, 1.5


def tenant(i: int) -> str:
    return f"t{i:03d}"


def say(message: str) -> None:
    print(f"[inbox bench] {message}", file=sys.stderr, flush=True)


def client_token(scope: str) -> str:
    return mint_token(procs.SECRET, scope, "client", 3600)


# --- a websocket client that times arrivals -------------------------------------------


def _timed_connection_class() -> type:
    from websockets.asyncio.client import ClientConnection

    class TimedConnection(ClientConnection):
        """Remembers when bytes last arrived: a frame's arrival, before any task runs."""

        arrived = 0.0

        def data_received(self, data: bytes) -> None:
            self.arrived = time.perf_counter()
            super().data_received(data)

    return TimedConnection


@dataclass
class Receiver:
    """A socket that waits for one frame at a time; ``when`` returns its arrival time."""

    ws: Any
    frames: asyncio.Queue[tuple[float, dict[str, Any]]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    def start(self) -> Receiver:
        self.task = asyncio.ensure_future(self._read())
        return self

    async def _read(self) -> None:
        async for message in self.ws:
            self.frames.put_nowait((self.ws.arrived, json.loads(message)))

    async def when(self, match: Any, timeout: float = 10.0) -> float:
        deadline = time.monotonic() + timeout
        while True:
            arrived, frame = await asyncio.wait_for(self.frames.get(), max(0.01, deadline - time.monotonic()))
            if match(frame):
                return arrived

    async def close(self) -> None:
        await self.ws.close()
        if self.task is not None:
            self.task.cancel()


async def open_socket(ws_base: str, path: str, token: str) -> Receiver:
    from websockets.asyncio.client import connect

    ws = await connect(
        ws_base + path,
        subprotocols=["qbroker.v1.json"],  # type: ignore[list-item]
        compression=None,
        ping_interval=None,
        max_size=None,
        create_connection=_timed_connection_class(),
    )
    await ws.send(json.dumps({"type": "hello", "token": token, "client": {"kind": "bot", "name": "bench"}}))
    return Receiver(ws).start()


# --- the held inbox sockets (a child process) ---------------------------------------------


async def hold(ws_urls: list[str], scopes: list[str]) -> None:
    """Connect an inbox socket per scope (round robin over the brokers), say how many got
    their list, and hold them until stdin closes; then say how many frames came."""
    from websockets.asyncio.client import connect

    sockets: list[Any] = []
    counts = [0]

    async def one(i: int, scope: str) -> None:
        ws = await connect(
            ws_urls[i % len(ws_urls)] + "/v1/inbox/ws", compression=None, ping_interval=None, max_size=None
        )
        await ws.send(json.dumps({"type": "hello", "token": client_token(scope)}))
        first = json.loads(await ws.recv())
        assert first["type"] == "inbox", first
        sockets.append(ws)

        async def drain() -> None:
            async for _ in ws:
                counts[0] += 1

        asyncio.ensure_future(drain())

    for start in range(0, len(scopes), 50):  # (50 handshakes at a time)
        await asyncio.gather(*(one(i, s) for i, s in enumerate(scopes[start : start + 50], start)))
    print(json.dumps({"connected": len(sockets)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(json.dumps({"frames": counts[0]}), flush=True)


# --- the run ------------------------------------------------------------------------------


async def seed(urls: list[str], tenants: int, sessions: int, per_session: int) -> int:
    """Open ``per_session`` questionnaires in each session, through every broker in turn."""
    import httpx

    agent = mint_token(procs.SECRET, "*", "agent", 3600)
    body = {"action": "start", "questions": [single("target"), single("when")]}
    jobs = [f"{tenant(t)}:s{s:02d}" for t in range(tenants) for s in range(sessions) for _ in range(per_session)]
    opened = 0
    limits = httpx.Limits(max_connections=48, max_keepalive_connections=48)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers={"Authorization": f"Bearer {agent}"}) as http:
        for start in range(0, len(jobs), 48):
            replies = await asyncio.gather(
                *(
                    http.post(f"{urls[(start + i) % len(urls)]}/v1/sessions/{sid}/questionnaire?wait=0", json=body)
                    for i, sid in enumerate(jobs[start : start + 48])
                )
            )
            opened += sum(1 for r in replies if r.status_code == 202)
    return opened


async def get_latencies(ports: list[int], tenants: int, count: int, path_for: Any, warmup: int = 50) -> list[float]:
    """``count`` sequential GETs (after ``warmup`` more), each on a kept-alive connection to
    a random broker: seconds from the request's first byte to the response's last."""
    streams = [await asyncio.open_connection("127.0.0.1", port) for port in ports]
    rng = random.Random(7)
    samples: list[float] = []
    for n in range(count + warmup):
        reader, writer = streams[rng.randrange(len(streams))]
        path, token = path_for(rng.randrange(tenants))
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        began = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")).split(b":")[1]
        )
        body = await reader.readexactly(length)
        took = time.perf_counter() - began
        assert head.startswith(b"HTTP/1.1 200"), head + body[:300]
        if n >= warmup:
            samples.append(took)
    for _, writer in streams:
        writer.close()
    return samples


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    raise AssertionError(f"no Content-Length in {head!r}")


def _next_question(index: int) -> Any:
    return lambda f: f["type"] == "question" and f["index"] == index


def _next_item(qid: str, index: int) -> Any:
    return lambda f: f["type"] == "inbox_item" and f["item"]["questionnaireId"] == qid and f["item"]["index"] == index


def _removed(qid: str) -> Any:
    return lambda f: f["type"] == "inbox_removed" and f["questionnaireId"] == qid


async def propagation(brokers: list[procs.Broker], live: int, answers: int) -> dict[str, list[float]]:
    """Answers in ``live`` sessions (one per tenant ``t000``..): seconds from an answer
    leaving to the next question at the session's clients on the two other brokers, and to
    the inbox_item at the tenant's inbox sockets on those brokers."""
    import httpx

    own: list[float] = []
    inbox: list[float] = []
    per_session = max(1, answers // live)
    async with httpx.AsyncClient(timeout=60) as http:
        for k in range(live):
            sid = f"{tenant(k)}:live"
            here, others = brokers[k % 3], [b for i, b in enumerate(brokers) if i != k % 3]
            person = await open_socket(here.ws_url, f"/v1/sessions/{sid}/ws", client_token(sid))
            clients = [await open_socket(b.ws_url, f"/v1/sessions/{sid}/ws", client_token(sid)) for b in others]
            watchers = [await open_socket(b.ws_url, "/v1/inbox/ws", client_token(f"{tenant(k)}:*")) for b in others]
            for receiver in (person, *clients):
                await receiver.when(lambda f: f["type"] == "idle")
            for watcher in watchers:
                await watcher.when(lambda f: f["type"] == "inbox")
            agent = {"Authorization": f"Bearer {mint_token(procs.SECRET, sid, 'agent', 3600)}"}
            done = 0
            while done < per_session:
                body = {"action": "start", "questions": [single(f"q{i}") for i in range(QUESTIONS)]}
                reply = await http.post(f"{here.url}/v1/sessions/{sid}/questionnaire?wait=0", json=body, headers=agent)
                assert reply.status_code == 202, reply.text
                qid = reply.json()["questionnaireId"]
                question: dict[str, Any] = {}
                while not question:
                    _, frame = await person.frames.get()
                    question = frame if frame["type"] == "question" else {}
                for receiver in clients:
                    await receiver.when(_next_question(0))
                for index in range(QUESTIONS - 1):  # (the last answer ends it: not timed)
                    answer = {
                        "type": "answer",
                        "questionnaireId": qid,
                        "step": question["step"],
                        "questionId": question["question"]["id"],
                        "selectedOptionIds": ["staging"],
                    }
                    sent = time.perf_counter()
                    await person.ws.send(json.dumps(answer))
                    nxt = index + 1
                    for receiver in clients:
                        own.append(await receiver.when(_next_question(nxt)) - sent)
                    for watcher in watchers:
                        inbox.append(await watcher.when(_next_item(qid, nxt)) - sent)
                    question = {}
                    while not question:
                        _, frame = await person.frames.get()
                        question = frame if frame["type"] == "question" and frame["index"] == nxt else {}
                    done += 1
                    if done >= per_session:
                        break
                # End it (its last answer is not timed): the next one starts clean.
                await http.delete(f"{here.url}/v1/sessions/{sid}/questionnaires/{qid}", headers=agent)
                for watcher in watchers:
                    await watcher.when(_removed(qid))
            for receiver in (person, *clients, *watchers):
                await receiver.close()
    return {"own": own, "inbox": inbox}


def main() -> int:
    args = _parser().parse_args()
    if args.hold:
        asyncio.run(hold(args.hold.split(","), sys.stdin.readline().split()))
        return 0
    scale = 10 if args.quick else 1
    tenants = TENANTS // scale
    procs.raise_nofile(4000)
    machine = procs.describe_machine()
    started, busy_before = time.time(), procs.machine_busy()
    load_before = os.getloadavg()
    results: dict[str, Any] = {
        "machine": machine,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": [round(x, 2) for x in load_before],
    }
    with procs.redis_server() as redis_url:
        if redis_url is None:
            say("redis-server is not installed")
            return 1
        say("floors: websocket echo, redis round trip")
        results["floors"] = {"ws_echo": ws_echo_floor(2000 // scale), "redis": redis_floor(redis_url, 2000 // scale)}
        with procs.brokers(3, redis_url) as brokers:
            say(f"opening {tenants * SESSIONS * PER_SESSION} questionnaires in {tenants * SESSIONS} sessions")
            began = time.monotonic()
            opened = asyncio.run(seed([b.url for b in brokers], tenants, SESSIONS, PER_SESSION))
            results["seeded"] = {
                "questionnaires": opened,
                "sessions": tenants * SESSIONS,
                "s": round(time.monotonic() - began, 1),
            }
            held = [f"{tenant(t)}:*" for t in range(tenants) for i in range(SOCKETS_PER_TENANT)]
            held = held[2 * LIVE_TENANTS :]  # (the measured tenants' two more are this process's)
            say(f"connecting {len(held)} inbox sockets (+{2 * LIVE_TENANTS} measuring)")
            holder = subprocess.Popen(
                [procs.PY, __file__, "--hold", ",".join(b.ws_url for b in brokers)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=procs.child_env(),
            )
            try:
                assert holder.stdin is not None and holder.stdout is not None
                holder.stdin.write(" ".join(held) + "\n")
                holder.stdin.flush()
                results["held_sockets"] = json.loads(holder.stdout.readline())["connected"]
                say("GET /v1/inbox (a tenant's pattern) and GET /healthz, one at a time")
                ports = [b.port for b in brokers]
                tokens = [client_token(f"{tenant(t)}:*") for t in range(tenants)]
                count = 1000 // scale
                health = asyncio.run(get_latencies(ports, tenants, count, lambda t: ("/healthz", tokens[t])))
                inbox_gets = asyncio.run(get_latencies(ports, tenants, count, lambda t: ("/v1/inbox", tokens[t])))
                operator = client_token("*")
                every = asyncio.run(get_latencies(ports, 1, 5, lambda _: ("/v1/inbox?limit=100", operator), warmup=1))
                results["get"] = {
                    "inbox": summarize(inbox_gets),
                    "healthz": summarize(health),
                    "every_session": summarize(every),
                }
                say("answers: own clients and inbox sockets on the other brokers")
                timed = asyncio.run(propagation(brokers, LIVE_TENANTS, 300 // scale))
                results["propagation"] = {key: summarize(values) for key, values in timed.items()}
                holder.stdin.close()
                results["held_frames"] = json.loads(holder.stdout.readline())["frames"]
            finally:
                procs.stop(holder)
    steal = procs.steal_share(busy_before, procs.machine_busy())
    busy_after = procs.machine_busy()
    results["busy_share"] = round((busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1]), 2)
    results["steal"] = None if steal is None else round(steal, 3)
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    results["duration_s"] = round(time.time() - started)
    results["quick"] = args.quick
    rows = table(results)
    print(render(rows))
    print(json.dumps(results, indent=1))
    if args.record:
        record(args.record, results, rows, args.note)
        say(f"recorded in {args.record}")
    return 0 if all(row[-1] == "met" for row in rows if row[-1]) else 1


def mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def table(results: dict[str, Any]) -> list[list[str]]:
    """Figure, value, beside (floor), target, met/MISSED."""
    get, prop, floors = results["get"], results["propagation"], results["floors"]
    inbox, health = get["inbox"], get["healthz"]
    ratio50 = prop["inbox"]["p50"] / prop["own"]["p50"]
    ratio99 = prop["inbox"]["p99"] / prop["own"]["p99"]
    redis = floors["redis"]
    return [
        [
            "GET /v1/inbox, a tenant's pattern (20 sessions, 40 items), p50",
            f"{inbox['p50']:.2f} ms",
            f"GET /healthz {health['p50']:.2f} ms; redis GET {redis['p50']:.3f} ms",
            f"<= {GET_TARGET_P50:g} ms",
            mark(inbox["p50"] <= GET_TARGET_P50),
        ],
        [
            "GET /v1/inbox, p99",
            f"{inbox['p99']:.2f} ms",
            f"GET /healthz {health['p99']:.2f} ms; redis GET {redis['p99']:.3f} ms",
            f"<= {GET_TARGET_P99:g} ms",
            mark(inbox["p99"] <= GET_TARGET_P99),
        ],
        [
            f"GET /v1/inbox?limit=100 with * ({results['seeded']['sessions']} sessions), p50 of 5",
            f"{get['every_session']['p50']:.0f} ms",
            "(an operator's token: a page reads its 101 sessions through the index)",
            "-",
            "",
        ],
        [
            "answer -> inbox_item at the tenant's inbox sockets on the other brokers, p50",
            f"{prop['inbox']['p50']:.3f} ms ({ratio50:.2f}x)",
            f"the session's own clients there {prop['own']['p50']:.3f} ms; echo {floors['ws_echo']['p50']:.3f} ms",
            f"<= {RATIO_TARGET:g}x own clients",
            mark(ratio50 <= RATIO_TARGET),
        ],
        [
            "answer -> inbox_item, p99",
            f"{prop['inbox']['p99']:.3f} ms ({ratio99:.2f}x)",
            f"own clients {prop['own']['p99']:.3f} ms; echo {floors['ws_echo']['p99']:.3f} ms",
            "-",
            "",
        ],
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="everything ten times smaller (a smoke test)")
    parser.add_argument("--record", type=Path, default=None, help="write the run into this page's inbox section")
    parser.add_argument("--note", default="", help="a remark recorded with the run")
    parser.add_argument("--hold", default=None, help=argparse.SUPPRESS)  # (the child that holds sockets)
    return parser


if __name__ == "__main__":
    sys.exit(main())
