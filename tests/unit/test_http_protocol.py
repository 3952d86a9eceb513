"""A response's head waits for its body, so the two leave in one transport write; a plain
response's head is written from checked parts, as uvicorn writes it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from broker.speedups.http_protocol import HeldHead, PreparedHeadCycle


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


async def test_head_and_body_leave_in_one_write() -> None:
    transport = Recorder()
    held = HeldHead(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.writes == []
    held.write(b"{}")
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    held.write(b" more")  # later writes go straight through
    assert transport.writes[-1] == b" more"


async def test_a_head_without_a_body_in_the_same_step_still_leaves() -> None:
    transport = Recorder()
    held = HeldHead(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 204 No Content\r\n\r\n"]
    await asyncio.sleep(0)
    assert len(transport.writes) == 1  # flushed once


async def test_closing_sends_a_held_head_first() -> None:
    transport = Recorder()
    held = HeldHead(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    held.close()
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n"] and transport.closed
    assert held.is_closing()  # everything else is the transport's


# --- a plain response's head from checked parts: byte for byte what uvicorn writes ----------

DEFAULTS = [(b"date", b"Sun, 06 Dec 2026 09:00:00 GMT"), (b"server", b"uvicorn")]
JSON = (b"content-type", b"application/json")


def cycle_of(
    cls: type[RequestResponseCycle], transport: Recorder, method: str = "POST", keep_alive: bool = True
) -> Any:
    cycle = cls(
        scope={"method": method},  # type: ignore[typeddict-item]
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test.access"),
        access_log=False,
        default_headers=DEFAULTS,
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=keep_alive,
        on_response=lambda: None,
    )
    return cycle


async def sent_by(cls: type[RequestResponseCycle], start: dict[str, Any], body: bytes, **how: Any) -> tuple[Any, ...]:
    transport = Recorder()
    cycle = cycle_of(cls, transport, **how)
    try:
        await cycle.send(start)
        await cycle.send({"type": "http.response.body", "body": body})
    except RuntimeError as exc:
        return ("raised", str(exc), transport.writes)
    return (transport.writes, cycle.response_complete, cycle.chunked_encoding, cycle.expected_content_length)


RESPONSES = [
    pytest.param({"status": 200, "headers": [(b"content-length", b"2"), JSON]}, b"{}", {}, id="plain"),
    pytest.param(
        {"status": 405, "headers": [(b"content-length", b"2"), JSON, (b"allow", b"POST")]}, b"{}", {}, id="allow"
    ),
    pytest.param(
        {"status": 200, "headers": [(b"Content-Length", b"2"), (b"Content-Type", b"x")]}, b"{}", {}, id="cased"
    ),
    pytest.param({"status": 200, "headers": [(b"content-length", b"2")]}, b"{}", {"method": "HEAD"}, id="head"),
    pytest.param({"status": 200, "headers": [(b"content-length", b"2")]}, b"{}", {"keep_alive": False}, id="closing"),
    pytest.param({"status": 200, "headers": [JSON]}, b"{}", {}, id="no-length"),
    pytest.param({"status": 200, "headers": [(b"content-length", b"+2")]}, b"{}", {}, id="odd-length"),
    pytest.param({"status": 200, "headers": [(b"content-length", b"3")]}, b"{}", {}, id="short-body"),
    pytest.param(
        {"status": 200, "headers": [(b"content-length", b"2"), (b"connection", b"close")]}, b"{}", {}, id="conn"
    ),
    pytest.param({"status": 200, "headers": [(b"content-length", b"2"), (b"x", b"a\nb")]}, b"{}", {}, id="bad-value"),
    pytest.param({"status": 200, "headers": [(b"content-length", b"2"), (b"x y", b"a")]}, b"{}", {}, id="bad-name"),
]


@pytest.mark.parametrize(("start", "body", "how"), RESPONSES)
async def test_a_prepared_head_is_the_one_uvicorn_writes(start: dict[str, Any], body: bytes, how: Any) -> None:
    message = {"type": "http.response.start", **start}
    for _ in range(2):  # the second time from the remembered header lines
        expected = await sent_by(RequestResponseCycle, dict(message), body, **how)
        assert await sent_by(PreparedHeadCycle, dict(message), body, **how) == expected


async def test_a_plain_response_is_not_left_to_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    uvicorn_send = RequestResponseCycle.send

    async def recorded(self: RequestResponseCycle, message: Any) -> None:
        seen.append(message["type"])
        await uvicorn_send(self, message)

    monkeypatch.setattr(RequestResponseCycle, "send", recorded)
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2"), JSON]}
    writes, complete, *_ = await sent_by(PreparedHeadCycle, start, b"{}")
    assert seen == [] and complete
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\ndate: ") and writes[1] == b"{}"
