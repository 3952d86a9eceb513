"""Tokens from an identity provider (broker/tokens/jwks.py, broker/tokens/checks.py): keys fetched from a
JWKS served on 127.0.0.1 by tests/helpers/jwks.py, cached, refetched for a new key id at
most once per interval, never on the event loop; and the token rules for them."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from broker.core.errors import BrokerError
from broker.runtime.config import Config
from broker.store.memory import MemoryStore
from broker.tokens import jwks
from broker.tokens.checks import Tokens
from broker.tokens.claims import mint_token
from broker.tokens.jwks import KeySet
from tests.helpers.jwks import AUDIENCE, ISSUER, IdentityProvider, new_key

SECRET = "a-secret-of-at-least-thirty-two-bytes!"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider() as provider:
        yield provider


# --- the key set ----------------------------------------------------------------------------


async def test_rs256_and_es256_keys_are_fetched_by_key_id_and_others_ignored(idp: IdentityProvider) -> None:
    rsa_key, ec_key = idp.add_key("rsa"), idp.add_key("ec")
    keys = KeySet(idp.jwks_url)
    assert await keys.fetch()
    assert keys.cached(rsa_key.kid) is not None and keys.cached(ec_key.kid) is not None
    assert (keys.cached(rsa_key.kid).algorithm_name, keys.cached(ec_key.kid).algorithm_name) == ("RS256", "ES256")  # type: ignore[union-attr]


async def test_a_shared_secret_an_encryption_key_and_a_key_without_id_are_not_taken(
    idp: IdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = new_key("rsa")
    published: list[dict[str, Any]] = [
        good.jwk(),
        {"kty": "oct", "kid": "shared", "k": "c2VjcmV0", "alg": "HS256"},
        {**new_key("rsa", "enc").jwk(), "use": "enc"},
        {key: value for key, value in new_key("ec").jwk().items() if key != "kid"},
        {**new_key("rsa", "ps").jwk(), "alg": "PS256"},
    ]
    keys = KeySet(idp.jwks_url)
    monkeypatch.setattr(jwks, "fetch_jwks", lambda url, timeout: {"keys": published})
    assert await keys.fetch()
    assert [kid for kid in ("shared", "enc", "ps", good.kid) if keys.cached(kid)] == [good.kid]


async def test_an_unknown_key_id_refetches_at_most_once_per_interval(idp: IdentityProvider) -> None:
    clock = Clock()
    idp.add_key("rsa")
    keys = KeySet(idp.jwks_url, refetch_interval=60, clock=clock)
    await keys.fetch()
    assert idp.fetches == 1
    rotated = idp.add_key("ec")  # the provider rotates: a new key appears
    assert await keys.key(rotated.kid) is None  # fetched a moment ago: not looked for again
    for n in range(20):
        assert await keys.key(f"made-up-{n}") is None
    assert idp.fetches == 1
    clock.now += 60
    assert await keys.key(rotated.kid) is not None  # a minute on: fetched, and there it is
    assert idp.fetches == 2
    assert await keys.key("made-up-again") is None
    assert idp.fetches == 2


async def test_tokens_waiting_for_one_key_share_one_fetch(idp: IdentityProvider) -> None:
    idp.delay = 0.2
    key = idp.add_key("rsa")
    keys = KeySet(idp.jwks_url)
    found = await asyncio.gather(*(keys.key(key.kid) for _ in range(10)))
    assert all(each is not None for each in found) and idp.fetches == 1


async def test_a_fetch_does_not_block_the_event_loop(idp: IdentityProvider) -> None:
    idp.delay = 0.5
    idp.add_key("rsa")
    keys = KeySet(idp.jwks_url)
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(ticking())
    started = time.monotonic()
    assert await keys.fetch()
    ticker.cancel()
    assert time.monotonic() - started >= 0.5
    assert ticks >= 10  # the loop ran on while the provider took its time


async def test_a_provider_that_is_down_keeps_the_keys_fetched_before(idp: IdentityProvider) -> None:
    key = idp.add_key("rsa")
    outcomes: list[bool] = []
    keys = KeySet(idp.jwks_url, refetch_interval=0, on_fetch=outcomes.append)
    assert await keys.fetch()
    idp.down = True
    assert not await keys.fetch()
    assert keys.cached(key.kid) is not None and outcomes == [True, False]


async def test_a_change_of_keys_is_told_and_a_withdrawn_key_is_gone(idp: IdentityProvider) -> None:
    old, new = idp.add_key("rsa"), new_key("ec")
    changes: list[int] = []
    keys = KeySet(idp.jwks_url, on_change=lambda: changes.append(1))
    await keys.fetch()
    await keys.fetch()  # the same keys: no change
    idp.publish(new)
    await keys.fetch()
    assert len(changes) == 2 and keys.cached(old.kid) is None and keys.cached(new.kid) is not None


# --- tokens from the provider ----------------------------------------------------------------


def hs256_signed_with(secret: bytes, kid: str) -> str:
    """An HS256 token signed with ``secret`` by hand (PyJWT refuses a PEM key as a secret)."""

    def part(value: dict[str, Any]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signing_input = part({"alg": "HS256", "typ": "JWT", "kid": kid}) + b"." + part({"sid": "s", "role": "agent"})
    signature = base64.urlsafe_b64encode(hmac.new(secret, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    return (signing_input + b"." + signature).decode()


def provider_config(idp: IdentityProvider, **more: Any) -> Config:
    return Config(secret=SECRET, jwks_url=idp.jwks_url, jwt_issuer=ISSUER, jwt_audience=(AUDIENCE,), **more)


async def started(config: Config) -> Tokens:
    tokens = Tokens(config, MemoryStore())
    await tokens.start()
    return tokens


async def refusal(tokens: Tokens, token: str, role: str = "agent") -> str:
    with pytest.raises(BrokerError) as refused:
        await tokens.verify(token, role=role)  # type: ignore[arg-type]
    assert refused.value.code == "unauthorized"
    return refused.value.message


@pytest.mark.parametrize("kind", ["rsa", "ec"])
async def test_a_providers_token_is_accepted_with_its_scope_role_and_holder(idp: IdentityProvider, kind: str) -> None:
    key = idp.add_key(kind)
    tokens = await started(provider_config(idp))
    try:
        claims = await tokens.verify(idp.sign(key, sid="alice:*", role="client", sub="alice"), role="client")
        assert (claims.sid, claims.role, claims.sub) == ("alice:*", "client", "alice") and claims.allows("alice:x")
        agent = await tokens.verify(idp.sign(key, sid="ci:*", role="agent", sub="ci", jti="t-1"), role="agent")
        assert (agent.sid, agent.jti) == ("ci:*", "t-1")
        # the broker's own tokens are accepted beside them
        assert (await tokens.verify(mint_token(SECRET, "s", "agent"), role="agent")).sid == "s"
    finally:
        await tokens.stop()


async def test_the_claims_are_read_under_the_names_configured(idp: IdentityProvider) -> None:
    key = idp.add_key("rsa")
    config = provider_config(
        idp, jwt_sid_claim="https://qbroker.example/sid", jwt_role_claim="roles", jwt_sub_claim="email"
    )
    tokens = await started(config)
    try:
        named: dict[str, Any] = {"https://qbroker.example/sid": "alice:*", "email": "alice@example.com"}
        token = idp.sign(key, **named, roles=["reader", "client"], sub="auth0|123")
        claims = await tokens.verify(token, role="client")
        assert (claims.sid, claims.role, claims.sub) == ("alice:*", "client", "alice@example.com")
        sid_only: dict[str, Any] = {"https://qbroker.example/sid": "a"}
        both = idp.sign(key, **sid_only, roles=["agent", "client"])
        assert "roles must be one of agent, client, admin" in await refusal(tokens, both, "client")
        plain = idp.sign(key, sid="alice:*", role="client")  # qbroker's names are not read
        assert "https://qbroker.example/sid must be" in await refusal(tokens, plain, "client")
    finally:
        await tokens.stop()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"iss": "https://evil.example.test/"}, "invalid token: another issuer's"),
        ({"aud": "another-app"}, "invalid token: for another audience"),
        ({"aud": None}, "invalid token: no aud claim"),
        ({"iss": None}, "invalid token: no iss claim"),
        ({"ttl": None}, "invalid token: no exp claim"),
        ({"ttl": -5}, "token expired"),
        ({"iat": int(time.time()) + 3600}, "invalid token"),  # issued in the future
        ({"sid": "al*ce"}, "invalid token claims: qbroker_sid must be"),
        ({"role": "root"}, "invalid token claims: role must be one of"),
        ({"role": "admin", "sid": "ops:*"}, "invalid token claims: an admin token's qbroker_sid must be *"),
    ],
)
async def test_a_providers_token_out_of_the_rules_is_refused(
    idp: IdentityProvider, change: dict[str, Any], says: str
) -> None:
    key = idp.add_key("rsa")
    tokens = await started(provider_config(idp))
    try:
        claims: dict[str, Any] = {"sid": "s", "role": "agent", **change}
        ttl = claims.pop("ttl", 600)
        assert (await refusal(tokens, idp.sign(key, ttl=ttl, **claims))).startswith(says)
    finally:
        await tokens.stop()


async def test_a_token_signed_by_a_key_not_published_is_refused(idp: IdentityProvider) -> None:
    published = idp.add_key("rsa")
    stranger = new_key("rsa", published.kid)  # the same key id, another key
    tokens = await started(provider_config(idp))
    try:
        assert await refusal(tokens, idp.sign(stranger, sid="s", role="agent")) == "invalid token"
        unknown = idp.sign(new_key("ec"), sid="s", role="agent")
        assert "a key the identity provider does not publish" in await refusal(tokens, unknown)
        no_kid = jwt.encode({"sid": "s", "role": "agent", "exp": time.time() + 60}, published.private, "RS256")
        assert "no key id" in await refusal(tokens, no_kid)
    finally:
        await tokens.stop()


async def test_an_alg_that_is_not_its_keys_or_a_public_key_as_a_secret_is_refused(idp: IdentityProvider) -> None:
    rsa_key = idp.add_key("rsa")
    tokens = await started(provider_config(idp))
    try:
        # ES256 named in the header, an RSA key's id: the key's own algorithm decides
        mismatched = idp.sign(new_key("ec"), sid="s", role="agent", headers={"kid": rsa_key.kid})
        assert "its alg is not its key's" in await refusal(tokens, mismatched)
        # The classic confusion: HS256 with the provider's public key as the HMAC secret.
        pem = rsa_key.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        assert await refusal(tokens, hs256_signed_with(pem, rsa_key.kid)) == "invalid token"
        unsigned = jwt.encode({"sid": "s", "role": "agent"}, None, algorithm="none")  # type: ignore[arg-type]
        assert await refusal(tokens, unsigned) == "invalid token"
    finally:
        await tokens.stop()


async def test_when_a_key_is_withdrawn_its_agent_tokens_are_refused(idp: IdentityProvider) -> None:
    old = idp.add_key("rsa")
    tokens = await started(provider_config(idp, jwks_refetch_interval=0.01))
    try:
        token = idp.sign(old, sid="s", role="agent")
        assert (await tokens.verify(token, role="agent")).sid == "s"  # (and now remembered)
        idp.publish(idp.add_key("ec"))  # the old key withdrawn
        assert tokens._keys is not None
        await tokens._keys.fetch()  # (what the 5-minute refresh does)
        assert "does not publish" in await refusal(tokens, token)
    finally:
        await tokens.stop()


async def test_without_a_jwks_url_a_providers_token_is_refused(idp: IdentityProvider) -> None:
    key = idp.add_key("rsa")
    tokens = await started(Config(secret=SECRET))
    try:
        assert await refusal(tokens, idp.sign(key, sid="s", role="agent")) == "invalid token"
    finally:
        await tokens.stop()
