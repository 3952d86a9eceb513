"""The ASGI application: every HTTP endpoint of the route table (broker/http/routes.py), and
the web client (the client websockets are served before the app, by broker/ws/transport.py).

``BrokerApp`` sends each path of the table straight to its endpoint, plain ASGI (the agent
API is the hot HTTP path: no Starlette routing or middleware on it), answers any other path
under ``/v1/`` with a JSON 404 listing the table, hands everything else to a Starlette app
serving the web client's files, and runs the lifespan itself.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from pathlib import Path
from typing import Protocol, runtime_checkable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount
from starlette.routing import Route as PageRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from broker.http import kit
from broker.http.framing import NoFraming
from broker.http.routes import ROUTES
from broker.http.routing import Endpoint, Route, unknown_endpoint
from broker.http.signin import page_endpoint
from broker.notify.config import load_routes
from broker.runtime.config import Config
from broker.runtime.hosts import refusal_message
from broker.service import Broker
from broker.store import open_store
from broker.store.base import Store, StoreUnavailable

log = logging.getLogger("qbroker.http")


@runtime_checkable
class _Running(Protocol):
    """An endpoint with work of its own for the app's lifetime (the MCP endpoint's SDK)."""

    def running(self) -> contextlib.AbstractAsyncContextManager[None]: ...


class BrokerApp:
    """The app uvicorn runs: the route table, then Starlette for the web client's files."""

    def __init__(self, broker: Broker, web: Starlette, routes: tuple[Route, ...] = ROUTES) -> None:
        self.broker = broker
        self.state = web.state  # ``app.state.broker``, as on the Starlette app
        made: dict[object, Endpoint] = {}  # one endpoint per class, however many paths it serves
        self._table = [
            (route, made.setdefault(route.endpoint, route.endpoint(broker)))
            for route in routes
            if route.endpoint is not None
        ]
        self._endpoints = list(made.values())
        self._routes = routes
        self._web = web
        self._hosts = broker.allowed_hosts

    async def _misdirected(self, scope: Scope, send: Send) -> None:
        """A request for a Host this broker does not answer for (broker/runtime/hosts.py)."""
        host = kit.header(scope["headers"], b"host")
        log.info("request refused: host not allowed", extra={"host": (host or "")[:200], "path": scope["path"][:200]})
        self.broker.metrics.errors.labels("misdirected_request").inc()
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await kit.respond(send, 421, kit.error_body("misdirected_request", refusal_message(host)), [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan" and not self._hosts.allows(kit.header(scope["headers"], b"host")):
            await self._misdirected(scope, send)
            return
        if scope["type"] == "http":
            path: str = scope["path"]
            parts = path.split("/")
            for route, endpoint in self._table:
                segments = route.match(parts)
                if segments is not None:
                    await endpoint(scope, receive, send, *segments)
                    return
            if path.startswith("/v1/"):
                await unknown_endpoint(self._routes, scope, send)
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
        running = contextlib.AsyncExitStack()
        try:
            await self.broker.start()
            for endpoint in self._endpoints:
                if isinstance(endpoint, _Running):
                    await running.enter_async_context(endpoint.running())
        except StoreUnavailable as exc:
            await send({"type": "lifespan.startup.failed", "message": f"qbroker cannot start: {exc}"})
            return
        except Exception:
            await send({"type": "lifespan.startup.failed", "message": traceback.format_exc()})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await running.aclose()  # (uvicorn has let the requests in flight finish, or cut them)
            await self.broker.stop()
        except Exception:
            await send({"type": "lifespan.shutdown.failed", "message": traceback.format_exc()})
            return
        await send({"type": "lifespan.shutdown.complete"})


def create_app(
    config: Config, store: Store | None = None, web_dir: Path | None = None, *, keep_revocations: bool = False
) -> BrokerApp:
    """``config.secret`` must be set (``serve`` resolves the generated one first).

    ``web_dir``: the browser page's files, served at ``/`` (None: no page). The broker does
    not know its clients; the ``qbroker`` command hands it the page (``qbroker.cli``).
    ``keep_revocations``: the memory store keeps its revocations in ``config.data_dir``
    (``serve`` does; a broker made in a test's process keeps them in memory)."""
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
            data_dir=config.data_dir if keep_revocations else None,
        ),
        routes=notify_routes,
    )

    routes: list[BaseRoute] = []
    if web_dir is not None:
        page = page_endpoint(web_dir, config)  # where people sign in, its policy names the provider
        routes += [PageRoute("/", page), PageRoute("/index.html", page)]
        routes.append(Mount("/", StaticFiles(directory=web_dir, html=True), name="web"))
    web = Starlette(routes=routes, middleware=[Middleware(NoFraming)])
    web.state.broker = broker
    return BrokerApp(broker, web)
