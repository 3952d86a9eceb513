"""Tripwires: the parts of uvicorn, websockets, redis-py (and hiredis, asyncio) that the broker
reaches into are still there, in the shape it relies on.

The broker overrides, reads or replaces other libraries' internals where ``bench/`` measured
what that buys (broker/speedups/, listed in its __init__), and in a few other places
(broker/store/redis/, broker/server.py, broker/runtime/logs.py). A new upstream release can move one
without any public API changing; these tests then fail first, one per upstream thing, saying
what changed, which broker file relies on it and for what, and what to do -- rather than a
fast path quietly turning itself off, or the suite failing somewhere far from the cause.

They must pass on the newest releases and on the floors pyproject.toml declares: .ci/run
runs the suite on both (the second with uv's "lowest-direct" resolution).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import inspect
import logging
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import hiredis
import pytest
import uvicorn
import uvloop
from redis._parsers.base import BaseParser
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, NodesManager, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection, parse_url
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.utils import HIREDIS_AVAILABLE
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.client import ClientProtocol
from websockets.http11 import Request
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader
from websockets.uri import parse_uri

from broker.runtime.logs import DropFrameTraces, QuietConnections
from broker.speedups import redis_wire
from broker.speedups.eager import _Continuation
from broker.speedups.http_protocol import CoalescingHttpProtocol, HeldHead
from broker.store.redis import connections as redis_connections
from broker.store.redis import links as redis_links
from broker.ws import frame_codec
from broker.ws.transport import ClientSocket

WS = "broker/ws/transport.py"
WS_FRAMES = "broker/ws/frame_codec.py"
HTTP = "broker/speedups/http_protocol.py"
EAGER = "broker/speedups/eager.py"
WIRE = "broker/speedups/redis_wire.py"
CONNECTIONS = "broker/store/redis/connections.py"
LINKS = "broker/store/redis/links.py"
COMMANDS = "broker/store/redis/commands.py"
ROUTING = "broker/store/redis/routing.py"
SERVER = "broker/server.py"
LOGS = "broker/runtime/logs.py"

# What to do about it, by where it is used.
FIX_CLIENT_SOCKET = (
    "update ClientSocket (broker/ws/transport.py) to the new uvicorn; or serve the client path through ASGI "
    "until then (broker/server.py: drop ws=protocol_for(...))"
)
FIX_FAST_FRAMES = (
    "update broker/ws/frame_codec.py, or disable the fast path (frame_codec.readable() returning False "
    "leaves every frame to websockets)"
)
FIX_HTTP = "update CoalescingHttpProtocol, or drop http=CoalescingHttpProtocol in broker/server.py"
FIX_PACKING = "update _packing_in_c in broker/store/redis/connections.py, or stop installing it (open_client)"
FIX_WIRE = (
    "update broker/speedups/redis_wire.py, or let redis-py carry the commands (RedisWire.from_url returning None)"
)
FIX_LINK = "update Link in broker/store/redis/links.py and NoticeConnection in broker/speedups/redis_wire.py together"
FIX_CLUSTER = "update the cluster routing in broker/store/redis/routing.py"


@dataclass(frozen=True)
class Internal:
    """An upstream thing the broker relies on, and a check that raises when its shape changed."""

    name: str  # the upstream thing, as a dotted path
    relied_on: str  # which broker file relies on it, and what for
    fix: str  # what to do when it changed
    check: Callable[[], object]  # sync or async; raises (AssertionError, AttributeError...) when changed


INTERNALS: list[Internal] = []


def internal(name: str, relied_on: str, fix: str) -> Callable[[Callable[[], object]], Callable[[], object]]:
    def register(check: Callable[[], object]) -> Callable[[], object]:
        INTERNALS.append(Internal(name, relied_on, fix, check))
        return check

    return register


@pytest.mark.parametrize("thing", INTERNALS, ids=lambda thing: thing.name)
async def test_an_upstream_internal_the_broker_relies_on_is_still_there(thing: Internal) -> None:
    try:
        result = thing.check()
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # every kind of change gets the same explanation
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        pytest.fail(
            f"{thing.name} is no longer what the broker relies on ({detail}): {thing.relied_on}; "
            f"check the upstream change and {thing.fix}",
            pytrace=False,
        )


def test_every_tripwire_has_its_own_name() -> None:
    names = [thing.name for thing in INTERNALS]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)


# --- helpers ---------------------------------------------------------------------------------


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:
    """A tiny JSON endpoint (anything else is left unanswered)."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})


def _config(**settings: Any) -> uvicorn.Config:
    config = uvicorn.Config(_asgi_app, log_config=None, lifespan="off", **settings)
    config.load()
    return config


class _Transport:
    """What the protocols see of a socket: writes recorded, nothing sent."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8700)}.get(name, default)


def _uvicorn_websocket(cls: type[WebSocketsSansIOProtocol] = WebSocketsSansIOProtocol) -> WebSocketsSansIOProtocol:
    return cls(_config(), ServerState(), {}, _loop=asyncio.get_running_loop())


def _upgrade_request() -> tuple[ClientProtocol, bytes]:
    client = ClientProtocol(parse_uri("ws://broker.test/v1/sessions/s1/ws"))
    client.send_request(client.connect())
    return client, b"".join(client.data_to_send())


def _handshaken() -> tuple[ClientProtocol, ServerProtocol]:
    """A websockets client and server after a real opening handshake (both OPEN)."""
    client, upgrade = _upgrade_request()
    server = ServerProtocol()
    server.receive_data(upgrade)
    [request] = server.events_received()
    assert isinstance(request, Request)
    server.send_response(server.accept(request))
    client.receive_data(b"".join(server.data_to_send()))
    client.events_received()
    assert client.state is State.OPEN and server.state is State.OPEN
    return client, server


def _open_uvicorn_websocket(
    cls: type[WebSocketsSansIOProtocol] = WebSocketsSansIOProtocol,
) -> tuple[WebSocketsSansIOProtocol, ClientProtocol, _Transport]:
    """uvicorn's protocol past the handshake (as ClientSocket leaves it), on a recording transport."""
    socket = _uvicorn_websocket(cls)
    transport = _Transport()
    socket.connection_made(transport)  # type: ignore[arg-type]
    client, server = _handshaken()
    socket.conn = server
    socket.handshake_initiated = socket.handshake_complete = True
    return socket, client, transport


def _client_bytes(client: ClientProtocol, send: Callable[[ClientProtocol], None]) -> bytes:
    send(client)
    return b"".join(client.data_to_send())


def _methods(cls: type) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    [body] = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    for node in body.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _self_attribute_uses(cls: type, attribute: str) -> dict[str, set[str]]:
    """Method name -> what each method does with ``self.<attribute>``: the names read off it
    (``self.queue.put_nowait`` -> ``put_nowait``), and ``""`` for any other use (an
    assignment, an argument)."""
    uses: dict[str, set[str]] = {}
    for method in _methods(cls):
        found: set[str] = set()
        chained: set[int] = set()
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == attribute
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"
            ):
                found.add(node.attr)
                chained.add(id(node.value))
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == attribute
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and id(node) not in chained
            ):
                found.add("")
        if found:
            uses[method.name] = found
    return uses


def _parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def _defined_parameters(cls: type, name: str) -> list[str]:
    """The parameters of method ``name`` as ``cls``'s source defines it (whatever has replaced
    the attribute since)."""
    [method] = [method for method in _methods(cls) if method.name == name]
    arguments = method.args
    return [argument.arg for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]


# --- uvicorn: the websocket protocol ClientSocket extends (broker/ws/transport.py) -----

# uvicorn's own methods that ClientSocket overrides: uvicorn must still have and call them.
_HOOKS: dict[str, list[str]] = {
    "handle_connect": ["self", "event"],
    "data_received": ["self", "data"],
    "send_receive_event_to_app": ["self"],
    "handle_parser_exception": ["self"],
    "pause_writing": ["self"],
    "resume_writing": ["self"],
    "connection_lost": ["self", "exc"],
}


@internal(
    "uvicorn.protocols.websockets.websockets_sansio_impl.WebSocketsSansIOProtocol(config, server_state, app_state, _loop)",
    f"{WS}'s ClientSocket extends it, and uvicorn makes one per upgrade with these arguments",
    FIX_CLIENT_SOCKET,
)
def _sansio_protocol_class() -> None:
    assert _parameters(WebSocketsSansIOProtocol.__init__)[:4] == ["self", "config", "server_state", "app_state"]
    assert "_loop" in _parameters(WebSocketsSansIOProtocol.__init__)
    assert isinstance(_uvicorn_websocket(), WebSocketsSansIOProtocol)


def _hook(name: str, parameters: list[str]) -> None:
    @internal(
        f"WebSocketsSansIOProtocol.{name}({', '.join(parameters[1:])})",
        f"{WS}'s ClientSocket overrides it to serve the client path without ASGI",
        FIX_CLIENT_SOCKET,
    )
    def check() -> None:
        method = getattr(WebSocketsSansIOProtocol, name)
        assert _parameters(method) == parameters, f"its parameters are now {_parameters(method)}"


for _name, _parameters_of_hook in _HOOKS.items():
    _hook(_name, _parameters_of_hook)


def _own_names(cls: type, *instance_attributes: str) -> set[str]:
    return {name for name in [*vars(cls), *getattr(cls, "__annotations__", {})] if not name.startswith("__")} | set(
        instance_attributes
    )


@internal(
    "WebSocketsSansIOProtocol's names (none shared with ClientSocket's own)",
    f"{WS}'s ClientSocket adds attributes and methods of its own (connection, fast_frames, failed, "
    "write_frame, _flush, close_with...); an upstream one of the same name would be silently replaced",
    "rename ClientSocket's (or, for an override of uvicorn's on purpose, add it to _HOOKS here)",
)
def _no_name_collisions() -> None:
    own = _own_names(ClientSocket, "connection", "fast_frames", "failed") - set(_HOOKS)
    upstream = set(dir(WebSocketsSansIOProtocol)) | set(vars(_uvicorn_websocket()))
    assert not own & upstream, f"uvicorn now has {sorted(own & upstream)}"


_STATE: dict[str, Callable[[Any], bool]] = {
    "conn": lambda value: isinstance(value, ServerProtocol),
    "transport": lambda value: value is None,  # set by connection_made
    "loop": lambda value: isinstance(value, asyncio.AbstractEventLoop),
    "handshake_initiated": lambda value: value is False,
    "handshake_complete": lambda value: value is False,
    "close_sent": lambda value: value is False,
    "close_timer": lambda value: value is None,
    "close_timeout": lambda value: isinstance(value, int | float) and value > 0,
    "read_paused": lambda value: value is False,
    "frames": lambda value: value == [],
    "curr_msg_data_type": lambda value: value in ("text", "bytes"),
    "default_headers": lambda value: isinstance(value, list),
    "queue": lambda value: callable(getattr(value, "put_nowait", None)),
    "writable": lambda value: isinstance(value, asyncio.Event),
}
_STATE_USE: dict[str, str] = {
    "conn": "drives websockets' ServerProtocol (accept, send_response, send_close, data_to_send)",
    "transport": "writes frames to it and pauses/resumes reading",
    "loop": "arms its timers on it",
    "handshake_initiated": "sets it as uvicorn's handle_connect does",
    "handshake_complete": "sets it once the 101 (or the refusal) is sent",
    "close_sent": "reads and sets it: past our close frame nothing more is sent or handled",
    "close_timer": "arms it after a close frame and after a failed connection (uvicorn cancels it)",
    "close_timeout": "uses it for the close_timer, as uvicorn does",
    "read_paused": "pauses reading while a client's inbox is full (uvicorn's flag, so both agree)",
    "frames": "reads a whole message's payloads in send_receive_event_to_app",
    "curr_msg_data_type": "tells a text message from a binary one",
    "default_headers": "copies them (list of (bytes, bytes), the Date among them) into the 101",
    "queue": "replaces it with a no-op after the handshake (uvicorn only put_nowait()s into it there)",
    "writable": "replaces it with a no-op after the handshake (uvicorn only set()s and clear()s it there)",
}


def _state(name: str) -> None:
    @internal(
        f"WebSocketsSansIOProtocol().{name}",
        f"{WS}'s ClientSocket {_STATE_USE[name]}",
        FIX_CLIENT_SOCKET,
    )
    def check() -> None:
        socket = _uvicorn_websocket()
        assert name in vars(socket), "not set in __init__ any more"
        value = vars(socket)[name]
        assert _STATE[name](value), f"it is now {value!r}"


for _name in _STATE:
    _state(_name)


@internal(
    "WebSocketsSansIOProtocol.start_keepalive()",
    f"{WS}'s ClientSocket completes the handshake itself and starts uvicorn's keepalive pings with it",
    FIX_CLIENT_SOCKET,
)
def _start_keepalive() -> None:
    assert _parameters(WebSocketsSansIOProtocol.start_keepalive) == ["self"]


# Methods that run only on the ASGI path (or that ClientSocket overrides without calling
# uvicorn's on the client path): the queue and the event are real there.
_ASGI_ONLY = {"send", "receive", "run_asgi", "handle_connect", "send_receive_event_to_app", "handle_parser_exception"}


@internal(
    "WebSocketsSansIOProtocol's use of self.queue outside the ASGI path (put_nowait only)",
    f"{WS}'s ClientSocket replaces the ASGI receive queue with a no-op after the handshake "
    "(it holds a deque per connection)",
    FIX_CLIENT_SOCKET,
)
def _queue_use() -> None:
    uses = {
        method: names
        for method, names in _self_attribute_uses(WebSocketsSansIOProtocol, "queue").items()
        if method not in _ASGI_ONLY and method != "__init__"
    }
    assert all(names <= {"put_nowait"} for names in uses.values()), f"uvicorn now does {uses}"


@internal(
    "WebSocketsSansIOProtocol's use of self.writable outside the ASGI path (set and clear only)",
    f"{WS}'s ClientSocket replaces the 'writable' event with a no-op after the handshake",
    FIX_CLIENT_SOCKET,
)
def _writable_use() -> None:
    uses = {
        method: names
        for method, names in _self_attribute_uses(WebSocketsSansIOProtocol, "writable").items()
        if method not in _ASGI_ONLY and method != "__init__"
    }
    assert all(names <= {"set", "clear"} for names in uses.values()), f"uvicorn now does {uses}"


@internal(
    "WebSocketsSansIOProtocol's use of self.request and self.response (the handshake and ASGI send only)",
    f"{WS}'s ClientSocket deletes both after its handshake (an idle connection keeps no headers)",
    FIX_CLIENT_SOCKET,
)
def _request_response_use() -> None:
    for attribute in ("request", "response"):
        users = set(_self_attribute_uses(WebSocketsSansIOProtocol, attribute)) - {"handle_connect", "send"}
        assert not users, f"uvicorn now uses self.{attribute} in {sorted(users)}"


@internal(
    "WebSocketsSansIOProtocol.handle_events calling handle_connect(Request)",
    f"{WS}'s ClientSocket takes over the upgrade there (its own checks and 101)",
    FIX_CLIENT_SOCKET,
)
async def _handle_connect_is_called() -> None:
    seen: list[object] = []

    class Recording(WebSocketsSansIOProtocol):
        def handle_connect(self, event: Request) -> None:
            seen.append(event)

    socket = _uvicorn_websocket(Recording)
    socket.connection_made(_Transport())  # type: ignore[arg-type]
    _, upgrade = _upgrade_request()
    socket.data_received(upgrade)
    assert len(seen) == 1 and isinstance(seen[0], Request), seen
    assert seen[0].path == "/v1/sessions/s1/ws"


@internal(
    "WebSocketsSansIOProtocol calling send_receive_event_to_app with self.frames and self.curr_msg_data_type",
    f"{WS}'s ClientSocket hands each whole message websockets parsed to the broker there",
    FIX_CLIENT_SOCKET,
)
async def _send_receive_event_is_called() -> None:
    seen: list[tuple[str, list[bytes]]] = []

    class Recording(WebSocketsSansIOProtocol):
        def send_receive_event_to_app(self) -> None:
            seen.append((self.curr_msg_data_type, [bytes(frame) for frame in self.frames]))
            self.frames = []

    socket, client, _ = _open_uvicorn_websocket(Recording)
    socket.data_received(_client_bytes(client, lambda c: c.send_text(b"hello")))
    socket.data_received(_client_bytes(client, lambda c: c.send_binary(b"\x01\x02")))
    socket.data_received(_client_bytes(client, lambda c: c.send_text(b"frag", fin=False)))
    socket.data_received(_client_bytes(client, lambda c: c.send_continuation(b"ment", fin=True)))
    assert seen == [("text", [b"hello"]), ("bytes", [b"\x01\x02"]), ("text", [b"frag", b"ment"])], seen


@internal(
    "WebSocketsSansIOProtocol.data_received calling handle_parser_exception when websockets fails the connection",
    f"{WS}'s ClientSocket sends the close code there and reads on until the client closes",
    FIX_CLIENT_SOCKET,
)
async def _parser_exception_is_handled() -> None:
    seen: list[int | None] = []

    class Recording(WebSocketsSansIOProtocol):
        def handle_parser_exception(self) -> None:
            seen.append(None if self.conn.close_sent is None else self.conn.close_sent.code)

    socket, _, _ = _open_uvicorn_websocket(Recording)
    socket.data_received(b"\x81\x02hi")  # an unmasked client frame: 1002
    assert seen == [1002], seen


@internal(
    "WebSocketsSansIOProtocol.handle_close cancelling close_timer once the peer answers our close",
    f"{WS}'s ClientSocket.close_with arms close_timer itself (as uvicorn's ASGI close does) and "
    "relies on uvicorn to end the connection when the client's close frame comes back",
    FIX_CLIENT_SOCKET,
)
async def _close_timer_cancelled_on_close() -> None:
    socket, client, transport = _open_uvicorn_websocket()
    socket.conn.send_close(1000, "bye")
    client.receive_data(b"".join(socket.conn.data_to_send()))
    client.events_received()
    socket.close_sent = True
    timer = socket.close_timer = socket.loop.call_later(socket.close_timeout, transport.close)
    socket.data_received(b"".join(client.data_to_send()))  # the client's close frame, echoed
    assert timer.cancelled() and socket.close_timer is None and transport.closed


@internal(
    "WebSocketsSansIOProtocol.connection_lost cancelling close_timer",
    f"{WS}'s ClientSocket arms close_timer after a close frame or a failed connection",
    FIX_CLIENT_SOCKET,
)
async def _close_timer_cancelled_on_loss() -> None:
    socket, _, transport = _open_uvicorn_websocket()
    timer = socket.close_timer = socket.loop.call_later(socket.close_timeout, transport.close)
    socket.connection_lost(None)
    assert timer.cancelled() and socket.close_timer is None


@internal(
    "uvicorn.server.ServerState().default_headers",
    f"{WS}'s ClientSocket puts them (uvicorn's Date and Server) in its 101 as (bytes, bytes) pairs",
    FIX_CLIENT_SOCKET,
)
def _default_headers() -> None:
    assert ServerState().default_headers == []
    config = _config()
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in config.encoded_headers)


# --- websockets: the handshake (broker/ws/transport.py) -------------------------------


@internal(
    "websockets.server.ServerProtocol.accept(request).headers['Date']",
    f"{WS}'s ClientSocket deletes websockets' Date header (uvicorn's default headers carry one)",
    FIX_CLIENT_SOCKET,
)
def _accept_has_a_date() -> None:
    _, upgrade = _upgrade_request()
    server = ServerProtocol()
    server.receive_data(upgrade)
    [request] = server.events_received()
    assert isinstance(request, Request)
    response = server.accept(request)
    assert response.status_code == 101 and "Date" in response.headers


# --- websockets: the protocol state the fast frame path reads (broker/ws/frame_codec.py) --


def _protocol_state(name: str, use: str, expected: Callable[[Any], bool]) -> None:
    @internal(f"websockets.protocol.Protocol.{name}", f"{WS_FRAMES} reads it {use}", FIX_FAST_FRAMES)
    def check() -> None:
        for protocol in (Protocol(Side.SERVER, state=State.OPEN, max_size=1000), _handshaken()[1]):
            assert hasattr(protocol, name), f"no `{name}` on {type(protocol).__name__}"
            assert expected(getattr(protocol, name)), f"it is {getattr(protocol, name)!r} on an open connection"


_protocol_state(
    "current_size",
    "to tell that no fragmented message is under way (None)",
    lambda value: value is None,
)
_protocol_state(
    "max_message_size",
    "to refuse a frame over websockets' message limit (websockets then fails it with 1009)",
    lambda value: value is None or isinstance(value, int),
)
_protocol_state(
    "max_fragment_size",
    "to refuse a frame over websockets' fragment limit",
    lambda value: value is None or isinstance(value, int),
)
_protocol_state(
    "extensions",
    "to leave every frame to websockets when an extension (permessage-deflate) is in use",
    lambda value: value == [],
)
_protocol_state(
    "reader",
    "to tell that websockets holds no unparsed bytes (reader.buffer)",
    lambda value: isinstance(value, StreamReader),
)
_protocol_state(
    "writes",
    "to write a server frame itself only when websockets has nothing of its own waiting",
    lambda value: isinstance(value, list),
)
_protocol_state(
    "expect_continuation_frame",
    "to write a server frame itself only outside a fragmented message of websockets'",
    lambda value: value is False,
)


@internal(
    "websockets.protocol.Protocol(max_size=int) -> max_message_size, max_fragment_size",
    f"{WS_FRAMES} compares a frame's length with both limits, as websockets' parser does",
    FIX_FAST_FRAMES,
)
def _max_size_split() -> None:
    protocol = Protocol(Side.SERVER, state=State.OPEN, max_size=1234)
    assert (protocol.max_message_size, protocol.max_fragment_size) == (1234, None)


@internal(
    "websockets.streams.StreamReader.buffer",
    f"{WS_FRAMES} reads a frame itself only when websockets' reader holds no bytes",
    FIX_FAST_FRAMES,
)
def _reader_buffer() -> None:
    reader = StreamReader()
    assert isinstance(reader.buffer, bytearray | bytes) and not reader.buffer
    reader.feed_data(b"x")
    assert bytes(reader.buffer) == b"x"


def _innermost(generator: Any) -> Any:
    while (inner := generator.gi_yieldfrom) is not None:
        generator = inner
    return generator


@internal(
    "websockets.protocol.Protocol.parser waiting in StreamReader.at_eof between frames",
    f"{WS_FRAMES} follows the parser generator's gi_yieldfrom chain to tell it waits for a new frame "
    "(and not for the rest of one whose head it read)",
    FIX_FAST_FRAMES,
)
def _parser_between_frames() -> None:
    assert inspect.isgeneratorfunction(StreamReader.at_eof)
    client, server = _handshaken()
    fresh = Protocol(Side.SERVER, state=State.OPEN)
    for protocol in (fresh, server):
        assert inspect.isgenerator(protocol.parser) and hasattr(protocol.parser, "gi_yieldfrom")
        assert _innermost(protocol.parser).gi_code is StreamReader.at_eof.__code__, "not between frames"
    server.receive_data(_client_bytes(client, lambda c: c.send_text(b"one")))
    server.events_received()
    assert _innermost(server.parser).gi_code is StreamReader.at_eof.__code__, "not between frames after one"
    frame = _client_bytes(client, lambda c: c.send_text(b"two"))
    server.receive_data(frame[:3])  # a frame's head, not its whole
    assert _innermost(server.parser).gi_code is not StreamReader.at_eof.__code__


@internal(
    "broker.ws.frame_codec.readable(uvicorn's ServerProtocol)",
    f"{WS_FRAMES}'s fast path is on only where every piece of websockets state above is as expected "
    "(it turns itself off, silently, otherwise)",
    FIX_FAST_FRAMES,
)
async def _fast_path_is_on() -> None:
    socket = _uvicorn_websocket()
    assert frame_codec.readable(socket.conn)
    assert frame_codec.readable(_handshaken()[1])


@internal(
    "websockets.speedups.apply_mask (C)",
    f"{WS_FRAMES} unmasks a client frame's payload with it (websockets.utils.apply_mask if absent: slower)",
    "check that websockets' wheel still ships its C extension, or update the import in broker/ws/frame_codec.py",
)
def _apply_mask() -> None:
    from websockets.speedups import apply_mask
    from websockets.utils import apply_mask as python_apply_mask

    assert apply_mask(b"hello", b"\x01\x02\x03\x04") == python_apply_mask(b"hello", b"\x01\x02\x03\x04")
    assert vars(frame_codec)["apply_mask"] is apply_mask


# --- websockets / uvicorn: log records the broker filters (broker/runtime/logs.py) --------------------


@internal(
    "websockets' frame traces ('< %s' / '> %s' with the Frame)",
    f"{LOGS}'s DropFrameTraces drops them by their message (payloads hold answers)",
    "update DropFrameTraces in broker/runtime/logs.py",
)
def _frame_traces() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("qbroker.tests.upstream-frame-traces")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.handlers[:] = [Keep()]
    client = ClientProtocol(parse_uri("ws://broker.test/"), logger=logger)
    server = ServerProtocol(logger=logger)
    client.send_request(client.connect())
    server.receive_data(b"".join(client.data_to_send()))
    [request] = server.events_received()
    assert isinstance(request, Request)
    server.send_response(server.accept(request))
    client.receive_data(b"".join(server.data_to_send()))
    server.send_text(b"the answer")
    client.receive_data(b"".join(server.data_to_send()))
    traces = [record for record in records if "the answer" in record.getMessage()]
    assert len(traces) == 2, [record.getMessage() for record in records]  # sent and received
    drop = DropFrameTraces()
    assert not any(drop.filter(record) for record in traces), [(r.msg, r.args) for r in traces]


@internal(
    "websockets' 'connection open' / 'connection closed' info records, on uvicorn's 'uvicorn.error' logger",
    f"{LOGS}'s QuietConnections turns those two messages into debug lines",
    "update QuietConnections in broker/runtime/logs.py",
)
async def _connection_lines() -> None:
    socket = _uvicorn_websocket()
    logger = socket.conn.logger
    assert logger is logging.getLogger("uvicorn.error")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep, level = Keep(), logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        _, upgrade = _upgrade_request()
        server = ServerProtocol(logger=logger)
        server.receive_data(upgrade)
        [request] = server.events_received()
        assert isinstance(request, Request)
        server.send_response(server.accept(request))
        server.receive_eof()
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
    lines = [record for record in records if record.msg in ("connection open", "connection closed")]
    assert [(record.levelno, record.msg) for record in lines] == [
        (logging.INFO, "connection open"),
        (logging.INFO, "connection closed"),
    ], [(record.levelno, record.msg) for record in records]
    quiet = QuietConnections(logging.INFO)
    assert not any(quiet.filter(record) for record in lines)


# --- uvicorn: the HTTP protocol CoalescingHttpProtocol extends (broker/speedups/http_protocol.py)


@internal(
    "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol.on_headers_complete() setting self.cycle",
    f"{HTTP}'s CoalescingHttpProtocol overrides it, then gives the request's RequestResponseCycle a "
    "transport that holds the response head back for the body",
    FIX_HTTP,
)
async def _on_headers_complete() -> None:
    assert _parameters(HttpToolsProtocol.on_headers_complete) == ["self"]
    assert _own_names(CoalescingHttpProtocol) == {"on_headers_complete"}
    protocol = HttpToolsProtocol(_config(), ServerState(), {}, _loop=asyncio.get_running_loop())
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: broker.test\r\n\r\n")
    cycle = protocol.cycle
    assert isinstance(cycle, RequestResponseCycle) and cycle.transport is protocol.transport
    assert protocol.transport is transport  # type: ignore[comparison-overlap]
    for _ in range(10):
        await asyncio.sleep(0)
    protocol.connection_lost(None)


@internal(
    "uvicorn's RequestResponseCycle writing the head (b'HTTP/...') and the body through cycle.transport",
    f"{HTTP}'s HeldHead recognises the head by its b'HTTP/' start and joins it to the body's first write",
    FIX_HTTP,
)
async def _one_write_per_response() -> None:
    assert all(line.startswith(b"HTTP/1.1 ") for line in STATUS_LINE.values())
    assert "transport" in _parameters(RequestResponseCycle.__init__)
    written: dict[str, list[bytes]] = {}
    for cls in (HttpToolsProtocol, CoalescingHttpProtocol):
        protocol = cls(_config(), ServerState(), {}, _loop=asyncio.get_running_loop())
        transport = _Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.data_received(b"GET / HTTP/1.1\r\nHost: broker.test\r\n\r\n")
        if cls is CoalescingHttpProtocol:
            assert isinstance(protocol.cycle, RequestResponseCycle) and isinstance(protocol.cycle.transport, HeldHead)
        for _ in range(10):
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        written[cls.__name__] = transport.writes
    plain, coalesced = written["HttpToolsProtocol"], written["CoalescingHttpProtocol"]
    assert plain[0].startswith(b"HTTP/1.1 200 ") and b"".join(plain).endswith(b"\r\n\r\n{}"), plain
    assert coalesced == [b"".join(plain)], (plain, coalesced)


@internal(
    "uvicorn.Config(http=<protocol class>, ws=<protocol class>)",
    f"{SERVER} hands uvicorn the broker's own protocol classes (CoalescingHttpProtocol, ClientSocket)",
    "update broker/server.py to however uvicorn now takes protocol classes",
)
def _config_takes_classes() -> None:
    config = _config(http=CoalescingHttpProtocol, ws=ClientSocket)
    assert config.http_protocol_class is CoalescingHttpProtocol
    assert config.ws_protocol_class is ClientSocket


# --- uvicorn: the server broker/server.py extends ----------------------------------------------


@internal(
    "uvicorn.Server.startup(sockets) and Server.started",
    f"{SERVER}'s _Server overrides startup to print the banner once uvicorn listens (started)",
    "update _Server in broker/server.py",
)
def _server_startup() -> None:
    assert _defined_parameters(uvicorn.Server, "startup") == ["self", "sockets"]
    assert inspect.iscoroutinefunction(uvicorn.Server.startup)
    assert uvicorn.Server(_config()).started is False


@internal(
    "uvicorn.Server.handle_exit(sig, frame) and Server.should_exit",
    f"{SERVER}'s _Server overrides handle_exit to tell the broker a shutdown began (long polls answer 202)",
    "update _Server in broker/server.py",
)
def _server_handle_exit() -> None:
    # (Read off uvicorn's source: importing mcp replaces Server.handle_exit with sse-starlette's
    # (*args, **kwargs) wrapper, which calls uvicorn's with the same arguments.)
    assert _defined_parameters(uvicorn.Server, "handle_exit") == ["self", "sig", "frame"]
    assert uvicorn.Server(_config()).should_exit is False


# --- redis-py: what the Redis store replaces or reads (broker/store/redis/) ---------------------


@internal(
    "redis.utils.HIREDIS_AVAILABLE",
    f"{CONNECTIONS}'s _packing_in_c packs with hiredis only when redis-py says hiredis is there",
    "check that hiredis is installed and that redis-py still detects it",
)
def _hiredis_available() -> None:
    assert HIREDIS_AVAILABLE is True


_PACKED = [
    ("EVALSHA", "a" * 40, 2, "qb:{s}:q:x", "qb:{s}:seq", 0, -7, 2**63 - 1, 1700000000.25, b"\x97\x00", "\u00e9"),
    ("SCRIPT LOAD", "return 1"),
    (b"CLIENT KILL", "TYPE", "pubsub"),
    ("SET", "k", 2**70),
    ("PUBLISH", "qb:{s}:events", b""),
]


@internal(
    "redis.asyncio.connection.AbstractConnection.pack_command(*args)",
    f"{CONNECTIONS}'s _packing_in_c replaces it in a subclass of the pool's connection class with hiredis' "
    "packer, which must pack the same bytes (and fall back to it for what hiredis refuses)",
    FIX_PACKING,
)
def _pack_command() -> None:
    assert _parameters(AbstractConnection.pack_command) == ["self", "args"]
    python = Connection()
    fast = redis_connections._packing_in_c(Connection)()
    assert set(vars(type(fast))) - {"__module__", "__doc__", "__qualname__"} == {"pack_command"}
    for command in _PACKED:
        packed = python.pack_command(*command)
        assert isinstance(packed, list) and all(isinstance(part, bytes | memoryview) for part in packed)
        assert b"".join(fast.pack_command(*command)) == b"".join(packed), command


@internal(
    "redis.asyncio.BlockingConnectionPool.connection_class (and connection_kwargs)",
    f"{CONNECTIONS} swaps the pool's connection class for the one _packing_in_c makes, and reads the "
    "pool's connection_kwargs (encoding, decode_responses)",
    FIX_PACKING,
)
def _pool_connection_class() -> None:
    pool = BlockingConnectionPool.from_url("redis://localhost:6379/0", max_connections=2, timeout=1)
    assert pool.connection_class is Connection and isinstance(pool.connection_kwargs, dict)
    pool.connection_class = redis_connections._packing_in_c(pool.connection_class)
    connection = pool.make_connection()  # type: ignore[no-untyped-call]
    assert type(connection) is pool.connection_class
    assert Redis.from_pool(pool).connection_pool is pool


@internal(
    "redis.asyncio.connection.Connection._parser.set_pubsub_push_handler",
    f"{LINKS}'s _quiet_push_trace sets a handler that does not log every pub/sub message "
    "(notices carry answers) where redis-py's parser would trace them at debug",
    "update _quiet_push_trace in broker/store/redis/links.py so that no notice reaches the logs",
)
def _push_handler() -> None:
    connection = Connection()
    parser = connection._parser
    if hasattr(parser, "handle_pubsub_push_response"):  # the parser traces pub/sub pushes
        assert callable(getattr(parser, "set_pubsub_push_handler", None)), f"{type(parser).__name__} has none"
        redis_links._quiet_push_trace(connection)
        assert parser.pubsub_push_handler_func is redis_links._pass_push  # type: ignore[attr-defined]


def _link_method(name: str, parameters: set[str], use: str) -> None:
    @internal(
        f"redis.asyncio.connection.AbstractConnection.{name}",
        f"{LINKS}'s Link {use}, on redis-py's connections and on redis_wire's NoticeConnection alike",
        FIX_LINK,
    )
    def check() -> None:
        upstream = inspect.getattr_static(AbstractConnection, name)
        if isinstance(upstream, property):
            assert isinstance(inspect.getattr_static(redis_wire.NoticeConnection, name), property)
            return
        assert parameters <= set(_parameters(upstream)), f"its parameters are now {_parameters(upstream)}"
        assert parameters <= set(_parameters(getattr(redis_wire.NoticeConnection, name)))


_link_method("connect", set(), "opens the notice connection with it")
_link_method("pack_commands", {"commands"}, "packs its SUBSCRIBE commands with it")
_link_method("send_packed_command", {"check_health"}, "sends the packed subscriptions with it")
_link_method(
    "read_response", {"timeout", "push_request"}, "reads notices with read_response(timeout=, push_request=True)"
)
_link_method("disconnect", {"nowait"}, "closes the connection with disconnect(nowait=True)")
_link_method("is_connected", set(), "tells a connection that is up")


@internal(
    "redis.asyncio.connection.AbstractConnection.send_command(*args, check_health=)",
    f"{LINKS}'s Link sends (UN)SUBSCRIBE and PING with send_command(..., check_health=False)",
    FIX_LINK,
)
def _send_command() -> None:
    assert _parameters(AbstractConnection.send_command) == ["self", "args", "kwargs"]
    assert "check_health" in inspect.getsource(AbstractConnection.send_command)


@internal(
    "redis.commands.core.AsyncScript.sha / .script",
    f"{COMMANDS} runs the scripts with EVALSHA script.sha itself (not through Script.__call__) and sets "
    "script.sha after a SCRIPT LOAD",
    "update Commands.run in broker/store/redis/commands.py",
)
def _script_sha() -> None:
    script = Redis().register_script("return 1")
    assert isinstance(script, AsyncScript) and script.script == "return 1"
    assert script.sha == hashlib.sha1(b"return 1").hexdigest()
    script.sha = "0" * 40
    assert script.sha == "0" * 40


@internal(
    "redis.asyncio.cluster.RedisCluster.get_connection_kwargs()",
    f"{COMMANDS} reads a cluster client's connection settings (decode_responses) with it",
    FIX_CLUSTER,
)
def _cluster_connection_kwargs() -> None:
    assert _parameters(RedisCluster.get_connection_kwargs) == ["self"]


@internal(
    "redis.asyncio.cluster.NodesManager.get_node_from_slot / get_node(node_name=) / initialize",
    f"{ROUTING} routes each session's notices to its slot's primary and re-reads the slot map after a failover",
    FIX_CLUSTER,
)
def _nodes_manager() -> None:
    assert _parameters(NodesManager.get_node_from_slot)[:2] == ["self", "slot"]
    assert "node_name" in _parameters(NodesManager.get_node)
    assert inspect.iscoroutinefunction(NodesManager.initialize)
    assert "__init__" in _self_attribute_uses(RedisCluster, "nodes_manager"), "no RedisCluster().nodes_manager"
    for name in ("keyslot", "get_primaries", "initialize", "mget_nonatomic"):
        assert callable(getattr(RedisCluster, name, None)), f"no RedisCluster.{name}"


@internal(
    "redis.asyncio.cluster.ClusterNode.connection_class / connection_kwargs",
    f"{ROUTING} opens each primary's notice connection itself, with the node's class and settings",
    FIX_CLUSTER,
)
def _cluster_node() -> None:
    node = ClusterNode("localhost", 7000)
    assert isinstance(node.connection_kwargs, dict) and issubclass(node.connection_class, AbstractConnection)


# --- redis-py and hiredis: what RedisWire stands in for (broker/speedups/redis_wire.py) --------


@internal(
    "redis.asyncio.connection.parse_url",
    f"{WIRE}'s RedisWire.from_url reads a URL with it, and takes only URLs whose options it knows "
    "(anything else stays with redis-py)",
    FIX_WIRE,
)
def _parse_url() -> None:
    assert set(parse_url("redis://user:secret@localhost:6380/2")) <= redis_wire._URL_OPTIONS
    unix = parse_url("unix:///run/redis.sock?db=1")
    assert set(unix) <= redis_wire._UNIX_URL_OPTIONS and unix["path"] == "/run/redis.sock"
    assert "protocol" in parse_url("redis://localhost/0?protocol=3")
    assert redis_wire.RedisWire.from_url("redis://localhost/0?protocol=3", connect_timeout=1, timeout=1) is None


@internal(
    "redis._parsers.base.BaseParser.parse_error (error replies as redis-py's exception classes)",
    f"{WIRE} classifies error replies by their first word into redis-py's classes, so that a caller's "
    "except clause works for both clients",
    "update _ERROR_KINDS in broker/speedups/redis_wire.py",
)
def _error_kinds() -> None:
    for word, ours in redis_wire._ERROR_KINDS.items():
        theirs = type(BaseParser.parse_error(f"{word} something"))  # type: ignore[no-untyped-call]
        assert issubclass(ours, theirs), f"{word}: redis-py raises {theirs.__name__}, we {ours.__name__}"
    for retried in ("LOADING", "NOAUTH"):  # retried as connection errors, as by redis-py
        error = BaseParser.parse_error(f"{retried} x")  # type: ignore[no-untyped-call]
        assert isinstance(error, RedisConnectionError), retried


@internal(
    "hiredis.Reader(replyError=).feed / .gets / hiredis.ProtocolError",
    f"{WIRE} parses every reply with it: an error reply as the object replyError makes, False for "
    "'not whole yet', ProtocolError for garbage",
    FIX_WIRE,
)
def _hiredis_reader() -> None:
    reader = hiredis.Reader(replyError=redis_wire._reply_error)
    reader.feed(b"-NOSCRIPT No matching script\r\n+OK\r\n:7\r\n$3\r\nab")
    error = reader.gets()
    assert type(error).__name__ == "NoScriptError" and str(error) == "NOSCRIPT No matching script"
    assert (reader.gets(), reader.gets(), reader.gets()) == (b"OK", 7, False)
    broken = hiredis.Reader()
    broken.feed(b"?what\r\n")
    with pytest.raises(hiredis.ProtocolError):
        broken.gets()


@internal(
    "hiredis.pack_command(tuple)",
    f"{WIRE} packs every command with it (and {CONNECTIONS}'s _packing_in_c, for redis-py's connections)",
    FIX_WIRE,
)
def _hiredis_pack_command() -> None:
    python = Connection()
    for command in _PACKED:
        head, *rest = command
        words = (head.encode() if isinstance(head, str) else bytes(head)).split()  # type: ignore[arg-type]
        assert hiredis.pack_command((*words, *rest)) == b"".join(python.pack_command(*command)), command  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hiredis.pack_command(("SET", "k", object()))  # type: ignore[arg-type]


# --- asyncio (and uvloop): what eager.py builds on (broker/speedups/eager.py) -------------------


@internal(
    "asyncio.Future.__await__ yielding the future itself",
    f"{EAGER}'s eagerly() tells a wait on a Resumable (a Redis reply) by what the coroutine yields",
    "update broker/speedups/eager.py (or run every frame's work in a task: Store.eager_safe = False)",
)
async def _future_yields_itself() -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        await future

    coroutine = waits()
    assert coroutine.send(None) is future
    coroutine.close()


def _continuation_in_a_task(new_loop: Callable[[], asyncio.AbstractEventLoop]) -> list[str]:
    """Run a _Continuation in a task on a loop of ``new_loop``'s, in a thread of its own (the
    test's own loop is running)."""
    ran: list[str] = []

    async def work(gate: asyncio.Future[str]) -> None:
        ran.append(await gate)

    async def main() -> None:
        gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        coroutine = work(gate)
        waiting_on = coroutine.send(None)
        task = asyncio.ensure_future(_Continuation(coroutine, waiting_on))
        await asyncio.sleep(0)
        assert not task.done()
        gate.set_result("woken")
        await task

    def run() -> None:
        loop = new_loop()
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()
    return ran


@internal(
    "asyncio.Task running a collections.abc.Coroutine that is not a native coroutine",
    f"{EAGER} hands a coroutine already started to a task through _Continuation, which returns the "
    "future the coroutine waits on from the task's first step (asyncio's and uvloop's loops)",
    "update broker/speedups/eager.py (or run every frame's work in a task: Store.eager_safe = False)",
)
def _task_takes_a_continuation() -> None:
    assert _continuation_in_a_task(asyncio.new_event_loop) == ["woken"]
    assert _continuation_in_a_task(uvloop.new_event_loop) == ["woken"]
