"""Browser push's operations: the VAPID key, a device's subscription."""

from __future__ import annotations

from typing import Final

from broker.http.openapi.shared import Schema, error, json_body, ref
from broker.http.routing import PathItem

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
    return {status: json_body(ref("PushError"), _PUSH_ERRORS[status]) for status in statuses}


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


def operations() -> dict[str, PathItem]:
    return {
        "/v1/push/key": {
            "get": {
                "operationId": "pushKey",
                "summary": "The VAPID public key a page subscribes with (applicationServerKey).",
                "security": [],
                "responses": {
                    "200": json_body(_push_key(), "The key: base64url of the uncompressed P-256 point."),
                    "404": json_body(ref("PushError"), "push_not_configured: no webpush route."),
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
                    "content": {"application/json": {"schema": ref("PushSubscription")}},
                },
                "responses": {
                    "201": json_body(_push_kept(), "Kept: the scope it hears of, and until when."),
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
    }


def schemas() -> dict[str, Schema]:
    return {
        "PushSubscription": _push_subscription(),
        "PushError": error("push"),
    }
