"""Clients of the websocket: a scripted person, and raw sockets for handshake tests.

``ScriptedClient`` is a person a test drives frame by frame:

    async with ScriptedClient.connect(broker.ws_url, "sess", token("sess", "client")) as person:
        question = await person.wait_for("question")
        await person.answer(question, ["staging"])
        closed = await person.wait_for("closed")

Every wait has a deadline (``timeout``, default 10 s, scaled by tests/helpers/waiting.py's
factor) and fails with the frames seen so far,
so a test never hangs and never sleeps to synchronize. Frames that arrive while nobody is
waiting are kept in order; ``wait_for`` consumes up to and including the first match, and
everything received is also kept in ``received`` for assertions. Speaks the JSON
subprotocol by default, msgpack with ``subprotocol=MSGPACK``.

``person`` connects one with a client token of its session. ``raw_socket`` is a bare
websocket (no hello sent) and ``close_code`` reads one until the broker closes it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.typing import Subprotocol

from broker.core.frames import SUBPROTOCOL_BY_CODEC
from tests.helpers.processes import token
from tests.helpers.waiting import scaled

JSON = SUBPROTOCOL_BY_CODEC["json"]
MSGPACK = SUBPROTOCOL_BY_CODEC["msgpack"]

Frame = dict[str, Any]


Opened = TypeVar("Opened", bound="ScriptedClient")


class Connecting(Generic[Opened]):
    """``ScriptedClient.connect(...)`` (and ``InboxClient.connect_inbox(...)``): awaitable,
    or an async context manager that closes."""

    def __init__(self, opening: Coroutine[Any, Any, Opened]) -> None:
        self._opening = opening
        self._client: Opened | None = None

    def __await__(self) -> Generator[Any, None, Opened]:
        return self._opening.__await__()

    async def __aenter__(self) -> Opened:
        self._client = await self._opening
        return self._client

    async def __aexit__(self, *exc_info: object) -> None:
        if self._client is not None:
            await self._client.close()


class ScriptedClient:
    def __init__(self, ws: ClientConnection, subprotocol: str, welcome: Frame) -> None:
        self.ws = ws
        self.subprotocol = subprotocol
        self.welcome = welcome
        self.received: list[Frame] = [welcome]
        self._unread: deque[Frame] = deque()
        self.closed_code: int | None = None

    # --- connecting -----------------------------------------------------------------
    @classmethod
    def connect(
        cls,
        ws_base: str,
        session: str,
        token: str,
        *,
        kind: str = "bot",
        name: str = "scripted",
        subprotocol: str = JSON,
        timeout: float = 10.0,
    ) -> Connecting[ScriptedClient]:
        """Open ``{ws_base}/v1/sessions/{session}/ws``, say hello and wait for ``welcome``.

        ``await ScriptedClient.connect(...)`` or ``async with ScriptedClient.connect(...)``.
        """
        return Connecting(
            cls._open(
                ws_base,
                session,
                token,
                kind=kind,
                name=name,
                subprotocol=subprotocol,
                timeout=timeout,
            )
        )

    @classmethod
    async def _open(
        cls,
        ws_base: str,
        session: str,
        token: str,
        *,
        kind: str = "bot",
        name: str = "scripted",
        subprotocol: str = JSON,
        timeout: float = 10.0,
    ) -> ScriptedClient:
        ws = await asyncio.wait_for(
            websockets.connect(
                f"{ws_base}/v1/sessions/{session}/ws",
                subprotocols=[Subprotocol(subprotocol)],
                open_timeout=scaled(timeout),
                max_size=None,
            ),
            scaled(timeout),
        )
        client = cls(ws, subprotocol, {})
        client.received.clear()
        await client.send({"type": "hello", "token": token, "client": {"kind": kind, "name": name}})
        client.welcome = await client.wait_for("welcome", timeout=timeout)
        return client

    async def __aenter__(self) -> ScriptedClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.ws.close()

    # --- frames ---------------------------------------------------------------------
    async def send(self, frame: Mapping[str, Any]) -> None:
        if self.subprotocol == MSGPACK:
            import msgpack

            await self.ws.send(msgpack.packb(dict(frame), use_bin_type=True))
        else:
            await self.ws.send(json.dumps(frame))

    def _decode(self, data: str | bytes) -> Frame:
        if isinstance(data, bytes):
            import msgpack

            value = msgpack.unpackb(data, raw=False)
        else:
            value = json.loads(data)
        assert isinstance(value, dict), f"broker sent a non-map frame: {value!r}"
        return value

    async def _receive(self, timeout: float) -> Frame:
        data = await asyncio.wait_for(self.ws.recv(), timeout)
        frame = self._decode(data)
        self.received.append(frame)
        return frame

    async def wait_for(
        self,
        *types: str,
        timeout: float = 10.0,
        where: Callable[..., bool] | None = None,  # (...: a lambda may bind a loop variable as a default)
    ) -> Frame:
        """The next frame whose type is one of ``types`` (and that ``where`` accepts).

        Frames before it are consumed. Fails after ``timeout`` seconds, or when the
        connection closes, listing what did arrive.
        """
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout

        def matches(frame: Frame) -> bool:
            return (not types or frame.get("type") in types) and (where is None or where(frame))

        while self._unread:
            frame = self._unread.popleft()
            if matches(frame):
                return frame
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {'/'.join(types) or 'frame'} within {timeout}s; got {self._summary()}")
            try:
                frame = await self._receive(remaining)
            except TimeoutError:
                continue
            except websockets.ConnectionClosed as exc:
                self.closed_code = exc.rcvd.code if exc.rcvd else None
                raise AssertionError(
                    f"connection closed ({self.closed_code}) while waiting for "
                    f"{'/'.join(types) or 'a frame'}; got {self._summary()}"
                ) from None
            if matches(frame):
                return frame

    async def expect_close(self, timeout: float = 10.0) -> int | None:
        """Wait until the broker closes the connection; returns the close code."""
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                await self._receive(max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                break
            except websockets.ConnectionClosed as exc:
                self.closed_code = exc.rcvd.code if exc.rcvd else None
                return self.closed_code
        raise AssertionError(f"the broker did not close within {timeout}s; got {self._summary()}")

    def _summary(self) -> str:
        return ", ".join(str(f.get("type")) for f in self.received[-20:]) or "nothing"

    # --- commands -------------------------------------------------------------------
    async def answer(
        self,
        question: Frame,
        selected: Sequence[str] = (),
        other: str | None = None,
        **extra: Any,
    ) -> None:
        """Commit an answer to ``question`` (a ``question`` frame)."""
        frame: Frame = {
            "type": "answer",
            "questionnaireId": question["questionnaireId"],
            "step": question["step"],
            "questionId": question["question"]["id"],
            "selectedOptionIds": list(selected),
            **extra,
        }
        if other is not None:
            frame["other"] = other
        await self.send(frame)

    async def draft(self, question: Frame, selected: Sequence[str] = (), other: str | None = None) -> None:
        frame: Frame = {
            "type": "draft",
            "questionnaireId": question["questionnaireId"],
            "step": question["step"],
            "selectedOptionIds": list(selected),
        }
        if other is not None:
            frame["other"] = other
        await self.send(frame)

    async def clarify(self, question: Frame, request: str, draft: Mapping[str, Any] | None = None) -> None:
        """Pause at ``question`` and ask the agent ``request``."""
        frame: Frame = {
            "type": "clarify",
            "questionnaireId": question["questionnaireId"],
            "step": question["step"],
            "request": request,
        }
        if draft is not None:
            frame["draft"] = dict(draft)
        await self.send(frame)

    async def cancel(self, frame: Frame) -> None:
        """Cancel the questionnaire of ``frame`` (a ``question`` or ``suspended`` frame)."""
        await self.send({"type": "cancel", "questionnaireId": frame["questionnaireId"], "step": frame["step"]})

    async def ping(self) -> Frame:
        await self.send({"type": "ping"})
        return await self.wait_for("pong")

    # --- scripts --------------------------------------------------------------------
    async def answer_all(
        self,
        answers: Mapping[str, Sequence[str] | Mapping[str, Any]] | None = None,
        *,
        first: Frame | None = None,
        timeout: float = 10.0,
    ) -> Frame:
        """Answer question after question until the questionnaire closes; returns ``closed``.

        ``answers`` maps a question id to its option ids, or to
        ``{"selected": [...], "other": "..."}``; a question it does not name gets its
        first option. ``first``: a ``question`` frame already taken with ``wait_for``.
        """
        answers = answers or {}
        while True:
            if first is not None:
                frame, first = first, None
            else:
                frame = await self.wait_for("question", "closed", timeout=timeout)
            if frame["type"] == "closed":
                return frame
            question = frame["question"]
            planned = answers.get(question["id"])
            if planned is None:
                await self.answer(frame, [question["options"][0]["id"]])
            elif isinstance(planned, Mapping):
                await self.answer(frame, planned.get("selected", ()), planned.get("other"))
            else:
                await self.answer(frame, list(planned))


# --- helpers ------------------------------------------------------------------------


def person(ws_url: str, sid: str, tok: str | None = None, **kwargs: Any) -> Connecting[ScriptedClient]:
    """``async with person(url, sid) as p:`` -- a ScriptedClient that has seen ``welcome``."""
    return ScriptedClient.connect(ws_url, sid, tok if tok is not None else token(sid, "client"), **kwargs)


async def raw_socket(
    ws_url: str,
    sid: str,
    *,
    subprotocol: str | None = JSON,
    origin: str | None = None,
    timeout: float = 10.0,
) -> ClientConnection:
    """A bare websocket, no hello sent: for handshake and close-code tests."""
    timeout = scaled(timeout)
    return await asyncio.wait_for(
        websockets.connect(
            f"{ws_url}/v1/sessions/{sid}/ws",
            subprotocols=[Subprotocol(subprotocol)] if subprotocol else None,
            origin=origin,  # type: ignore[arg-type]
            open_timeout=timeout,
            max_size=None,
            ping_interval=None,
        ),
        timeout,
    )


async def close_code(ws: ClientConnection, timeout: float = 10.0) -> int | None:
    """Read until the broker closes; the close code it sent."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the broker did not close the connection within {timeout}s")
            await asyncio.wait_for(ws.recv(), remaining)
    except websockets.ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd else None
    except TimeoutError:
        raise AssertionError(f"the broker did not close the connection within {timeout}s") from None


def hello(tok: str, kind: str = "bot") -> str:
    return json.dumps({"type": "hello", "token": tok, "client": {"kind": kind, "name": "protocol-suite"}})


async def barrier(*clients: ScriptedClient) -> None:
    """Ping every client and wait for its pong: everything the broker sent each one
    in reply to earlier frames has then arrived (frames on a socket stay in order)."""
    await asyncio.gather(*(c.ping() for c in clients))


def frames_since(client: ScriptedClient, mark: int, kind: str | None = None) -> list[Frame]:
    return [f for f in client.received[mark:] if kind is None or f.get("type") == kind]


TCP_CLOSE_WAIT = 8  # linux/tcp_states.h


def peer_shut_down(writer: asyncio.StreamWriter) -> bool:
    """The other end of this TCP connection shut its writing side (its FIN arrived after all
    it sent), read off the socket's state (Linux TCP_INFO), so nothing of it is consumed."""
    sock = writer.get_extra_info("socket")
    return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]) == TCP_CLOSE_WAIT
