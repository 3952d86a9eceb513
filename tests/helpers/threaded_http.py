"""A stand-in that a program under test calls over HTTP (a scripted model, a tampering proxy),
served on 127.0.0.1 by a thread of its own.

A subclass says what it serves (``handler()``: an ``http.server`` handler class, usually
reading the stand-in's own state); this serves it on an ephemeral port from ``start()`` (or
``with``) to ``stop()``.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar, Self


class ServedInAThread:
    THREAD_NAME: ClassVar[str] = "test-http-server"
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler class each request is given to."""
        raise NotImplementedError

    @property
    def origin(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
