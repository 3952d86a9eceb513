"""The route table: every endpoint of the broker, in one place.

The app dispatches by it (broker/app.py), the 404 under ``/v1/`` lists it, and the OpenAPI
document is built from it (broker/http/openapi/), so the three cannot drift. A new endpoint
is a row here: its path, its methods, one line about it, the class that serves it (made
once per app, handed the broker; called with the path's ``{name}`` segments) and its
area's part of the OpenAPI document.

The agent API comes first: the table is tried in order, and it is the hot HTTP path.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import orjson
from starlette.types import Receive, Scope, Send

from broker.http.agent_api import AgentAPI
from broker.http.health import Liveness, MetricsPage, Readiness, read_only
from broker.http.inbox import InboxAPI
from broker.http.kit import respond
from broker.http.openapi import agent_api, health, inbox, mcp, operator, push, record, signin
from broker.http.openapi.document import build_openapi
from broker.http.operator import OperatorAPI
from broker.http.push import PushKeyAPI, PushSubscriptionsAPI
from broker.http.record import HistoryAPI
from broker.http.routing import Route
from broker.http.signin import SIGNIN_PATH, SignInAPI
from broker.remote_mcp import McpEndpoint
from broker.service import Broker
from broker.ws.handshake import INBOX_PATH, SESSION_PATH


class OpenApiDocument:
    """``GET /openapi.json``: the document this table makes."""

    def __init__(self, broker: Broker) -> None:
        self.body = orjson.dumps(openapi_document())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await read_only(scope, send):
            await respond(send, 200, self.body, [], head=scope["method"] == "HEAD")


ROUTES: Final[tuple[Route, ...]] = (
    Route("/v1/sessions/{sid}/questionnaire", "POST", "the agent API: start or resume", AgentAPI, agent_api),
    Route(
        "/v1/sessions/{sid}/questionnaires/{qid}", "GET/DELETE", "the agent API: re-attach, abort", AgentAPI, agent_api
    ),
    Route("/v1/sessions/{sid}/questionnaires", "GET", "the record: the session's history", HistoryAPI, record),
    Route("/v1/sessions/{sid}/questionnaires/{qid}/events", "GET", "the record: who changed what", HistoryAPI, record),
    Route("/mcp", "POST/GET/DELETE", "the MCP endpoint, the session from the token", McpEndpoint, mcp, slash=True),
    Route("/v1/sessions/{sid}/mcp", "POST/GET/DELETE", "the MCP endpoint for one session", McpEndpoint, mcp),
    Route(SESSION_PATH, "websocket", "the client websocket", None, None),
    Route("/v1/inbox", "GET", "the inbox", InboxAPI, inbox),
    Route(INBOX_PATH, "websocket", "the inbox websocket", None, None),
    Route("/v1/push/key", "GET", "browser push: the VAPID key", PushKeyAPI, push),
    Route("/v1/push/subscriptions", "POST/DELETE", "browser push: a device", PushSubscriptionsAPI, push),
    Route(SIGNIN_PATH, "GET", "where people sign in (OpenID Connect), no token", SignInAPI, signin),
    Route("/v1/revocations", "POST", "the operator's revocations (admin tokens)", OperatorAPI, operator),
    Route("/healthz", "GET", "liveness", Liveness, health),
    Route("/readyz", "GET", "readiness", Readiness, health),
    Route("/metrics", "GET", "Prometheus metrics", MetricsPage, health),
    Route("/openapi.json", "GET", "this table as an OpenAPI document", OpenApiDocument, health),
)


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of ``ROUTES`` (built once; do not change it)."""
    return build_openapi(ROUTES)
