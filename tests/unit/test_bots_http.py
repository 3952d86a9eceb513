"""The bots' lean HTTP client against a scripted local server: replies it must read, a
connection it keeps for the next call, and failures it reports as transport errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from clients.bots.http import AgentHTTP, ConnectError, ReadError, TimeoutError_

Reply = Callable[[bytes], bytes | None]  # request bytes -> raw reply (None: say nothing)
CLOSE = b"<close without a reply>"


@asynccontextmanager
async def server(reply: Reply) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """A server answering each request with ``reply``; yields (base URL, requests, connections)."""
    requests: list[bytes] = []
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                request = head + await reader.readexactly(length)
                requests.append(request)
                raw = reply(request)
                if raw is None:
                    await asyncio.sleep(3600)  # a server that never answers: the silence under test
                assert raw is not None  # (the test is long over after an hour of silence)
                if raw is CLOSE:
                    break
                writer.write(raw)
                await writer.drain()
                if b"Connection: close" in raw:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", requests, connections
    finally:
        srv.close()


def ok(body: bytes = b'{"ok":true}', extra: str = "") -> Reply:
    return lambda _: f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


async def test_a_json_request_and_its_reply() -> None:
    async with server(ok(b'{"status":"completed"}')) as (url, requests, _):
        client = AgentHTTP(timeout=5)
        status, body = await client.request(
            "POST", f"{url}/v1/sessions/s/questionnaire?wait=1", {"questions": ["é"]}, {"Authorization": "Bearer t"}
        )
        await client.aclose()
    assert (status, json.loads(body)) == (200, {"status": "completed"})
    head, _, sent = requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/sessions/s/questionnaire?wait=1 HTTP/1.1\r\n")
    assert b"Authorization: Bearer t" in head and b"Content-Type: application/json" in head
    assert json.loads(sent) == {"questions": ["é"]}


async def test_the_connection_is_kept_for_the_next_call() -> None:
    async with server(ok()) as (url, requests, connections):
        client = AgentHTTP(timeout=5)
        for _ in range(3):
            assert (await client.request("GET", f"{url}/x"))[0] == 200
        await client.aclose()
    assert len(requests) == 3 and len(connections) == 1


async def test_a_connection_the_server_closes_is_not_reused() -> None:
    async with server(ok(extra="Connection: close\r\n")) as (url, requests, connections):
        client = AgentHTTP(timeout=5)
        for _ in range(2):
            assert (await client.request("DELETE", f"{url}/x"))[0] == 200
        await client.aclose()
    assert len(connections) == 2


async def test_a_chunked_reply_is_read_whole() -> None:
    chunked = b'HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
    async with server(lambda _: chunked) as (url, _, _):
        client = AgentHTTP(timeout=5)
        status, body = await client.request("GET", f"{url}/x")
        status2, _ = await client.request("GET", f"{url}/x")  # the stream is where it should be
        await client.aclose()
    assert (status, json.loads(body), status2) == (202, {"a": 1}, 202)


async def test_no_reply_in_time_is_a_timeout_error() -> None:
    async with server(lambda _: None) as (url, _, _):
        client = AgentHTTP(timeout=0.2)
        with pytest.raises(TimeoutError_):
            await client.request("GET", f"{url}/x")
        await client.aclose()
    assert TimeoutError_.__name__ == "TimeoutError"  # reported as http_TimeoutError


async def test_a_malformed_reply_is_a_read_error() -> None:
    async with server(lambda _: b"SMTP ready\r\n\r\n") as (url, _, _):
        client = AgentHTTP(timeout=5)
        with pytest.raises(ReadError):
            await client.request("GET", f"{url}/x")
        await client.aclose()


async def test_nobody_listening_is_a_connect_error() -> None:
    async with server(ok()) as (url, _, _):
        pass  # closed again: the port is free now
    client = AgentHTTP(timeout=5, connect_timeout=2)
    with pytest.raises(ConnectError):
        await client.request("GET", f"{url}/x")
    with pytest.raises(ConnectError):
        await client.request("GET", "https://127.0.0.1:1/x")


async def test_a_kept_connection_the_server_drops_unanswered_is_replaced() -> None:
    # The second request lands on the kept connection just as the server closes it (as
    # uvicorn does to idle connections): it never answers, so the client sends it again.
    answers = iter([ok()(b""), CLOSE, ok()(b"")])
    async with server(lambda _: next(answers)) as (url, requests, connections):
        client = AgentHTTP(timeout=5)
        assert (await client.request("GET", f"{url}/x"))[0] == 200
        assert (await client.request("GET", f"{url}/x"))[0] == 200
        await client.aclose()
    assert len(requests) == 3 and len(connections) == 2
