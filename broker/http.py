"""The agent API over HTTP: start/resume, re-attach, abort. A thin adapter over ``Broker``."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from broker.auth import Claims, valid_session_id, verify_token
from broker.errors import BrokerError, invalid
from broker.model import ResumeInput, StartInput, parse_tool_input
from broker.service import Broker
from broker.store.base import StoreUnavailable

log = logging.getLogger("qbroker.http")

MAX_BODY_BYTES = 2 * 1024 * 1024  # the largest valid tool input is well under 1 MiB
MAX_WAIT = 300.0
DEFAULT_WAIT = 30.0
MAX_IDEMPOTENCY_KEY = 200


def error_response(exc: BrokerError) -> JSONResponse:
    return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, status_code=exc.http_status)


def _broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def _authorize(request: Request) -> tuple[Broker, str]:
    """Check the bearer token against the path's session; return (broker, session id)."""
    broker = _broker(request)
    session_id = request.path_params["sid"]
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise BrokerError("unauthorized", "questionnaire: missing 'Authorization: Bearer <agent token>'")
    try:
        claims: Claims = verify_token(broker.config.secret or "", token.strip(), role="agent")
    except BrokerError as exc:
        raise BrokerError("unauthorized", f"questionnaire: {exc.message}") from None
    if not valid_session_id(session_id):
        raise invalid("the session id must be 1-128 characters of [A-Za-z0-9._:-]")
    if not claims.allows(session_id):
        raise BrokerError("forbidden", f"questionnaire: this token is not valid for session {session_id}")
    if broker.shutting_down.is_set():
        raise BrokerError("shutting_down", "questionnaire: this broker is shutting down; retry")
    return broker, session_id


def _query(request: Request, allowed: frozenset[str]) -> None:
    """Refuse unknown or repeated query parameters, as unknown keys are refused everywhere
    else: a typo such as ``?wiat=5`` must not silently become the default 30 s wait."""
    names = request.query_params.keys()
    unknown = sorted(set(names) - allowed)
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise invalid(f"unknown query parameter(s) {shown}; this call takes {', '.join(sorted(allowed)) or 'none'}")
    repeated = sorted(name for name in allowed if len(request.query_params.getlist(name)) > 1)
    if repeated:
        raise invalid(f"query parameter {repeated[0]!r} is given more than once")


_NUMBER: Final = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?", re.ASCII)
_WAIT_ONLY: Final = frozenset({"wait"})
_NO_QUERY: Final = frozenset[str]()


def _wait(request: Request) -> float:
    _query(request, _WAIT_ONLY)
    raw = request.query_params.get("wait")
    if raw is None:
        return DEFAULT_WAIT
    # A plain number ("30", "0.5", "1e-3"): float() alone would also take " 5", "1_0",
    # "+5" and non-ASCII digits, none of which is a number in the API's documented sense.
    if not _NUMBER.fullmatch(raw):
        raise invalid(f"wait must be a number of seconds from 0 to 300, got {raw[:40]!r}")
    wait = float(raw)
    if not math.isfinite(wait) or not 0 <= wait <= MAX_WAIT:
        raise invalid(f"wait must be a number of seconds from 0 to 300, got {raw!r}")
    return wait


async def _json_body(request: Request) -> Any:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BrokerError("payload_too_large", "questionnaire: the request body is larger than 2 MiB")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise BrokerError("payload_too_large", "questionnaire: the request body is larger than 2 MiB")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: '[[[[...' nested too deep
        raise invalid("the request body must be a JSON object (the tool input)") from None


def _respond(result: tuple[int, dict[str, Any]]) -> JSONResponse:
    status, body = result
    return JSONResponse(body, status_code=status)


async def _guarded(request: Request, handler: Callable[[Request], Awaitable[Response]]) -> Response:
    try:
        return await handler(request)
    except BrokerError as exc:
        _broker(request).metrics.errors.labels(exc.code).inc()
        return error_response(exc)
    except StoreUnavailable:
        log.warning("store unavailable", extra={"path": request.url.path})
        _broker(request).metrics.errors.labels("store_unavailable").inc()
        return error_response(
            BrokerError("store_unavailable", "questionnaire: the state store is unavailable; retry shortly")
        )


async def post_questionnaire(request: Request) -> Response:
    async def handle(request: Request) -> Response:
        broker, session_id = _authorize(request)
        wait = _wait(request)
        tool_input = parse_tool_input(await _json_body(request))
        if isinstance(tool_input, StartInput):
            key = request.headers.get("idempotency-key")
            if key is not None and not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
                raise invalid(f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
            return _respond(await broker.start_questionnaire(session_id, tool_input.questions, key, wait))
        assert isinstance(tool_input, ResumeInput)
        return _respond(await broker.resume(session_id, tool_input, wait))

    return await _guarded(request, handle)


async def get_questionnaire(request: Request) -> Response:
    async def handle(request: Request) -> Response:
        broker, session_id = _authorize(request)
        wait = _wait(request)
        return _respond(await broker.wait_for_outcome(session_id, request.path_params["qid"], wait))

    return await _guarded(request, handle)


async def delete_questionnaire(request: Request) -> Response:
    async def handle(request: Request) -> Response:
        broker, session_id = _authorize(request)
        _query(request, _NO_QUERY)
        return _respond(await broker.abort(session_id, request.path_params["qid"]))

    return await _guarded(request, handle)


def _method_not_allowed(allow: str) -> Callable[[Request], Awaitable[Response]]:
    """405 with the right ``Allow`` header and an error body like every other refusal.

    Without these routes a wrong method on an API path would fall through to the web
    client's static mount at ``/``, which answers 405 ``Allow: GET, HEAD``: wrong here.
    """

    async def endpoint(request: Request) -> Response:
        message = f"questionnaire: {request.method} is not allowed on this path; use {allow}"
        return JSONResponse(
            {"error": {"code": "method_not_allowed", "message": message}}, status_code=405, headers={"Allow": allow}
        )

    return endpoint


_OTHER_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]

routes = [
    Route("/v1/sessions/{sid}/questionnaire", post_questionnaire, methods=["POST"]),
    Route("/v1/sessions/{sid}/questionnaires/{qid}", get_questionnaire, methods=["GET"]),
    Route("/v1/sessions/{sid}/questionnaires/{qid}", delete_questionnaire, methods=["DELETE"]),
    Route(
        "/v1/sessions/{sid}/questionnaire",
        _method_not_allowed("POST"),
        methods=[m for m in _OTHER_METHODS if m != "POST"],
    ),
    Route(
        "/v1/sessions/{sid}/questionnaires/{qid}",
        _method_not_allowed("GET, HEAD, DELETE"),  # Starlette serves HEAD wherever it serves GET
        methods=[m for m in _OTHER_METHODS if m not in ("GET", "HEAD", "DELETE")],
    ),
]
