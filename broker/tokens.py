"""``Tokens``: every token check of a running broker, in one place.

The agent API, the client websocket and the operator endpoints call ``verify`` (a token
and the role it is used as) and get the token's ``Claims``, or a ``BrokerError``
``unauthorized`` (401 / close 4401). A check is the signature, the claims, the expiry, the
role and the revocations: all in memory on the agent API's hot path (an agent presents
the same token on every call, so its signature is checked once, broker/auth.py).

A connection that stays open after its check (a websocket) asks to be told when its token
is revoked later (``watch``), and closes itself.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

from broker.auth import Claims, Role, cached_hs256_claims, check_use, hs256_claims
from broker.config import Config
from broker.core.errors import BrokerError

log = logging.getLogger("qbroker.tokens")


class Tokens:
    """Verifies tokens against the broker's secret (and, later, revocations)."""

    def __init__(self, config: Config, clock: Callable[[], float] = time.time) -> None:
        self._secret = config.secret or ""
        self._clock = clock
        self._watchers: dict[int, tuple[Claims, Callable[[], None]]] = {}
        self._ids = itertools.count()

    async def verify(self, token: str, *, role: Role | None) -> Claims:
        """The claims of ``token`` used as ``role`` (None: any role, for a caller that
        answers a wrong role itself); raises ``unauthorized`` naming what is wrong."""
        if not isinstance(token, str) or not token:
            raise BrokerError("unauthorized", "missing token")
        claims = cached_hs256_claims(self._secret, token) if role == "agent" else hs256_claims(self._secret, token)
        check_use(claims, role, self._clock())
        if self.revoked(claims):
            raise BrokerError("unauthorized", "token revoked")
        return claims

    def revoked(self, claims: Claims) -> bool:
        """Whether a revocation covers the token with these claims (an in-memory lookup)."""
        return False

    def watch(self, claims: Claims, on_revoked: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_revoked`` (once) if the token with ``claims`` is revoked while the caller
        holds it; returns the function that stops watching (call it when the connection ends)."""
        key = next(self._ids)
        self._watchers[key] = (claims, on_revoked)
        return lambda: self._watchers.pop(key, None) and None

    def _tell_revoked(self) -> None:
        """Close what uses a token that is revoked now (after the revocations changed)."""
        for key, (claims, on_revoked) in list(self._watchers.items()):
            if self.revoked(claims):
                del self._watchers[key]
                try:
                    on_revoked()
                except Exception:
                    log.exception("closing a connection whose token was revoked failed")
