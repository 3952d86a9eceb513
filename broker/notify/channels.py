"""Which channel serves a route: one line per kind.

The ``webpush`` kind is built by ``broker/notify/webpush.py`` (``WebPushChannel(route, store,
vapid)``, with the VAPID keys from the configuration or the data dir, the shared HTTP client,
the allowed push services, and the broker's revocation check, as a device was subscribed with
a token that may be revoked since); it is imported only when a route asks for it (pywebpush and
its cryptography load then), and a build without it stops ``serve`` in one line.
"""

from __future__ import annotations

import importlib
from typing import Any

import httpx

from broker.notify.channel import Channel, IsRevoked, never_revoked
from broker.notify.config import Route
from broker.notify.email import EmailChannel
from broker.notify.ntfy import NtfyChannel
from broker.notify.slack import SlackChannel
from broker.notify.webhook import WebhookChannel
from broker.runtime.config import Config
from broker.store.base import Store


def build_channel(
    route: Route, *, http: httpx.AsyncClient, store: Store, config: Config, revoked: IsRevoked = never_revoked
) -> Channel:
    if route.kind == "webhook":
        return WebhookChannel(route, http)
    if route.kind == "slack":
        return SlackChannel(route, http)
    if route.kind == "ntfy":
        return NtfyChannel(route, http)
    if route.kind == "email":
        return EmailChannel(route, config.notify_timeout)
    if route.kind == "webpush":
        return _webpush(route, store, config, http, revoked)
    raise ValueError(f"no channel for kind {route.kind!r}")  # (config.py admits only known kinds)


def _webpush(route: Route, store: Store, config: Config, http: httpx.AsyncClient, revoked: IsRevoked) -> Channel:
    try:
        webpush: Any = importlib.import_module("broker.notify.webpush")
    except ImportError:
        where = config.notify_config or "QBROKER_NOTIFY_CONFIG"
        raise SystemExit(
            f'qbroker: {where}: {route.name}: key "kind": webpush is not available in this build'
        ) from None
    channel: Channel = webpush.WebPushChannel(
        route, store, webpush.vapid_keys(config), http=http, services=config.push_services, revoked=revoked
    )
    return channel
