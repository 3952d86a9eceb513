"""The operator's operation: POST /v1/revocations."""

from __future__ import annotations

from typing import Final

from broker.http.openapi.shared import Schema, error, json_body, ref
from broker.http.routing import PathItem

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


def operations() -> dict[str, PathItem]:
    return {
        "/v1/revocations": {
            "post": {
                "operationId": "revokeTokens",
                "summary": "Revoke one token (jti) or every token of a holder issued before now (sub).",
                "security": [{"adminToken": []}],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref("RevocationRequest")}},
                },
                "responses": {
                    "200": json_body(ref("Revocation"), "Revoked: every broker refuses the tokens within a second."),
                    **{status: json_body(ref("RevocationError"), text) for status, text in _REVOCATION_ERRORS.items()},
                },
            }
        },
    }


def schemas() -> dict[str, Schema]:
    return {
        "RevocationRequest": _revocation_request(),
        "RevocationError": error("revocations"),
        "Revocation": _revocation(),
    }
