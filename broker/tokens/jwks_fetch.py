"""Fetching a JWKS document safely: the keys that decide who may do anything on the broker.

- ``https://`` only, but for a loopback address or ``localhost`` (a provider on the same
  host, a test): a key set fetched in clear could be swapped by anyone on the path;
- a redirect is followed (at most ``MAX_REDIRECTS``) only to the same scheme: an https
  JWKS that redirects to http would hand the keys to that same on-path attacker;
- the body is read up to ``MAX_BYTES`` (a JWKS is a few KiB): a provider, or whoever
  answers in its place, cannot make the broker read without end.

Blocking (urllib is not used: it follows any redirect); ``KeySet`` runs it in a thread.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import httpx

MAX_BYTES: Final = 512 * 1024
MAX_REDIRECTS: Final = 3


class JwksFetchError(Exception):
    pass


def url_problem(url: str) -> str | None:
    """Why ``url`` may not serve a JWKS, or None."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return None
    return "a JWKS URL must be https:// (http:// only for a loopback address or localhost)"


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetch_jwks(url: str, timeout: float) -> Any:
    """The JSON document at ``url``; ``JwksFetchError`` saying why not."""
    scheme = urlsplit(url).scheme
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            problem = url_problem(url)
            if problem is not None:
                raise JwksFetchError(problem)
            with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if response.is_redirect:
                    target = urljoin(url, response.headers.get("location", ""))
                    if urlsplit(target).scheme != scheme:
                        raise JwksFetchError(f"the JWKS URL redirects to another scheme ({urlsplit(target).scheme}:)")
                    url = target
                    continue
                if response.status_code != 200:
                    raise JwksFetchError(f"the JWKS URL answered HTTP {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise JwksFetchError(f"the JWKS is over {MAX_BYTES // 1024} KiB")
            try:
                return json.loads(body)
            except ValueError:
                raise JwksFetchError("the JWKS is not JSON") from None
    raise JwksFetchError(f"the JWKS URL redirects more than {MAX_REDIRECTS} times")
