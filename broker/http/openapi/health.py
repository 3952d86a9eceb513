"""The operations of health, readiness and metrics (no token)."""

from __future__ import annotations

from broker.http.openapi.shared import Schema, json_body
from broker.http.routing import PathItem


def _status_body(values: list[str]) -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {"status": {"type": "string", "enum": values}},
    }


def operations() -> dict[str, PathItem]:
    return {
        "/healthz": {
            "get": {
                "operationId": "liveness",
                "security": [],
                "responses": {"200": json_body(_status_body(["ok"]), "The process answers.")},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readiness",
                "security": [],
                "responses": {
                    "200": json_body(_status_body(["ready"]), "The store answers and the broker is not draining."),
                    "503": json_body(_status_body(["store_unavailable", "shutting_down"]), "Not ready."),
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
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "security": [],
                "responses": {"200": json_body({"type": "object"}, "This document.")},
            }
        },
    }


def schemas() -> dict[str, Schema]:
    return {}
