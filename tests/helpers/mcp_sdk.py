"""The official MCP Python SDK's own Streamable HTTP client, as a host would use it against
the broker's MCP endpoint (``/mcp``): the bearer token as a header on every request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from broker.core.tool import DETAILS_META_KEY

# Both protocol eras the SDK speaks: the initialize handshake, and the per-request revision.
MODES: Final = ("legacy", "2026-07-28")


@asynccontextmanager
async def mcp_client(
    url: str,
    token: str | None,
    *,
    mode: str = "legacy",
    headers: dict[str, str] | None = None,
    statuses: list[int] | None = None,
    elicitation: ElicitationFnT | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> AsyncIterator[Client]:
    """A connected ``mcp.Client`` for the endpoint at ``url`` (``.../mcp``); ``statuses``
    collects the HTTP status of every response it gets; ``elicitation`` answers the forms
    the server asks (none: the client declares no elicitation); ``transport``: the HTTP
    transport underneath (one that sends some requests elsewhere)."""
    sent = {"Authorization": f"Bearer {token}"} if token is not None else {}
    sent.update(headers or {})

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async with (
        httpx2.AsyncClient(
            headers=sent,
            timeout=httpx2.Timeout(30.0, read=300.0),
            event_hooks={"response": [record]},
            transport=transport,
        ) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=elicitation) as client,
    ):
        yield client


def text_of(result: Any) -> str:
    return "\n".join(item.text for item in result.content if item.type == "text")


def details_of(result: Any) -> Any:
    """The versioned ``details`` of a ``CallToolResult``: in its ``_meta``, for programs.
    A result never carries ``structuredContent`` (hosts would hand it to the model in place
    of the text), which this checks on every result it reads."""
    assert result.structured_content is None, "a result must not carry structuredContent"
    return (result.meta or {}).get(DETAILS_META_KEY)
