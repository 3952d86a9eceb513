"""Local receivers for notifications: an HTTP server on 127.0.0.1 that records what it is
sent and answers with a scripted status, and an SMTP server (aiosmtpd) that keeps the mails.

    with http_receiver() as hooks:                      # answers 200 to everything
        ...
        request = hooks.wait_for(1)[0]                  # deadline: fails with what it got
        assert request.headers["Idempotency-Key"] == ...

``statuses`` scripts the answers in order (then 200); ``delay`` holds each answer that long
(a slow receiver). Everything binds 127.0.0.1 and every wait has a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers.waiting import wait_until


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when it arrived


@dataclass
class HttpReceiver:
    server: ThreadingHTTPServer
    statuses: list[int] = field(default_factory=list)
    delay: float = 0.0
    default: int = 200  # the answer once ``statuses`` ran out
    headers: dict[str, str] = field(default_factory=dict)  # sent with every answer but a 2xx
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """The first ``count`` requests, once they have arrived."""
        wait_until(lambda: len(self.received) >= count, timeout=timeout, what=f"{count} request(s) at {self.url}")
        with self.lock:
            return list(self.received[:count])

    def about(self, text: str) -> list[Received]:
        """The requests so far whose body mentions ``text`` (a session id)."""
        with self.lock:
            return [r for r in self.received if text.encode() in r.body or text in str(r.headers)]

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default


def _handler(receiver: list[HttpReceiver]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            owner = receiver[0]
            with owner.lock:
                owner.received.append(
                    Received("POST", self.path, {k: v for k, v in self.headers.items()}, body, time.time())
                )
            if owner.delay:
                time.sleep(owner.delay)
            status = owner.next_status()
            self.send_response(status)
            if status >= 300:
                for name, value in owner.headers.items():
                    self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def http_receiver(statuses: Sequence[int] = (), delay: float = 0.0, default: int = 200) -> Iterator[HttpReceiver]:
    holder: list[HttpReceiver] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    server.daemon_threads = True
    receiver = HttpReceiver(server, list(statuses), delay, default)
    holder.append(receiver)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class SmtpReceiver:
    port: int
    mails: list[tuple[str, list[str], Message]] = field(default_factory=list)  # (from, to, message)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def about(self, text: str) -> list[tuple[str, list[str], Message]]:
        return [mail for mail in self.mails if text in mail[2].as_string()]

    def wait_for(self, count: int, timeout: float = 20.0) -> list[tuple[str, list[str], Message]]:
        wait_until(lambda: len(self.mails) >= count, timeout=timeout, what=f"{count} mail(s) on port {self.port}")
        return list(self.mails[:count])


@contextmanager
def black_hole() -> Iterator[str]:
    """The URL of a server that accepts connections and never answers (a hung receiver)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(512)  # connections complete in the backlog; nothing ever reads them
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"


@contextmanager
def smtp_receiver() -> Iterator[SmtpReceiver]:
    """An aiosmtpd server on 127.0.0.1 (in its own thread) keeping every mail it accepts."""
    from aiosmtpd.controller import Controller

    from tests.helpers.processes import free_port

    port = free_port()
    receiver = SmtpReceiver(port)

    class Keep:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's naming
            receiver.mails.append((envelope.mail_from, list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
            return "250 OK"

    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield receiver
    finally:
        controller.stop()
