"""A response's head waits for its body, so the two leave in one transport write."""

from __future__ import annotations

import asyncio

from broker.speedups.http_protocol import HeldHead


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
