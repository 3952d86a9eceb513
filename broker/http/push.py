"""The browser push endpoints: the page's "Notify me on this device" (docs/protocol.md).

- ``GET /v1/push/key``: the broker's VAPID public key, the ``applicationServerKey`` a page
  subscribes with (public: no token). 404 ``push_not_configured`` where no ``webpush``
  route is configured: the page then offers no button that could never ring.
- ``POST /v1/push/subscriptions`` (client token as ``Authorization: Bearer``; the body the
  browser's ``PushSubscription.toJSON()``, at most 4 KiB): kept under the token's scope, so
  it hears of every session the token covers, until the token expires (at most 30 days; the
  page posts it again on each visit). 201 ``{"scope", "expiresAt"}``. Rate-limited per token
  and process (``QBROKER_PUSH_SUBSCRIBE_BURST`` at once, then
  ``QBROKER_PUSH_SUBSCRIBE_PER_MINUTE``): 429 ``rate_limited`` with ``Retry-After``.
- ``DELETE /v1/push/subscriptions`` (same token; body ``{"endpoint"}``): forgets that
  endpoint under the token's scope. 204, or 404 ``not_found``.

Errors are the agent API's shape, ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from broker.core import push
from broker.core.errors import BrokerError
from broker.http.kit import bearer_token
from broker.runtime.config import Config
from broker.runtime.rate_limits import KeyedBuckets
from broker.service import Broker
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims

log = logging.getLogger("qbroker.push")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def _vapid_public_key(broker: Broker) -> str | None:
    """The VAPID public key of the broker's webpush routes (None: there is none)."""
    notifier = broker.notifier
    for channel in notifier.channels if notifier is not None else ():
        if channel.kind == "webpush":
            key: str = getattr(channel, "vapid").public_key  # noqa: B009 - (imported only with a route)
            return key
    return None


_NOT_CONFIGURED = "push: this broker sends no browser pushes (no webpush route in QBROKER_NOTIFY_CONFIG)"


async def public_key(request: Request) -> Response:
    if request.method not in ("GET", "HEAD"):
        return _method_not_allowed(request.method, "GET, HEAD")
    key = _vapid_public_key(request.app.state.broker)
    if key is None:
        return _error(404, "push_not_configured", _NOT_CONFIGURED)
    return JSONResponse({"publicKey": key}, headers={"Cache-Control": "no-cache"})


def subscribe_limits(config: Config) -> KeyedBuckets:
    """The buckets of ``POST /v1/push/subscriptions``, one per token (the app keeps them)."""
    return KeyedBuckets(config.push_subscribe_per_minute / 60, config.push_subscribe_burst)


def _limit_key(claims: Claims, token: str) -> str:
    """A token's bucket: its jti, or a digest of the token itself where it has none (an
    identity provider's may not); never the token, which would sit in memory as a key."""
    if claims.jti is not None:
        return "j:" + claims.jti
    return "t:" + hashlib.sha256(token.encode()).hexdigest()


async def subscriptions(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    if request.method not in ("POST", "DELETE"):
        return _method_not_allowed(request.method, "POST, DELETE")
    try:
        token, claims = await _client(broker, request)  # (first: a request without a token learns nothing)
        if _vapid_public_key(broker) is None:
            return _error(404, "push_not_configured", _NOT_CONFIGURED)
        if request.method == "POST":  # (before the body is read: a refused flood costs nothing more)
            limits: KeyedBuckets = request.app.state.push_subscribe_limits
            wait = limits.take(_limit_key(claims, token))
            if wait:
                broker.metrics.errors.labels("rate_limited").inc()
                message = f"push: too many subscriptions posted with this token; retry in {wait} s"
                return _error(429, "rate_limited", message, {"Retry-After": str(wait)})
        body = await _json(request)
        if request.method == "POST":
            return await _subscribe(broker, claims, body)
        return await _unsubscribe(broker, claims, body)
    except BrokerError as exc:
        broker.metrics.errors.labels(exc.code).inc()
        headers = {"WWW-Authenticate": "Bearer"} if exc.code == "unauthorized" else None
        message = exc.message if exc.message.startswith("push: ") else f"push: {exc.message}"
        return _error(exc.http_status, exc.code, message, headers)
    except StoreUnavailable:
        log.warning("store unavailable", extra={"path": request.url.path})
        broker.metrics.errors.labels("store_unavailable").inc()
        return _error(503, "store_unavailable", "push: the state store is unavailable; retry shortly")
    except ClientDisconnect:
        return Response(status_code=400)


async def _client(broker: Broker, request: Request) -> tuple[str, Claims]:
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise BrokerError("unauthorized", "push: a client token is required (Authorization: Bearer <token>)")
    claims = await broker.tokens.verify(token, role="client")
    if claims.role == "admin":  # (an admin token acts on no session)
        raise BrokerError("forbidden", "push: an admin token covers no session")
    return token, claims


async def _json(request: Request) -> Any:
    length = request.headers.get("content-length")
    if length is not None and length.isdecimal() and int(length) > push.MAX_BODY_BYTES:
        raise BrokerError("payload_too_large", f"push: the body is larger than {push.MAX_BODY_BYTES} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > push.MAX_BODY_BYTES:
            raise BrokerError("payload_too_large", f"push: the body is larger than {push.MAX_BODY_BYTES} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BrokerError("invalid_arguments", "push: the body must be JSON") from None


async def _subscribe(broker: Broker, claims: Claims, body: Any) -> Response:
    try:
        endpoint, p256dh, auth, expiration = push.parse_subscription(body, broker.config.push_services)
        _on_curve(p256dh)
    except push.InvalidSubscription as exc:
        raise BrokerError("invalid_arguments", f"push: {exc}") from None
    now = broker.clock()
    expires = push.lifetime_end(now, claims.exp, expiration)
    if expires <= now:
        raise BrokerError("invalid_arguments", "push: the subscription has expired already")
    subscription = push.PushSubscription(
        endpoint, p256dh, auth, claims.sid, claims.sub, now, expires, jti=claims.jti, iat=claims.iat
    )
    await broker.store.add_push_subscription(subscription, push.MAX_PER_SCOPE)
    log.info("push subscription kept", extra={"scope": claims.sid, "sub": claims.sub})
    return JSONResponse({"scope": claims.sid, "expiresAt": int(expires)}, status_code=201)


async def _unsubscribe(broker: Broker, claims: Claims, body: Any) -> Response:
    endpoint = body.get("endpoint") if isinstance(body, dict) else None
    if not isinstance(endpoint, str) or not endpoint:
        raise BrokerError("invalid_arguments", 'push: the body must be {"endpoint": <the subscription\'s endpoint>}')
    if not await broker.store.remove_push_subscription(claims.sid, endpoint):
        raise BrokerError("not_found", "push: no such subscription under this token's scope")
    return Response(status_code=204)


def _on_curve(p256dh: str) -> None:
    """A point the encryption can use (the core checked its length only)."""
    raw = push.decode_b64url(p256dh)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise push.InvalidSubscription("keys.p256dh is not a point on P-256") from None


def _method_not_allowed(method: str, allow: str) -> Response:
    message = f"push: {method} is not allowed on this path; use {allow}"
    return _error(405, "method_not_allowed", message, {"Allow": allow})


# (Every method reaches the handlers, which answer a wrong one in JSON with its Allow.)
_ANY = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [Route("/v1/push/key", public_key, methods=_ANY), Route("/v1/push/subscriptions", subscriptions, methods=_ANY)]
PATHS = frozenset(route.path for route in ROUTES)
