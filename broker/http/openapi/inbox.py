"""The inbox's operation: GET /v1/inbox, a page of the open questionnaires a client token covers."""

from __future__ import annotations

from typing import Final

from broker.core import inbox
from broker.http.openapi.shared import Schema, error, json_body, query_parameter, ref
from broker.http.routing import PathItem

_INBOX_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: a bad limit or cursor, an unknown or repeated query parameter.",
    "401": "unauthorized: no token, a bad, expired or revoked token, or not a client token.",
    "429": "rate_limited: the token read too much (QBROKER_READS_PER_MINUTE); retry after Retry-After seconds.",
    "503": "store_unavailable: retry.",
}


def operations() -> dict[str, PathItem]:
    return {
        "/v1/inbox": {
            "get": {
                "operationId": "inbox",
                "summary": "The open questionnaires of the sessions the client token covers, by session id.",
                "security": [{"clientToken": []}],
                "parameters": [
                    query_parameter(
                        "limit",
                        f"At most this many items (default {inbox.DEFAULT_LIMIT}).",
                        {"type": "integer", "minimum": 1, "maximum": inbox.MAX_LIMIT},
                    ),
                    query_parameter(
                        "cursor", "The cursor a previous page's next gave: the page after it.", {"type": "string"}
                    ),
                ],
                "responses": {
                    "200": json_body(ref("Inbox"), "A page; next: the cursor of the next (null: none)."),
                    **{status: json_body(ref("InboxError"), text) for status, text in _INBOX_ERRORS.items()},
                },
            }
        },
    }


def schemas() -> dict[str, Schema]:
    nullable_text: Schema = {"type": ["string", "null"]}
    return {
        "InboxError": error("inbox"),
        "InboxItem": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "sessionId",
                "questionnaireId",
                "status",
                "label",
                "prompt",
                "index",
                "total",
                "createdAt",
                "updatedAt",
                "askedBy",
                "clients",
            ],
            "properties": {
                "sessionId": {"type": "string"},
                "questionnaireId": {"type": "string"},
                "status": {"type": "string", "enum": ["in_progress", "needs_clarification"]},
                "label": nullable_text,
                "prompt": nullable_text,
                "index": {"type": "integer", "minimum": 0},
                "total": {"type": "integer", "minimum": 1},
                "createdAt": {"type": "number"},
                "updatedAt": {"type": "number"},
                "askedBy": nullable_text,
                "clients": {"type": "integer", "minimum": 0},
            },
        },
        "Inbox": {
            "type": "object",
            "additionalProperties": False,
            "required": ["items", "next"],
            "properties": {"items": {"type": "array", "items": ref("InboxItem")}, "next": nullable_text},
        },
    }
