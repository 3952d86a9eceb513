"""The client connection's flow control, against a fake socket (the wire is tested end to end
in tests/integration/test_protocol_websocket.py and test_protocol_limits.py).

What only a fake socket can show on demand: a socket that stops draining gets its frames
queued in order and sent when it drains, and a client that falls too far behind is closed;
a burst of received frames pauses reading until the handler catches up.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from broker.core.model import StartInput, parse_tool_input
from broker.core.status import CloseCode
from broker.runtime.config import Config
from broker.service import Broker, Encoded
from broker.store.memory import MemoryStore
from broker.tokens.claims import mint_token
from broker.ws import connection as connection_module
from broker.ws import session
from tests.helpers.waiting import eventually

SECRET = "unit-test-secret-unit-test-secret-0123"


class FakeSocket:
    """A ``Socket`` (broker/ws/socket.py): what a connection uses of the transport."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.written: list[dict[str, Any]] = []
        self.writes: list[list[str]] = []  # the frame types of each write, one list per write
        self.closed_with: tuple[int, str] | None = None
        self.close_sent = False
        self.sending = True  # False once either side began the closing handshake
        self.reading_paused: list[bool] = []

    def write_frame(self, data: bytes, text: bool) -> None:
        self.write_frames([data], text)

    def write_frames(self, payloads: list[bytes], text: bool) -> None:
        assert text
        frames = [json.loads(data) for data in payloads]
        self.written.extend(frames)
        self.writes.append([frame["type"] for frame in frames])

    def close_with(self, code: int, reason: str = "") -> None:
        if not self.close_sent:
            self.closed_with, self.close_sent = (code, reason), True

    def pause_reading_for_backlog(self, paused: bool) -> None:
        if paused != (self.reading_paused[-1] if self.reading_paused else False):
            self.reading_paused.append(paused)  # changes only, as the real socket acts


class TaskMemoryStore(MemoryStore):
    """The memory store, saying its calls may wait (as Redis's do): a client's frames are
    then handled by a worker task, not at once."""

    eager_safe = False


async def connection(
    store: MemoryStore | None = None, **settings: Any
) -> tuple[session.ClientConnection, FakeSocket, Broker]:
    config = replace(Config(), secret=SECRET, **settings)
    broker = Broker(config, store or MemoryStore())
    socket = FakeSocket()
    return session.ClientConnection(socket, broker, "s1", "json"), socket, broker


def hello(session: str = "s1") -> str:
    token = mint_token(SECRET, session, "client")
    return json.dumps({"type": "hello", "token": token, "client": {"kind": "bot", "name": "unit"}})


async def settle(client: session.ClientConnection) -> None:
    for _ in range(100):
        if not client.working:
            return
        await asyncio.sleep(0)
    raise AssertionError("the connection's worker did not finish")


async def joined(
    store: MemoryStore | None = None, **settings: Any
) -> tuple[session.ClientConnection, FakeSocket, Broker]:
    client, socket, broker = await connection(store, **settings)
    client.received(hello())
    await settle(client)
    assert [f["type"] for f in socket.written] == ["welcome", "idle"]
    socket.written.clear()
    return client, socket, broker


def pong(n: int) -> Encoded:
    return Encoded({"type": "pong", "n": n})


async def test_frames_wait_while_the_socket_does_not_drain_and_go_out_in_order_when_it_does() -> None:
    client, socket, _ = await joined()
    client.writable = False  # what ClientSocket.pause_writing sets
    for n in range(3):
        client.deliver(pong(n))
    assert socket.written == []
    client.drain()
    assert [f["n"] for f in socket.written] == [0, 1, 2]
    client.deliver(pong(3))
    assert socket.written[-1]["n"] == 3


async def test_a_questionnaire_ends_with_closed_and_the_next_view_in_one_write() -> None:
    client, socket, broker = await joined()
    await broker.start()  # the store's notices reach the clients
    questions = parse_tool_input(
        {
            "action": "start",
            "questions": [{"id": "q1", "label": "Q", "prompt": "?", "type": "single", "options": [{"id": "a"}]}],
        }
    )
    assert isinstance(questions, StartInput)
    agent = asyncio.create_task(broker.start_questionnaire("s1", questions.questions, None, wait=5))
    for _ in range(100):
        if socket.written:
            break
        await asyncio.sleep(0)
    shown = socket.written[-1]
    assert shown["type"] == "question"
    socket.writes.clear()
    answer = {"type": "answer", "questionnaireId": shown["questionnaireId"], "step": shown["step"], "questionId": "q1"}
    client.received(json.dumps({**answer, "selectedOptionIds": ["a"]}))
    await settle(client)
    assert socket.writes == [["closed", "idle"]]
    assert (await agent)[0] == 200
    await broker.stop()


async def test_frames_queued_together_drain_in_order() -> None:
    client, socket, _ = await joined()
    client.writable = False
    client.deliver(pong(0), pong(1))
    client.deliver(pong(2))
    client.drain()
    assert [f["n"] for f in socket.written] == [0, 1, 2]


async def test_a_client_too_far_behind_is_closed_1008() -> None:
    client, socket, _ = await joined()
    client.writable = False
    for n in range(connection_module.OUTBOUND_QUEUE):
        client.deliver(pong(n))
    assert socket.closed_with is None
    client.deliver(pong(connection_module.OUTBOUND_QUEUE))
    assert socket.closed_with == (CloseCode.POLICY_VIOLATION, "client too slow")
    client.deliver(pong(0))
    client.drain()
    assert socket.written == []  # nothing more goes to a closing socket


async def test_a_socket_the_client_began_to_close_takes_no_frames_and_raises_nothing() -> None:
    client, socket, _ = await joined()
    client.writable = False
    client.deliver(pong(0))
    socket.sending = False  # the client's close frame arrived; the connection is not lost yet
    client.deliver(pong(1))
    client.writable = True
    client.deliver(pong(2))
    client.drain()
    assert socket.written == []


async def test_on_the_memory_store_a_frame_is_handled_at_once_with_no_task() -> None:
    client, socket, _ = await joined()
    client.received(json.dumps({"type": "ping", "ref": 1}))
    assert not client.working and client.worker is None
    assert socket.written == [{"type": "pong"}]


async def test_a_burst_of_frames_pauses_reading_until_they_are_handled() -> None:
    client, socket, _ = await joined(TaskMemoryStore())
    assert client.worker is None
    for _ in range(connection_module.INBOX_HIGH):
        client.received(json.dumps({"type": "ping"}))
    assert socket.reading_paused == [True]
    await settle(client)
    assert socket.reading_paused == [True, False]
    assert [f["type"] for f in socket.written] == ["pong"] * connection_module.INBOX_HIGH


async def test_frames_beyond_the_rate_limit_close_1008() -> None:
    client, socket, _ = await joined(rate_limit=0.001, rate_burst=3)
    for _ in range(4):
        client.received(json.dumps({"type": "ping"}))
    await settle(client)
    assert socket.closed_with == (CloseCode.POLICY_VIOLATION, "rate limit exceeded")
    assert [f["type"] for f in socket.written] == ["pong"] * 3


async def test_frames_after_the_hello_wait_for_the_join() -> None:
    client, socket, _ = await connection()
    client.received(hello())
    client.received(json.dumps({"type": "ping", "ref": 1}))
    await settle(client)
    assert [f["type"] for f in socket.written] == ["welcome", "idle", "pong"]


@pytest.mark.parametrize(
    ("first", "closed_with"),
    [
        ({"type": "hello"}, (CloseCode.BAD_TOKEN, "missing token: hello 'token' must be a string")),
        ({"type": "hello", "token": 5}, (CloseCode.BAD_TOKEN, "missing token: hello 'token' must be a string")),
        ({"type": "hello", "token": "t", "x": 1}, (CloseCode.PROTOCOL_VIOLATION, "hello frame has unknown key(s): x")),
        ({"type": "hello", "token": "t", "client": 1}, (CloseCode.PROTOCOL_VIOLATION, "hello 'client' must be a map")),
        (
            {"type": "hello", "token": "t", "ref": True},
            (CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello"),
        ),
        ({"type": "cancel", "step": 0}, (CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")),
        ({"type": "ping"}, (CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")),
        (["hello"], (CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")),
    ],
    ids=["no-token", "token-a-number", "unknown-key", "client-not-a-map", "bad-ref", "bad-cancel", "ping", "list"],
)
async def test_a_bad_first_frame_closes_with_the_code_for_what_is_wrong(
    first: Any, closed_with: tuple[int, str]
) -> None:
    client, socket, _ = await connection()
    client.received(json.dumps(first))
    await settle(client)
    assert socket.closed_with == closed_with


async def test_no_hello_in_time_closes_4408() -> None:
    client, socket, _ = await connection(hello_timeout=0.01)
    await eventually(lambda: socket.closed_with is not None, "the hello timer to close", timeout=2, interval=0.01)
    assert socket.closed_with == (CloseCode.HELLO_TIMEOUT, "no hello in time")


async def test_a_lost_socket_leaves_the_session_after_a_join_in_progress() -> None:
    client, socket, broker = await connection(TaskMemoryStore())
    client.received(hello())
    client.lost()  # the socket goes while the join is still running
    await settle(client)
    for _ in range(100):
        if broker.local_clients("s1") == 0:
            break
        await asyncio.sleep(0)
    assert broker.local_clients("s1") == 0
    client.deliver(pong(0))
    assert [f["type"] for f in socket.written] == []
