"""The ``webpush`` kind: the browser's own push, to every device subscribed for the session.

A page posts its ``PushSubscription`` (``POST /v1/push/subscriptions``, broker/http/push.py);
the store keeps it under the token's scope. A notification goes to every subscription whose
scope covers its session: the payload (``payload``: title, body, link, session,
questionnaire; nothing else) is encrypted for the subscription's keys (RFC 8291, aes128gcm)
by ``pywebpush`` and signed with the broker's VAPID key (``vapid.py``, ``py_vapid``).

Why not ``pywebpush.webpush_async``: it POSTs through aiohttp, following redirects, and an
endpoint is where a browser (whoever holds a client token) told the broker to POST. Here the
POST goes through the broker's shared httpx client, which never follows a redirect, to an
endpoint of an allowed push service only (``QBROKER_PUSH_SERVICES``, checked again before
each send). The encryption and signing (an ECDH and an ECDSA each) run in a worker thread:
a notification to many devices must not hold up the event loop.

Every token is checked on every use, and a subscription is a use of the token that posted it:
before each send, the subscription's ``jti``, ``sub`` and ``iat`` are checked against the
broker's revocations (``revoked``, an in-memory lookup, broker/tokens/checks.py). A device whose
token was revoked since is sent nothing and dropped from the store.

A push service's 404 or 410 means the subscription is gone (the person unsubscribed, the
browser dropped it): the subscription is dropped from the store. Timeouts, 429 and 5xx are
retried by the dispatcher, for the devices that did not get it yet (a retry never pushes
twice to one device); any other answer gives that device up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import orjson
from pywebpush import WebPusher

from broker.core.push import InvalidSubscription, PushService, PushSubscription, check_endpoint
from broker.notify.channel import Channel, FailedDelivery, IsRevoked, RetryableDelivery
from broker.notify.config import Route
from broker.notify.notification import Notification
from broker.notify.ntfy import body as message_body
from broker.notify.posting import judge, send
from broker.notify.vapid import VapidKeys, vapid_keys
from broker.store.base import Store, StoreUnavailable

__all__ = ["WebPushChannel", "payload", "vapid_keys"]
log = logging.getLogger("qbroker.notify")

# How long a push service keeps a push for a device that is off (seconds): a question still
# matters an hour on; the idle notice follows if it is still open.
PUSH_TTL: Final = 3600
MAX_TITLE: Final = 200
MAX_BODY: Final = 1000  # a push's payload is at most ~4 kB, encrypted
_REMEMBERED: Final = 1000  # notifications whose delivered devices are remembered, for retries


def payload(note: Notification) -> dict[str, Any]:
    """What the service worker gets: the notification's public fields only."""
    return {
        "title": note.headline[:MAX_TITLE],
        "body": message_body(note)[:MAX_BODY],
        "link": note.link,
        "session": note.session_id,
        "questionnaire": note.questionnaire_id,
    }


class WebPushChannel(Channel):
    kind = "webpush"

    def __init__(
        self,
        route: Route,
        store: Store,
        vapid: VapidKeys,
        *,
        http: httpx.AsyncClient | None = None,
        services: tuple[PushService, ...] | None = None,
        clock: Callable[[], float] = time.time,
        revoked: IsRevoked,
    ) -> None:
        super().__init__(route)
        self.store = store
        self._revoked = revoked
        self.vapid = vapid
        self.subscription_key = vapid.public_key
        self.services = services
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=httpx.Timeout(10.0), follow_redirects=False)
        self._clock = clock
        # notification id -> endpoints it reached: a retry goes to the others only.
        self._delivered: OrderedDict[str, set[str]] = OrderedDict()

    @property
    def target(self) -> str:
        return "browser push services"

    def _now(self) -> float:
        return self._clock()

    async def deliver(self, note: Notification) -> None:
        try:
            found = await self.store.push_subscriptions(note.session_id, self._now())
        except StoreUnavailable:
            raise RetryableDelivery("store unavailable") from None
        delivered = self._delivered.setdefault(note.id, set())
        self._delivered.move_to_end(note.id)
        while len(self._delivered) > _REMEMBERED:
            self._delivered.popitem(last=False)
        unique: dict[str, PushSubscription] = {}
        for subscription in found:
            if self._revoked(subscription.jti, subscription.sub, subscription.iat):
                await self._drop(subscription, "its token was revoked")
            elif subscription.endpoint not in delivered:
                unique.setdefault(subscription.endpoint, subscription)
        data = orjson.dumps(payload(note))
        results = await asyncio.gather(
            *(self._push(subscription, data, note.id) for subscription in unique.values()), return_exceptions=True
        )
        retry: RetryableDelivery | None = None
        failed: FailedDelivery | None = None
        for subscription, result in zip(unique.values(), results, strict=True):
            if result is None:
                delivered.add(subscription.endpoint)
            elif isinstance(result, RetryableDelivery):
                retry = retry or result
            elif isinstance(result, FailedDelivery):
                failed = failed or result
            else:
                raise result
        if retry is not None:
            raise retry
        if failed is not None and not delivered:
            raise failed

    async def _push(self, subscription: PushSubscription, data: bytes, note_id: str) -> None:
        """One device: ``None`` when the push service took it (or the subscription is gone)."""
        if self.services is not None:
            try:
                check_endpoint(subscription.endpoint, self.services)
            except InvalidSubscription:
                raise FailedDelivery("endpoint no longer an allowed push service") from None
        content, headers = await asyncio.to_thread(self._encrypted, subscription, data, self._now())
        headers["Topic"] = note_id.replace("-", "")[:32]  # the push service keeps one per notification
        response = await send(self.http, subscription.endpoint, content, headers)
        status = response.status_code
        if status in (404, 410):  # the subscription expired or was withdrawn: forget it
            await self._drop(subscription, f"the push service answered {status}")
            return
        judge(response, f" from {urlsplit(subscription.endpoint).hostname}")

    def _encrypted(self, subscription: PushSubscription, data: bytes, now: float) -> tuple[bytes, dict[str, str]]:
        """The encrypted body and the headers of one push (run in a thread: CPU-bound)."""
        encoded = WebPusher(subscription.info()).encode(data, "aes128gcm")
        headers = {
            **self.vapid.headers(subscription.endpoint, now),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(PUSH_TTL),
            "Urgency": "high",  # a person is being waited for: wake the phone
        }
        return bytes(encoded["body"]), headers

    async def _drop(self, subscription: PushSubscription, why: str) -> None:
        try:
            await self.store.remove_push_subscription(subscription.scope, subscription.endpoint)
        except StoreUnavailable:
            return  # the next notification drops it
        log.info(
            "push subscription dropped",
            extra={
                "why": why,
                "scope": subscription.scope,
                "sub": subscription.sub,
                "host": urlsplit(subscription.endpoint).hostname,
            },
        )

    async def close(self) -> None:
        if self._own_http:
            await self.http.aclose()
