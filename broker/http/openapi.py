"""The agent API (and the operator's ``POST /v1/revocations``) as an OpenAPI 3.1 document,
served at ``GET /openapi.json``.

Built from the same limits the validator enforces (broker.core.model), so the document cannot
drift from them. It describes the wire contract of docs/protocol.md: the request bodies
(the questionnaire tool's input), every status each operation can answer and the shape of
each body. CI runs schemathesis against a live broker with it (tests/integration/
test_abuse.py): no 5xx, and every response matches this document.

The request body is the tool input's one JSON Schema (broker/core/schema.py), the very one
the MCP tool publishes: a flat object, so what would take ``oneOf`` or conditionals (a
start carries only questions, selection bounds only on multi questions, ids unique after
trimming, ``minSelections <= maxSelections``) is in its descriptions instead. A body that
satisfies the schema can therefore still be refused with ``400 invalid_arguments``; one the
broker accepts always satisfies it.
"""

from __future__ import annotations

from typing import Any, Final

from broker.core.events import EVENT_TYPES
from broker.core.history import STATUSES
from broker.core.model import MAX_CLARIFICATION, MAX_OTHER
from broker.core.schema import tool_input_schema
from broker.core.wire import SESSION_ID_PATTERN, SESSION_ID_RULE

OPENAPI_VERSION: Final = "3.1.0"
# Questionnaire ids are minted by the broker (UUIDs); anything else is simply unknown (404).
QUESTIONNAIRE_ID_PATTERN: Final = r"^[A-Za-z0-9._:-]{1,128}$"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


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
            "options": {"type": "array", "minItems": 1, "items": _ref("OptionSnapshot")},
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
            "questions": {"type": "array", "minItems": 1, "items": _ref("QuestionSnapshot")},
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
            "draftAnswer": {"oneOf": [_ref("Selection"), {"type": "null"}]},
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
            "clarifications": {"type": "array", "items": _ref("Clarification")},
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
            "details": _ref("Details"),
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


def _error(prefix: str = "questionnaire") -> Schema:
    """The API's error shape; the message starts with the endpoint's word (``questionnaire:``
    on the agent API, ``revocations:`` on the operator's)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "additionalProperties": False,
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "pattern": "^[a-z_]+$"},
                    "message": {"type": "string", "pattern": f"^{prefix}: "},
                },
            }
        },
    }


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
            "by": _ref("Actor"),
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


def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


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


_RECORD_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: a bad session id or query parameter.",
    "401": "unauthorized: no token, a bad signature, an expired or revoked token, an admin token.",
    "403": "forbidden: an agent or client token whose scope does not cover the session.",
    "404": "unknown_questionnaire: no such questionnaire in this session (or it expired).",
    "503": "store_unavailable (Redis cannot be reached): retry.",
}


def _record_responses(error: str, ok: Schema, *statuses: str) -> Schema:
    return {"200": ok, **{s: _json(_ref(error), _RECORD_ERRORS[s]) for s in statuses}}


def _responses(*statuses: str, outcome: bool = True) -> Schema:
    out: Schema = {}
    if outcome:
        out["200"] = _json(_ref("ToolResult"), "An outcome: the tool result.")
        out["202"] = _json(_ref("Pending"), "Still with the person when wait ran out: re-attach with GET.")
    for status in statuses:
        out[status] = _json(_ref("Error"), _ERRORS[status])
    return out


_SID: Final[Schema] = {
    "name": "sid",
    "in": "path",
    "required": True,
    "description": f"Session id: {SESSION_ID_RULE} ('.' and '..' cannot travel in a URL path).",
    "schema": {"type": "string", "pattern": SESSION_ID_PATTERN, "not": {"enum": [".", ".."]}},
}
_QID: Final[Schema] = {
    "name": "qid",
    "in": "path",
    "required": True,
    "description": "A questionnaire id from a result or a 202.",
    "schema": {"type": "string", "pattern": QUESTIONNAIRE_ID_PATTERN, "not": {"enum": [".", ".."]}},
}
_WAIT: Final[Schema] = {
    "name": "wait",
    "in": "query",
    "required": False,
    "description": "Seconds to hold the call open for an outcome (default 30).",
    "schema": {"type": "number", "minimum": 0, "maximum": 300, "default": 30},
}
_CLIENT_WAIT: Final[Schema] = {
    "name": "clientWait",
    "in": "query",
    "required": False,
    "description": "On a start: seconds the new questionnaire waits for a first client before it ends "
    "unavailable/ui_unavailable (default: QBROKER_CLIENT_WAIT, or QBROKER_NOTIFY_CLIENT_WAIT where a "
    "notification route covers the session); at most QBROKER_MAX_CLIENT_WAIT (default 3600). Refused on a resume.",
    "schema": {"type": "number", "minimum": 0, "maximum": 3600},
}
_REATTACH: Final[Schema] = {
    "name": "reattach",
    "in": "query",
    "required": False,
    "description": "On a start, instead of an Idempotency-Key: re-attach to an identical start (same session, "
    "token sub and questions) that is still open, else start a new one, as the MCP endpoint's starts do. "
    "Refused on a resume and together with an Idempotency-Key.",
    "schema": {"type": "string", "enum": ["true"]},
}
_STATUS: Final[Schema] = {
    "name": "status",
    "in": "query",
    "required": False,
    "description": "Only questionnaires in this status.",
    "schema": {"type": "string", "enum": list(STATUSES)},
}
_LIMIT: Final[Schema] = {
    "name": "limit",
    "in": "query",
    "required": False,
    "description": "At most this many items (default 50).",
    "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
}
_BEFORE: Final[Schema] = {
    "name": "before",
    "in": "query",
    "required": False,
    "description": "The cursor a previous page's next gave: the page after it.",
    "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
}
_RECORD_SECURITY: Final[list[dict[str, list[str]]]] = [{"agentToken": []}, {"clientToken": []}]
_IDEMPOTENCY_KEY: Final[Schema] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "On a start: the same key in the same session always returns the same questionnaire.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
}


def build_openapi() -> dict[str, Any]:
    """The whole document (no ``servers``: paths are relative to wherever it was fetched)."""
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "qbroker agent API",
            "version": "1",
            "description": "The questionnaire tool over HTTP: start or resume (POST), re-attach (GET), "
            "abort (DELETE); and the record of a session: its history and each questionnaire's events. "
            "The person answers over the client websocket, which this document does not "
            "cover; see docs/protocol.md for both.",
        },
        "paths": {
            "/v1/sessions/{sid}/questionnaire": {
                "post": {
                    "operationId": "callQuestionnaire",
                    "summary": "Start a questionnaire or resume one after a clarification; wait for an outcome.",
                    "parameters": [_SID, _WAIT, _CLIENT_WAIT, _REATTACH, _IDEMPOTENCY_KEY],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("ToolInput")}},
                    },
                    "responses": _responses("400", "401", "403", "404", "409", "413", "503"),
                }
            },
            "/v1/sessions/{sid}/questionnaires/{qid}": {
                "get": {
                    "operationId": "reattachQuestionnaire",
                    "summary": "Re-attach: the same answers as the POST that started it.",
                    "parameters": [_SID, _QID, _WAIT],
                    "responses": _responses("400", "401", "403", "404", "503"),
                },
                "delete": {
                    "operationId": "abortQuestionnaire",
                    "summary": "Abort (cancelled/aborted); an already finished questionnaire is returned unchanged.",
                    "parameters": [_SID, _QID],
                    "responses": {
                        "200": _json(_ref("ToolResult"), "The final tool result."),
                        **_responses("400", "401", "403", "404", "409", "503", outcome=False),
                    },
                },
            },
            "/v1/revocations": {
                "post": {
                    "operationId": "revokeTokens",
                    "summary": "Revoke one token (jti) or every token of a holder issued before now (sub).",
                    "security": [{"adminToken": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("RevocationRequest")}},
                    },
                    "responses": {
                        "200": _json(_ref("Revocation"), "Revoked: every broker refuses the tokens within a second."),
                        **{status: _json(_ref("RevocationError"), text) for status, text in _REVOCATION_ERRORS.items()},
                    },
                }
            },
            "/v1/push/key": {
                "get": {
                    "operationId": "pushKey",
                    "summary": "The VAPID public key a page subscribes with (applicationServerKey).",
                    "security": [],
                    "responses": {
                        "200": _json(_push_key(), "The key: base64url of the uncompressed P-256 point."),
                        "404": _json(_ref("PushError"), "push_not_configured: no webpush route."),
                    },
                }
            },
            "/v1/push/subscriptions": {
                "post": {
                    "operationId": "pushSubscribe",
                    "summary": "Keep a browser's PushSubscription under the client token's scope.",
                    "security": [{"clientToken": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("PushSubscription")}},
                    },
                    "responses": {
                        "201": _json(_push_kept(), "Kept: the scope it hears of, and until when."),
                        **_push_errors("400", "401", "403", "404", "413", "429", "503"),
                    },
                },
                "delete": {
                    "operationId": "pushUnsubscribe",
                    "summary": "Forget a subscription's endpoint under the client token's scope.",
                    "security": [{"clientToken": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _push_endpoint()}},
                    },
                    "responses": {
                        "204": {"description": "Forgotten."},
                        **_push_errors("400", "401", "403", "404", "413", "503"),
                    },
                },
            },
            "/v1/sessions/{sid}/questionnaires": {
                "get": {
                    "operationId": "listQuestionnaires",
                    "summary": "The session's questionnaires within retention, newest first, each as it stands.",
                    "description": "A page filtered by status looks at up to 1,000 questionnaires; it may then"
                    " hold fewer than limit items while next is not null.",
                    "security": _RECORD_SECURITY,
                    "parameters": [_SID, _STATUS, _LIMIT, _BEFORE],
                    "responses": _record_responses(
                        "HistoryError",
                        _json(_ref("History"), "A page; next: the cursor of the next (null: none)."),
                        "400",
                        "401",
                        "403",
                        "503",
                    ),
                }
            },
            "/v1/sessions/{sid}/questionnaires/{qid}/events": {
                "get": {
                    "operationId": "questionnaireEvents",
                    "summary": "Every change of the questionnaire, oldest first, each with who made it (no texts).",
                    "security": _RECORD_SECURITY,
                    "parameters": [_SID, _QID],
                    "responses": _record_responses(
                        "EventsError", _json(_ref("Events"), "The events."), "400", "401", "403", "404", "503"
                    ),
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "liveness",
                    "security": [],
                    "responses": {"200": _json(_status_body(["ok"]), "The process answers.")},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readiness",
                    "security": [],
                    "responses": {
                        "200": _json(_status_body(["ready"]), "The store answers and the broker is not draining."),
                        "503": _json(_status_body(["store_unavailable", "shutting_down"]), "Not ready."),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Prometheus text format.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
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
            },
            "schemas": {
                "ToolInput": tool_input_schema(),
                "QuestionSnapshot": _question_out(),
                "OptionSnapshot": _option_out(),
                "Selection": _selection(),
                "Clarification": _clarification(),
                "Details": _details(),
                "ToolResult": _tool_result(),
                "Pending": _pending(),
                "Error": _error(),
                "RevocationRequest": _revocation_request(),
                "RevocationError": _error("revocations"),
                "Revocation": _revocation(),
                "PushSubscription": _push_subscription(),
                "PushError": _push_error(),
                "HistoryError": _error("history"),
                "EventsError": _error("events"),
                "Actor": _actor(),
                "Event": _event(),
                "Events": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["events"],
                    "properties": {"events": {"type": "array", "items": _ref("Event")}},
                },
                "HistoryItem": _history_item(),
                "History": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["items", "next"],
                    "properties": {
                        "items": {"type": "array", "items": _ref("HistoryItem")},
                        "next": {"type": ["string", "null"]},
                    },
                },
            },
        },
        "security": [{"agentToken": []}],
    }


_REVOCATION_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: not exactly one of jti and sub, an unknown key, a bad jti, sub or exp.",
    "401": "unauthorized: no token, a bad signature, an expired or revoked token.",
    "403": "forbidden: a valid token that is not an admin token.",
    "413": "payload_too_large: a body over 4 KiB.",
    "503": "store_unavailable: Redis cannot be reached; retry.",
}


def _revocation_request() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "jti": {"type": "string", "minLength": 1, "maxLength": 256, "description": "A token's id."},
            "sub": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "A holder: every token with this sub issued (iat) before now.",
            },
            "exp": {
                "type": "number",
                "minimum": 0,
                "description": "The latest expiry of the tokens covered (Unix seconds): the revocation is kept until"
                " then (default: for the longest lifetime a token may have, 100 years).",
            },
        },
        "oneOf": [
            {"required": ["jti"], "not": {"required": ["sub"]}},
            {"required": ["sub"], "not": {"required": ["jti"]}},
        ],
        "description": "Exactly one of jti and sub; no control characters in either.",
    }


def _revocation() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["revokedAt", "keptUntil"],
        "properties": {
            "jti": {"type": "string"},
            "sub": {"type": "string"},
            "revokedAt": {"type": "number", "description": "The revocation's time (Unix seconds)."},
            "keptUntil": {"type": "number", "description": "When it is dropped (Unix seconds)."},
        },
        "oneOf": [{"required": ["jti"]}, {"required": ["sub"]}],
    }


def _status_body(values: list[str]) -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {"status": {"type": "string", "enum": values}},
    }


# --- browser push (broker/http/push.py) ---------------------------------------------------

_PUSH_ERRORS: Final[dict[str, str]] = {
    "400": "invalid_arguments: not JSON, or a subscription the broker cannot use (the message says why: "
    "an endpoint that is no allowed push service, keys of the wrong length or off the curve, expired).",
    "401": "unauthorized: no token, a bad, expired or revoked token, or not a client token.",
    "403": "forbidden: an admin token (it covers no session).",
    "404": "push_not_configured (no webpush route), or not_found (DELETE: no such subscription).",
    "413": "payload_too_large: a body over 4 KiB.",
    "429": "rate_limited: this token posted too many subscriptions lately; retry after Retry-After seconds.",
    "503": "store_unavailable: retry.",
}


def _push_errors(*statuses: str) -> Schema:
    return {status: _json(_ref("PushError"), _PUSH_ERRORS[status]) for status in statuses}


def _push_error() -> Schema:
    error = _error()
    error["properties"]["error"]["properties"]["message"] = {"type": "string", "pattern": "^push: "}
    return error


def _b64url_key(description: str) -> Schema:
    return {"type": "string", "pattern": "^[A-Za-z0-9_-]+=*$", "description": description}


def _push_subscription() -> Schema:
    return {
        "type": "object",
        "description": "PushSubscription.toJSON() as the browser gives it; other keys are ignored.",
        "required": ["endpoint", "keys"],
        "properties": {
            "endpoint": {"type": "string", "maxLength": 1024, "description": "An https URL of a push service."},
            "expirationTime": {"type": ["number", "null"], "description": "Milliseconds since the epoch, or null."},
            "keys": {
                "type": "object",
                "required": ["p256dh", "auth"],
                "properties": {
                    "p256dh": _b64url_key("The browser's P-256 public key (65 bytes), base64url."),
                    "auth": _b64url_key("The auth secret (16 bytes), base64url."),
                },
            },
        },
    }


def _push_endpoint() -> Schema:
    return {
        "type": "object",
        "required": ["endpoint"],
        "properties": {"endpoint": {"type": "string", "minLength": 1}},
    }


def _push_key() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["publicKey"],
        "properties": {"publicKey": _b64url_key("The VAPID public key (65 bytes), base64url without padding.")},
    }


def _push_kept() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["scope", "expiresAt"],
        "properties": {
            "scope": {"type": "string", "description": "The token's sid: the sessions the device hears of."},
            "expiresAt": {"type": "integer", "description": "Unix seconds; post it again to keep it longer."},
        },
    }
