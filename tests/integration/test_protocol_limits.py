"""docs/protocol.md limits on the websocket: 64 KiB frames (1009), the per-connection rate
limit (1008), hello in time (4408), and the Origin check on browser handshakes
(same-origin by default, QBROKER_ALLOWED_ORIGINS as an allow-list)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets

from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.processes import token
from tests.helpers.protocol import Agent, Deployment
from tests.helpers.samples import single

# --- frame size ---------------------------------------------------------------------------


async def test_frame_over_64_kib_closes_1009(deployment: Deployment, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.send({"type": "ping", "ref": "x" * (64 * 1024 + 100)})
        assert await p.expect_close() == 1009


async def test_hello_over_64_kib_closes_1009(deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(json.dumps({"type": "hello", "token": "t" * (70 * 1024), "client": {"kind": "bot", "name": "x"}}))
    assert await close_code(ws) == 1009


async def test_frame_just_under_64_kib_is_handled(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single())
        q = await p.wait_for("question")
        await p.answer(q, [], other="z" * 60_000)  # a 60 KB frame: refused for its text, not closed
        assert (await p.wait_for("error"))["code"] == "text_too_long"
        assert await p.ping() == {"type": "pong"}


# --- rate limit (fast deployment: 2 frames/s, bursts of 6) ---------------------------------


async def test_rate_limit_closes_1008(fast_deployment: Deployment, sid: str) -> None:
    async with person(fast_deployment.client_ws_url, sid) as p:
        for _ in range(40):
            try:
                await p.send({"type": "ping"})
            except websockets.ConnectionClosed:
                break
        assert await p.expect_close() == 1008


async def test_frames_within_the_rate_limit_are_served(fast_deployment: Deployment, sid: str) -> None:
    async with person(fast_deployment.client_ws_url, sid) as p:
        for _ in range(4):
            assert await p.ping() == {"type": "pong"}


# --- hello timeout (fast deployment: 1 s) ----------------------------------------------


async def test_no_hello_in_time_closes_4408(fast_deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(fast_deployment.client_ws_url, sid)
    started = time.monotonic()
    assert await close_code(ws, timeout=10) == 4408
    assert 0.8 <= time.monotonic() - started < 6


async def test_hello_within_the_timeout_is_accepted(deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(token(sid, "client")))
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "welcome"
    await ws.close()


# --- Origin ---------------------------------------------------------------------------------


async def _handshake_refused(ws_url: str, sid: str, origin: str) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await raw_socket(ws_url, sid, origin=origin)
    assert refused.value.response.status_code == 403


async def _handshake_accepted(ws_url: str, sid: str, origin: str | None) -> None:
    ws = await raw_socket(ws_url, sid, origin=origin)
    await ws.send(hello(token(sid, "client")))
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "welcome"
    await ws.close()


@pytest.mark.parametrize("origin", ["https://evil.example", "http://localhost:1", "null"])
async def test_foreign_origin_is_refused(deployment: Deployment, sid: str, origin: str) -> None:
    await _handshake_refused(deployment.client_ws_url, sid, origin)


async def test_same_origin_is_accepted(deployment: Deployment, sid: str) -> None:
    await _handshake_accepted(deployment.client_ws_url, sid, deployment.client_url)


async def test_no_origin_is_accepted(deployment: Deployment, sid: str) -> None:
    await _handshake_accepted(deployment.client_ws_url, sid, None)


async def test_allowed_origins_list(fast_deployment: Deployment, sid: str) -> None:
    """fast_deployment runs with QBROKER_ALLOWED_ORIGINS=https://app.example.test/ (a slash
    and upper case in the setting, as an operator may write it). The list adds origins to
    the broker's own: the page it serves keeps working."""
    await _handshake_accepted(fast_deployment.client_ws_url, sid, "https://app.example.test")
    await _handshake_refused(fast_deployment.client_ws_url, sid, "https://evil.example")
    await _handshake_accepted(fast_deployment.client_ws_url, sid, None)
    await _handshake_accepted(fast_deployment.client_ws_url, sid, fast_deployment.client_url)
