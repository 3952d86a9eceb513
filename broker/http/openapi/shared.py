"""What every area's part of the OpenAPI document shares: references, the error shape,
the path's session and questionnaire ids."""

from __future__ import annotations

from typing import Any, Final

from broker.core.wire import SESSION_ID_PATTERN, SESSION_ID_RULE

OPENAPI_VERSION: Final = "3.1.0"
# Questionnaire ids are minted by the broker (UUIDs); anything else is simply unknown (404).
QUESTIONNAIRE_ID_PATTERN: Final = r"^[A-Za-z0-9._:-]{1,128}$"

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(prefix: str = "questionnaire") -> Schema:
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


SID: Final[Schema] = {
    "name": "sid",
    "in": "path",
    "required": True,
    "description": f"Session id: {SESSION_ID_RULE} ('.' and '..' cannot travel in a URL path).",
    "schema": {"type": "string", "pattern": SESSION_ID_PATTERN, "not": {"enum": [".", ".."]}},
}


QID: Final[Schema] = {
    "name": "qid",
    "in": "path",
    "required": True,
    "description": "A questionnaire id from a result or a 202.",
    "schema": {"type": "string", "pattern": QUESTIONNAIRE_ID_PATTERN, "not": {"enum": [".", ".."]}},
}


def query_parameter(name: str, description: str, schema: Schema) -> Schema:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}
