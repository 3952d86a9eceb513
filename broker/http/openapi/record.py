"""The record's operations: a session's history, a questionnaire's events."""

from __future__ import annotations

from typing import Final

from broker.core.events import EVENT_TYPES
from broker.core.history import STATUSES
from broker.http.openapi.shared import QID, SID, Schema, error, json_body, query_parameter, ref
from broker.http.routing import PathItem


def _actor() -> Schema:
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["sub", "role", "client"],
        "properties": {
            "sub": {"type": ["string", "null"], "description": "The token's holder (its sub claim); null: not said."},
            "role": {"type": "string", "enum": ["agent", "client"]},
            "client": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "required": ["kind", "name"],
                "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
                "description": "For a client: the kind and name its hello gave; null for an agent.",
            },
        },
        "description": "Who made a change; null for the broker's own (a questionnaire nobody was there to answer).",
    }


def _event() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "at", "step", "by"],
        "properties": {
            "type": {"type": "string", "enum": list(EVENT_TYPES)},
            "at": {"type": "number", "description": "Unix seconds."},
            "step": {"type": "integer", "minimum": 0, "description": "The step the change was made at."},
            "questionId": {"type": "string", "description": "The question it concerns, where one does."},
            "revision": {"type": "integer", "minimum": 1, "description": "clarification_requested, resumed."},
            "reason": {"type": "string", "enum": ["ui_unavailable", "ui_error"], "description": "unavailable."},
            "questions": {"type": "integer", "minimum": 1, "description": "started: how many questions."},
            "by": ref("Actor"),
        },
    }


def _history_item() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "status", "reason", "createdAt", "endedAt", "askedBy", "questions"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": list(STATUSES)},
            "reason": {
                "type": ["string", "null"],
                "enum": ["user_cancelled", "aborted", "ui_unavailable", "ui_error", None],
            },
            "createdAt": {"type": "number"},
            "endedAt": {"type": ["number", "null"]},
            "askedBy": {"type": ["string", "null"], "description": "The sub of the agent token that started it."},
            "questions": {"type": "integer", "minimum": 1},
        },
    }


_RECORD_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: a bad session id or query parameter.",
    "401": "unauthorized: no token, a bad signature, an expired or revoked token, an admin token.",
    "403": "forbidden: an agent or client token whose scope does not cover the session.",
    "404": "unknown_questionnaire: no such questionnaire in this session (or it expired).",
    "429": "rate_limited: the token read too much (QBROKER_READS_PER_MINUTE); retry after Retry-After seconds.",
    "503": "store_unavailable (Redis cannot be reached): retry.",
}


def _record_responses(error: str, ok: Schema, *statuses: str) -> Schema:
    return {"200": ok, **{s: json_body(ref(error), _RECORD_ERRORS[s]) for s in statuses}}


_STATUS: Final[Schema] = query_parameter(
    "status",
    "Only questionnaires in this status.",
    {"type": "string", "enum": list(STATUSES)},
)


_LIMIT: Final[Schema] = query_parameter(
    "limit",
    "At most this many items (default 50).",
    {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
)


_BEFORE: Final[Schema] = query_parameter(
    "before",
    "The cursor a previous page's next gave: the page after it.",
    {"type": "string", "pattern": "^[0-9]{1,18}$"},
)


_RECORD_SECURITY: Final[list[dict[str, list[str]]]] = [{"agentToken": []}, {"clientToken": []}]


def operations() -> dict[str, PathItem]:
    return {
        "/v1/sessions/{sid}/questionnaires": {
            "get": {
                "operationId": "listQuestionnaires",
                "summary": "The session's questionnaires within retention, newest first, each as it stands.",
                "description": "A page filtered by status looks at up to 1,000 questionnaires; it may then"
                " hold fewer than limit items while next is not null.",
                "security": _RECORD_SECURITY,
                "parameters": [SID, _STATUS, _LIMIT, _BEFORE],
                "responses": _record_responses(
                    "HistoryError",
                    json_body(ref("History"), "A page; next: the cursor of the next (null: none)."),
                    "400",
                    "401",
                    "403",
                    "429",
                    "503",
                ),
            }
        },
        "/v1/sessions/{sid}/questionnaires/{qid}/events": {
            "get": {
                "operationId": "questionnaireEvents",
                "summary": "Every change of the questionnaire, oldest first, each with who made it (no texts).",
                "security": _RECORD_SECURITY,
                "parameters": [SID, QID],
                "responses": _record_responses(
                    "EventsError", json_body(ref("Events"), "The events."), "400", "401", "403", "404", "429", "503"
                ),
            }
        },
    }


def schemas() -> dict[str, Schema]:
    return {
        "HistoryError": error("history"),
        "EventsError": error("events"),
        "Actor": _actor(),
        "Event": _event(),
        "Events": {
            "type": "object",
            "additionalProperties": False,
            "required": ["events"],
            "properties": {"events": {"type": "array", "items": ref("Event")}},
        },
        "HistoryItem": _history_item(),
        "History": {
            "type": "object",
            "additionalProperties": False,
            "required": ["items", "next"],
            "properties": {
                "items": {"type": "array", "items": ref("HistoryItem")},
                "next": {"type": ["string", "null"]},
            },
        },
    }
