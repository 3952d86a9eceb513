"""The MCP endpoint's ASGI side: the gate, then the official MCP SDK's Streamable HTTP
transport in stateless mode, serving a low-level ``Server`` with the one tool.

Stateless: the SDK keeps no session between requests (no ``Mcp-Session-Id``), so any broker
behind a load balancer serves any request, and a host's retry may land anywhere. Protocol
revisions that open with ``initialize`` and the per-request revision (2026-07-28) are both
served by the SDK's session manager. Responses stream (SSE) rather than being one JSON body,
so that progress notifications reach the host while a call waits; the SDK pings the stream
every 15 s, which keeps proxies from closing a quiet one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from sse_starlette.sse import AppStatus
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from broker.core import tool
from broker.core.errors import BrokerError
from broker.core.request_state import SESSION_PREFIX
from broker.http import agent_api
from broker.remote_mcp import calls, gate, in_host, streams
from broker.service import Broker

log = logging.getLogger("qbroker.mcp")


class McpEndpoint:
    """``/mcp`` and ``/v1/sessions/{sid}/mcp``; ``running()`` spans the app's lifespan."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.asking = in_host.Asking(broker)
        self.server = _server(broker, self.asking)
        # The broker checks Host (broker/runtime/hosts.py: DNS rebinding), the gate Origin
        # (with the broker's own rule) and the body size first.
        self.security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.streams = streams.Streams(self.server, self.asking, self.security)
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's task group for the requests in flight (a manager runs only once, so
        each lifespan has its own)."""
        manager = StreamableHTTPSessionManager(
            self.server,
            stateless=True,
            json_response=False,
            security_settings=self.security,
            max_request_body_size=agent_api.MAX_BODY_BYTES,
        )
        # sse-starlette (the SDK's SSE responses) would cut every stream the moment uvicorn
        # is told to stop; the broker's own shutdown ends each waiting call first, with a
        # tool error that tells the host to call again (calls.py), and that must get out.
        AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, path_session: str | None = None) -> None:
        admitted = await gate.admit(self.broker, scope, receive, send, path_session)
        if admitted is None:
            return
        manager = self._manager
        if manager is None:  # (an app served without its lifespan)
            gone = BrokerError("shutting_down", "questionnaire: the MCP endpoint is not running; retry")
            await gate.refuse(send, gone)
            return
        caller: gate.Caller = scope[gate.CALLER_KEY]
        body: bytes = scope[gate.BODY_KEY]
        headers = Headers(scope=scope)
        token = headers.get(streams.SESSION_HEADER)
        if token is not None and token.startswith(SESSION_PREFIX):
            await self.streams.handle(scope, admitted, send, caller, token, body)
            return
        opened = streams.opening(caller, self.asking, dict(headers), body) if scope["method"] == "POST" else None
        if opened is not None:  # an older host that shows forms: a session of its own
            log.info("mcp session opened", extra={"session": caller.session_id, "host": opened.host_name})
            await self.streams.serve(scope, admitted, send, self.streams.seal(opened), opened)
            return
        await manager.handle_request(scope, admitted, send)


def _server(broker: Broker, asking: in_host.Asking) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool.tool_listing())])

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        caller: gate.Caller = ctx.request.scope[gate.CALLER_KEY]

        async def progress(done: float, message: str) -> None:
            await ctx.session.report_progress(done, message=message)

        meta: dict[str, Any] = dict(params.meta or {})  # (the SDK's TypedDict: any other key kept as sent)
        reply = None
        if params.request_state is not None:
            responses = {key: value.model_dump(by_alias=True) for key, value in (params.input_responses or {}).items()}
            reply = in_host.Reply(params.request_state, responses)
        host = _host(ctx)
        result = await calls.call_tool(
            broker, caller, params.name, params.arguments, meta, progress, asking, host, reply
        )
        if result.get("resultType") == "input_required":
            return types.InputRequiredResult.model_validate(result)
        return types.CallToolResult.model_validate(result)

    return Server(
        tool.SERVER_NAME,
        version=_version(),
        instructions=tool.SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _host(ctx: Any) -> in_host.Host:
    """What the request says of its host: form elicitation declared (an empty
    ``elicitation`` means forms), and a way to show it: MCP 2026-07-28's multi round-trip
    pattern, or the call's own stream in an older host's session (``streams.py``)."""
    session = ctx.session
    capabilities = session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    declared = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
    params = session.client_params
    name = (params.client_info.name if params is not None else in_host.UNNAMED_HOST)[:100]
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return in_host.Host(declared, name)
    token = ctx.request.headers.get(streams.SESSION_HEADER) if ctx.request is not None else None
    if not declared or not session.can_send_request or token is None:
        return in_host.Host(False, name)

    async def send_form(form: dict[str, Any]) -> Any:
        return await session.elicit_form(form["message"], form["requestedSchema"], related_request_id=ctx.request_id)

    return in_host.Host(True, name, streams.Stream(token, send_form))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("qbroker")
    except Exception:  # not installed as a distribution: running from a checkout
        return "0.1.0"
