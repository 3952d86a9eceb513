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

Errors are the agent API's shape, ``{"error": {"code", "message"}}``, with messages that start
with ``push:``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import orjson
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.types import Receive, Scope, Send

from broker.core import push
from broker.core.errors import BrokerError
from broker.http.kit import ClientGone, bearer_token, error_body, header, limit_key, read_body, respond
from broker.runtime.config import Config
from broker.runtime.rate_limits import KeyedBuckets
from broker.service import Broker
from broker.store.base import StoreUnavailable
from broker.tokens.claims import Claims

log = logging.getLogger("qbroker.push")

_NOT_CONFIGURED: Final = "push: this broker sends no browser pushes (no webpush route in QBROKER_NOTIFY_CONFIG)"
_TOO_LARGE: Final = f"push: the body is larger than {push.MAX_BODY_BYTES} bytes"


def _vapid_public_key(broker: Broker) -> str | None:
    """The VAPID public key of the broker's webpush routes (None: there is none)."""
    return None if broker.notifier is None else broker.notifier.push_key


class PushKeyAPI:
    """``GET /v1/push/key``: public, no token."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method: str = scope["method"]
        if method not in ("GET", "HEAD"):
            await _method_not_allowed(send, method, "GET, HEAD")
            return
        key = _vapid_public_key(self.broker)
        if key is None:
            await respond(send, 404, error_body("push_not_configured", _NOT_CONFIGURED), [], head=method == "HEAD")
            return
        body = orjson.dumps({"publicKey": key})
        await respond(send, 200, body, [(b"cache-control", b"no-cache")], head=method == "HEAD")


def subscribe_limits(config: Config) -> KeyedBuckets:
    """The buckets of ``POST /v1/push/subscriptions``, one per token."""
    return KeyedBuckets(config.push_subscribe_per_minute / 60, config.push_subscribe_burst)


class PushSubscriptionsAPI:
    """``POST`` and ``DELETE /v1/push/subscriptions``, with a client token."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.limits = subscribe_limits(broker.config)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method: str = scope["method"]
        if method not in ("POST", "DELETE"):
            await _method_not_allowed(send, method, "POST, DELETE")
            return
        broker = self.broker
        extra: list[tuple[bytes, bytes]] = []
        try:
            status, body = await self._handle(scope, receive, method)
        except BrokerError as exc:
            broker.metrics.errors.labels(exc.code).inc()
            if exc.code == "unauthorized":
                extra.append((b"www-authenticate", b"Bearer"))
            if isinstance(exc, _RateLimited):
                extra.append((b"retry-after", b"%d" % exc.retry_after))
            message = exc.message if exc.message.startswith("push: ") else f"push: {exc.message}"
            status, body = exc.http_status, error_body(exc.code, message)
        except StoreUnavailable:
            log.warning("store unavailable", extra={"path": scope["path"]})
            broker.metrics.errors.labels("store_unavailable").inc()
            status, body = 503, error_body("store_unavailable", "push: the state store is unavailable; retry shortly")
        except ClientGone:
            return
        except Exception:  # a bug: a JSON 500, logged
            log.exception("push call failed", extra={"path": scope["path"], "method": method})
            status, body = 500, error_body("internal_error", "push: the broker failed on this call; see its log")
        if status == 204:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await respond(send, status, body, extra)

    async def _handle(self, scope: Scope, receive: Receive, method: str) -> tuple[int, bytes]:
        broker = self.broker
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        token, claims = await _client(broker, header(headers, b"authorization"))  # (first: no token, no news)
        if _vapid_public_key(broker) is None:
            return 404, error_body("push_not_configured", _NOT_CONFIGURED)
        if method == "POST":  # (before the body is read: a refused flood costs nothing more)
            wait = self.limits.take(limit_key(claims, token))
            if wait:
                raise _RateLimited(wait)
        body = await read_body(receive, header(headers, b"content-length"), push.MAX_BODY_BYTES, _TOO_LARGE)
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BrokerError("invalid_arguments", "push: the body must be JSON") from None
        if method == "POST":
            return await _subscribe(broker, claims, value)
        return await _unsubscribe(broker, claims, value)


class _RateLimited(BrokerError):
    def __init__(self, wait: int) -> None:
        super().__init__("rate_limited", f"push: too many subscriptions posted with this token; retry in {wait} s")
        self.retry_after = wait


async def _client(broker: Broker, authorization: str | None) -> tuple[str, Claims]:
    token = bearer_token(authorization)
    if token is None:
        raise BrokerError("unauthorized", "push: a client token is required (Authorization: Bearer <token>)")
    claims = await broker.tokens.verify(token, role="client")
    if claims.role == "admin":  # (an admin token acts on no session)
        raise BrokerError("forbidden", "push: an admin token covers no session")
    return token, claims


async def _subscribe(broker: Broker, claims: Claims, body: Any) -> tuple[int, bytes]:
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
    return 201, orjson.dumps({"scope": claims.sid, "expiresAt": int(expires)})


async def _unsubscribe(broker: Broker, claims: Claims, body: Any) -> tuple[int, bytes]:
    endpoint = body.get("endpoint") if isinstance(body, dict) else None
    if not isinstance(endpoint, str) or not endpoint:
        raise BrokerError("invalid_arguments", 'push: the body must be {"endpoint": <the subscription\'s endpoint>}')
    if not await broker.store.remove_push_subscription(claims.sid, endpoint):
        raise BrokerError("not_found", "push: no such subscription under this token's scope")
    return 204, b""


def _on_curve(p256dh: str) -> None:
    """A point the encryption can use (the core checked its length only)."""
    raw = push.decode_b64url(p256dh)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise push.InvalidSubscription("keys.p256dh is not a point on P-256") from None


async def _method_not_allowed(send: Send, method: str, allow: str) -> None:
    message = f"push: {method} is not allowed on this path; use {allow}"
    await respond(
        send, 405, error_body("method_not_allowed", message), [(b"allow", allow.encode())], head=method == "HEAD"
    )
