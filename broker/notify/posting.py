"""One HTTP POST for the HTTP kinds (webhook, slack, ntfy; webpush through ``send`` and
``judge``, as it first acts on a 404 or 410 itself), and what its answer means.

2xx: delivered. A timeout, a connection that fails, 5xx or 429: worth another attempt
(``RetryableDelivery``, with the receiver's Retry-After when it gave one). Any other answer
(4xx, a redirect: webhook targets are called as configured, never followed elsewhere):
``FailedDelivery``. Reasons name the status or the error's type, never the URL (its path
or query is often the secret).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from broker.notify.channel import FailedDelivery, RetryableDelivery

USER_AGENT = "qbroker-notify/1"


def http_client(timeout: float) -> httpx.AsyncClient:
    """The client every HTTP channel of a broker shares (its connections are kept)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_connections=50, max_keepalive_connections=10),
    )


async def post(client: httpx.AsyncClient, url: str, content: bytes, headers: Mapping[str, str]) -> None:
    """POST ``content`` to ``url``; return on 2xx, else raise what the dispatcher acts on."""
    judge(await send(client, url, content, headers))


async def send(client: httpx.AsyncClient, url: str, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
    """POST ``content`` to ``url``: its answer, whatever the status; a timeout or a failed
    connection raises ``RetryableDelivery``."""
    try:
        return await client.post(url, content=content, headers=dict(headers))
    except httpx.TimeoutException:
        raise RetryableDelivery("timed out") from None
    except httpx.TransportError as exc:
        raise RetryableDelivery(f"cannot connect ({type(exc).__name__})") from None


def judge(response: httpx.Response, failed: str = "") -> None:
    """Return on 2xx; raise ``RetryableDelivery`` on 429 or 5xx, else ``FailedDelivery``
    (its reason the status, then ``failed``)."""
    status = response.status_code
    if 200 <= status < 300:
        return
    if status == 429 or status >= 500:
        raise RetryableDelivery(f"HTTP {status}", _retry_after(response.headers.get("retry-after")))
    raise FailedDelivery(f"HTTP {status}{failed}")


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare from webhooks: ignored)."""
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value.strip())
        if 0 <= seconds < float("inf"):
            return seconds
    return None


async def reachable(url: str, timeout: float) -> str | None:
    """A start-up check: None when a TCP connection to the URL's host and port opens,
    else a warning (the receiver may come up later: never a refusal to start)."""
    parts = urlsplit(url)
    default = {"https": 443, "http": 80, "smtps": 465, "smtp": 25}.get(parts.scheme, 443)
    host, port = parts.hostname or "", parts.port or default
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        return f"cannot connect to {parts.scheme}://{host}:{port} ({reason})"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
