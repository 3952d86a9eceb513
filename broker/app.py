"""The Starlette application: agent API, health, and the web client (the client websocket is broker/ws.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from broker import http
from broker.config import Config
from broker.metrics import CONTENT_TYPE
from broker.openapi import build_openapi
from broker.service import Broker
from broker.store import open_store
from broker.store.base import Store

WEB_DIR = Path(__file__).resolve().parent.parent / "clients" / "web"
OPENAPI_DOCUMENT = build_openapi()


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    broker: Broker = request.app.state.broker
    return Response(broker.metrics.render(), media_type=CONTENT_TYPE)


async def openapi(request: Request) -> Response:
    """The agent API as an OpenAPI 3.1 document (broker/openapi.py)."""
    return JSONResponse(OPENAPI_DOCUMENT)


async def readyz(request: Request) -> Response:
    """Readiness: the store answers and the broker is not draining."""
    broker: Broker = request.app.state.broker
    if broker.shutting_down.is_set():
        return JSONResponse({"status": "shutting_down"}, status_code=503)
    if not await broker.store.ping():
        return JSONResponse({"status": "store_unavailable"}, status_code=503)
    return JSONResponse({"status": "ready"})


def create_app(config: Config, store: Store | None = None) -> Starlette:
    """``config.secret`` must be set (``serve`` resolves the generated one first)."""
    broker = Broker(
        config,
        store
        or open_store(
            config.redis_url,
            config.retention,
            cluster=config.redis_cluster,
            wait_replicas=config.redis_wait_replicas,
            wait_aof=config.redis_wait_aof,
            wait_timeout=config.redis_wait_timeout,
        ),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        try:
            yield
        finally:
            await broker.stop()

    routes = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        Route("/openapi.json", openapi),
        *http.routes,
    ]
    if WEB_DIR.is_dir():
        routes.append(Mount("/", StaticFiles(directory=WEB_DIR, html=True), name="web"))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.broker = broker
    return app
