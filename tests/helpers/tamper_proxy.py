"""An HTTP proxy in front of a broker that alters one byte of every ``requestState`` a host
sends back (MCP's multi round-trip pattern), for the test that a tampered state is refused.

``TamperingProxy(upstream_port)`` listens on 127.0.0.1 (a thread of its own) and forwards
every request to the broker as it came, except that a JSON-RPC body whose
``params.requestState`` is a string gets one character of it changed (``altered`` keeps
each original and what it became). Responses, server-sent event streams included, are passed
back as they arrive.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from tests.helpers.threaded_http import ServedInAThread

# Not forwarded: they describe one hop, not the message (the body may change length).
HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})


def one_byte_off(state: str) -> str:
    """``state`` with the character in its middle changed (to another of the same alphabet)."""
    at = len(state) // 2
    return state[:at] + ("A" if state[at] != "A" else "B") + state[at + 1 :]


@dataclass
class TamperingProxy(ServedInAThread):
    upstream_port: int
    altered: list[tuple[str, str]] = field(default_factory=list)

    THREAD_NAME: ClassVar[str] = "tampering-proxy"

    def _alter(self, body: bytes) -> bytes:
        try:
            message: Any = json.loads(body)
        except ValueError:
            return body
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict) or not isinstance(params.get("requestState"), str):
            return body
        state = params["requestState"]
        params["requestState"] = one_byte_off(state)
        self.altered.append((state, params["requestState"]))
        return json.dumps(message).encode()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.command == "POST":
                    body = proxy._alter(body)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                headers["Content-Length"] = str(len(body))
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=300)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in HOP_HEADERS:
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    while chunk := response.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.close_connection = True
                finally:
                    upstream.close()

            do_GET = do_POST = do_DELETE = _forward

        return Handler
