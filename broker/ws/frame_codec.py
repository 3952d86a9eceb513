"""The common client websocket frame, read without websockets' parser.

Nearly every frame a client sends is one small, final, masked text or binary frame that
arrives alone in one read. websockets' sans-I/O parser is general (fragments, control
frames, extensions) and generator-based: it takes about a tenth of an answer's path through
the broker for such a frame; this reads it in a microsecond.

Anything else -- a control frame, a fragment, a frame split over reads or several in one
read, an extension in use, a frame over the size limit, an unmasked frame, a connection
not open, a parser in the middle of a frame -- is left to websockets, so the connection's
state (keepalive, closing handshake, errors and their close codes) stays websockets' own.
A frame read here is exactly one websockets would have accepted and handed on unchanged.

The other way, a frame to the client on an open connection is written as its head and
payload (``server_frame``), the bytes websockets' ``send_text``/``send_binary`` would write,
without building a ``Frame`` to serialize.
"""

from __future__ import annotations

from typing import Any, Final

from websockets.protocol import Protocol, State
from websockets.streams import StreamReader

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

_TEXT: Final = 0x81  # FIN, no reserved bits, opcode 1
_BINARY: Final = 0x82  # FIN, no reserved bits, opcode 2
_MASKED: Final = 0x80
# What is read of websockets' state (websockets 16 and later name it so: before 16 there is no
# current_size, max_message_size or max_fragment_size, and readable() turns the fast path off).
_STATE: Final = (
    "current_size",
    "max_message_size",
    "max_fragment_size",
    "extensions",
    "reader",
    "writes",
    "expect_continuation_frame",
)
# websockets' parser, waiting between two frames, waits in ``StreamReader.at_eof``.
_BETWEEN_FRAMES: Final = StreamReader.at_eof.__code__


def readable(protocol: Protocol) -> bool:
    """Whether this websockets can be read around: its parser is the generator this module
    knows how to inspect (checked once per connection; if not, every frame goes to it)."""
    return all(hasattr(protocol, name) for name in _STATE) and hasattr(protocol.parser, "gi_yieldfrom")


def whole_data_frame(protocol: Protocol, data: bytes) -> tuple[bool, bytes] | None:
    """``data`` as (text?, unmasked payload) when it is exactly one whole, final data frame
    and ``protocol`` is open, between frames and outside a fragmented message; else None."""
    size = len(data)
    if size < 6:
        return None
    first, second = data[0], data[1]
    if first == _TEXT:
        text = True
    elif first == _BINARY:
        text = False
    else:
        return None
    if second < _MASKED:
        return None
    length = second - _MASKED
    if length < 126:
        start = 6
    elif length == 126 and size >= 8:
        length = (data[2] << 8) | data[3]
        start = 8
    else:
        return None
    if size != start + length:
        return None
    # Over websockets' own limits (it fails such a frame with 1009): the limit for a message
    # and the one for a fragment.
    limit = protocol.max_message_size
    if limit is not None and length > limit:
        return None
    limit = protocol.max_fragment_size
    if limit is not None and length > limit:
        return None
    if protocol.state is not State.OPEN or protocol.extensions or protocol.current_size is not None:
        return None
    # websockets has consumed every byte it was given and waits for a new frame (not for the
    # rest of one whose head it read). (Inline: this runs for every frame a client sends.)
    if protocol.reader.buffer:
        return None
    waiting: Any = protocol.parser  # a generator: gi_yieldfrom leads to the one that waits
    while (inner := waiting.gi_yieldfrom) is not None:
        waiting = inner
    if waiting.gi_code is not _BETWEEN_FRAMES:
        return None
    return text, apply_mask(data[start:], data[start - 4 : start])


def server_frame(protocol: Protocol, payload: bytes, text: bool) -> bytes | None:
    """``payload`` as one final, unmasked text or binary frame, when ``protocol`` is open,
    uses no extension and has nothing of its own waiting to be written; else None (send it
    through websockets)."""
    if protocol.state is not State.OPEN or protocol.extensions or protocol.writes or protocol.expect_continuation_frame:
        return None
    length = len(payload)
    if length < 126:
        head = bytes((_TEXT if text else _BINARY, length))
    elif length < 65536:
        head = bytes((_TEXT if text else _BINARY, 126, length >> 8, length & 0xFF))
    else:
        head = bytes((_TEXT if text else _BINARY, 127)) + length.to_bytes(8, "big")
    return head + payload
