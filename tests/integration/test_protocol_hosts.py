"""DNS rebinding: the broker answers only for a Host it knows (broker/runtime/hosts.py), on
every HTTP request (the agent API, /mcp, the inbox, the record, the page, health) and every
websocket handshake; a page whose own name resolves to the broker's address is refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.processes import BrokerProcess, broker, token

PUBLIC = "qbroker.example.test"
PATHS = [
    ("GET", "/healthz"),
    ("GET", "/v1/sessions/hosts/questionnaires/q-1?wait=0"),
    ("POST", "/mcp"),
    ("GET", "/v1/inbox"),
    ("GET", "/v1/sessions/hosts/questionnaires"),
    ("GET", "/openapi.json"),
]


@pytest.fixture(scope="module")
def hosted() -> Iterator[BrokerProcess]:
    with broker(public_url=f"https://{PUBLIC}/team", allowed_hosts="agents.internal") as process:
        yield process


def request(process: BrokerProcess, method: str, path: str, host: str) -> httpx.Response:
    by_client = path.startswith(("/v1/inbox", "/v1/sessions/hosts/questionnaires"))
    tok = token("hosts", "client") if by_client else token("hosts", "agent")
    headers = {
        "Host": host,
        "Authorization": f"Bearer {tok}",
        "Accept": "application/json, text/event-stream",
    }
    return httpx.request(method, process.url + path, headers=headers, json={} if method == "POST" else None, timeout=10)


@pytest.mark.parametrize(("method", "path"), PATHS)
def test_a_rebound_name_is_refused_421_on_every_path(hosted: BrokerProcess, method: str, path: str) -> None:
    response = request(hosted, method, path, f"evil.example:{hosted.port}")
    assert response.status_code == 421, response.text
    assert response.json()["error"]["code"] == "misdirected_request"
    assert "QBROKER_ALLOWED_HOSTS" in response.json()["error"]["message"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", PUBLIC, "agents.internal:{port}"])
@pytest.mark.parametrize(("method", "path"), PATHS)
def test_known_hosts_are_answered(hosted: BrokerProcess, method: str, path: str, host: str) -> None:
    response = request(hosted, method, path, host.format(port=hosted.port))
    assert response.status_code != 421, response.text


def handshake(process: BrokerProcess, path: str, host: str) -> int:
    """The status of a websocket upgrade of ``path`` with ``Host: host``."""
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "",
        "",
    ]
    with socket.create_connection(("127.0.0.1", process.port), timeout=10) as sock:
        sock.sendall("\r\n".join(lines).encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(status_line.split()[1])


@pytest.mark.parametrize("path", ["/v1/sessions/hosts/ws", "/v1/inbox/ws"])
def test_a_websocket_handshake_with_a_rebound_name_is_refused(hosted: BrokerProcess, path: str) -> None:
    assert handshake(hosted, path, "evil.example") == 403
    assert handshake(hosted, path, f"localhost:{hosted.port}") == 101
    assert hosted.logged("websocket handshake refused", reason="host not allowed") >= 1


def test_a_refused_handshake_cannot_forge_a_line_of_the_text_log() -> None:
    with broker(log_format="text") as process:
        path = "/v1/sessions/bad%0d%0a12:00:00%20info%20%20%20%20qbroker.ws:%20forged%1b[2K/ws"
        assert handshake(process, path, "evil.example") == 403
        log = process.log()
    assert "websocket handshake refused" in log
    assert not any(line.lstrip().startswith(("12:00:00", "info    qbroker.ws: forged")) for line in log.splitlines())
    assert "\\r\\n12:00:00" in log and "\x1b" not in log
