"""The operation that tells the page and the terminal client where people sign in (no token)."""

from __future__ import annotations

from broker.http.openapi.shared import Schema, error, json_body, ref
from broker.http.routing import PathItem


def operations() -> dict[str, PathItem]:
    return {
        "/v1/signin": {
            "get": {
                "operationId": "signInSettings",
                "summary": "Where people sign in: the OpenID Connect provider and the public client id.",
                "security": [],
                "responses": {
                    "200": json_body(ref("SignIn"), "People sign in with this provider."),
                    "404": json_body(error("signin"), "People do not sign in on this broker: links carry tokens."),
                },
            }
        }
    }


def schemas() -> dict[str, Schema]:
    return {
        "SignIn": {
            "type": "object",
            "additionalProperties": False,
            "required": ["issuer", "clientId", "scope"],
            "properties": {
                "issuer": {"type": "string", "description": "The provider's issuer URL (its discovery document)."},
                "clientId": {"type": "string", "description": "The public client (PKCE; no secret)."},
                "scope": {"type": "string", "description": "The scopes to ask for, space-separated."},
            },
        }
    }
