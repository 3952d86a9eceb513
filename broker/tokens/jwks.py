"""``KeySet``: an identity provider's signing keys, fetched from its JWKS URL and cached.

PyJWT's ``PyJWK`` parses the keys (RSA and EC, with ``cryptography``); ``jwks_fetch.py``
fetches the document (https only, no redirect to another scheme, a bounded size). Here

- a fetch runs in a worker thread (``asyncio.to_thread``): the event loop never waits on
  the identity provider; several tokens waiting for the same fetch share it;
- keys are cached by ``kid``, and looked up in memory on every check;
- a token with a ``kid`` the cache lacks (a rotation: the provider published a new key)
  fetches the JWKS again, but at most once per ``refetch_interval`` (60 s): tokens with
  made-up key ids cannot make the broker hammer the provider;
- the whole set is fetched again every ``REFRESH_INTERVAL`` (5 minutes), so a key the
  provider withdrew stops being trusted.

Only RS256 and ES256 keys are taken (an ``oct`` key, a shared secret, has no business in a
JWKS; other algorithms are not offered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import httpx
from jwt import PyJWK
from jwt.exceptions import InvalidKeyError, PyJWKError

from broker.runtime.tasks import stop_tasks
from broker.tokens.jwks_fetch import JwksFetchError, fetch_jwks

log = logging.getLogger("qbroker.jwks")

ALGORITHMS: Final = ("RS256", "ES256")
REFRESH_INTERVAL: Final = 300.0  # seconds between two fetches of the whole set
FETCH_TIMEOUT: Final = 5.0


class KeySet:
    """The keys of one JWKS URL, by key id."""

    def __init__(
        self,
        url: str,
        *,
        refetch_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        on_fetch: Callable[[bool], None] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self._refetch_interval = refetch_interval
        self._clock = clock
        self._on_fetch = on_fetch  # told whether each fetch succeeded (metrics)
        self._on_change = on_change  # told when the keys changed
        self._keys: dict[str, PyJWK] = {}
        self._published: dict[str, dict[str, Any]] = {}  # the keys as the JWKS had them
        self._fetched_at = -float("inf")  # the last fetch's start (successful or not)
        self._fetching: asyncio.Future[bool] | None = None
        self._task: asyncio.Task[None] | None = None

    def cached(self, kid: str) -> PyJWK | None:
        return self._keys.get(kid)

    async def key(self, kid: str) -> PyJWK | None:
        """The key ``kid``: from the cache, or from a fetch when the last one is at least
        ``refetch_interval`` old; None when the provider has no such key (or cannot be
        reached)."""
        key = self._keys.get(kid)
        if key is not None:
            return key
        if self._fetching is None and self._clock() - self._fetched_at < self._refetch_interval:
            return None  # fetched a moment ago: the key is not there
        await self.fetch()
        return self._keys.get(kid)

    async def fetch(self) -> bool:
        """Fetch the set now (or join the fetch under way); whether it succeeded."""
        if self._fetching is None:
            self._fetched_at = self._clock()
            self._fetching = asyncio.ensure_future(self._fetch())
            self._fetching.add_done_callback(self._fetched)
        return await asyncio.shield(self._fetching)

    def _fetched(self, done: asyncio.Future[bool]) -> None:
        self._fetching = None

    async def _fetch(self) -> bool:
        try:
            data = await asyncio.to_thread(fetch_jwks, self.url, FETCH_TIMEOUT)
            published = data.get("keys") if isinstance(data, dict) else None
            if not isinstance(published, list):
                raise ValueError("the JWKS has no list of keys")
        except (JwksFetchError, httpx.HTTPError, OSError, ValueError) as exc:
            log.warning(
                "fetching the JWKS failed; the keys fetched before stay", extra={"url": self.url, "error": str(exc)}
            )
            self._tell(False)
            return False
        usable = [jwk for jwk in published if isinstance(jwk, dict) and _usable(jwk)]
        keys: dict[str, PyJWK] = {}
        for jwk in usable:
            try:
                keys[jwk["kid"]] = PyJWK(jwk)
            except (PyJWKError, InvalidKeyError, ValueError, TypeError):
                continue  # a key we cannot read; the others still count
        keys = {kid: key for kid, key in keys.items() if key.algorithm_name in ALGORITHMS}
        published_now = {jwk["kid"]: jwk for jwk in usable if jwk["kid"] in keys}
        changed = published_now != self._published
        self._keys, self._published = keys, published_now
        if changed:
            log.info("JWKS keys changed", extra={"url": self.url, "keys": ",".join(sorted(keys))})
            if self._on_change is not None:
                self._on_change()
        self._tell(True)
        return True

    def _tell(self, ok: bool) -> None:
        if self._on_fetch is not None:
            self._on_fetch(ok)

    # --- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Fetch the keys once (a provider that cannot be reached is logged, not fatal: the
        broker's own tokens work, and the provider's are checked once it answers), then
        refresh them every ``REFRESH_INTERVAL``."""
        await self.fetch()
        self._task = asyncio.create_task(self._refreshing(), name="qbroker-jwks")

    async def stop(self) -> None:
        await stop_tasks([self._task])
        self._task = None
        if self._fetching is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._fetching), FETCH_TIMEOUT)

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL)
            try:
                await self.fetch()
            except Exception:  # the loop must survive anything
                log.exception("refreshing the JWKS failed")


def _usable(jwk: dict[str, Any]) -> bool:
    """A signing key with an id, of a type RS256 or ES256 use."""
    return (
        isinstance(jwk.get("kid"), str)
        and bool(jwk["kid"])
        and jwk.get("kty") in ("RSA", "EC")
        and jwk.get("use", "sig") == "sig"
        and jwk.get("alg", "RS256" if jwk.get("kty") == "RSA" else "ES256") in ALGORITHMS
    )
