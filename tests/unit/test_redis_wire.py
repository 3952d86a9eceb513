"""RedisWire, the pipelined RESP connection, against a fake Redis the test controls.

The fake server (FakeRedis) parses commands with hiredis and answers with hand-written RESP,
so each test decides exactly what "Redis" does: echo, answer with an error, close the socket
on a given command, or never answer at all. No redis-server is needed.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import hiredis
import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis import exceptions as redis_errors

from broker.speedups.eager import Resuming, eagerly
from broker.speedups.redis_wire import NoticeConnection, RedisWire, pack_evalsha
from tests.helpers.waiting import eventually

BOUND = 5.0  # seconds any one await here may take before the test fails rather than hangs

Command = list[bytes]
Reply = Callable[[Command], bytes | None]  # the fake's answer to a command; None: say nothing


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def standard_reply(command: Command) -> bytes:
    """What the fake Redis says unless a test says otherwise: ECHO echoes, the rest is OK."""
    if command[0].upper() == b"ECHO":
        return bulk(command[1])
    return b"+OK\r\n"


def by_name(table: dict[bytes, bytes]) -> Reply:
    """Answers by command name from ``table``; ECHO and the rest as usual."""
    return lambda command: table.get(command[0], standard_reply(command))


class FakeRedis:
    """A RESP server on 127.0.0.1 with knobs, counting its connections and the commands it saw."""

    def __init__(self) -> None:
        self.reply: Reply = standard_reply
        self.drop_on: set[int] = set()  # 1-based numbers (over all connections) of commands that close the socket
        self.silent = False  # take commands, never answer
        self.connections = 0
        self.open_connections = 0
        self.commands: list[Command] = []
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    def wire(self, *, timeout: float = 1.0) -> RedisWire:
        return RedisWire("127.0.0.1", self.port, connect_timeout=1.0, timeout=timeout)

    def url(self, userinfo: str = "", path: str = "") -> str:
        """``redis://{userinfo}127.0.0.1:PORT{path}``, e.g. userinfo ``user:pw@`` and path ``/3``."""
        return f"redis://{userinfo}127.0.0.1:{self.port}{path}"

    async def saw(self, count: int) -> None:
        """Wait (bounded) until the server has received ``count`` commands."""
        await eventually(lambda: len(self.commands) >= count, f"{count} commands", timeout=BOUND, interval=0.005)

    def send(self, data: bytes) -> None:
        """Write ``data`` on the newest connection, whatever it was asked: a late reply."""
        self._writers[-1].write(data)

    async def all_closed(self) -> None:
        """Wait (bounded) until the client has closed every connection."""
        await eventually(lambda: not self.open_connections, "every connection closed", timeout=BOUND, interval=0.005)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_connections += 1
        self._writers.append(writer)
        parser = hiredis.Reader()
        try:
            while data := await reader.read(65536):
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    self.commands.append(command)
                    if len(self.commands) in self.drop_on:
                        return
                    answer = None if self.silent else self.reply(command)
                    if answer is not None:
                        writer.write(answer)
        except OSError:
            pass  # the client went away: nothing to answer
        finally:
            self.open_connections -= 1
            writer.transport.abort()


@pytest.fixture
async def server() -> AsyncIterator[FakeRedis]:
    fake = FakeRedis()
    await fake.start()
    try:
        yield fake
    finally:
        async with asyncio.timeout(BOUND):
            await fake.stop()


@pytest.fixture
async def wires() -> AsyncIterator[list[RedisWire]]:
    """The wires a test opens (via ``kept``): each closed at teardown, so no socket outlives its test."""
    made: list[RedisWire] = []
    try:
        yield made
    finally:
        for wire in made:
            await wire.aclose()


def kept(wires: list[RedisWire], wire: RedisWire | None) -> RedisWire:
    assert wire is not None
    wires.append(wire)
    return wire


async def open_wire(server: FakeRedis, wires: list[RedisWire]) -> RedisWire:
    """A wire whose connection is open already."""
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        await wire.execute("ECHO", "open the connection first")
    return wire


def eagerly_from_a_callback(coroutine: Coroutine[Any, Any, None]) -> list[object]:
    """Start ``coroutine`` with ``eagerly`` from a loop callback, with no current task (as a
    socket's read callback does); the list then holds what ``eagerly`` returned."""
    started: list[object] = []
    asyncio.get_running_loop().call_soon(lambda: started.append(eagerly(coroutine)))
    return started


# --- pipelining and replies ----------------------------------------------------------------


async def test_concurrent_callers_each_get_their_own_reply_over_one_connection(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        replies = await asyncio.gather(*(wire.execute("ECHO", f"caller-{i}") for i in range(50)))
    assert replies == [f"caller-{i}".encode() for i in range(50)]
    assert server.connections == 1
    assert len(server.commands) == 50


async def test_a_caller_without_a_task_connects_and_gets_its_reply(server: FakeRedis, wires: list[RedisWire]) -> None:
    """A client's frame runs eagerly (broker/speedups/eager.py), in the socket's read callback: no
    current task. Its first command must still be able to open the connection, whose
    connect timeout needs a task."""
    wire = kept(wires, server.wire())
    replies: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    async def command() -> None:
        replies.set_result(await wire.execute("ECHO", "no task here"))

    def from_a_callback() -> None:
        assert asyncio.current_task() is None
        task = eagerly(command())
        assert isinstance(task, asyncio.Task)  # it waits for the connection, then the reply
        pending.append(task)

    pending: list[asyncio.Task[None]] = []  # (a task: it waits for the connection first)
    asyncio.get_running_loop().call_soon(from_a_callback)
    async with asyncio.timeout(BOUND):
        assert await replies == b"no task here"
        await pending[0]
    assert server.connections == 1


async def test_a_caller_run_eagerly_gets_its_reply_in_the_read_callback_with_no_task(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    wire = await open_wire(server, wires)
    seen: asyncio.Future[tuple[object, object]] = asyncio.get_running_loop().create_future()

    async def command() -> None:
        reply = await wire.execute("ECHO", "straight through")
        seen.set_result((reply, asyncio.current_task()))

    started = eagerly_from_a_callback(command())
    async with asyncio.timeout(BOUND):
        assert await seen == (b"straight through", None)  # (None: the socket's read callback)
    assert isinstance(started[0], Resuming) and started[0].task is None


async def test_a_caller_run_eagerly_whose_connection_drops_gets_the_retrys_reply_in_a_task(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    wire = await open_wire(server, wires)
    server.drop_on = {2}
    seen: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    async def command() -> None:
        seen.set_result(await wire.execute("ECHO", "again"))

    started = eagerly_from_a_callback(command())
    async with asyncio.timeout(BOUND):
        assert await seen == b"again"
    assert isinstance(started[0], Resuming) and started[0].task is not None  # (the pause before the retry)
    assert server.connections == 2


async def test_replies_come_through_raw(server: FakeRedis, wires: list[RedisWire]) -> None:
    server.reply = by_name(
        {
            b"BULK": bulk(b"caf\xc3\xa9\x00"),
            b"INT": b":-42\r\n",
            b"STATUS": b"+OK\r\n",
            b"NIL": b"$-1\r\n",
            b"NILARRAY": b"*-1\r\n",
            b"NESTED": b"*3\r\n$1\r\na\r\n:7\r\n*2\r\n$-1\r\n*1\r\n$1\r\nb\r\n",
            b"EMPTY": b"*0\r\n",
        }
    )
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        assert await wire.execute("BULK") == b"caf\xc3\xa9\x00"
        assert await wire.execute("INT") == -42
        assert await wire.execute("STATUS") == b"OK"
        assert await wire.execute("NIL") is None
        assert await wire.execute("NILARRAY") is None
        assert await wire.execute("NESTED") == [b"a", 7, [None, [b"b"]]]
        assert await wire.execute("EMPTY") == []


async def test_arguments_of_every_kind_reach_the_server_as_redis_encodes_them(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        await wire.execute("EVALSHA", "abc", 2, "k\u00e9y", b"\x00\xff", 1.5)
    assert server.commands == [[b"EVALSHA", b"abc", b"2", "k\u00e9y".encode(), b"\x00\xff", b"1.5"]]


@given(
    sha=st.text("0123456789abcdef", min_size=40, max_size=40),
    keys=st.lists(st.binary(max_size=80), max_size=3),
    args=st.lists(st.binary(max_size=2000), max_size=12),
)
def test_a_script_call_packed_here_is_the_command_hiredis_packs(sha: str, keys: list[bytes], args: list[bytes]) -> None:
    # (The write scripts' packer: byte for byte what the server would read from hiredis, for
    # every shape, the same shape twice too: its start is kept.)
    for _ in range(2):
        assert pack_evalsha(sha, keys, args) == hiredis.pack_command(("EVALSHA", sha, len(keys), *keys, *args))  # type: ignore[arg-type]  # (its stub says a 1-tuple)


# --- error replies -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (b"NOSCRIPT No matching script. Please use EVAL.", redis_errors.NoScriptError),
        (b"READONLY You can't write against a read only replica.", redis_errors.ReadOnlyError),
        (b"ERR unknown command 'FOO'", redis_errors.ResponseError),
        (b"WRONGTYPE Operation against a key holding the wrong kind of value", redis_errors.ResponseError),
    ],
)
async def test_an_error_reply_raises_its_redis_py_class_and_the_connection_stays(
    server: FakeRedis, wires: list[RedisWire], error: bytes, kind: type[redis_errors.RedisError]
) -> None:
    server.reply = by_name({b"FAIL": b"-" + error + b"\r\n"})
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.RedisError) as raised:
            await wire.execute("FAIL")
        assert await wire.execute("ECHO", "after") == b"after"
    assert raised.type is kind
    assert str(raised.value) == error.decode()
    assert server.connections == 1
    assert len(server.commands) == 2  # an error reply is an answer: not sent again


# --- a connection that fails ---------------------------------------------------------------


async def test_a_command_whose_connection_drops_is_sent_once_more_on_a_new_one(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    server.drop_on = {1}
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        assert await wire.execute("ECHO", "again") == b"again"
    assert server.connections == 2
    assert server.commands == [[b"ECHO", b"again"]] * 2


async def test_a_command_whose_second_connection_drops_too_raises_connection_error(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    server.drop_on = {1, 2}
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.ConnectionError):
            await wire.execute("ECHO", "lost")
    assert server.connections == 2
    assert server.commands == [[b"ECHO", b"lost"]] * 2


async def test_after_a_drop_the_wire_reconnects_for_the_next_command(server: FakeRedis, wires: list[RedisWire]) -> None:
    server.drop_on = {1, 2}
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.ConnectionError):
            await wire.execute("ECHO", "lost")
        assert await wire.execute("ECHO", "back") == b"back"
    assert server.connections == 3


async def test_an_unanswered_command_times_out_after_its_one_retry(server: FakeRedis, wires: list[RedisWire]) -> None:
    server.silent = True
    wire = kept(wires, server.wire(timeout=0.2))
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.TimeoutError):
            await wire.execute("ECHO", "anyone?")
        await server.all_closed()  # the wire closed each connection it gave up on
    assert server.connections == 2
    assert server.commands == [[b"ECHO", b"anyone?"]] * 2


async def test_a_command_queued_behind_an_unanswered_one_times_out_too(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    server.silent = True
    wire = kept(wires, server.wire(timeout=0.2))
    async with asyncio.timeout(BOUND):
        first = asyncio.create_task(wire.execute("ECHO", "first"))
        await server.saw(1)
        second = asyncio.create_task(wire.execute("ECHO", "second"))
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
    assert [type(outcome) for outcome in outcomes] == [redis_errors.TimeoutError] * 2
    assert sorted(command[1] for command in server.commands) == [b"first", b"first", b"second", b"second"]


async def test_new_commands_do_not_keep_an_unanswered_connection_alive(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    # One timer watches the connection from its oldest unanswered command: commands sent after
    # it must not push its deadline back, or a steady trickle would keep a dead Redis "alive".
    server.silent = True
    wire = kept(wires, server.wire(timeout=0.2))
    trickle: list[asyncio.Task[object]] = []
    first = asyncio.create_task(wire.execute("ECHO", "first"))
    try:
        async with asyncio.timeout(BOUND):
            for i in range(100):  # 2 s of traffic, ten times the timeout
                if first.done():
                    break
                trickle.append(asyncio.create_task(wire.execute("ECHO", f"more-{i}")))
                await asyncio.sleep(0.02)  # the trickle under test: a command every 20 ms
            assert first.done(), "the first command outlived its timeout while others kept coming"
            with pytest.raises(redis_errors.TimeoutError):
                await first
    finally:
        for task in [first, *trickle]:
            task.cancel()
        await asyncio.gather(first, *trickle, return_exceptions=True)


async def test_connecting_where_nobody_listens_raises_connection_error(wires: list[RedisWire]) -> None:
    with socket.socket() as bound:  # holds the port, never listens: a connection is refused
        bound.bind(("127.0.0.1", 0))
        wire = kept(wires, RedisWire("127.0.0.1", bound.getsockname()[1], connect_timeout=1.0, timeout=1.0))
        async with asyncio.timeout(BOUND):
            with pytest.raises(redis_errors.ConnectionError, match="Error connecting to 127.0.0.1"):
                await wire.execute("ECHO", "hello")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="relies on Linux dropping SYNs to a full backlog")
async def test_a_connection_that_does_not_open_in_connect_timeout_raises_timeout_error(
    wires: list[RedisWire],
) -> None:
    # A listener that never accepts, its backlog filled: Linux drops further SYNs, so a
    # connection attempt neither succeeds nor is refused until the client gives up.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(4)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            wire = kept(wires, RedisWire("127.0.0.1", port, connect_timeout=0.2, timeout=1.0))
            async with asyncio.timeout(BOUND):
                with pytest.raises(redis_errors.TimeoutError, match="Timeout connecting"):
                    await wire.execute("ECHO", "hello")
        finally:
            for filler in fillers:
                filler.close()


# --- the URL and connection setup ----------------------------------------------------------


@pytest.mark.parametrize(
    ("userinfo", "path", "setup"),
    [
        ("user:pw@", "/3", [[b"AUTH", b"user", b"pw"], [b"SELECT", b"3"]]),
        (":pw@", "/3", [[b"AUTH", b"pw"], [b"SELECT", b"3"]]),
        ("user:pw@", "", [[b"AUTH", b"user", b"pw"]]),
        ("", "/2", [[b"SELECT", b"2"]]),
        ("", "/0", []),
        ("", "", []),
    ],
)
async def test_auth_and_select_open_each_new_connection_when_the_url_asks(
    server: FakeRedis, wires: list[RedisWire], userinfo: str, path: str, setup: list[Command]
) -> None:
    wire = kept(wires, RedisWire.from_url(server.url(userinfo, path), connect_timeout=1, timeout=1))
    server.drop_on = {len(setup) + 1}  # the first ECHO: the retry must set up its new connection too
    async with asyncio.timeout(BOUND):
        assert await wire.execute("ECHO", "hi") == b"hi"
    assert server.connections == 2
    assert server.commands == [*setup, [b"ECHO", b"hi"]] * 2


async def test_a_refused_auth_raises_authentication_error(server: FakeRedis, wires: list[RedisWire]) -> None:
    server.reply = by_name({b"AUTH": b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"})
    wire = kept(wires, RedisWire.from_url(server.url("user:bad@"), connect_timeout=1, timeout=1))
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.AuthenticationError, match="WRONGPASS"):
            await wire.execute("ECHO", "hi")
    assert [b"ECHO", b"hi"] not in server.commands


@pytest.mark.parametrize(
    "url",
    [
        "rediss://127.0.0.1:6379",
        "unix:///tmp/redis.sock?socket_timeout=1",
        "redis://127.0.0.1:6379?socket_timeout=1",
        "redis://127.0.0.1:6379/0?protocol=3",
    ],
)
def test_from_url_leaves_what_only_redis_py_does_to_redis_py(url: str) -> None:
    assert RedisWire.from_url(url, connect_timeout=1, timeout=1) is None


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379", "redis://localhost", "redis://user:pw@example.com:6380/5", "redis://:pw@h/0"]
)
def test_from_url_takes_a_plain_redis_url(url: str) -> None:
    assert isinstance(RedisWire.from_url(url, connect_timeout=1, timeout=1), RedisWire)


def test_from_url_takes_a_unix_socket_with_its_database_and_credentials() -> None:
    wire = RedisWire.from_url("unix://user:pw@/run/redis/redis.sock?db=3", connect_timeout=1, timeout=1)
    assert wire is not None
    assert wire.where == "/run/redis/redis.sock"
    assert wire._setup() == [("AUTH", "user", "pw"), ("SELECT", 3)]


# --- callers and the wire's own lifetime ---------------------------------------------------


async def test_a_cancelled_caller_loses_its_late_reply_and_the_next_caller_gets_its_own(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    held: list[bytes] = []

    def late_for_slow(command: Command) -> bytes | None:
        if command[1] == b"slow":
            held.append(bulk(b"slow"))  # answered later, in front of the next reply
            return None
        late, held[:] = b"".join(held), []
        return late + bulk(command[1])

    server.reply = late_for_slow
    wire = kept(wires, server.wire(timeout=2.0))
    async with asyncio.timeout(BOUND):
        slow = asyncio.create_task(wire.execute("ECHO", "slow"))
        await server.saw(1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert await wire.execute("ECHO", "next") == b"next"
        assert await wire.execute("ECHO", "and next") == b"and next"
    assert server.connections == 1


async def test_aclose_fails_pending_commands_and_refuses_new_ones_without_reconnecting(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    server.silent = True
    wire = kept(wires, server.wire(timeout=2.0))
    async with asyncio.timeout(BOUND):
        pending = asyncio.create_task(wire.execute("ECHO", "pending"))
        await server.saw(1)
        await wire.aclose()
        with pytest.raises(redis_errors.ConnectionError):
            await pending
        with pytest.raises(redis_errors.ConnectionError):
            await wire.execute("ECHO", "new")
        await asyncio.sleep(0.1)  # time enough for a (wrong) reconnect to show
    assert server.connections == 1
    assert server.commands == [[b"ECHO", b"pending"]]


async def test_aclose_while_a_connection_is_being_set_up_fails_the_command(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    server.reply = lambda command: None if command[0] == b"AUTH" else standard_reply(command)
    wire = kept(wires, RedisWire.from_url(server.url(":pw@"), connect_timeout=1, timeout=2))
    async with asyncio.timeout(BOUND):
        pending = asyncio.create_task(wire.execute("ECHO", "pending"))
        await server.saw(1)  # the AUTH, unanswered: the connection is still being set up
        await wire.aclose()
        server.send(b"+OK\r\n")  # AUTH accepted after all
        with pytest.raises(redis_errors.ConnectionError):
            await pending
    assert server.commands == [[b"AUTH", b"pw"]]


async def test_an_argument_redis_cannot_encode_raises_data_error_without_a_connection(
    server: FakeRedis, wires: list[RedisWire]
) -> None:
    wire = kept(wires, server.wire())
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.DataError):
            await wire.execute("SET", "key", None)  # type: ignore[arg-type]
        assert server.connections == 0
        assert await wire.execute("ECHO", "fine") == b"fine"
        with pytest.raises(redis_errors.DataError):
            await wire.execute("SET", "key", None)  # type: ignore[arg-type]
        assert await wire.execute("ECHO", "still fine") == b"still fine"
    assert server.connections == 1
    assert server.commands == [[b"ECHO", b"fine"], [b"ECHO", b"still fine"]]


# --- the notice connection -------------------------------------------------------------


def message(channel: bytes, data: bytes) -> bytes:
    return b"*3\r\n" + bulk(b"message") + bulk(channel) + bulk(data)


@pytest.fixture
async def notices(server: FakeRedis) -> AsyncIterator[NoticeConnection]:
    wire = RedisWire.from_url(server.url(":pw@"), connect_timeout=1.0, timeout=1.0)
    assert wire is not None
    connection = NoticeConnection(wire)
    async with asyncio.timeout(BOUND):
        await connection.connect()
    try:
        yield connection
    finally:
        await connection.disconnect()


async def test_a_notice_connection_says_auth_first_and_then_what_it_is_told(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    async with asyncio.timeout(BOUND):
        await notices.send_packed_command(notices.pack_commands([("SUBSCRIBE", "a"), ("SUBSCRIBE", "b")]))
        await notices.send_command("PING")
        await server.saw(4)
    assert server.commands == [[b"AUTH", b"pw"], [b"SUBSCRIBE", b"a"], [b"SUBSCRIBE", b"b"], [b"PING"]]
    assert notices.is_connected


async def test_a_notice_connection_hands_out_what_came_in_one_read_in_order(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    server.send(message(b"ch", b"one") + message(b"ch", b"two"))
    async with asyncio.timeout(BOUND):
        first = await notices.read_response(timeout=1.0)
        second = await notices.read_response(timeout=1.0)
    assert [first, second] == [[b"message", b"ch", b"one"], [b"message", b"ch", b"two"]]


async def test_a_notice_connection_read_returns_none_when_its_time_runs_out(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    async with asyncio.timeout(BOUND):
        assert await notices.read_response(timeout=0.05) is None
        server.send(message(b"ch", b"late"))
        assert await notices.read_response(timeout=1.0) == [b"message", b"ch", b"late"]
    assert notices.is_connected


async def test_a_message_read_while_the_reader_waits_is_handled_at_once_and_its_work_queued_in_order(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    handled: list[bytes] = []

    async def left_over() -> None:
        handled.append(b"work of two")

    def direct(reply: Any) -> Coroutine[Any, Any, None] | None:
        handled.append(reply[2])
        return left_over() if reply[2] == b"two" else None

    notices.direct = direct
    async with asyncio.timeout(BOUND):
        read = asyncio.create_task(notices.read_response(timeout=5.0))
        await eventually(lambda: notices._waiter is not None, "the read to wait for a reply", interval=0.005)
        server.send(message(b"ch", b"one"))
        await eventually(lambda: handled == [b"one"], "the first message handled as it was read", interval=0.005)
        assert not read.done()  # (handled at once: the waiting reader was not woken)
        assert notices.handled == 1  # (traffic the reader did not see: its link does not PING)
        # Work left to await goes to the reader; what comes meanwhile waits behind it, in order.
        server.send(message(b"ch", b"two") + message(b"ch", b"three") + b"*2\r\n" + bulk(b"pong") + bulk(b""))
        deferred = await read
        assert handled == [b"one", b"two"]
        await deferred.work
        assert await notices.read_response(timeout=1.0) == [b"message", b"ch", b"three"]
        assert await notices.read_response(timeout=1.0) == [b"pong", b""]  # (not a message: the reader's)
    assert handled == [b"one", b"two", b"work of two"]


async def test_work_left_for_a_reader_that_is_gone_is_dropped_quietly_on_disconnect(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    left: list[Coroutine[Any, Any, None]] = []
    readers: list[asyncio.Task[Any]] = []

    async def left_over() -> None:
        pass  # pragma: no cover - never run

    def direct(reply: Any) -> Coroutine[Any, Any, None]:
        readers[0].cancel()  # (the link's reader stopping before it takes the work)
        left.append(left_over())
        return left[-1]

    notices.direct = direct
    async with asyncio.timeout(BOUND):
        readers.append(asyncio.create_task(notices.read_response(timeout=5.0)))
        await eventually(lambda: notices._waiter is not None, "the read to wait for a reply", interval=0.005)
        server.send(message(b"ch", b"one"))
        with pytest.raises(asyncio.CancelledError):
            await readers[0]
        assert len(notices._replies) == 1  # (its work, which no reader will take now)
    await notices.disconnect()
    assert not notices._replies
    assert len(left) == 1 and inspect.getcoroutinestate(left[0]) == inspect.CORO_CLOSED  # (no "never awaited")


async def test_a_message_handler_that_fails_is_logged_and_the_connection_reads_on(
    server: FakeRedis, notices: NoticeConnection, caplog: pytest.LogCaptureFixture
) -> None:
    def direct(reply: Any) -> None:
        raise RuntimeError("a bug")

    notices.direct = direct
    async with asyncio.timeout(BOUND):
        read = asyncio.create_task(notices.read_response(timeout=5.0))
        await eventually(lambda: notices._waiter is not None, "the read to wait for a reply", interval=0.005)
        server.send(message(b"ch", b"one"))
        await eventually(lambda: "redis notice handler failed" in caplog.text, "the failure logged", interval=0.005)
        notices.direct = None
        server.send(message(b"ch", b"two"))
        assert await read == [b"message", b"ch", b"two"]
    assert notices.is_connected


async def test_a_notice_connection_raises_an_error_reply(server: FakeRedis, notices: NoticeConnection) -> None:
    server.send(b"-MOVED 3999 127.0.0.1:6381\r\n")
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.ResponseError, match="MOVED"):
            await notices.read_response(timeout=1.0)


async def test_a_lost_notice_connection_fails_the_waiting_read_and_every_later_call(
    server: FakeRedis, notices: NoticeConnection
) -> None:
    async with asyncio.timeout(BOUND):
        read = asyncio.create_task(notices.read_response(timeout=5.0))
        await eventually(lambda: notices._waiter is not None, "the read to wait for a reply", interval=0.005)
        await server.stop()
        with pytest.raises(redis_errors.ConnectionError):
            await read
        with pytest.raises(redis_errors.ConnectionError):
            await notices.read_response(timeout=1.0)
        with pytest.raises(redis_errors.ConnectionError):
            await notices.send_command("PING")
    assert not notices.is_connected


async def test_a_notice_connection_refused_at_auth_raises_and_closes(server: FakeRedis) -> None:
    server.reply = by_name({b"AUTH": b"-WRONGPASS invalid username-password pair\r\n"})
    wire = RedisWire.from_url(server.url(":bad@"), connect_timeout=1.0, timeout=1.0)
    assert wire is not None
    connection = NoticeConnection(wire)
    async with asyncio.timeout(BOUND):
        with pytest.raises(redis_errors.AuthenticationError):
            await connection.connect()
        await server.all_closed()
    assert not connection.is_connected
