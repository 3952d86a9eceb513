"""A client whose close frame has arrived, but whose connection is not lost yet, while a
notice fans out to its session: the real websocket protocol class, in process.

Between the client's close frame and ``connection_lost`` websockets refuses to send
(``InvalidState``). A delivery there once raised out of the fan-out: the clients after it
in the session did not get the frame until the next reconciliation tick, and the notice
handler logged an error. The broker and uvicorn run in the test's own event loop so that
the close lands exactly between the write and its notice being fanned out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
import uvicorn
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.frames import Close, Frame, Opcode
from websockets.typing import Subprotocol

from broker.app import create_app
from broker.core import machine
from broker.core.model import StartInput, parse_tool_input
from broker.runtime.config import Config
from broker.service import Broker
from broker.store.memory import MemoryStore
from broker.tokens.claims import mint_token
from broker.ws.handshake import handshake_for
from broker.ws.transport import ClientSocket, protocol_for
from tests.helpers.processes import free_port
from tests.helpers.waiting import eventually

SECRET = "fan-out-test-secret-fan-out-test-secret"
DEADLINE = 5.0


def _questions() -> StartInput:
    parsed = parse_tool_input(
        {
            "action": "start",
            "questions": [{"id": "q1", "prompt": "Which?", "type": "single", "options": [{"id": "a"}, {"id": "b"}]}],
        }
    )
    assert isinstance(parsed, StartInput)
    return parsed


@contextlib.asynccontextmanager
async def broker_in_process() -> AsyncIterator[tuple[Broker, int]]:
    port = free_port()
    # No reconciliation tick within the test: a frame held back would stay held back.
    config = replace(Config(), secret=SECRET, port=port, reconcile_interval=60.0)
    app = create_app(config, MemoryStore())
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_config=None,
            ws=protocol_for(handshake_for(app.state.broker), app.state.broker.metrics),
            lifespan="on",
        )
    )
    serving = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started, "uvicorn to start", timeout=DEADLINE)
        yield app.state.broker, port
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, DEADLINE)


async def joined(port: int, sid: str) -> tuple[ClientConnection, str]:
    ws = await websockets.connect(
        f"ws://127.0.0.1:{port}/v1/sessions/{sid}/ws", subprotocols=[Subprotocol("qbroker.v1.json")]
    )
    await ws.send(json.dumps({"type": "hello", "token": mint_token(SECRET, sid, "client")}))
    welcome = await next_frame(ws)
    assert welcome["type"] == "welcome"
    assert (await next_frame(ws))["type"] == "idle"
    return ws, welcome["clientId"]


async def next_frame(ws: ClientConnection) -> dict[str, Any]:
    frame = json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))
    assert isinstance(frame, dict)
    return frame


def close_frame() -> bytes:
    """The client's close frame (1000), masked as a client sends it."""
    return Frame(Opcode.CLOSE, Close(1000, "bye").serialize()).serialize(mask=True, extensions=[])


async def test_a_client_closing_while_a_notice_fans_out_does_not_keep_the_frame_from_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with broker_in_process() as (broker, port):
        sid = f"s-{uuid.uuid4().hex[:8]}"
        closing, closing_id = await joined(port, sid)  # first in the session's fan-out
        others = [(await joined(port, sid))[0] for _ in range(2)]
        socket = broker.hubs[sid].clients[closing_id].socket  # type: ignore[attr-defined]
        assert isinstance(socket, ClientSocket)

        # A write whose notice reaches this process on the next loop turn (as a Redis
        # notice would)...
        state = machine.start(str(uuid.uuid4()), sid, _questions().questions, time.time())
        await broker.store.create(state)
        # ...and, before that turn, the first client's close frame, read off its socket.
        socket.data_received(close_frame())
        assert socket.conn.state.name == "CLOSING"

        for ws in others:
            frame = await next_frame(ws)
            assert (frame["type"], frame["questionnaireId"]) == ("question", state.id)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
        for ws in [closing, *others]:
            await ws.close()
