"""The agent API's operations: start or resume, re-attach, abort.

The request body is the tool input's one JSON Schema (broker/core/schema.py), the very one
the MCP tool publishes: a flat object, so what would take ``oneOf`` or conditionals (a
start carries only questions, selection bounds only on multi questions, ids unique after
trimming, ``minSelections <= maxSelections``) is in its descriptions instead. A body that
satisfies the schema can therefore still be refused with ``400 invalid_arguments``; one the
broker accepts always satisfies it.
"""

from __future__ import annotations

from typing import Final

from broker.core.model import MAX_CLARIFICATION, MAX_OTHER
from broker.core.schema import tool_input_schema
from broker.http.openapi.shared import QID, SID, Schema, error, json_body, query_parameter, ref
from broker.http.routing import PathItem


def _option_out() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "label"],
        "properties": {"id": {"type": "string"}, "label": {"type": "string"}, "description": {"type": "string"}},
    }


def _question_out() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "label", "prompt", "type", "options", "allowOther"],
        "properties": {
            "id": {"type": "string"},
            "label": {"type": "string"},
            "prompt": {"type": "string"},
            "type": {"type": "string", "enum": ["single", "multi"]},
            "options": {"type": "array", "minItems": 1, "items": ref("OptionSnapshot")},
            "allowOther": {"type": "boolean"},
            "minSelections": {"type": "integer", "minimum": 0},
            "maxSelections": {"type": ["integer", "null"], "minimum": 1},
        },
        "description": "The normalized question; minSelections/maxSelections only on multi (null: no ceiling).",
    }


def _selection() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["selectedOptionIds"],
        "properties": {
            "selectedOptionIds": {"type": "array", "items": {"type": "string"}},
            "other": {"type": "string", "maxLength": MAX_OTHER},
        },
    }


def _clarification() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["revision", "questionId", "request"],
        "properties": {
            "revision": {"type": "integer", "minimum": 1},
            "questionId": {"type": "string"},
            "request": {"type": "string", "maxLength": MAX_CLARIFICATION},
            "response": {"type": "string", "maxLength": MAX_CLARIFICATION},
        },
    }


def _details() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "version",
            "questionnaireId",
            "revision",
            "status",
            "currentQuestionIndex",
            "questions",
            "answers",
            "draftAnswer",
            "clarifications",
        ],
        "properties": {
            "version": {"type": "integer", "enum": [1]},
            "questionnaireId": {"type": "string"},
            "revision": {"type": "integer", "minimum": 0},
            "status": {"type": "string", "enum": ["completed", "needs_clarification", "cancelled", "unavailable"]},
            "cancellationReason": {
                "type": "string",
                "enum": ["user_cancelled", "aborted", "ui_unavailable", "ui_error"],
                "description": "Only for cancelled and unavailable.",
            },
            "currentQuestionIndex": {"type": "integer", "minimum": 0},
            "questions": {"type": "array", "minItems": 1, "items": ref("QuestionSnapshot")},
            "answers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["questionId", "selectedOptionIds"],
                    "properties": {
                        "questionId": {"type": "string"},
                        "selectedOptionIds": {"type": "array", "items": {"type": "string"}},
                        "other": {"type": "string", "maxLength": MAX_OTHER},
                    },
                },
                "description": "In question order; option ids in declared order; other only when given.",
            },
            "draftAnswer": {"oneOf": [ref("Selection"), {"type": "null"}]},
            "clarificationRequest": {
                "type": "object",
                "additionalProperties": False,
                "required": ["revision", "questionId", "request"],
                "properties": {
                    "revision": {"type": "integer", "minimum": 1},
                    "questionId": {"type": "string"},
                    "request": {"type": "string"},
                },
                "description": "Only when needs_clarification.",
            },
            "clarifications": {"type": "array", "items": ref("Clarification")},
        },
    }


def _tool_result() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["content", "details", "isError"],
        "properties": {
            "content": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type", "text"],
                    "properties": {
                        "type": {"type": "string", "enum": ["text"]},
                        "text": {
                            "type": "string",
                            "pattern": r"^QUESTIONNAIRE_(COMPLETED|NEEDS_CLARIFICATION|CANCELLED|UNAVAILABLE) "
                            r"questionnaireId=\S+ revision=[0-9]+",
                            "description": "For a model: the marker line, then what happened.",
                        },
                    },
                },
            },
            "details": ref("Details"),
            "isError": {"type": "boolean", "enum": [False]},
        },
    }


def _pending() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "questionnaireId", "revision", "step"],
        "properties": {
            "status": {"type": "string", "enum": ["pending"]},
            "questionnaireId": {"type": "string"},
            "revision": {"type": "integer", "minimum": 0},
            "step": {"type": "integer", "minimum": 0},
        },
    }


_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: the tool input breaks a rule, a bad wait or clientWait, session id, "
    "Idempotency-Key or body.",
    "401": "unauthorized: no token, a bad signature, an expired or bad token, a client or admin token.",
    "403": "forbidden: an agent token whose scope does not cover the session.",
    "404": "unknown_questionnaire: no such questionnaire in this session (or it expired).",
    "409": "stale_revision / not_awaiting_clarification (resume), conflict (a storm of concurrent writes).",
    "413": "payload_too_large: a body over 16 MiB.",
    "503": "store_unavailable (Redis cannot be reached) or shutting_down (this process drains): retry.",
}


def _responses(*statuses: str, outcome: bool = True) -> Schema:
    out: Schema = {}
    if outcome:
        out["200"] = json_body(ref("ToolResult"), "An outcome: the tool result.")
        out["202"] = json_body(ref("Pending"), "Still with the person when wait ran out: re-attach with GET.")
    for status in statuses:
        out[status] = json_body(ref("Error"), _ERRORS[status])
    return out


_WAIT: Final[Schema] = query_parameter(
    "wait",
    "Seconds to hold the call open for an outcome (default 30).",
    {"type": "number", "minimum": 0, "maximum": 300, "default": 30},
)


_CLIENT_WAIT: Final[Schema] = query_parameter(
    "clientWait",
    "On a start: seconds the new questionnaire waits for a first client before it ends "
    "unavailable/ui_unavailable (default: QBROKER_CLIENT_WAIT, or QBROKER_NOTIFY_CLIENT_WAIT where a "
    "notification route covers the session); at most QBROKER_MAX_CLIENT_WAIT (default 3600). Refused on a resume.",
    {"type": "number", "minimum": 0, "maximum": 3600},
)


_REATTACH: Final[Schema] = query_parameter(
    "reattach",
    "On a start, instead of an Idempotency-Key: re-attach to an identical start (same session, "
    "token sub and questions) that is still open, else start a new one, as the MCP endpoint's starts do. "
    "Refused on a resume and together with an Idempotency-Key.",
    {"type": "string", "enum": ["true"]},
)


_IDEMPOTENCY_KEY: Final[Schema] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "On a start: the same key in the same session always returns the same questionnaire.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
}


def operations() -> dict[str, PathItem]:
    return {
        "/v1/sessions/{sid}/questionnaire": {
            "post": {
                "operationId": "callQuestionnaire",
                "summary": "Start a questionnaire or resume one after a clarification; wait for an outcome.",
                "parameters": [SID, _WAIT, _CLIENT_WAIT, _REATTACH, _IDEMPOTENCY_KEY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref("ToolInput")}},
                },
                "responses": _responses("400", "401", "403", "404", "409", "413", "503"),
            }
        },
        "/v1/sessions/{sid}/questionnaires/{qid}": {
            "get": {
                "operationId": "reattachQuestionnaire",
                "summary": "Re-attach: the same answers as the POST that started it.",
                "parameters": [SID, QID, _WAIT],
                "responses": _responses("400", "401", "403", "404", "503"),
            },
            "delete": {
                "operationId": "abortQuestionnaire",
                "summary": "Abort (cancelled/aborted); an already finished questionnaire is returned unchanged.",
                "parameters": [SID, QID],
                "responses": {
                    "200": json_body(ref("ToolResult"), "The final tool result."),
                    **_responses("400", "401", "403", "404", "409", "503", outcome=False),
                },
            },
        },
    }


def schemas() -> dict[str, Schema]:
    return {
        "ToolInput": tool_input_schema(),
        "QuestionSnapshot": _question_out(),
        "OptionSnapshot": _option_out(),
        "Selection": _selection(),
        "Clarification": _clarification(),
        "Details": _details(),
        "ToolResult": _tool_result(),
        "Pending": _pending(),
        "Error": error(),
    }
