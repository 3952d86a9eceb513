"""Health, readiness and metrics: what an orchestrator and Prometheus call (no token).

GET /healthz   {"status": "ok"}: the process answers
GET /readyz    {"status": "ready"}, or 503 {"status": "store_unavailable" | "shutting_down"}
GET /metrics   Prometheus text format (broker/runtime/metrics.py)
"""

from __future__ import annotations

from typing import Final

import orjson
from starlette.types import Receive, Scope, Send

from broker.http.kit import error_body, respond
from broker.runtime.metrics import CONTENT_TYPE
from broker.service import Broker

_OK: Final = orjson.dumps({"status": "ok"})
_READY: Final = orjson.dumps({"status": "ready"})


async def read_only(scope: Scope, send: Send) -> bool:
    """True for a GET or HEAD; else answer 405 (with ``Allow``) and return False."""
    method: str = scope["method"]
    if method in ("GET", "HEAD"):
        return True
    message = f"{method} is not allowed on {scope['path']}; use GET"
    await respond(send, 405, error_body("method_not_allowed", message), [(b"allow", b"GET, HEAD")])
    return False


class Liveness:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await read_only(scope, send):
            await respond(send, 200, _OK, [], head=scope["method"] == "HEAD")


class Readiness:
    """Ready: the store answers and the broker is not draining."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await read_only(scope, send):
            return
        broker = self.broker
        if broker.shutting_down.is_set():
            status, body = 503, orjson.dumps({"status": "shutting_down"})
        elif not await broker.store.ping():
            status, body = 503, orjson.dumps({"status": "store_unavailable"})
        else:
            status, body = 200, _READY
        await respond(send, status, body, [], head=scope["method"] == "HEAD")


class MetricsPage:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await read_only(scope, send):
            body = self.broker.render_metrics()
            await respond(send, 200, body, [], head=scope["method"] == "HEAD", content_type=CONTENT_TYPE.encode())
