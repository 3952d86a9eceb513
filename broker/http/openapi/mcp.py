"""The MCP endpoint's operations: the ``questionnaire`` tool over Streamable HTTP.

Its messages are JSON-RPC, described by the MCP specification, not here; what the document
says is where the endpoint is, which token it takes, and that its refusals before the MCP
layer (Origin, token, session, body size) are the agent API's errors.
"""

from __future__ import annotations

from broker.http.openapi.shared import SID, Schema
from broker.http.routing import PathItem

_ANSWERS = (
    "JSON-RPC over Streamable HTTP (stateless): a JSON or text/event-stream answer from the MCP layer; "
    "or, before it, the agent API's error shape (403 Origin or scope, 401 token, 413 body, 503 draining)."
)


def _operations(operation_id: str, summary: str, parameters: list[Schema]) -> PathItem:
    # GET (no stream is offered: 405, remote_mcp/gate.py) and DELETE (an older host's session
    # ends; else nothing to end), listed so that the document names every method the path's
    # Allow does.
    answers = {"default": {"description": _ANSWERS}}
    return {
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
            "responses": answers,
        },
        "get": {"operationId": operation_id + "Stream", "parameters": parameters, "responses": answers},
        "delete": {"operationId": operation_id + "End", "parameters": parameters, "responses": answers},
    }


def operations() -> dict[str, PathItem]:
    return {
        "/mcp": _operations("mcp", "The questionnaire tool over MCP, for the session the agent token names.", []),
        "/v1/sessions/{sid}/mcp": _operations(
            "sessionMcp", "The questionnaire tool over MCP, for the session in the path.", [SID]
        ),
    }


def schemas() -> dict[str, Schema]:
    return {}
