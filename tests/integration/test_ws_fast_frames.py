"""Client frames in awkward pieces, against the real broker over a raw TCP socket.

The broker reads a frame that arrives alone and whole around websockets' parser
(broker/ws/frame_codec.py, ClientSocket.data_received) and leaves everything else to websockets.
Here the pieces are cut so that both ways are taken and mixed: a frame byte by byte, several
frames in one write, a frame whose rest (after its head) looks like a whole frame of its own,
a fragmented message with a ping inside, and the frames websockets must close the connection
for (invalid UTF-8: 1007, unmasked: 1002). The application messages are the protocol's
``ping``s, answered with ``pong``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import msgpack
import pytest
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side

from tests.helpers.clients import JSON, MSGPACK, hello, peer_shut_down
from tests.helpers.processes import token
from tests.helpers.protocol import Deployment
from tests.helpers.waiting import eventually

TIMEOUT = 5.0  # every read and connect waits at most this long
PING = b'{"type":"ping"}'
BYTE_PAUSE = 0.003  # between single bytes: each arrives in a read of its own


def client_frame(opcode: Opcode, payload: bytes, *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """A masked client frame: as websockets writes it (a random mask), or with ``mask``."""
    if mask is None:
        return Frame(opcode, payload, fin).serialize(mask=True, extensions=[])
    unmasked = Frame(opcode, payload, fin).serialize(mask=False, extensions=[])
    head = unmasked[: len(unmasked) - len(payload)]
    return bytes([head[0], head[1] | 0x80]) + head[2:] + mask + xor(payload, mask)


def xor(data: bytes, mask: bytes) -> bytes:
    return bytes(byte ^ mask[i % 4] for i, byte in enumerate(data))


def padded_ping(size: int) -> bytes:
    """The protocol's ping, padded with JSON whitespace to ``size`` bytes."""
    return PING + b" " * (size - len(PING))


def frame_with_decoy_rest(payload: bytes, cut: int) -> bytes:
    """A final masked text frame (7-bit length) carrying ``payload`` whose bytes from ``cut`` on
    are, alone, one whole masked text frame of valid UTF-8 -- which the broker must not take
    for one: they are the rest of the first. The mask is chosen to make it so."""
    rest = 6 + len(payload) - cut
    assert cut >= 2 and 6 <= rest < 6 + 126
    fixed: dict[int, int] = {}  # mask byte index -> value, so that the rest starts with a frame head
    for position, wanted in ((cut, 0x81), (cut + 1, 0x80 | (rest - 6))):
        if position < 6:  # a mask byte itself
            fixed[position - 2] = wanted
        else:  # a masked payload byte: the mask byte that masks it
            fixed[(position - 6) % 4] = payload[position - 6] ^ wanted
    free = [i for i in range(4) if i not in fixed]
    for choice in range(1 << 16):
        mask = bytearray(4)
        for index, value in fixed.items():
            mask[index] = value
        mask[free[0]], mask[free[1]] = choice >> 8, choice & 0xFF
        frame = bytes([0x81, 0x80 | len(payload)]) + bytes(mask) + xor(payload, bytes(mask))
        decoy = frame[cut:]
        try:
            xor(decoy[6:], decoy[2:6]).decode()
        except UnicodeDecodeError:
            continue
        alone = Protocol(Side.SERVER)
        alone.receive_data(decoy)
        [event] = alone.events_received()
        assert isinstance(event, Frame) and (event.opcode, event.fin) == (Opcode.TEXT, True)  # a decoy indeed
        return frame
    raise AssertionError("no mask makes a decoy")


class RawClient:
    """A websocket client written by hand: the upgrade, then bytes exactly as the test cuts them."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, codec: str) -> None:
        self.reader, self.writer, self.codec = reader, writer, codec

    @classmethod
    async def connect(cls, ws_url: str, sid: str, subprotocol: str = JSON) -> RawClient:
        url = urlsplit(ws_url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            f"GET /v1/sessions/{sid}/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {subprotocol}\r\n\r\n".encode()
        )
        response = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        assert response.startswith(b"HTTP/1.1 101"), response
        return cls(reader, writer, "json" if subprotocol == JSON else "msgpack")

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), TIMEOUT)

    async def write(self, *pieces: bytes, pause: float = 0.0) -> None:
        """Each piece in a write of its own, ``pause`` seconds apart."""
        for i, piece in enumerate(pieces):
            if i and pause:
                await asyncio.sleep(pause)
            self.writer.write(piece)
            await self.writer.drain()

    async def write_bytewise(self, data: bytes) -> None:
        await self.write(*(data[i : i + 1] for i in range(len(data))), pause=BYTE_PAUSE)

    async def frame(self) -> tuple[int, bytes]:
        """(first byte, payload) of the next frame from the broker, its keepalive pings skipped."""
        while True:
            head = await asyncio.wait_for(self.reader.readexactly(2), TIMEOUT)
            assert head[1] & 0x80 == 0, "a server frame must not be masked"
            size = head[1] & 0x7F
            if size == 126:
                size = int.from_bytes(await asyncio.wait_for(self.reader.readexactly(2), TIMEOUT), "big")
            elif size == 127:
                size = int.from_bytes(await asyncio.wait_for(self.reader.readexactly(8), TIMEOUT), "big")
            payload = await asyncio.wait_for(self.reader.readexactly(size), TIMEOUT)
            if head[0] != 0x89:
                return head[0], payload

    async def message(self) -> dict[str, Any]:
        first, payload = await self.frame()
        if self.codec == "json":
            assert first == 0x81, f"expected a text frame, got {first:#x} {payload!r}"
            value = json.loads(payload)
        else:
            assert first == 0x82, f"expected a binary frame, got {first:#x} {payload!r}"
            value = msgpack.unpackb(payload)
        assert isinstance(value, dict)
        return value

    async def hello(self, sid: str) -> None:
        if self.codec == "json":
            await self.write(client_frame(Opcode.TEXT, hello(token(sid, "client")).encode()))
        else:
            body = {"type": "hello", "token": token(sid, "client"), "client": {"kind": "bot", "name": "fast-frames"}}
            await self.write(client_frame(Opcode.BINARY, msgpack.packb(body)))
        assert (await self.message())["type"] == "welcome"
        assert await self.message() == {"type": "idle"}  # a new session: nothing to ask yet

    async def pongs(self, count: int) -> None:
        """The next ``count`` messages are pongs: no error frame, no close."""
        for _ in range(count):
            assert await self.message() == {"type": "pong"}

    async def close_code(self) -> int | None:
        """Read until the broker's close frame; its code (None: the socket ended without one)."""
        while True:
            try:
                first, payload = await self.frame()
            except asyncio.IncompleteReadError:
                return None
            if first == 0x88:
                return int.from_bytes(payload[:2], "big")


async def joined(deployment: Deployment, sid: str, subprotocol: str = JSON) -> RawClient:
    client = await RawClient.connect(deployment.client_ws_url, sid, subprotocol)
    await client.hello(sid)
    return client


# --- frames that must be answered ----------------------------------------------------------


@pytest.mark.parametrize("size", [len(PING), 130], ids=["7-bit length", "16-bit length"])
async def test_a_frame_split_byte_by_byte(deployment: Deployment, sid: str, size: int) -> None:
    async with await joined(deployment, sid) as client:
        await client.write_bytewise(client_frame(Opcode.TEXT, padded_ping(size)))
        await client.pongs(1)
        await client.write(client_frame(Opcode.TEXT, PING))  # whole and alone again
        await client.pongs(1)


async def test_the_hello_split_byte_by_byte(deployment: Deployment, sid: str) -> None:
    async with await RawClient.connect(deployment.client_ws_url, sid) as client:
        await client.write_bytewise(client_frame(Opcode.TEXT, hello(token(sid, "client")).encode()))
        assert (await client.message())["type"] == "welcome"
        assert await client.message() == {"type": "idle"}
        await client.write(client_frame(Opcode.TEXT, PING))
        await client.pongs(1)


# A mask whose every byte has its high bit set: frames of ASCII text with 7-bit lengths under it
# are all high bytes, so a text frame read on into the frames after it (as if its length were
# not checked) unmasks them to ASCII -- valid UTF-8, which the broker would take for one
# garbled message instead of falling back to websockets.
HIGH_MASK = bytes([0xA5, 0xC3, 0x96, 0xF0])


@pytest.mark.parametrize("count", [2, 3])
async def test_several_frames_in_one_write(deployment: Deployment, sid: str, count: int) -> None:
    async with await joined(deployment, sid) as client:
        frames = [client_frame(Opcode.TEXT, padded_ping(size), mask=HIGH_MASK) for size in (15, 125, 60)[:count]]
        await client.write(b"".join(frames))
        await client.pongs(count)
        await client.write(client_frame(Opcode.TEXT, PING))
        await client.pongs(1)


async def test_writes_that_cut_across_frames(deployment: Deployment, sid: str) -> None:
    """Two and a half frames, then the rest of the third with a fourth: no write is one frame."""
    async with await joined(deployment, sid) as client:
        one, two, three, four = (client_frame(Opcode.TEXT, padded_ping(size)) for size in (15, 300, 40, 15))
        await client.write(one + two + three[:5], three[5:] + four, pause=0.05)
        await client.pongs(4)


@pytest.mark.parametrize("cut", [2, 3, 6, 9], ids=["after the head", "in the mask", "after the mask", "in the payload"])
async def test_the_rest_of_a_frame_is_not_taken_for_a_frame(deployment: Deployment, sid: str, cut: int) -> None:
    """The first ``cut`` bytes, then the rest, which alone reads as one whole text frame of
    valid UTF-8: taken for one, it would be answered with an error frame and the ping after it
    would be lost in a frame websockets still waits to finish."""
    frame = frame_with_decoy_rest(padded_ping(20), cut)
    async with await joined(deployment, sid) as client:
        await client.write(frame[:cut], frame[cut:], pause=0.05)
        await client.pongs(1)
        await client.write(client_frame(Opcode.TEXT, PING))
        await client.pongs(1)


@pytest.mark.parametrize("together", [False, True], ids=["three writes", "one write"])
async def test_a_fragmented_message_with_a_ping_inside(deployment: Deployment, sid: str, together: bool) -> None:
    pieces = [
        client_frame(Opcode.TEXT, PING[:7], fin=False),
        client_frame(Opcode.PING, b"between"),
        client_frame(Opcode.CONT, PING[7:]),
    ]
    async with await joined(deployment, sid) as client:
        await client.write(b"".join(pieces)) if together else await client.write(*pieces, pause=0.05)
        assert await client.frame() == (0x8A, b"between")  # the control pong, at once
        await client.pongs(1)  # then the message, whole
        await client.write(client_frame(Opcode.TEXT, PING))
        await client.pongs(1)


async def test_a_16_bit_length_longer_than_needed(deployment: Deployment, sid: str) -> None:
    """124 bytes in the 16-bit form (websockets reads it): its head is two bytes longer than
    the 7-bit form's, which a reader must not assume. (With an ASCII mask, the frame misread
    as a 7-bit 126-byte one would still be valid UTF-8.)"""
    frame = bytes([0x81, 0x80 | 126, 0, 124]) + b"\x11\x22\x33\x44" + xor(padded_ping(124), b"\x11\x22\x33\x44")
    async with await joined(deployment, sid) as client:
        await client.write(frame)
        await client.pongs(1)


@pytest.mark.parametrize(("subprotocol", "opcode"), [(JSON, Opcode.BINARY), (MSGPACK, Opcode.TEXT)])
async def test_a_data_frame_of_the_other_kind_is_a_bad_frame(
    deployment: Deployment, sid: str, subprotocol: str, opcode: Opcode
) -> None:
    """The frame's opcode reaches the broker as sent: a binary frame of JSON text on the json
    subprotocol (or a text frame on msgpack) is refused, not taken for the other kind."""
    async with await joined(deployment, sid, subprotocol) as client:
        await client.write(client_frame(opcode, PING))
        reply = await client.message()
        assert reply["type"] == "error" and reply["code"] == "bad_frame", reply


async def test_binary_frames_over_msgpack(deployment: Deployment, sid: str) -> None:
    async with await joined(deployment, sid, MSGPACK) as client:
        ping = client_frame(Opcode.BINARY, msgpack.packb({"type": "ping"}))
        await client.write(ping)
        await client.pongs(1)
        await client.write_bytewise(ping)
        await client.pongs(1)


async def test_the_largest_16_bit_length_frame(deployment: Deployment, sid: str) -> None:
    async with await joined(deployment, sid) as client:
        await client.write(client_frame(Opcode.TEXT, padded_ping(65535)))
        await client.pongs(1)


# --- frames that must close the connection -------------------------------------------------


INVALID_UTF8 = client_frame(Opcode.TEXT, b'{"type":"\xed\xa0\x80"}')  # a surrogate's encoding


@pytest.mark.parametrize(
    "pieces",
    [
        [client_frame(Opcode.TEXT, b'{"type":"ping","ref":"\xff"}')],
        [client_frame(Opcode.TEXT, b'{"type":"ping","ref":"\xc3(')],
        [INVALID_UTF8],
        [INVALID_UTF8[:4], INVALID_UTF8[4:]],
    ],
    ids=["alone", "alone, broken sequence", "alone, surrogate", "in two writes"],
)
async def test_invalid_utf8_text_closes_1007(deployment: Deployment, sid: str, pieces: list[bytes]) -> None:
    async with await joined(deployment, sid) as client:
        await client.write(*pieces, pause=0.05)
        assert await client.close_code() == 1007


async def test_invalid_utf8_across_fragments_closes_1007(deployment: Deployment, sid: str) -> None:
    async with await joined(deployment, sid) as client:
        await client.write(
            client_frame(Opcode.TEXT, b'{"type":"ping","ref":"\xc3', fin=False),
            client_frame(Opcode.CONT, b'("}'),
            pause=0.05,
        )
        assert await client.close_code() == 1007


async def test_valid_utf8_split_across_fragments_is_one_message(deployment: Deployment, sid: str) -> None:
    async with await joined(deployment, sid) as client:
        await client.write(
            client_frame(Opcode.TEXT, b'{"type":"ping","ref":"\xc3', fin=False),
            client_frame(Opcode.CONT, b'\xa9"}'),
            pause=0.05,
        )
        await client.pongs(1)


@pytest.mark.parametrize(
    ("first", "more"),
    [(0x81, b""), (0x82, b""), (0x81, b"    ")],
    ids=["text", "binary", "text and four bytes more"],
)
async def test_an_unmasked_frame_closes_1002(deployment: Deployment, sid: str, first: int, more: bytes) -> None:
    """Four bytes more make the write as long as the same frame masked (and read as masked,
    ASCII unmasked with ASCII is still valid UTF-8)."""
    async with await joined(deployment, sid) as client:
        await client.write(bytes([first, len(PING)]) + PING + more)
        assert await client.close_code() == 1002


async def test_a_whole_message_inside_a_fragmented_one_closes_1002(deployment: Deployment, sid: str) -> None:
    """Between the fragments the parser waits for a new frame, as between messages: a whole
    text frame arriving alone then is websockets' to refuse, not a ping to answer."""
    async with await joined(deployment, sid) as client:
        await client.write(client_frame(Opcode.TEXT, PING[:7], fin=False), client_frame(Opcode.TEXT, PING), pause=0.05)
        assert await client.close_code() == 1002


async def test_a_64_bit_length_over_the_limit_closes_1009(deployment: Deployment, sid: str) -> None:
    """A 64-bit length of about 2**50, in a write of 13 bytes: its first two length bytes,
    read as a 16-bit length (5), would fit the write (and unmask to valid UTF-8)."""
    async with await joined(deployment, sid) as client:
        await client.write(bytes([0x81, 0x80 | 127, 0x00, 0x05]) + b" " * 9)
        assert await client.close_code() == 1009


async def test_a_frame_with_a_reserved_bit_closes_1002(deployment: Deployment, sid: str) -> None:
    async with await joined(deployment, sid) as client:
        frame = bytearray(client_frame(Opcode.TEXT, PING))
        frame[0] |= 0x40  # RSV1: no extension was negotiated
        await client.write(bytes(frame))
        assert await client.close_code() == 1002


async def test_a_client_still_sending_an_oversized_frame_gets_the_1009_not_a_reset(
    deployment: Deployment, sid: str
) -> None:
    """The broker refuses the frame by its head; the client goes on sending the rest, and
    reads only after. A socket the broker closed would answer those bytes with a reset,
    which destroys the 1009 waiting to be read: the broker must drain what still comes
    (websockets' own server half-closes and reads on, as the broker does)."""
    async with await joined(deployment, sid) as client:
        size = 256 * 1024
        head = bytes([0x81, 0x80 | 127]) + size.to_bytes(8, "big") + b"mask"
        await client.write(head)
        await eventually(lambda: peer_shut_down(client.writer), "the broker to refuse it (its close, then its FIN)")
        with contextlib.suppress(ConnectionError):
            await client.write(*(b"x" * 16384 for _ in range(size // 16384)), pause=0.005)
        assert await client.close_code() == 1009
