"""The ``webhook`` kind: the notification's JSON, POSTed and signed Stripe-style.

``X-QBroker-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` with the
route's ``secret``: a receiver recomputes it over the raw body, compares in constant time
and refuses a ``t`` too far from its clock (a replay), as docs/notifications.md shows in ten
lines. Every attempt is signed afresh (a retry has a new ``t``, the same body);
``Idempotency-Key`` is the notification's id, the same on every attempt and from whichever
broker, so a receiver can drop a repeat.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

import httpx
import orjson

from broker.notify.channel import Channel
from broker.notify.config import Route
from broker.notify.notification import Notification
from broker.notify.posting import post, reachable

SIGNATURE_HEADER = "X-QBroker-Signature"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The header's value for ``body`` signed at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


class WebhookChannel(Channel):
    kind = "webhook"

    def __init__(self, route: Route, http: httpx.AsyncClient, clock: Callable[[], float] = time.time) -> None:
        super().__init__(route)
        self.http = http
        self.clock = clock
        self.secret = str(route.options["secret"])

    async def deliver(self, note: Notification) -> None:
        body = orjson.dumps(note.payload())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self.secret, int(self.clock()), body),
            "Idempotency-Key": note.id,
        }
        await post(self.http, self.route.url, body, headers)

    async def check(self) -> str | None:
        return await reachable(self.route.url, self.http.timeout.connect or 5.0)
