"""Which ``Host`` the broker answers for: its defence against DNS rebinding.

A web page on the visitor's own network can reach a broker through the visitor's browser by
having its own name (``evil.example``) resolve to the broker's address: the browser then
sends ``Host: evil.example`` and, to the page, the broker is same-origin, so the Origin
check alone (broker/ws/session.py) lets it through. The MCP specification asks HTTP
servers to check ``Host`` for this. Every HTTP request and websocket handshake (the agent
API, ``/mcp``, the inbox, the page, the health endpoints) is answered only for a ``Host``:

- that is an IP address (no name to rebind: what probes, proxies and scrapers use),
- ``localhost`` or a name under ``.localhost``,
- the host of ``QBROKER_PUBLIC_URL``,
- or one of ``QBROKER_ALLOWED_HOSTS`` (comma-separated names; ``*``: any, which turns the
  check off; ``*.example.com``: its subdomains).

Any port goes with an allowed host. Anything else, or no ``Host``, is refused: HTTP ``421
misdirected_request``, a handshake ``403``.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

from broker.runtime.config import Config

_LOOPBACK_NAMES: Final = frozenset({"localhost"})
# Host headers already judged, with the answer: a deployment's clients send the same one or
# two on every request, and parsing an address costs more than the request's routing.
# Bounded (the header is the caller's to choose): emptied when full.
_JUDGED_KEPT: Final = 256


class AllowedHosts:
    """The hosts one broker answers for (made once from its configuration)."""

    __slots__ = ("_any", "_judged", "_names", "_suffixes")

    def __init__(self, config: Config) -> None:
        names = set(_LOOPBACK_NAMES)
        if config.public_url is not None and urlsplit(config.public_url).hostname:
            names.add(str(urlsplit(config.public_url).hostname).lower())
        self._any = "*" in config.allowed_hosts
        self._suffixes = tuple(h[1:] for h in config.allowed_hosts if h.startswith("*."))
        names.update(h for h in config.allowed_hosts if not h.startswith("*"))
        self._names = frozenset(names)
        self._judged: dict[str | None, bool] = {}

    def allows(self, host_header: str | None) -> bool:
        """Whether to answer a request whose ``Host`` header is ``host_header``."""
        if self._any:
            return True
        judged = self._judged.get(host_header)
        if judged is None:
            judged = self._judge(host_header)
            if len(self._judged) >= _JUDGED_KEPT:
                self._judged.clear()
            self._judged[host_header] = judged
        return judged

    def _judge(self, host_header: str | None) -> bool:
        host = hostname(host_header)
        if host is None:
            return False
        if host in self._names or host.endswith(".localhost") or any(host.endswith(s) for s in self._suffixes):
            return True
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True


def hostname(host_header: str | None) -> str | None:
    """The name or address of a ``Host`` header (lower-case, without its port or a final
    dot; an IPv6 address without its brackets), or None when it is none."""
    if not host_header:
        return None
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end >= 0 else ""
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        return value[1:end] or None
    name = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
    name = name.rstrip(".")
    if not name or any(c in name for c in "/@ \t\\") or ":" in name:
        return None
    return name


def refusal_message(host_header: str | None) -> str:
    shown = (host_header or "")[:100]
    return (
        f"this broker does not answer for the host {shown!r} (DNS rebinding protection): add it to"
        " QBROKER_ALLOWED_HOSTS, or set QBROKER_PUBLIC_URL"
    )
