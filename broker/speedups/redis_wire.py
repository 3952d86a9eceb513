"""A pipelined connection to one Redis: the store's commands without redis-py's per-call cost.

redis-py's asyncio client spends ~60 us of CPU on every command on a small machine (a pool
checkout, a retry wrapper, a timeout context per read, its reply plumbing); at ~4 commands a
questionnaire that was a fifth of a broker's CPU, and ~50 us of every answer's latency. This
connection does what the store's hot path needs and no more: a command is packed by hiredis
and written at once, commands from every coroutine share the one socket (pipelined), hiredis
parses the replies and they go to their callers in order, and one timer watches the whole
connection rather than one per read.

It keeps the rules of the redis-py client it stands in for (``RedisStore``'s pool):

- connecting gives up after ``connect_timeout``; a connection that leaves commands
  unanswered for ``timeout`` is closed, failing every command on it;
- a command that failed because its connection did is sent once more, on a new connection,
  after a short pause: each of the store's scripts is safe to repeat. So is one Redis
  refused as not ready yet (LOADING, NOAUTH: redis-py counts them as connection errors too),
  there on the same connection; any other error reply is the caller's;
- failures are redis-py's exceptions (``ConnectionError``, ``TimeoutError``, ``ResponseError``
  and its kinds such as ``NoScriptError``), so callers treat both clients alike.

Only for a plain ``redis://`` URL (TCP) or ``unix://`` URL (a Redis on this host's Unix
socket), RESP2, with an optional user, password and database; TLS, other URL options and
clusters stay with redis-py (``from_url`` says None).
The store's notice links use ``NoticeConnection`` (below) on the same terms.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final, NamedTuple, TypeVar

import hiredis
from redis.asyncio.connection import parse_url
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    DataError,
    MasterDownError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from broker.speedups.eager import Resumable

_P = TypeVar("_P", bound=asyncio.Protocol)

logger = logging.getLogger(__name__)

RETRY_PAUSE: Final = 0.05  # seconds before the one retry on a new connection (redis-py's backoff)

# Error replies by their first word, as redis-py classifies them (its classes, so that a
# caller's ``except NoScriptError`` or ``except ConnectionError`` works for both clients).
_ERROR_KINDS: Final[dict[str, type[RedisError]]] = {
    "NOSCRIPT": NoScriptError,
    "LOADING": BusyLoadingError,  # a ConnectionError: retried, as by redis-py
    "READONLY": ReadOnlyError,
    "MASTERDOWN": MasterDownError,
    "NOAUTH": AuthenticationError,
    "WRONGPASS": AuthenticationError,
}
_URL_OPTIONS: Final = frozenset({"host", "port", "db", "username", "password"})
# (For a unix:// URL redis-py's parse_url also names its Unix socket connection class.)
_UNIX_URL_OPTIONS: Final = frozenset({"path", "db", "username", "password", "connection_class"})


def _reply_error(message: str) -> RedisError:
    return _ERROR_KINDS.get(message.split(" ", 1)[0], ResponseError)(message)


class _RespSocket(asyncio.Protocol):
    """A socket to Redis whose replies hiredis parses as they arrive; each goes to
    ``_received``, and a subclass says what a failure (``_fail``) undoes."""

    def __init__(self) -> None:
        self._reader = hiredis.Reader(replyError=_reply_error)
        self._transport: asyncio.Transport | None = None
        self._failure: RedisError | None = None  # why the connection is unusable, once it is

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # (uvloop's is no asyncio.Transport subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while True:
            try:
                reply = self._reader.gets()
            except hiredis.ProtocolError as exc:
                self._fail(RedisConnectionError(f"Protocol error from Redis: {exc}"))
                return
            if reply is False:
                break
            if not self._received(reply):
                return
        self._read_all()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError("Connection closed by server." if exc is None else f"Connection lost: {exc}"))

    def _received(self, reply: Any) -> bool:
        """Take one reply; False: the connection failed over it (stop reading)."""
        raise NotImplementedError

    def _read_all(self) -> None:
        """Every reply of the data just read was taken."""

    def _fail(self, error: RedisError) -> None:
        if self._failure is None:
            self._failure = error
        if self._transport is not None:
            self._transport.abort()


class _Connection(_RespSocket):
    """One socket: commands written in order, replies handed to their callers in order."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._waiting: deque[Resumable] = deque()
        self._outbox: list[bytes] = []  # commands not written yet (see ``call``)
        self._watchdog: asyncio.TimerHandle | None = None
        self._progress = 0.0  # loop time of the last reply, or of a command sent to an idle connection

    @property
    def usable(self) -> bool:
        return self._failure is None

    def call(self, packed: bytes) -> Resumable:
        """Send one packed command; the future gets its reply (or its error). A caller run
        eagerly (broker/speedups/eager.py) goes on in the callback that reads the reply."""
        if self._failure is not None or self._transport is None:
            raise RedisConnectionError(str(self._failure or "not connected"))
        future = Resumable(loop=self._loop)
        idle = not self._waiting
        if idle:
            self._progress = self._loop.time()
            if self._watchdog is None:
                self._watchdog = self._loop.call_at(self._progress + self._timeout, self._check)
        self._waiting.append(future)
        if idle:
            self._transport.write(packed)  # nothing else in flight: latency first
        else:
            # Busy: commands issued in the same turn of the event loop leave in one write (one
            # system call instead of one each: under load, many sessions commit at once).
            if not self._outbox:
                self._loop.call_soon(self._flush)
            self._outbox.append(packed)
        return future

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        if self._failure is None and self._transport is not None:
            self._transport.write(outbox[0] if len(outbox) == 1 else b"".join(outbox))

    def _received(self, reply: Any) -> bool:
        if not self._waiting:
            self._fail(RedisConnectionError("Redis sent a reply to no command"))
            return False
        future = self._waiting.popleft()
        if future.done():
            return True  # its caller was cancelled; the reply is simply dropped
        if isinstance(reply, RedisError):
            future.set_exception(reply)
        else:
            future.set_result(reply)
        future.resume()
        return True

    def _read_all(self) -> None:
        self._progress = self._loop.time()

    def close(self) -> None:
        self._fail(RedisConnectionError("Connection closed."))

    def _check(self) -> None:
        """The watchdog: close a connection that has left commands unanswered too long."""
        self._watchdog = None
        if self._failure is not None or not self._waiting:
            return
        due = self._progress + self._timeout
        if self._loop.time() >= due:
            self._fail(RedisTimeoutError(f"Timeout reading from Redis: no reply in {self._timeout:g}s"))
        else:
            self._watchdog = self._loop.call_at(due, self._check)

    def _fail(self, error: RedisError) -> None:
        super()._fail(error)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(type(error)(str(error)))  # one exception object per caller
                self._loop.call_soon(future.resume)  # (not here: the failure is still unwinding)


_EVALSHA_HEADS: dict[tuple[str, int, int], bytes] = {}  # (sha, keys, arguments) -> the command's start
_BULK_HEADS_KEPT: Final = 16384  # (shorter ones only: a few hundred kB at most)


class _BulkHeads(dict[int, bytes]):
    """A length -> the head of a bulk string that long (looked up in C: ``heads[n]``)."""

    def __missing__(self, length: int) -> bytes:
        head = b"$%d\r\n" % length
        if length < _BULK_HEADS_KEPT:
            self[length] = head
        return head


_BULK_HEADS: Final = _BulkHeads()


def pack_evalsha(sha: str, keys: list[bytes], args: list[bytes]) -> bytes:
    """``EVALSHA sha len(keys) *keys *args`` packed as hiredis.pack_command packs it, for
    arguments that are bytes already: the store's write scripts, whose ~1 kB record and
    handful of short arguments hiredis copies three times and measures with sprintf (~1,500
    instructions an argument). Here, the command's start is made once per script and shape,
    each argument's head once per length, and the parts joined."""
    head = _EVALSHA_HEADS.get((sha, len(keys), len(args)))
    if head is None:
        start = hiredis.pack_command(("EVALSHA", sha, len(keys)))  # type: ignore[arg-type]
        head = b"*%d" % (3 + len(keys) + len(args)) + start[start.index(b"\r\n") :]
        if len(_EVALSHA_HEADS) < 256:  # (a few scripts, a few shapes each)
            _EVALSHA_HEADS[(sha, len(keys), len(args))] = head
    parts = [head]
    heads = _BULK_HEADS
    for item in keys:
        parts += (heads[len(item)], item, b"\r\n")
    for item in args:
        parts += (heads[len(item)], item, b"\r\n")
    return b"".join(parts)


class RedisWire:
    """Commands to one Redis over one pipelined connection, (re)opened when needed."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        connect_timeout: float = 2.0,
        timeout: float = 5.0,
    ) -> None:
        self._host, self._port, self._db = host, port, db
        self._path = path  # a Unix socket's, in place of host and port
        self._username, self._password = username, password
        self._connect_timeout, self._timeout = connect_timeout, timeout
        self._connection: _Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: float, timeout: float) -> RedisWire | None:
        """A wire to ``url``, or None when the URL asks for what only redis-py does."""
        unix = url.startswith("unix://")
        if not (unix or url.startswith("redis://")):
            return None
        try:
            options: dict[str, Any] = dict(parse_url(url))
        except ValueError:
            return None
        if not set(options) <= (_UNIX_URL_OPTIONS if unix else _URL_OPTIONS) or (unix and not options.get("path")):
            return None
        return cls(
            str(options.get("host") or "localhost"),
            int(options.get("port") or 6379),
            path=options.get("path"),
            db=int(options.get("db") or 0),
            username=options.get("username"),
            password=options.get("password"),
            connect_timeout=connect_timeout,
            timeout=timeout,
        )

    async def execute(self, *args: EncodableT) -> Any:
        """Run one command; returns its reply (bytes, ints, lists, None), raises on an error
        reply; if the connection fails under it, sends it once more on a new connection."""
        try:
            packed = hiredis.pack_command(args)  # type: ignore[arg-type]  # (its stub says a 1-tuple)
        except TypeError as exc:
            raise DataError(f"cannot send {args[0]!r}: {exc}") from exc
        return await self.execute_packed(packed)

    async def execute_packed(self, packed: bytes) -> Any:
        """``execute`` for a command already packed (``pack_evalsha``)."""
        connection = self._connection
        try:
            if connection is None or not connection.usable:  # (else no coroutine to open it)
                connection = await self._open()
            return await connection.call(packed)
        except (RedisConnectionError, RedisTimeoutError):
            if self._closed:
                raise
            await asyncio.sleep(RETRY_PAUSE)
            return await (await self._open()).call(packed)

    @property
    def where(self) -> str:
        """The Redis's address, for error messages."""
        return self._path or f"{self._host}:{self._port}"

    async def open_socket(self, protocol: Callable[[], _P]) -> tuple[asyncio.BaseTransport, _P]:
        """A new socket to the Redis, over TCP or its Unix socket, served by ``protocol()``."""
        loop = asyncio.get_running_loop()
        if self._path is not None:
            return await loop.create_unix_connection(protocol, self._path)
        return await loop.create_connection(protocol, self._host, self._port)

    async def aclose(self) -> None:
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    async def _open(self) -> _Connection:
        connection = self._connection
        if connection is not None and connection.usable:
            return connection
        async with self._opening:  # one connection attempt at a time; the others wait for it
            connection = self._connection
            if connection is not None and connection.usable:
                return connection
            if self._closed:
                raise RedisConnectionError("the Redis connection was closed")
            self._connection = None
            # In a task of its own: the connect timeout needs one, and a caller run eagerly
            # (broker/speedups/eager.py) has none.
            connection = await asyncio.ensure_future(self._connect())
            if self._closed:  # closed while connecting: nothing may use this socket
                connection.close()
                raise RedisConnectionError("the Redis connection was closed")
            self._connection = connection
            return connection

    def _setup(self) -> list[tuple[str | int, ...]]:
        """The commands that start every connection: AUTH, SELECT, as the URL says."""
        setup: list[tuple[str | int, ...]] = []
        if self._password is not None:
            credentials = (self._password,) if self._username is None else (self._username, self._password)
            setup.append(("AUTH", *credentials))
        if self._db:
            setup.append(("SELECT", self._db))
        return setup

    async def _connect(self) -> _Connection:
        where = self.where
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await self.open_socket(lambda: _Connection(self._timeout))
        except TimeoutError as exc:
            raise RedisTimeoutError(f"Timeout connecting to {where}") from exc
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to {where}: {exc}") from exc
        try:
            for command in self._setup():
                await connection.call(hiredis.pack_command(command))  # type: ignore[arg-type]
        except BaseException:
            connection.close()
            raise
        return connection


class NoticeConnection(_RespSocket):
    """A pub/sub connection for the store's notice links (``Link``, broker/store/redis/links.py),
    in place of a redis-py connection: the same methods the link calls, without redis-py's cost per
    message read (a timeout context and several coroutine layers for every notice).

    ``read_response(timeout)`` returns the next reply at once when one is buffered, else
    waits up to ``timeout`` and returns None when nothing came (as redis-py's does); an
    error reply is raised, a lost connection raises ``ConnectionError``.
    """

    def __init__(self, wire: RedisWire) -> None:
        super().__init__()
        self._wire = wire
        self._replies: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        # What handles a published message at once, as it is read (``Link``), while the reader
        # waits with nothing queued: no task woken, no timer made, for the usual notice.
        self.direct: Callable[[Any], Coroutine[Any, Any, None] | None] | None = None
        self.handled = 0  # messages handled so: traffic the reader does not see
        # Python 3.11's get_running_loop() makes a getpid() system call: not once per notice.
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_connected(self) -> bool:
        return self._transport is not None and self._failure is None

    async def connect(self) -> None:
        wire = self._wire
        where = wire.where
        try:
            async with asyncio.timeout(wire._connect_timeout):
                await wire.open_socket(lambda: self)
                for command in wire._setup():
                    await self.send_command(*command)
                    await self.read_response(timeout=wire._timeout)
        except TimeoutError as exc:
            await self.disconnect()
            raise RedisTimeoutError(f"Timeout connecting to {where}") from exc
        except OSError as exc:
            await self.disconnect()
            raise RedisConnectionError(f"Error connecting to {where}: {exc}") from exc
        except BaseException:
            await self.disconnect()
            raise

    def pack_commands(self, commands: list[tuple[EncodableT, ...]]) -> list[bytes]:
        return [hiredis.pack_command(command) for command in commands]  # type: ignore[arg-type]

    async def send_packed_command(self, packed: list[bytes], check_health: bool = True) -> None:
        self._writable().write(b"".join(packed))

    async def send_command(self, *args: EncodableT, check_health: bool = True) -> None:
        self._writable().write(hiredis.pack_command(args))  # type: ignore[arg-type]

    async def read_response(self, timeout: float | None = None, push_request: bool = False) -> Any:
        if not self._replies:
            if self._failure is not None:
                raise RedisConnectionError(str(self._failure))
            loop = self._loop
            if loop is None:
                self._loop = loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, _settle, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if not self._replies:
                if self._failure is not None:
                    raise RedisConnectionError(str(self._failure))
                return None  # the time ran out
        reply = self._replies.popleft()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    async def disconnect(self, nowait: bool = False) -> None:
        self._fail(RedisConnectionError("Connection closed."))
        for reply in self._replies:  # (work its reader will not await now: dropped quietly)
            if type(reply) is Deferred:
                reply.work.close()
        self._replies.clear()

    def _received(self, reply: Any) -> bool:
        direct = self.direct
        waiter = self._waiter
        if (
            direct is not None
            and waiter is not None  # (the reader is idle: not amid another's work, not stopping)
            and not waiter.done()
            and not self._replies
            and type(reply) is list
            and len(reply) == 3
            and reply[0] in _MESSAGES
        ):
            self.handled += 1
            try:
                work = direct(reply)
            except Exception:
                logger.exception("redis notice handler failed")
                return True
            if work is not None:  # the reader awaits it, and whatever comes meanwhile after it
                self._replies.append(Deferred(work))
            return True
        self._replies.append(reply)
        return True

    def _read_all(self) -> None:
        if self._replies:
            _settle(self._waiter)

    def _writable(self) -> asyncio.Transport:
        if self._transport is None or self._failure is not None:
            raise RedisConnectionError(str(self._failure or "not connected"))
        return self._transport

    def _fail(self, error: RedisError) -> None:
        super()._fail(error)
        _settle(self._waiter)


_MESSAGES: Final = frozenset((b"message", b"smessage"))  # (pub/sub, sharded pub/sub)


class Deferred(NamedTuple):
    """What ``read_response`` hands over for a message handled at once whose handler left
    work to await (the reader awaits it, in its turn)."""

    work: Coroutine[Any, Any, None]


def _settle(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
