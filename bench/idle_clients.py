"""Hold many idle websocket clients open (run by bench/run.py to measure memory per client).

    python bench/idle_clients.py --url ws://127.0.0.1:P --count N --mode qbroker --prefix idle-0
    python bench/idle_clients.py --url ws://127.0.0.1:P --count N --mode raw

``qbroker`` mode: one client per session, each says hello (token minted with
$QBROKER_SECRET) and waits for its welcome and ``idle`` frames. ``raw`` mode only opens the
connection (for the bare websockets floor). Prints ``READY <ok> <failed>`` once every client
is connected, then holds the connections until stdin closes (or --hold seconds pass).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from typing import Any

from broker.core.frames import JSON_SUBPROTOCOL

CONCURRENCY = 64


async def hold(url: str, count: int, mode: str, prefix: str, hold_for: float) -> None:
    from websockets.asyncio.client import connect
    from websockets.typing import Subprotocol

    from broker.tokens.claims import mint_token

    secret = os.environ.get("QBROKER_SECRET", "")
    slots = asyncio.Semaphore(CONCURRENCY)
    connections: list[Any] = []
    failed = 0

    async def one(i: int) -> None:
        nonlocal failed
        sid = f"{prefix}-{i}"
        try:
            async with slots:
                if mode == "raw":
                    ws = await connect(f"{url}/", compression=None, ping_interval=None, open_timeout=30)
                else:
                    ws = await connect(
                        f"{url}/v1/sessions/{sid}/ws",
                        subprotocols=[Subprotocol(JSON_SUBPROTOCOL)],
                        compression=None,
                        ping_interval=None,
                        open_timeout=30,
                    )
                    token = mint_token(secret, sid, "client")
                    await ws.send(json.dumps({"type": "hello", "token": token, "client": {"kind": "bot"}}))
                    async with asyncio.timeout(30):
                        welcome = json.loads(await ws.recv())
                        view = json.loads(await ws.recv())
                    if welcome.get("type") != "welcome" or view.get("type") != "idle":
                        raise RuntimeError(f"unexpected frames {welcome!r} {view!r}")
            connections.append(ws)
        except Exception as exc:  # counted and reported
            failed += 1
            if failed <= 3:
                print(f"idle_clients: {exc!r}", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(i) for i in range(count)))
    print(f"READY {len(connections)} {failed}", flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stdin_closed, hold_for)
    for ws in connections:
        ws.transport.abort()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="ws://127.0.0.1:PORT")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--mode", choices=("qbroker", "raw"), default="qbroker")
    parser.add_argument("--prefix", default="idle")
    parser.add_argument("--hold", type=float, default=600.0)
    args = parser.parse_args()
    if not args.url.startswith(("ws://127.0.0.1:", "ws://localhost:")):
        print("idle_clients: only local brokers", file=sys.stderr)
        return 2
    try:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(hold(args.url, args.count, args.mode, args.prefix, args.hold))
    except ImportError:  # pragma: no cover
        asyncio.run(hold(args.url, args.count, args.mode, args.prefix, args.hold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
