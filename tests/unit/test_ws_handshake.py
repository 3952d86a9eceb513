"""broker/ws/handshake.py: which upgrades are the broker's sockets, which are refused and
why, and which connection an accepted one runs (no transport: the handshake is a function
of the path and the headers)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from websockets.datastructures import Headers

from broker.core.frames import MSGPACK_SUBPROTOCOL
from broker.runtime.config import Config
from broker.service import Broker
from broker.store.memory import MemoryStore
from broker.ws.connection import WebsocketConnection
from broker.ws.handshake import handshake_for
from broker.ws.inbox import InboxConnection
from broker.ws.session import ClientConnection
from broker.ws.socket import Accept, Refuse

# A browser and every HTTP/1.1 client send Host; the broker answers only for its own names.
LOCAL = {"Host": "localhost:8700"}


class IdleSocket:
    """A ``Socket`` that is never written to here."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.close_sent = False
        self.sending = True

    def write_frame(self, data: bytes, text: bool) -> None:
        raise AssertionError("nothing is written in a handshake test")

    def write_frames(self, payloads: list[bytes], text: bool) -> None:
        raise AssertionError("nothing is written in a handshake test")

    def close_with(self, code: int, reason: str = "") -> None:
        self.close_sent = True

    def pause_reading_for_backlog(self, paused: bool) -> None:
        pass


def _broker(**settings: Any) -> Broker:
    return Broker(replace(Config(), secret="unit-test-secret-unit-test-secret-0123", **settings), MemoryStore())


def test_other_paths_are_left_to_the_app() -> None:
    handshake = handshake_for(_broker())
    assert handshake("/v1/sessions/s1/mcp", Headers(LOCAL)) is None
    assert handshake("/v1/inbox", Headers(LOCAL)) is None
    assert handshake("/", Headers(LOCAL)) is None


async def test_the_session_path_runs_a_client_connection_with_the_chosen_subprotocol() -> None:
    handshake = handshake_for(_broker())
    answer = handshake(
        "/v1/sessions/s1/ws", Headers({**LOCAL, "Sec-WebSocket-Protocol": "nope, " + MSGPACK_SUBPROTOCOL})
    )
    assert isinstance(answer, Accept) and answer.subprotocol == MSGPACK_SUBPROTOCOL
    connection = answer.connect(IdleSocket())
    assert isinstance(connection, ClientConnection) and connection.session_id == "s1"
    assert connection.codec == "msgpack"
    connection.lost()


async def test_the_inbox_path_runs_an_inbox_connection_that_is_no_session_connection() -> None:
    answer = handshake_for(_broker())("/v1/inbox/ws", Headers(LOCAL))
    assert isinstance(answer, Accept) and answer.subprotocol is None
    connection = answer.connect(IdleSocket())
    assert isinstance(connection, InboxConnection) and isinstance(connection, WebsocketConnection)
    assert not isinstance(connection, ClientConnection) and not hasattr(connection, "session_id")
    connection.lost()


def test_refusals_say_why_when_an_operator_can_fix_it() -> None:
    handshake = handshake_for(_broker(allowed_origins=("https://ok.example",)))
    foreign = Headers({"Origin": "https://evil.example", "Host": "localhost:8700"})
    assert handshake("/v1/sessions/s1/ws", foreign) == Refuse(
        {"session": "s1", "reason": "origin not allowed", "origin": "https://evil.example", "host": "localhost:8700"}
    )
    assert handshake("/v1/sessions/a%20b/ws", Headers(LOCAL)) == Refuse(
        {"session": "a%20b", "reason": "invalid session id", "origin": "", "host": "localhost:8700"}
    )
    assert handshake("/v1/sessions/s1/ws", Headers({**LOCAL, "Origin": "https://ok.example"})) is not None
    # A client offering only other subprotocols is refused without a log line (nothing to fix).
    assert handshake("/v1/inbox/ws", Headers({**LOCAL, "Sec-WebSocket-Protocol": "chat"})) == Refuse()


def test_a_draining_broker_refuses_new_sockets() -> None:
    broker = _broker()
    broker.begin_shutdown()
    assert handshake_for(broker)("/v1/sessions/s1/ws", Headers(LOCAL)) == Refuse()
