"""``Tokens``: every token check of a running broker, in one place.

The agent API, the client websocket and the operator endpoints call ``verify`` (a token
and the role it is used as) and get the token's ``Claims``, or a ``BrokerError``
``unauthorized`` (401 / close 4401). A check is the signature, the claims, the expiry, the
role and the revocations, all in memory on the agent API's hot path: an agent presents the
same token on every call, so its signature and claims are checked once and kept (a few
thousand tokens, forgotten when the identity provider's keys change), and the revocations
are a set kept here.

Two kinds of token are accepted: HS256 tokens signed with the broker's secret (``qbroker
token``), and, with ``QBROKER_JWKS_URL`` set, RS256/ES256 tokens from an identity provider,
signed by a key of its JWKS (broker/tokens/jwks.py), for the configured issuer and audience, whose
scope, role and holder are read from the configured claims. The token's ``alg`` says which:
a JWKS key never checks an HS256 token, nor the secret an RS256 one.

Revocations live in the store, so that every broker of a deployment honours them. Each
broker reads the list's version every ``REFRESH_INTERVAL`` (one cheap read) and the whole
list only when it changed (revocations are rare), so a revocation made on any broker holds
on every other within about half a second, and no token check waits on the store. The
broker that takes a revocation applies it at once.

A connection that stays open after its check (a websocket) asks to be told when its token
is revoked later (``watch``), and closes itself (4401 "token revoked").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Final

import jwt

from broker.core.errors import BrokerError
from broker.core.revocations import Revocation, Revoked, exp_problem, keep_until
from broker.runtime.config import Config
from broker.runtime.metrics import Metrics
from broker.runtime.tasks import stop_tasks
from broker.store.base import Store, StoreUnavailable
from broker.tokens.claims import ClaimNames, Claims, Role, check_use, hs256_claims, read_claims
from broker.tokens.jwks import ALGORITHMS, KeySet

log = logging.getLogger("qbroker.tokens")

REFRESH_INTERVAL: Final = 0.5  # seconds between two reads of the revocation list's version
AGENT_TOKENS_KEPT: Final = 4096  # verified agent tokens remembered (the oldest go first)
CLOCK_SKEW: Final = 30.0  # seconds an identity provider's iat/nbf may be ahead of this clock


class Tokens:
    """Verifies tokens against the broker's secret and the revocations in the store."""

    def __init__(
        self, config: Config, store: Store, clock: Callable[[], float] = time.time, metrics: Metrics | None = None
    ) -> None:
        self._secret = config.secret or ""
        self._store = store
        self._clock = clock
        self._metrics = metrics or Metrics()
        self._agent_claims: dict[str, Claims] = {}  # verified agent tokens (signature and claims)
        self._keys: KeySet | None = None
        if config.jwks_url is not None:
            self._keys = KeySet(
                config.jwks_url,
                refetch_interval=config.jwks_refetch_interval,
                on_fetch=lambda ok: self._metrics.jwks_fetches.labels("ok" if ok else "error").inc(),
                on_change=self._agent_claims.clear,  # a withdrawn key's tokens are checked afresh
            )
        self._issuer = config.jwt_issuer
        self._audience = list(config.jwt_audience)
        self._names = ClaimNames(config.jwt_sid_claim, config.jwt_role_claim, config.jwt_sub_claim)
        self._revoked = Revoked()
        self._kept: list[Revocation] = []
        self._version: str | None = None  # of the revocation list read last (None: never read)
        self._watchers: dict[int, tuple[Claims, Callable[[], None]]] = {}
        self._ids = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._store_was_down = False

    # --- checks ------------------------------------------------------------------------

    async def verify(self, token: str, *, role: Role | None) -> Claims:
        """The claims of ``token`` used as ``role`` (None: any role, for a caller that
        answers a wrong role itself); raises ``unauthorized`` naming what is wrong."""
        if not isinstance(token, str) or not token:
            raise BrokerError("unauthorized", "missing token")
        if role == "agent":  # the same token on every call: checked once
            claims = self._agent_claims.get(token)
            if claims is None:
                claims = await self._read(token)
                if len(self._agent_claims) >= AGENT_TOKENS_KEPT:
                    del self._agent_claims[next(iter(self._agent_claims))]
                self._agent_claims[token] = claims
        else:
            claims = await self._read(token)
        check_use(claims, role, self._clock())
        if self._revoked.size and self._revoked.covers(claims.jti, claims.sub, claims.iat):
            raise BrokerError("unauthorized", "token revoked")
        return claims

    async def _read(self, token: str) -> Claims:
        """The checked claims of a correctly signed token (expiry and role aside)."""
        if self._keys is not None:
            try:
                header = jwt.get_unverified_header(token)
            except jwt.PyJWTError:
                raise BrokerError("unauthorized", "invalid token") from None
            if header.get("alg") in ALGORITHMS:
                return await self._provider_claims(token, header)
        return hs256_claims(self._secret, token)

    async def _provider_claims(self, token: str, header: dict[str, object]) -> Claims:
        """The claims of a token signed by a key of the identity provider's JWKS."""
        assert self._keys is not None
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise BrokerError("unauthorized", "invalid token: no key id (kid) in its header")
        key = await self._keys.key(kid)
        if key is None:
            raise BrokerError("unauthorized", "invalid token: signed by a key the identity provider does not publish")
        if key.algorithm_name != header.get("alg"):
            raise BrokerError("unauthorized", "invalid token: its alg is not its key's")
        try:
            payload = jwt.decode(
                token,
                key.key,
                algorithms=[key.algorithm_name],
                issuer=self._issuer,
                audience=self._audience,
                leeway=CLOCK_SKEW,
                options={"require": ["exp", "iss", "aud"], "verify_exp": False},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise BrokerError("unauthorized", f"invalid token: no {exc.claim} claim") from None
        except jwt.InvalidIssuerError:
            raise BrokerError("unauthorized", "invalid token: another issuer's") from None
        except jwt.InvalidAudienceError:
            raise BrokerError("unauthorized", "invalid token: for another audience") from None
        except jwt.PyJWTError:
            raise BrokerError("unauthorized", "invalid token") from None
        return read_claims(payload, self._names)

    def revoked(self, claims: Claims) -> bool:
        """Whether a revocation covers the token with these claims (an in-memory lookup)."""
        return self._revoked.covers(claims.jti, claims.sub, claims.iat)

    def revoked_ids(self, jti: str | None, sub: str | None, iat: float | None) -> bool:
        """``revoked`` for what was kept of a token used earlier (a push subscription keeps
        its token's ``jti``, ``sub`` and ``iat``, not the token): an in-memory lookup."""
        return self._revoked.covers(jti, sub, iat)

    def watch(self, claims: Claims, on_revoked: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_revoked`` (once) if the token with ``claims`` is revoked while the caller
        holds it; returns the function that stops watching (call it when the connection ends).
        A token revoked since its check (while the connection was being set up) is told at once."""
        if self.revoked(claims):
            on_revoked()
            return lambda: None
        key = next(self._ids)
        self._watchers[key] = (claims, on_revoked)
        return lambda: self._watchers.pop(key, None) and None

    @property
    def revocations_in_force(self) -> int:
        return self._revoked.size

    # --- revocations -------------------------------------------------------------------

    async def revoke(self, *, jti: str | None = None, sub: str | None = None, exp: float | None = None) -> Revocation:
        """Revoke the token ``jti``, or every token of holder ``sub`` issued before now;
        kept until ``exp`` (the latest expiry of the tokens it covers) when given, which
        must be in the future (else ``invalid_arguments``)."""
        now = self._clock()
        problem = None if exp is None else exp_problem(now, exp)
        if problem is not None:
            raise BrokerError("invalid_arguments", problem)
        revocation = Revocation(jti, sub, now, keep_until(now, exp))
        await self._store.revoke(revocation, now)
        await self.refresh()  # this broker at once; the others within REFRESH_INTERVAL
        return revocation

    async def refresh(self) -> None:
        """Read the revocation list if it changed; close the connections it now covers."""
        result = await self._store.revocations(self._version)
        now = self._clock()
        if result is None:
            if now >= self._revoked.next_expiry:  # one of them is due to be dropped
                self._revoked = Revoked(self._kept, now)
                self._metrics.revocations.value = self._revoked.size
            return
        self._version, kept = result
        self._kept = [revocation for revocation in kept if revocation.until > now]
        self._revoked = Revoked(self._kept, now)
        self._metrics.revocations.value = self._revoked.size
        self._tell_revoked()

    def _tell_revoked(self) -> None:
        for key, (claims, on_revoked) in list(self._watchers.items()):
            if self.revoked(claims):
                del self._watchers[key]
                try:
                    on_revoked()
                except Exception:
                    log.exception("closing a connection whose token was revoked failed")

    # --- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Read the revocations (before the broker serves anything), then keep them fresh;
        fetch the identity provider's keys."""
        await self.refresh()
        self._task = asyncio.create_task(self._refreshing(), name="qbroker-revocations")
        if self._keys is not None:
            await self._keys.start()

    async def stop(self) -> None:
        if self._keys is not None:
            await self._keys.stop()
        await stop_tasks([self._task])
        self._task = None

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL)
            try:
                await self.refresh()
            except StoreUnavailable:
                if not self._store_was_down:  # once per outage, not twice a second
                    log.warning("revocations not refreshed: store unavailable; the last list read holds")
                self._store_was_down = True
                continue
            except Exception:  # the loop must survive anything
                log.exception("refreshing the revocations failed")
                continue
            if self._store_was_down:
                log.info("revocations refreshed again")
                self._store_was_down = False
