"""The ASGI application: agent API, MCP endpoint, the inbox, operator endpoints, health, and
the web client (the client websockets are broker/ws/session.py and broker/ws/inbox.py).

``BrokerApp`` sends the agent API's paths straight to ``broker/http/agent_api.py``, the MCP endpoint's
to ``broker/remote_mcp/``, the operator's to ``broker/http/operator.py``, the inbox's to
``broker/http/inbox.py``, the record's (events, history) to ``broker/http/record.py``, and
everything else (health, metrics, OpenAPI, the web client) to a Starlette app; it runs the
lifespan itself.
"""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from broker.http import agent_api, push, record
from broker.http.inbox import INBOX_HTTP_PATH, InboxAPI
from broker.http.openapi import build_openapi
from broker.http.operator import REVOCATIONS_PATH, OperatorAPI
from broker.http.signin import SIGNIN_PATH, page_endpoint, sign_in_settings
from broker.notify.config import load_routes
from broker.remote_mcp import McpEndpoint
from broker.remote_mcp import match as mcp_match
from broker.runtime.config import Config
from broker.runtime.metrics import CONTENT_TYPE
from broker.service import Broker
from broker.store import open_store
from broker.store.base import Store, StoreUnavailable

OPENAPI_DOCUMENT = build_openapi()


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    broker: Broker = request.app.state.broker
    return Response(broker.render_metrics(), media_type=CONTENT_TYPE)


async def openapi(request: Request) -> Response:
    """The agent API as an OpenAPI 3.1 document (broker/http/openapi.py)."""
    return JSONResponse(OPENAPI_DOCUMENT)


async def readyz(request: Request) -> Response:
    """Readiness: the store answers and the broker is not draining."""
    broker: Broker = request.app.state.broker
    if broker.shutting_down.is_set():
        return JSONResponse({"status": "shutting_down"}, status_code=503)
    if not await broker.store.ping():
        return JSONResponse({"status": "store_unavailable"}, status_code=503)
    return JSONResponse({"status": "ready"})


class BrokerApp:
    """The app uvicorn runs: a two-way switch in front of Starlette.

    The agent API is the hot HTTP path, so it skips Starlette's middleware and routing
    (``broker/http/agent_api.py`` answers its own errors, a crash included, as JSON).
    """

    def __init__(self, broker: Broker, web: Starlette) -> None:
        self.broker = broker
        self.state = web.state  # ``app.state.broker``, as on the Starlette app
        self._agent_api = agent_api.AgentAPI(broker)
        self._operator_api = OperatorAPI(broker)
        self._inbox_api = InboxAPI(broker)
        self._mcp = McpEndpoint(broker)
        self._history_api = record.HistoryAPI(broker)
        self._web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = agent_api.match(scope["path"])
            if route is not None:
                await self._agent_api(scope, receive, send, *route)
                return
            if scope["path"] == REVOCATIONS_PATH:
                await self._operator_api(scope, receive, send)
                return
            if scope["path"] == INBOX_HTTP_PATH:
                await self._inbox_api(scope, receive, send)
                return
            if scope["path"] == SIGNIN_PATH:
                await sign_in_settings(self.broker.config, scope, send)
                return
            mcp = mcp_match(scope["path"])
            if mcp is not None:
                await self._mcp(scope, receive, send, *mcp)
                return
            if scope["path"].startswith("/v1/") and scope["path"] not in push.PATHS:
                in_record = record.match(scope["path"])
                if in_record is not None:
                    await self._history_api(scope, send, *in_record)
                    return
                await agent_api.unknown_endpoint(scope, send)
                return
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self._web(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Start the broker, and stop it at shutdown (the ASGI lifespan protocol). Handled
        here, not by Starlette, so that a store that cannot be reached at startup says so in
        one line (uvicorn logs it and exits 3), where Starlette would log a traceback."""
        await receive()  # lifespan.startup
        mcp = contextlib.AsyncExitStack()
        try:
            await self.broker.start()
            await mcp.enter_async_context(self._mcp.running())
        except StoreUnavailable as exc:
            await send({"type": "lifespan.startup.failed", "message": f"qbroker cannot start: {exc}"})
            return
        except Exception:
            await send({"type": "lifespan.startup.failed", "message": traceback.format_exc()})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await mcp.aclose()  # (uvicorn has let the requests in flight finish, or cut them)
            await self.broker.stop()
        except Exception:
            await send({"type": "lifespan.shutdown.failed", "message": traceback.format_exc()})
            return
        await send({"type": "lifespan.shutdown.complete"})


def create_app(config: Config, store: Store | None = None, web_dir: Path | None = None) -> BrokerApp:
    """``config.secret`` must be set (``serve`` resolves the generated one first).

    ``web_dir``: the browser page's files, served at ``/`` (None: no page). The broker does
    not know its clients; the ``qbroker`` command hands it the page (``qbroker.cli``)."""
    # A routes file that cannot be used stops here, in one line, before anything listens.
    notify_routes = load_routes(config.notify_config) if config.notify_config is not None else ()
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
            sentinels=config.redis_sentinels,
            sentinel_master=config.redis_sentinel_master,
            password=config.redis_password,
            sentinel_password=config.redis_sentinel_password,
        ),
        routes=notify_routes,
    )

    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        Route("/openapi.json", openapi),
        *push.ROUTES,
    ]
    if web_dir is not None:
        page = page_endpoint(web_dir, config)  # where people sign in, its policy names the provider
        routes += [Route("/", page), Route("/index.html", page)]
        routes.append(Mount("/", StaticFiles(directory=web_dir, html=True), name="web"))
    web = Starlette(routes=routes)
    web.state.broker = broker
    web.state.push_subscribe_limits = push.subscribe_limits(config)
    return BrokerApp(broker, web)
