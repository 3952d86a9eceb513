"""What one answer costs the broker with the processor's caches empty (not a test).

    python bench/cold_path.py [--count 300] [--evict-mib 64]

On the bench's machine (a VM) a process that waits for the next frame loses its caches to
the processes that run meanwhile, so in the latency runs every answer runs cold: inside the
broker, the same code takes several times as long as in a tight loop. This measures that in
one process, without sockets or other processes, so a change to the broker's answer path
can be judged in a few seconds, with a noise of a few microseconds (the latency runs' is
tens):

- a broker on the memory store, one client connection whose socket records what is written,
  and an agent starting questionnaires of 3 single-choice questions of 4 options;
- each answer is timed from the frame's payload reaching the connection
  (``ClientConnection.received``) to the next question's frame being written;
- before each answer of every other questionnaire the caches are emptied by writing
  ``--evict-mib`` MiB (more than the processor's last-level cache); the others run as the
  broker's previous work left the caches ("warm").

Not included: the websocket framing and the system calls (measured in situ on an Intel Xeon
VM on 2026-12-03: ~6 us, and a few us per system call), and on Redis the store's part
(packing the record, the script's round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.core.model import StartInput, parse_tool_input  # noqa: E402
from broker.runtime.config import Config  # noqa: E402
from broker.service import Broker  # noqa: E402
from broker.store.memory import MemoryStore  # noqa: E402
from broker.tokens.claims import mint_token  # noqa: E402
from broker.ws import session  # noqa: E402

SECRET = "cold-path-secret-cold-path-secret-0123"
SESSION = "cold"


class RecordingSocket:
    """What ClientConnection uses of its socket: the last frame written, and when."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.close_sent = False
        self.last: bytes | str = b""
        self.written_at = 0

    def write_frame(self, data: bytes | str, text: bool) -> None:
        self.written_at = time.perf_counter_ns()
        self.last = data

    def write_frames(self, payloads: list[bytes | str], text: bool) -> None:
        self.written_at = time.perf_counter_ns()
        self.last = payloads[-1]

    def close_with(self, code: int, reason: str = "") -> None:
        raise RuntimeError(f"the broker closed the connection: {code} {reason}")

    def pause_reading_for_backlog(self, paused: bool) -> None:
        pass


def _questions() -> StartInput:
    parsed = parse_tool_input(
        {
            "action": "start",
            "questions": [
                {
                    "id": f"q{i}",
                    "label": f"Question {i}",
                    "prompt": "Which of these should the agent do next, and in which order?",
                    "type": "single",
                    "options": [
                        {"id": f"o{j}", "label": f"Option {j}", "description": "What this option would do."}
                        for j in range(4)
                    ],
                }
                for i in range(3)
            ],
        }
    )
    assert isinstance(parsed, StartInput)
    return parsed


async def measure(count: int, evict_mib: int) -> dict[str, list[int]]:
    config = replace(Config(), secret=SECRET, rate_limit=1e9, rate_burst=1e9)
    broker = Broker(config, MemoryStore())
    await broker.start()
    socket = RecordingSocket()
    client = session.ClientConnection(socket, broker, SESSION, "json")  # type: ignore[arg-type]
    client.received(json.dumps({"type": "hello", "token": mint_token(SECRET, SESSION, "client")}))
    await _turns(20)
    questions = _questions().questions
    caches = bytearray(evict_mib << 20)
    ones = b"\x01" * (len(caches) // 64)
    times: dict[str, list[int]] = {"cold": [], "warm": []}
    ref = 0
    for n in range(2 * count):
        cold = n % 2 == 0
        agent = asyncio.ensure_future(broker.start_questionnaire(SESSION, questions, None, wait=30))
        await _turns(20)
        for _ in questions:
            shown: dict[str, Any] = json.loads(socket.last)
            if shown.get("type") != "question":
                raise RuntimeError(f"expected a question, got {shown!r}")
            ref += 1
            payload = json.dumps(
                {
                    "type": "answer",
                    "questionnaireId": shown["questionnaireId"],
                    "step": shown["step"],
                    "questionId": shown["question"]["id"],
                    "selectedOptionIds": ["o1"],
                    "ref": ref,
                }
            )
            if cold:
                caches[::64] = ones  # one write per cache line
            began = time.perf_counter_ns()
            client.received(payload)  # on the memory store the next frame is written before this returns
            if socket.written_at < began:
                raise RuntimeError("the answer was not handled at once")
            times["cold" if cold else "warm"].append(socket.written_at - began)
            await _turns(5)
        status, _ = await agent
        if status != 200:
            raise RuntimeError(f"the agent's call answered {status}")
    await broker.stop()
    return times


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=300, help="questionnaires of each kind (3 answers each)")
    parser.add_argument("--evict-mib", type=int, default=64, help="MiB written to empty the caches")
    args = parser.parse_args()
    if args.count < 1 or args.evict_mib < 1:
        parser.error("--count and --evict-mib must be positive")
    try:
        import uvloop

        times = uvloop.run(measure(args.count, args.evict_mib))
    except ImportError:  # pragma: no cover
        times = asyncio.run(measure(args.count, args.evict_mib))
    print(f"one answer in the broker (memory store, {args.count * 3} answers each), microseconds:")
    print(f"  {'':6s} {'p25':>7s} {'p50':>7s} {'p75':>7s}")
    for kind in ("cold", "warm"):
        q1, q2, q3 = statistics.quantiles(times[kind], n=4)
        print(f"  {kind:6s} {q1 / 1000:7.1f} {q2 / 1000:7.1f} {q3 / 1000:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
