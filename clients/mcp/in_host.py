"""``qbroker mcp`` for a host that can show a form: the call goes through the broker's own MCP
endpoint, which decides whether to ask in the host's form (``QBROKER_IN_HOST``, or
``--in-host``), signs the form's ``requestState`` and applies the person's reply, exactly
as for a host connected to ``/mcp`` itself.

The endpoint speaks MCP 2026-07-28's multi round-trip pattern; this side meets the host
in whichever protocol era the host speaks:

- a 2026-07-28 host: the endpoint's ``input_required`` result is handed to the host as it
  is, and the host's repeated call (its ``inputResponses`` and ``requestState``) is handed
  back, so the broker-signed state makes the round trip untouched;
- an older host (an ``initialize`` handshake): the form goes to the host as an
  ``elicitation/create`` request on the call's own stream, and its answer goes back to the
  endpoint in the repeated call, here.

Progress notifications from the endpoint are passed on to the host.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote, urlencode

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

MODERN: Final = MODERN_PROTOCOL_VERSIONS[-1]


def host_shows_forms(session: Any) -> bool:
    """Whether the host declared form elicitation (an empty ``elicitation`` means forms)."""
    capabilities = session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def endpoint_url(base: str, session_id: str, timeout: float | None, in_host: str | None) -> str:
    """The broker's MCP endpoint for ``session_id`` (the path names it: the token may cover more)."""
    query = {}
    if timeout is not None:
        query["timeout"] = f"{max(1.0, timeout):g}"
    if in_host is not None:
        query["inHost"] = in_host
    url = f"{base.rstrip('/')}/v1/sessions/{quote(session_id, safe='')}/mcp"
    return f"{url}?{urlencode(query)}" if query else url


async def call_through_endpoint(
    ctx: Any, call: types.CallToolRequestParams, url: str, token: str | None
) -> types.CallToolResult | types.InputRequiredResult:
    """The call, made on the broker's endpoint for the host behind ``ctx``."""
    modern_host = ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def to_the_host(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)  # (the endpoint asks forms only)
        result: types.ElicitResult = await ctx.session.elicit_form(
            params.message, params.requested_schema, related_request_id=ctx.request_id
        )
        return result

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=None)) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=MODERN,
            elicitation_callback=to_the_host,
        ) as client,
    ):
        arguments = dict(call.arguments or {})
        if modern_host:
            # The host runs the round trips itself: its form, its repeated call.
            return await client.session.call_tool(
                call.name,
                arguments,
                progress_callback=progress,
                input_responses=call.input_responses,
                request_state=call.request_state,
                allow_input_required=True,
            )
        return await client.call_tool(call.name, arguments, progress_callback=progress)
