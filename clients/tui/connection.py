"""The connection to the broker: one websocket, re-opened with backoff until told to stop.

``Connection`` is the client's only I/O besides the terminal: hello, then every frame into
the model, and the model's frames out (``--inbox`` runs one to the inbox and one to the
session being answered). Around it, the decisions about the connection are
pure functions, tested alone: where the session's websocket is, whether a session id can
be valid, how long to wait before the next attempt, and what a close code means (4400,
4401 and 4403 end the program: a retry cannot change the reason).
"""

from __future__ import annotations

import asyncio
import json
import random
import shlex
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from broker.core.status import CloseCode, CloseReason
from broker.core.wire import SESSION_ID_RULE, is_session_id


class Listener(Protocol):
    """What a connection reports to: a ``TuiModel``, or one of the inbox's sockets."""

    def connecting(self, attempt: int) -> None: ...

    def disconnected(self, reason: str, retry_at: float | None) -> None: ...

    def fatal(self, message: str) -> None: ...

    def apply(self, frame: dict[str, Any]) -> None: ...


# Close codes after which reconnecting cannot help: show the reason and exit non-zero.
FATAL_CLOSE_CODES: dict[int, str] = {
    CloseCode.PROTOCOL_VIOLATION: "the broker rejected the connection",
    CloseCode.BAD_TOKEN: "the broker refused the token",
    CloseCode.WRONG_SESSION: "the token is for another session",
}
CLOSE_REASONS: dict[int, str] = {
    CloseCode.NORMAL_CLOSURE: "connection closed",
    CloseCode.GOING_AWAY: "the broker is shutting down",
    CloseCode.ABNORMAL_CLOSURE: "connection lost",
    CloseCode.POLICY_VIOLATION: "rate limit exceeded",
    CloseCode.MESSAGE_TOO_BIG: "a frame was too large",
    CloseCode.INTERNAL_ERROR: "broker error",
    CloseCode.SERVICE_RESTART: "the broker is restarting",
    CloseCode.HELLO_TIMEOUT: "hello timed out",
}


def validate_session(sid: str) -> str | None:
    """An error message when ``sid`` is not a valid session id, else None."""
    if not is_session_id(sid):
        return f"session ids are {SESSION_ID_RULE}"
    return None


def websocket_url(base: str, sid: str) -> str:
    """The session's websocket URL from the broker's base ``http(s)://`` URL."""
    return _ws_url(base, f"/v1/sessions/{quote(sid, safe=':')}/ws")


def inbox_websocket_url(base: str) -> str:
    """The inbox's websocket URL from the broker's base ``http(s)://`` URL."""
    return _ws_url(base, "/v1/inbox/ws")


def _ws_url(base: str, path: str) -> str:
    parts = urlsplit(base.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise ValueError(f"expected an http:// or https:// URL, got {base!r}")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, "", ""))


def backoff_delay(
    attempt: int, rng: Callable[[], float] = random.random, base: float = 0.5, cap: float = 10.0
) -> float:
    """Seconds to wait before reconnect ``attempt`` (0-based): exponential, capped, jittered.

    The ceiling doubles per attempt up to ``cap``; the delay is drawn from the upper half of
    it ("equal jitter"), so clients that lost the same broker do not return in lockstep.
    """
    ceiling = min(cap, base * (2 ** min(attempt, 30)))
    return float(ceiling / 2 + rng() * ceiling / 2)


def describe_close(code: int | None, reason: str = "") -> str:
    text = FATAL_CLOSE_CODES.get(code or 0) or CLOSE_REASONS.get(code or 0) or "connection closed"
    if code:
        text += f" ({code}{': ' + reason if reason else ''})"
    return text


def agent_token_hint(code: int | None, reason: str, token: str) -> str | None:
    """What to do about the commonest wrong token, an agent's (the broker refuses it to a
    client with 4401 and a reason naming the agent token): which token to use instead."""
    if code != CloseCode.BAD_TOKEN or "agent token" not in reason:
        return None
    session = _scope_of(token) or "SESSION"
    return (
        f"the TUI needs a client token: mint one with `qbroker token --session {shlex.quote(session)} --role"
        " client` and give it with --token or QBROKER_TOKEN"
    )


def _scope_of(token: str) -> str | None:
    """The session (or pattern) a token says it is for, unverified: only to word a hint."""
    import jwt

    try:
        scope = jwt.decode(token, options={"verify_signature": False}).get("sid")
    except jwt.PyJWTError:
        return None
    return scope if isinstance(scope, str) and scope else None


class Credentials(Protocol):
    """A token that can be renewed (``sign_in.SignedIn``)."""

    token: str

    def renew(self) -> bool: ...


class Connection:
    """One websocket at a time to the session (or the inbox), re-opened with backoff until
    told to stop. ``ready``: the frame types that say the hello was accepted (the inbox
    socket's first list says it)."""

    def __init__(
        self,
        model: Listener,
        url: str,
        token: str,
        name: str,
        on_change: Any,
        ready: tuple[str, ...] = ("welcome",),
        credentials: Credentials | None = None,
    ) -> None:
        self.model = model
        self.url = url
        self.token = token
        # A signed-in person's (sign_in.py): its token is read at each hello, and renewed
        # when the broker closes the socket for an expired one.
        self.credentials = credentials
        self.name = name
        self.on_change = on_change  # called after every state change (redraw)
        self.ready = ready
        self.outbox: asyncio.Queue[dict[str, Any]] | None = None
        self.fatal = asyncio.Event()

    def send(self, frames: list[dict[str, Any]]) -> None:
        if self.outbox is not None:
            for frame in frames:
                self.outbox.put_nowait(frame)

    async def run(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
        from websockets.typing import Subprotocol

        from broker.core.frames import JSON_SUBPROTOCOL  # here, as websockets is: the codecs load on connecting

        attempt = 0
        while True:
            self.model.connecting(attempt)
            self.on_change()
            reason, why = "connection lost", ""
            try:
                async with connect(
                    self.url,
                    subprotocols=[Subprotocol(JSON_SUBPROTOCOL)],
                    open_timeout=10,
                    close_timeout=2,
                    max_size=1 << 20,
                    ping_interval=15,
                    ping_timeout=15,
                ) as ws:
                    if ws.subprotocol != JSON_SUBPROTOCOL:
                        reason = f"the server did not accept the {JSON_SUBPROTOCOL} subprotocol"
                        raise ConnectionError(reason)
                    hello = {
                        "type": "hello",
                        "token": self.credentials.token if self.credentials else self.token,
                        "client": {"kind": "tui", "name": self.name},
                    }
                    await ws.send(json.dumps(hello))
                    self.outbox = asyncio.Queue()
                    sender = asyncio.create_task(self._pump(ws, self.outbox))
                    try:
                        async for raw in ws:
                            frame = json.loads(raw)
                            if not isinstance(frame, dict):
                                continue
                            if frame.get("type") in self.ready:
                                attempt = 0
                            self._apply(frame)
                            self.on_change()
                    finally:
                        self.outbox = None
                        sender.cancel()
                    code, why = ws.close_code, ws.close_reason or ""
                    reason = describe_close(code, why)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                why = exc.rcvd.reason if exc.rcvd else ""
                reason = describe_close(code, why)
            except InvalidURI as exc:
                self._give_up(f"invalid URL: {exc}")
                return
            except (OSError, InvalidHandshake, TimeoutError, ConnectionError, ValueError) as exc:
                code, why = None, ""
                reason = _network_reason(exc)
            if code == CloseCode.BAD_TOKEN and why == CloseReason.TOKEN_EXPIRED and self.credentials is not None:
                if await asyncio.to_thread(self.credentials.renew):
                    attempt = 0
                    continue  # the same socket again, with the new token
                self._give_up("your sign-in has ended: run qbroker tui again to sign in")
                return
            if code in FATAL_CLOSE_CODES:
                hint = agent_token_hint(code, why, self.token)
                self._give_up(f"{reason}; {hint}" if hint else reason)
                return
            delay = backoff_delay(attempt)
            attempt += 1
            deadline = time.monotonic() + delay
            self.model.disconnected(reason, deadline)
            while (left := deadline - time.monotonic()) > 0:
                self.on_change()  # the countdown
                await asyncio.sleep(min(1.0, left))

    def _apply(self, frame: dict[str, Any]) -> None:
        try:
            self.model.apply(frame)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # A frame this client cannot read must not take the whole screen down.
            self.model.apply(
                {
                    "type": "error",
                    "code": "unreadable_frame",
                    "message": f"Could not show a {frame.get('type')!r} frame from the broker ({type(exc).__name__})",
                }
            )

    async def _pump(self, ws: Any, outbox: asyncio.Queue[dict[str, Any]]) -> None:
        from websockets.exceptions import ConnectionClosed

        while True:
            frame = await outbox.get()
            try:
                await ws.send(json.dumps(frame))
            except ConnectionClosed:
                return  # the reader sees the close too, and reconnects

    def _give_up(self, message: str) -> None:
        self.model.fatal(message)
        self.fatal.set()
        self.on_change()


def _network_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the broker running?)"
    if isinstance(exc, TimeoutError):
        return "timed out connecting"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
