"""The one interface every notification kind implements, and how a delivery fails.

A ``Channel`` is one route's way of telling people: ``deliver`` sends one notification and
returns, or raises ``RetryableDelivery`` (worth another attempt later: a timeout, a refused
connection, a 5xx, a 429) or ``FailedDelivery`` (another attempt would fail the same way: any
other 4xx, a malformed target). The dispatcher (``dispatch.py``) owns the retries, the
queue and the metrics; a channel makes one attempt and says how it went.

``check`` runs once at start-up: a route that cannot be reached then is a warning in the
log, never a refusal to start (the receiver may come up later).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TypeAlias
from urllib.parse import urlsplit

from broker.notify.config import Route
from broker.notify.notification import Notification

# Whether a token with this ``jti``, ``sub`` and ``iat`` is revoked: the broker's in-memory
# check (broker/tokens/checks.py), for a channel that sends on behalf of a token used earlier.
IsRevoked: TypeAlias = Callable[[str | None, str | None, float | None], bool]


def never_revoked(jti: str | None, sub: str | None, iat: float | None) -> bool:
    """For a notifier built without a broker's tokens (no revocations to honour)."""
    return False


class RetryableDelivery(Exception):
    """This attempt failed in a way that may pass later. ``retry_after``: what the receiver
    asked for (a 429's or 503's Retry-After, seconds), or None."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class FailedDelivery(Exception):
    """This notification cannot be delivered: give up on it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Channel(abc.ABC):
    """One route's delivery. ``kind``: the route's kind, the metrics' label."""

    kind: str
    # What a device subscribes with to hear of this channel (the webpush kind's VAPID
    # public key, base64url); None for the kinds a person does not subscribe to.
    subscription_key: str | None = None

    def __init__(self, route: Route) -> None:
        self.route = route

    @abc.abstractmethod
    async def deliver(self, note: Notification) -> None:
        """Send ``note`` once; raise ``RetryableDelivery`` or ``FailedDelivery`` when it did not go."""

    async def check(self) -> str | None:
        """At start-up: a warning when the target looks unreachable now, else None."""
        return None

    async def close(self) -> None:  # noqa: B027 - most kinds hold nothing of their own
        """Release what the channel holds (connections)."""

    @property
    def target(self) -> str:
        """The target as a log line may show it: scheme and host, never a path, a
        password or a token (a Slack webhook's path and an ntfy topic are secrets)."""
        url = self.route.options.get("url")
        if not isinstance(url, str):
            return self.kind
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
