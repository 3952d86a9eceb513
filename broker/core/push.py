"""Browser push subscriptions: what a page may register, and which sessions it hears of.

A page posts the browser's ``PushSubscription`` (``{"endpoint", "keys": {"p256dh", "auth"}}``)
with a client token; the subscription is kept under the token's scope (``scopes.py``: one
session, a prefix pattern, or ``*``) and hears of every session that scope covers. Here are
the rules a subscription must pass before it is kept, pure: its size, its keys' lengths, and
that its endpoint is a push service the operator allows. An endpoint is where the broker
will POST, and it comes from a browser, that is from whoever holds a client token: without
the allow-list a token holder could point the broker at any address inside the network.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

MAX_BODY_BYTES: Final = 4096  # a browser's subscription is ~400 bytes
MAX_ENDPOINT: Final = 1024
MAX_PER_SCOPE: Final = 20  # devices of one scope; the oldest goes when a new one comes
MAX_LIFETIME: Final = 30 * 24 * 3600.0  # kept at most this long without being posted again
# The push services of the browsers people use: Chrome and Android (FCM), Firefox (autopush),
# Safari on macOS and iOS (Apple), Edge (WNS). QBROKER_PUSH_SERVICES replaces the list.
DEFAULT_PUSH_SERVICES: Final = (
    "fcm.googleapis.com",
    "*.push.services.mozilla.com",
    "*.push.apple.com",
    "*.notify.windows.com",
)
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class PushSubscription(msgspec.Struct, frozen=True):
    """One device's subscription, as kept: ``scope``, the sessions it hears of (the token's
    ``sid``); ``sub``, who subscribed (the token's ``sub``); times in Unix seconds.

    ``jti`` and ``iat``: the posting token's, so that a revocation of that token (or of its
    holder) silences the device at send time, as it would refuse the token itself. Kept
    subscriptions from before they were recorded load with None: a revocation of their
    ``sub`` covers them (they cannot show they came later), one by ``jti`` cannot."""

    endpoint: str
    p256dh: str
    auth: str
    scope: str
    sub: str | None
    created: float
    expires: float
    jti: str | None = None
    iat: float | None = None

    @property
    def id(self) -> str:
        return subscription_id(self.endpoint)

    def info(self) -> dict[str, Any]:
        """The subscription as ``pywebpush`` takes it."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


class InvalidSubscription(ValueError):
    """What is wrong with a posted subscription (the message says it to the page)."""


def subscription_id(endpoint: str) -> str:
    """A short stable name for an endpoint (a store's field name; never shown)."""
    return hashlib.sha256(endpoint.encode()).hexdigest()[:32]


class PushService(msgspec.Struct, frozen=True):
    """One allowed push service: a scheme, a host (``*.`` allows its subdomains) and a port."""

    scheme: str
    host: str
    port: int

    def allows(self, scheme: str, host: str, port: int) -> bool:
        if scheme != self.scheme or port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


def parse_push_services(text: str) -> tuple[PushService, ...]:
    """QBROKER_PUSH_SERVICES: comma-separated ``[scheme://]host[:port]``, ``host`` may start
    with ``*.``; https and port 443 unless given. Raises ``ValueError`` naming the bad entry."""
    services = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        parts = urlsplit(entry if "://" in entry else "https://" + entry)
        try:
            port = parts.port
        except ValueError:
            port = -1
        host = (parts.hostname or "").lower()
        if (
            parts.scheme not in _DEFAULT_PORTS
            or not host
            or port == -1
            or parts.path not in ("", "/")
            or parts.query
            or parts.username is not None
            or "*" in host.removeprefix("*.")
        ):
            raise ValueError(f"{entry!r} is not [https://]host[:port] (a host may start with *.)")
        services.append(PushService(parts.scheme, host, port or _DEFAULT_PORTS[parts.scheme]))
    return tuple(services)


_B64URL: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def decode_b64url(text: str) -> bytes:
    """base64url without padding (as browsers give keys); ``ValueError`` when it is not."""
    text = text.rstrip("=")
    if text.strip(_B64URL):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        raise ValueError("not base64url") from None


def _b64url(value: Any, name: str, size: int) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 2 * size:
        raise InvalidSubscription(f"keys.{name} must be a base64url string of {size} bytes")
    try:
        raw = decode_b64url(value)
    except ValueError:
        raise InvalidSubscription(f"keys.{name} must be a base64url string of {size} bytes") from None
    if len(raw) != size:
        raise InvalidSubscription(f"keys.{name} must be a base64url string of {size} bytes")
    return value.rstrip("=")


def parse_subscription(body: Any, services: tuple[PushService, ...]) -> tuple[str, str, str, float | None]:
    """``(endpoint, p256dh, auth, expiration)`` of a posted PushSubscription's JSON (parsed),
    ``expiration`` being the browser's ``expirationTime`` in Unix seconds (None: none). Raises
    ``InvalidSubscription`` saying what is wrong. Other keys are ignored (browsers may add)."""
    if not isinstance(body, Mapping):
        raise InvalidSubscription('the body must be a PushSubscription: {"endpoint": ..., "keys": {...}}')
    endpoint = check_endpoint(body.get("endpoint"), services)
    keys = body.get("keys")
    if not isinstance(keys, Mapping):
        raise InvalidSubscription('"keys" must be an object with p256dh and auth')
    p256dh = _b64url(keys.get("p256dh"), "p256dh", 65)
    if not p256dh.startswith("B"):  # 0x04: an uncompressed P-256 point
        raise InvalidSubscription("keys.p256dh must be an uncompressed P-256 public key")
    auth = _b64url(keys.get("auth"), "auth", 16)
    expiration = body.get("expirationTime")
    if expiration is not None and (
        isinstance(expiration, bool) or not isinstance(expiration, int | float) or not math.isfinite(expiration)
    ):
        raise InvalidSubscription('"expirationTime" must be null or a number of milliseconds')
    return endpoint, p256dh, auth, None if expiration is None else float(expiration) / 1000


def check_endpoint(endpoint: Any, services: tuple[PushService, ...]) -> str:
    """``endpoint`` when it is a URL of an allowed push service; else ``InvalidSubscription``."""
    if not isinstance(endpoint, str) or not 0 < len(endpoint) <= MAX_ENDPOINT:
        raise InvalidSubscription(f'"endpoint" must be a URL of up to {MAX_ENDPOINT} characters')
    try:
        parts = urlsplit(endpoint)
    except ValueError:  # (an unclosed IPv6 bracket: "https://[x/")
        raise InvalidSubscription('"endpoint" is not a URL') from None
    try:
        port = parts.port
    except ValueError:
        raise InvalidSubscription('"endpoint" has a port that is not a number') from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in _DEFAULT_PORTS or not host or parts.username is not None or parts.fragment:
        raise InvalidSubscription('"endpoint" must be an https:// URL of a push service')
    if not endpoint.isascii() or any(ch.isspace() for ch in endpoint):
        raise InvalidSubscription('"endpoint" must be a URL without spaces')
    if not any(service.allows(parts.scheme, host, port or _DEFAULT_PORTS[parts.scheme]) for service in services):
        raise InvalidSubscription(
            f'"endpoint": {parts.scheme}://{host} is not a push service this broker sends to (QBROKER_PUSH_SERVICES)'
        )
    return endpoint


def lifetime_end(now: float, token_exp: float | None, expiration: float | None) -> float:
    """Until when a subscription is kept: no longer than the token that posted it, the
    browser's own expiration, or ``MAX_LIFETIME`` (the page posts it again on each visit)."""
    return min([now + MAX_LIFETIME, *(t for t in (token_exp, expiration) if t is not None)])
