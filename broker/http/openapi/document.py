"""The HTTP API as an OpenAPI 3.1 document, served at ``GET /openapi.json``, built from the
route table (broker/http/routes.py): each route names its area's part of the document
(a module here, one per area), so a route cannot be missing from it.

Built from the same limits the validator enforces (broker.core.model), so the document cannot
drift from them. It describes the wire contract of docs/protocol.md: the request bodies
(the questionnaire tool's input), every status each operation can answer and the shape of
each body. CI runs schemathesis against a live broker with it (tests/integration/
test_abuse.py): no 5xx, and every response matches this document.
"""

from __future__ import annotations

from typing import Any

from broker.http.openapi.shared import OPENAPI_VERSION, Schema
from broker.http.routing import PathItem, Route


def build_openapi(routes: tuple[Route, ...]) -> dict[str, Any]:
    """The whole document (no ``servers``: paths are relative to wherever it was fetched)."""
    paths: dict[str, PathItem] = {}
    schemas: dict[str, Schema] = {}
    for route in routes:
        if route.doc is not None:
            paths[route.path] = route.doc.operations()[route.path]
            schemas.update(route.doc.schemas())
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "qbroker agent API",
            "version": "1",
            "description": "The questionnaire tool over HTTP: start or resume (POST), re-attach (GET), "
            "abort (DELETE); the record of a session: its history and each questionnaire's events; a "
            "person's inbox, browser push, the operator's revocations, and where the MCP endpoint is. "
            "The person answers over the client websocket, which this document does not "
            "cover; see docs/protocol.md for both.",
        },
        "paths": paths,
        "components": {"securitySchemes": _SECURITY_SCHEMES, "schemas": schemas},
        "security": [{"agentToken": []}],
    }


_SECURITY_SCHEMES: dict[str, Schema] = {
    "agentToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An agent token (role agent) whose sid covers the session: the session id, a"
        " prefix pattern ('alice:*') or every session ('*').",
    },
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An admin token (role admin, sid '*'): the operator's.",
    },
    "clientToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "A client token (role client): a push subscription hears of every session"
        " its sid covers; the record's endpoints take it as a bearer token for a session its sid"
        " covers (the websocket takes it in the hello).",
    },
}
