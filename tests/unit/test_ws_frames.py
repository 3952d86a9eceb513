"""broker/ws/frame_codec.py: a frame read around websockets' parser is exactly one websockets would
have accepted and handed on unchanged; anything else is refused with websockets' state untouched.

Three kinds of evidence: frames the fast path must read (each checked against what websockets
delivers for the same bytes), inputs it must refuse (each checked to leave the protocol as it
was, and websockets then to do its own thing with them), and a property: any client byte
stream, cut into any chunks, ends the same -- messages, replies, state -- whether every chunk
goes to websockets or each first goes to the fast path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import PerMessageDeflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from broker.ws.frame_codec import readable, server_frame, whole_data_frame

MAX_SIZE = 70_000  # room for the largest 16-bit-length frame (65535 bytes)

OP_CONT, OP_TEXT, OP_BINARY = Opcode.CONT, Opcode.TEXT, Opcode.BINARY
OP_CLOSE, OP_PING, OP_PONG = Opcode.CLOSE, Opcode.PING, Opcode.PONG


# --- protocols and frames ---------------------------------------------------------------


def open_protocol(max_size: int | None = MAX_SIZE) -> Protocol:
    return Protocol(Side.SERVER, state=State.OPEN, max_size=max_size)


def handshaken_server(max_size: int | None = MAX_SIZE) -> ServerProtocol:
    """What uvicorn uses: a ServerProtocol after a real opening handshake (its parser is the
    HTTP request reader that went on to read frames, one generator deeper)."""
    client = ClientProtocol(parse_uri("ws://broker.test/v1/sessions/s1/ws"))
    client.send_request(client.connect())
    server = ServerProtocol(max_size=max_size)
    server.receive_data(b"".join(client.data_to_send()))
    [request] = server.events_received()
    assert isinstance(request, Request)
    server.send_response(server.accept(request))
    server.data_to_send()
    assert server.state is State.OPEN
    return server


MakeProtocol = Callable[..., Protocol]
PROTOCOLS = [pytest.param(open_protocol, id="protocol"), pytest.param(handshaken_server, id="server")]


def client_frame(opcode: Opcode, payload: bytes, *, fin: bool = True) -> bytes:
    """A frame as a websockets client writes it (masked with a random mask)."""
    return Frame(opcode, payload, fin).serialize(mask=True, extensions=[])


def xor(data: bytes, mask: bytes) -> bytes:
    return bytes(byte ^ mask[i % 4] for i, byte in enumerate(data))


def hand_frame(first: int, payload: bytes, *, mask: bytes | None = b"\x0f\x1e\x2d\x3c", form: int = 0) -> bytes:
    """A client frame built by hand, for what Frame.serialize will not write: reserved bits,
    no mask, a chosen mask, a 64-bit or a longer-than-needed length (``form`` 7, 16 or 64)."""
    size = len(payload)
    form = form or (7 if size < 126 else 16 if size < 65536 else 64)
    masked = 0x80 if mask is not None else 0
    if form == 7:
        head = bytes([first, masked | size])
    elif form == 16:
        head = bytes([first, masked | 126]) + size.to_bytes(2, "big")
    else:
        head = bytes([first, masked | 127]) + size.to_bytes(8, "big")
    return head + payload if mask is None else head + mask + xor(payload, mask)


def frame_with_decoy_tail(size: int, cut: int, body: bytes = b"") -> tuple[bytes, bytes]:
    """(frame, payload): a final masked text frame whose bytes from ``cut`` on are, alone, one
    whole masked text frame -- what a parser that lost track mid-frame would take for one."""
    head = bytes([0x81, 0x80 | size]) if size < 126 else bytes([0x81, 0x80 | 126]) + size.to_bytes(2, "big")
    free = (body + bytes(range(7, 256)) * (size // 249 + 1))[: 4 + size]  # mask, masked payload
    frame = bytearray(head + free)
    tail = len(frame) - cut
    fake = [0x81, 0x80 | (tail - 6)] if tail - 6 < 126 else [0x81, 0x80 | 126, *(tail - 8).to_bytes(2, "big")]
    assert len(head) <= cut and cut + len(fake) <= len(frame), "the decoy must lie in the mask and payload"
    frame[cut : cut + len(fake)] = fake
    mask = bytes(frame[len(head) : len(head) + 4])
    payload = xor(bytes(frame[len(head) + 4 :]), mask)
    [alone] = websockets_reads(open_protocol(None), bytes(frame[cut:]))  # websockets too reads one
    assert (alone.opcode, alone.fin) == (OP_TEXT, True)
    return bytes(frame), payload


def websockets_reads(protocol: Protocol, data: bytes) -> list[Frame]:
    protocol.receive_data(data)
    return [event for event in protocol.events_received() if isinstance(event, Frame)]


def waiting_in(protocol: Protocol) -> str:
    """The name of the innermost generator websockets' parser is suspended in."""
    gen: Any = protocol.parser
    while gen.gi_yieldfrom is not None:
        gen = gen.gi_yieldfrom
    return str(gen.gi_code.co_name)


def snapshot(protocol: Protocol) -> tuple[object, ...]:
    """Everything of the protocol a read could disturb."""
    return (
        protocol.state,
        bytes(protocol.reader.buffer),
        protocol.reader.eof,
        protocol.parser,
        waiting_in(protocol),
        protocol.current_size,
        list(protocol.events),
        list(protocol.writes),
        protocol.parser_exc,
    )


def text_payload(size: int) -> bytes:
    return (b'{"type":"ping"}' + b" " * size)[:size] if size >= 15 else b"x" * size


def binary_payload(size: int) -> bytes:
    return (bytes(range(256)) * (size // 256 + 1))[:size]


async def test_under_uvicorn_the_limit_websockets_enforces_is_ws_max_size() -> None:
    """The fast path reads the limits off the protocol uvicorn built: ``config.ws_max_size``
    for a message, and none per fragment."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    config = uvicorn.Config(app, ws_max_size=1234, log_config=None, lifespan="off")
    config.load()
    socket = WebSocketsSansIOProtocol(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    assert (socket.conn.max_message_size, socket.conn.max_fragment_size) == (config.ws_max_size, None)
    assert socket.conn.extensions == [] and readable(socket.conn)


# --- accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", PROTOCOLS)
def test_readable_for_websockets_protocols(make: MakeProtocol) -> None:
    assert readable(make())


def test_not_readable_when_the_parser_is_not_a_generator() -> None:
    protocol = open_protocol()
    protocol.parser = iter(())  # type: ignore[assignment]
    assert not readable(protocol)


@pytest.mark.parametrize("make", PROTOCOLS)
@pytest.mark.parametrize(
    ("opcode", "size"),
    [
        (OP_TEXT, 0),
        (OP_TEXT, 1),
        (OP_TEXT, 15),
        (OP_TEXT, 125),  # the largest 7-bit length
        (OP_TEXT, 126),  # the smallest 16-bit length
        (OP_TEXT, 1000),
        (OP_TEXT, 65535),  # the largest 16-bit length
        (OP_BINARY, 0),
        (OP_BINARY, 125),
        (OP_BINARY, 126),
        (OP_BINARY, 4000),
    ],
)
def test_a_whole_data_frame_is_read_as_websockets_reads_it(make: MakeProtocol, opcode: Opcode, size: int) -> None:
    payload = text_payload(size) if opcode is OP_TEXT else binary_payload(size)
    data = client_frame(opcode, payload)
    fast, twin = make(), make()
    before = snapshot(fast)
    assert whole_data_frame(fast, data) == (opcode is OP_TEXT, payload)
    assert snapshot(fast) == before  # websockets never saw it
    [frame] = websockets_reads(twin, data)
    assert (frame.opcode, frame.data, frame.fin, twin.parser_exc) == (opcode, payload, True, None)
    # websockets reads on from where the fast path left it: between frames.
    [after] = websockets_reads(fast, client_frame(OP_BINARY, b"next"))
    assert (after.opcode, after.data) == (OP_BINARY, b"next")


@pytest.mark.parametrize("make", PROTOCOLS)
@pytest.mark.parametrize(("limit", "size"), [(100, 100), (1000, 1000)], ids=["7-bit", "16-bit"])
def test_a_frame_of_exactly_max_size_is_read(make: MakeProtocol, limit: int, size: int) -> None:
    data = client_frame(OP_TEXT, text_payload(size))
    assert whole_data_frame(make(limit), data) == (True, text_payload(size))
    [frame] = websockets_reads(make(limit), data)
    assert frame.data == text_payload(size)


def test_a_16_bit_length_longer_than_needed_is_read_as_websockets_reads_it() -> None:
    data = hand_frame(0x81, b"short", form=16)  # 5 bytes, written in the 16-bit form
    assert whole_data_frame(open_protocol(), data) == (True, b"short")
    [frame] = websockets_reads(open_protocol(), data)
    assert frame.data == b"short"


def test_invalid_utf8_text_is_returned_raw_as_websockets_delivers_it() -> None:
    # Decoding (and the 1007 close) is the caller's: websockets' sans-I/O layer does not decode.
    data = client_frame(OP_TEXT, b"\xff\xfe\xc3(")
    assert whole_data_frame(open_protocol(), data) == (True, b"\xff\xfe\xc3(")
    [frame] = websockets_reads(open_protocol(), data)
    assert frame.data == b"\xff\xfe\xc3("


@pytest.mark.parametrize("make", PROTOCOLS)
def test_read_again_once_a_fragmented_message_and_a_ping_are_over(make: MakeProtocol) -> None:
    protocol = make()
    websockets_reads(protocol, client_frame(OP_TEXT, b"one ", fin=False))
    websockets_reads(protocol, client_frame(OP_PING, b"p"))
    websockets_reads(protocol, client_frame(OP_CONT, b"two"))
    assert protocol.current_size is None
    assert whole_data_frame(protocol, client_frame(OP_TEXT, b"three")) == (True, b"three")


# --- refused ----------------------------------------------------------------------------


def _two_frames(make: MakeProtocol) -> tuple[Protocol, bytes]:
    return make(), client_frame(OP_TEXT, b"one") + client_frame(OP_TEXT, b"two")


def _inside_fragmented_message(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    websockets_reads(protocol, client_frame(OP_TEXT, b"first ", fin=False))
    assert protocol.current_size is not None and waiting_in(protocol) == "at_eof"
    return protocol, client_frame(OP_TEXT, b"whole")


def _closing_after_sending_close(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    protocol.send_close(1000)  # the parser still reads frames, between two of them
    assert protocol.state is State.CLOSING and waiting_in(protocol) == "at_eof"
    return protocol, client_frame(OP_TEXT, b"late")


def _closing_after_receiving_close(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    websockets_reads(protocol, client_frame(OP_CLOSE, b"\x03\xe8"))
    # websockets now discards what follows, waiting in the same at_eof as between frames.
    assert protocol.state is State.CLOSING and waiting_in(protocol) == "at_eof"
    return protocol, client_frame(OP_TEXT, b"late")


def _closed(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    protocol.state = State.CLOSED  # only the state says no: the parser is between frames
    return protocol, client_frame(OP_TEXT, b"late")


def _with_extension(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    protocol.extensions = [PerMessageDeflate(False, False, 15, 15)]
    return protocol, client_frame(OP_TEXT, b"not compressed, but an extension could change it")


def _stale_byte_in_reader(make: MakeProtocol) -> tuple[Protocol, bytes]:
    protocol = make()
    protocol.reader.feed_data(b"\x81")  # a byte websockets has not parsed yet (parser not stepped)
    return protocol, client_frame(OP_TEXT, b"after it")


def _over_max_size(limit: int, size: int) -> Callable[[MakeProtocol], tuple[Protocol, bytes, int]]:
    def setup(make: MakeProtocol) -> tuple[Protocol, bytes, int]:
        return make(limit), client_frame(OP_TEXT, text_payload(size)), limit

    return setup


def _fresh(data: bytes) -> Callable[[MakeProtocol], tuple[Protocol, bytes]]:
    return lambda make: (make(), data)


WHOLE = client_frame(OP_TEXT, b'{"type":"ping"}')

REFUSED: dict[str, Callable[[MakeProtocol], tuple[Any, ...]]] = {
    "unmasked": _fresh(hand_frame(0x81, b"hello", mask=None)),
    "unmasked binary": _fresh(hand_frame(0x82, b"hello", mask=None)),
    # Four bytes more than the frame: their size is that of the same frame masked.
    "unmasked, four bytes more": _fresh(hand_frame(0x81, b"hello", mask=None) + b"next"),
    "fin clear (first fragment)": _fresh(client_frame(OP_TEXT, b"part", fin=False)),
    "fin clear binary": _fresh(client_frame(OP_BINARY, b"part", fin=False)),
    "rsv1": _fresh(hand_frame(0x81 | 0x40, b"hello")),
    "rsv2": _fresh(hand_frame(0x82 | 0x20, b"hello")),
    "rsv3": _fresh(hand_frame(0x81 | 0x10, b"hello")),
    "continuation": _fresh(client_frame(OP_CONT, b"cont")),
    "ping": _fresh(client_frame(OP_PING, b"ping")),
    "pong": _fresh(client_frame(OP_PONG, b"pong")),
    "close": _fresh(client_frame(OP_CLOSE, b"\x03\xe8bye")),
    "reserved opcode": _fresh(hand_frame(0x83, b"hello")),
    "two frames in one chunk": _two_frames,
    "a trailing byte": _fresh(WHOLE + b"\x81"),
    "the next frame's head": _fresh(WHOLE + WHOLE[:2]),
    "truncated by a byte": _fresh(WHOLE[:-1]),
    "head and mask only": _fresh(WHOLE[:6]),
    "16-bit frame truncated": _fresh(client_frame(OP_TEXT, text_payload(300))[:-1]),
    "16-bit head too short": _fresh(client_frame(OP_TEXT, text_payload(300))[:7]),
    "64-bit length": _fresh(hand_frame(0x81, b"hello", form=64)),
    "64-bit length, large": _fresh(hand_frame(0x82, binary_payload(70_000), form=64)),
    # Its first two length bytes, read as a 16-bit length (5), match the chunk's size.
    "64-bit length, misread as 16-bit": _fresh(bytes([0x81, 0xFF, 0, 5]) + bytes(9)),
    "7-bit length over max_size": _over_max_size(100, 101),
    "16-bit length over max_size": _over_max_size(1000, 1001),
    "extension in use": _with_extension,
    "closing: close sent": _closing_after_sending_close,
    "closing: close received": _closing_after_receiving_close,
    "closed": _closed,
    "inside a fragmented message": _inside_fragmented_message,
    "a byte not parsed yet": _stale_byte_in_reader,
    "empty": _fresh(b""),
}


@pytest.mark.parametrize("make", PROTOCOLS)
@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_and_left_untouched(make: MakeProtocol, case: str) -> None:
    protocol, data, *_ = REFUSED[case](make)  # (an over-the-limit case says its limit too)
    before = snapshot(protocol)
    assert whole_data_frame(protocol, data) is None
    assert snapshot(protocol) == before


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("unmasked", 1002),
        ("unmasked, four bytes more", 1002),
        ("64-bit length, misread as 16-bit", 1009),
        ("rsv1", 1002),
        ("continuation", 1002),
        ("inside a fragmented message", 1002),
        ("7-bit length over max_size", 1009),
        ("16-bit length over max_size", 1009),
    ],
)
def test_websockets_then_fails_the_refused_frame_with_its_own_code(case: str, code: int) -> None:
    protocol, data, *_ = REFUSED[case](open_protocol)
    assert websockets_reads(protocol, data) == []
    assert protocol.parser_exc is not None and protocol.close_sent is not None
    assert protocol.close_sent.code == code


@pytest.mark.parametrize("make", PROTOCOLS)
@pytest.mark.parametrize(
    ("size", "cut"),
    [(15, 2), (15, 3), (15, 4), (15, 6), (15, 9), (40, 2), (126, 4), (126, 5), (126, 8), (300, 4), (300, 8)],
)
def test_mid_frame_the_rest_is_not_taken_for_a_frame(make: MakeProtocol, size: int, cut: int) -> None:
    """websockets has read the first ``cut`` bytes of a frame; the rest, which on its own
    looks exactly like a whole frame, must go to websockets to complete the first one."""
    frame, payload = frame_with_decoy_tail(size, cut)
    protocol = make()
    assert websockets_reads(protocol, frame[:cut]) == []
    before = snapshot(protocol)
    assert whole_data_frame(protocol, frame[cut:]) is None
    assert snapshot(protocol) == before
    [delivered] = websockets_reads(protocol, frame[cut:])
    assert (delivered.opcode, delivered.data, delivered.fin) == (OP_TEXT, payload, True)


def test_mid_frame_with_nothing_buffered_is_told_by_the_parser_alone() -> None:
    """After the 2-byte head (and after head and mask) websockets holds no bytes: only where
    its parser waits tells that a frame is under way."""
    frame, _ = frame_with_decoy_tail(15, 2)
    protocol = open_protocol()
    websockets_reads(protocol, frame[:2])
    assert protocol.reader.buffer == b"" and waiting_in(protocol) == "read_exact"
    frame, _ = frame_with_decoy_tail(15, 6)
    protocol = open_protocol()
    websockets_reads(protocol, frame[:6])
    assert protocol.reader.buffer == b"" and waiting_in(protocol) == "read_exact"
    assert whole_data_frame(protocol, frame[6:]) is None


def test_mid_frame_of_a_64_bit_length_head() -> None:
    protocol = open_protocol()
    frame = hand_frame(0x81, b"hello", form=64)
    websockets_reads(protocol, frame[:2])
    assert whole_data_frame(protocol, client_frame(OP_TEXT, b"\x00" * 6)) is None


# --- the property: the fast path changes nothing websockets would do ----------------------


@dataclass
class Peer:
    """One server protocol fed a client's stream chunk by chunk; what it delivered, the way
    uvicorn assembles it (a text or binary frame, then continuation frames up to FIN)."""

    protocol: Protocol
    max_size: int | None
    fast: bool
    log: list[tuple[str, bytes]] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    kind: str = ""
    parts: list[bytes] = field(default_factory=list)
    fast_frames: int = 0

    def feed(self, chunk: bytes) -> None:
        if self.fast:
            whole = whole_data_frame(self.protocol, chunk)
            if whole is not None:
                self.log.append(("text" if whole[0] else "binary", whole[1]))
                self.fast_frames += 1
                return
        self.protocol.receive_data(chunk)
        for event in self.protocol.events_received():
            assert isinstance(event, Frame)
            self._deliver(event)
        self.sent.extend(self.protocol.data_to_send())

    def _deliver(self, frame: Frame) -> None:
        if frame.opcode in (OP_TEXT, OP_BINARY):
            self.kind, self.parts = ("text" if frame.opcode is OP_TEXT else "binary"), [bytes(frame.data)]
        elif frame.opcode is OP_CONT:
            self.parts.append(bytes(frame.data))
        else:
            self.log.append((frame.opcode.name.lower(), bytes(frame.data)))
            return
        if frame.fin:
            self.log.append((self.kind, b"".join(self.parts)))
            self.parts = []

    def outcome(self) -> tuple[object, ...]:
        protocol = self.protocol
        return (
            self.log,
            b"".join(self.sent),
            protocol.eof_sent,
            protocol.state,
            type(protocol.parser_exc),
            protocol.close_sent and (protocol.close_sent.code, protocol.close_sent.reason),
            protocol.close_rcvd and (protocol.close_rcvd.code, protocol.close_rcvd.reason),
        )


@dataclass
class Stream:
    pieces: list[bytes]  # the stream, in the chunks it arrives in
    max_size: int | None
    expected: list[tuple[str, bytes]] | None  # what a valid stream delivers; None: it is not valid
    server: bool  # a handshaken ServerProtocol, or a bare Protocol


masks = st.binary(min_size=4, max_size=4)
small = st.binary(max_size=300)
large = st.binary(min_size=126, max_size=2000)
around_limits = st.sampled_from([125, 126, 999, 1000, 1001, 2000]).map(binary_payload)
utf8 = st.text(max_size=80).map(str.encode)
invalid_utf8 = st.sampled_from([b"\xff", b"\xc3(", b'{"type":"ping"}\xed\xa0\x80', b"\xe2\x82"])
payloads = st.one_of(small, large, around_limits, utf8, invalid_utf8)
control_payloads = st.binary(max_size=125)
# How a frame arrives: alone in a read (the fast path's case), cut in pieces, byte by byte,
# or in one read with the next frame.
ARRIVALS = ["alone", "alone", "alone", "split", "bytewise", "joined"]


@st.composite
def client_streams(draw: st.DrawFn) -> Stream:
    max_size = draw(st.sampled_from([None, 1000, 65536]))
    frames: list[tuple[bytes, tuple[int, ...]]] = []  # a frame, and offsets to cut it at
    expected: list[tuple[str, bytes]] = []
    valid = True

    def add(frame: bytes, *within: int) -> None:
        frames.append((frame, (2, 3, 4, 6, 8, 10, *within)))

    def fits(size: int) -> bool:
        return max_size is None or size <= max_size

    for _ in range(draw(st.integers(1, 8))):
        shape = draw(st.sampled_from(["data", "data", "data", "ping", "pong", "fragmented", "decoy", "long form"]))
        first = draw(st.sampled_from([0x81, 0x82]))
        kind = "text" if first == 0x81 else "binary"
        if shape == "data":
            payload = draw(payloads)
            add(hand_frame(first, payload, mask=draw(masks)))
        elif shape in ("ping", "pong"):
            payload = draw(control_payloads)
            add(hand_frame(0x89 if shape == "ping" else 0x8A, payload, mask=draw(masks)))
            expected.append((shape, payload))
            continue
        elif shape == "fragmented":
            parts = draw(st.lists(st.one_of(small, utf8), min_size=2, max_size=3))
            for i, part in enumerate(parts):
                head = (first & 0x0F if i == 0 else 0) | (0x80 if i == len(parts) - 1 else 0)
                add(hand_frame(head, part, mask=draw(masks)))
                if i < len(parts) - 1 and draw(st.booleans()):
                    ping = draw(control_payloads)
                    add(hand_frame(0x89, ping, mask=draw(masks)))
                    expected.append(("ping", ping))
            payload = b"".join(parts)
        elif shape == "decoy":
            size = draw(st.integers(6, 200))
            cut = draw(st.sampled_from([2, 3, 4, 5, 6]) if size < 126 else st.sampled_from([4, 5, 6, 8]))
            frame, payload = frame_with_decoy_tail(size, cut, draw(st.binary(min_size=4 + size, max_size=4 + size)))
            kind = "text"
            add(frame, cut, cut, cut)  # cut there more often than elsewhere
        else:  # "long form": a length in more bytes than needed (websockets reads it alike)
            payload = draw(small)
            add(hand_frame(first, payload, mask=draw(masks), form=draw(st.sampled_from([16, 64]))))
        valid = valid and fits(len(payload))
        expected.append((kind, payload))

    ending = draw(st.sampled_from(["none", "close", "close then data", "bad", "bad"]))
    if ending.startswith("close"):
        reason = draw(st.sampled_from([b"", b"\x03\xe8", b"\x03\xe8bye", b"\x0f\xa0x"]))
        add(hand_frame(0x88, reason, mask=draw(masks)))
        expected.append(("close", reason))
        if ending == "close then data":  # discarded by websockets: never read around it
            add(client_frame(OP_TEXT, b'{"type":"ping"}'))
            add(client_frame(OP_BINARY, b"after close"))
    elif ending == "bad":
        valid = False
        bad = draw(
            st.sampled_from(["unmasked", "rsv1", "data inside fragments", "continuation", "oversize", "misread length"])
        )
        if bad == "unmasked":
            add(hand_frame(0x81, b"hello", mask=None) + b"more")
        elif bad == "rsv1":
            add(hand_frame(0xC1, b"hello"))  # compressed, says the bit: no extension was agreed
        elif bad == "data inside fragments":
            add(client_frame(OP_TEXT, b"first", fin=False))
            add(client_frame(OP_TEXT, b"whole"))
        elif bad == "continuation":
            add(client_frame(OP_CONT, b"orphan"))
        elif bad == "oversize":
            add(client_frame(OP_BINARY, binary_payload(1001 if max_size == 1000 else 65535 if max_size else 70_000)))
        else:  # a 64-bit length whose top two bytes, read as a 16-bit one, fit the frame's size
            add(bytes([0x81, 0xFF, 0, 5]) + bytes(9))
        add(client_frame(OP_TEXT, b"after the failure"))

    pieces, pending = [], b""
    for frame, within in frames:
        arrival = draw(st.sampled_from(ARRIVALS))
        if arrival == "split":
            offsets = sorted({offset for offset in within if offset < len(frame) and draw(st.booleans())})
            bounds = [0, *offsets, len(frame)]
            segments = [frame[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
            pieces += [pending + segments[0], *segments[1:]]
        elif arrival == "bytewise" and len(frame) <= 40:
            pieces += [pending, *(frame[i : i + 1] for i in range(len(frame)))]
        elif arrival == "joined":
            pending += frame
            continue
        else:
            pieces.append(pending + frame)
        pending = b""
    pieces = [piece for piece in [*pieces, pending] if piece]
    return Stream(pieces, max_size, expected if valid else None, draw(st.booleans()))


def run(stream: Stream) -> tuple[Peer, Peer]:
    make = handshaken_server if stream.server else open_protocol
    plain = Peer(make(stream.max_size), stream.max_size, fast=False)
    fast = Peer(make(stream.max_size), stream.max_size, fast=True)
    for piece in stream.pieces:
        plain.feed(piece)
        fast.feed(piece)
    return plain, fast


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(client_streams())
def test_any_stream_in_any_chunks_ends_as_with_websockets_alone(stream: Stream) -> None:
    plain, fast = run(stream)
    if stream.expected is not None:  # the stream itself is sound, and websockets reads it all
        assert plain.log == stream.expected
        assert plain.protocol.parser_exc is None
    assert fast.outcome() == plain.outcome()


def test_frame_aligned_chunks_go_the_fast_way() -> None:
    """The property's harness does exercise the fast path: chunks that are each one whole data
    frame are all read around websockets, with the same result."""
    stream = Stream(
        [
            client_frame(OP_TEXT, b'{"type":"ping"}'),
            client_frame(OP_BINARY, binary_payload(1000)),
            client_frame(OP_PING, b"p"),
            client_frame(OP_TEXT, b""),
            client_frame(OP_TEXT, b"a", fin=False),
            client_frame(OP_CONT, b"b"),
            client_frame(OP_TEXT, b"\xff"),
        ],
        MAX_SIZE,
        None,
        server=True,
    )
    plain, fast = run(stream)
    assert fast.fast_frames == 4
    assert fast.outcome() == plain.outcome()
    assert plain.log == [
        ("text", b'{"type":"ping"}'),
        ("binary", binary_payload(1000)),
        ("ping", b"p"),
        ("text", b""),
        ("text", b"ab"),
        ("text", b"\xff"),
    ]


# --- frames to the client -----------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 125, 126, 1000, 65535, 65536, 70_000])
@pytest.mark.parametrize("text", [True, False])
def test_a_server_frame_is_the_bytes_websockets_would_write(size: int, text: bool) -> None:
    payload = text_payload(size)
    ours = server_frame(open_protocol(), payload, text)
    theirs = open_protocol()
    if text:
        theirs.send_text(payload)
    else:
        theirs.send_binary(payload)
    assert ours == b"".join(theirs.data_to_send())


def test_a_server_frame_is_left_to_websockets_unless_the_connection_is_open_and_plain() -> None:
    closing = open_protocol()
    closing.send_close(1000)
    pending = open_protocol()
    pending.receive_data(client_frame(OP_PING, b"hi"))  # websockets queued its pong
    fragmenting = open_protocol()
    fragmenting.send_text(b"first part", fin=False)
    extended = open_protocol()
    extended.extensions = [PerMessageDeflate(False, False, 15, 15)]
    for protocol in (closing, pending, fragmenting, extended):
        assert server_frame(protocol, b"{}", True) is None
    assert server_frame(open_protocol(), b"{}", True) == b"\x81\x02{}"


# --- several frames in one write ----------------------------------------------------------


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "through-websockets"])
async def test_several_frames_leave_in_one_write_and_read_back_in_order(fast: bool) -> None:
    from broker.ws.transport import ClientSocket

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    config = uvicorn.Config(app, log_config=None, lifespan="off")
    config.load()
    socket = ClientSocket(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    client = ClientProtocol(parse_uri("ws://broker.test/v1/sessions/s1/ws"))
    client.send_request(client.connect())
    server = ServerProtocol()
    server.receive_data(b"".join(client.data_to_send()))
    [request] = server.events_received()
    assert isinstance(request, Request)
    server.send_response(server.accept(request))
    client.receive_data(b"".join(server.data_to_send()))
    client.events_received()  # the handshake's response
    socket.conn, socket.transport, socket.fast_frames = server, Transport(), fast

    socket.write_frames([b'{"type":"closed"}', b'{"type":"idle"}', binary_payload(300)], text=False)
    socket.write_frame(b"last", text=True)

    assert len(socket.transport.writes) == 2  # one per call
    client.receive_data(b"".join(socket.transport.writes))
    got = [(frame.opcode, bytes(frame.data)) for frame in client.events_received() if isinstance(frame, Frame)]
    assert got == [
        (OP_BINARY, b'{"type":"closed"}'),
        (OP_BINARY, b'{"type":"idle"}'),
        (OP_BINARY, binary_payload(300)),
        (OP_TEXT, b"last"),
    ]
