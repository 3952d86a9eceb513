"""Revocations: the pure rules (broker/core/revocations.py) and the broker's in-memory check
kept fresh from the store (broker/tokens/checks.py), on the memory store."""

from __future__ import annotations

import pytest

from broker.core.errors import BrokerError
from broker.core.revocations import LONGEST_LIFETIME, Revocation, Revoked, exp_problem, keep_until
from broker.runtime.config import Config
from broker.store.memory import MemoryStore
from broker.tokens.checks import Tokens
from broker.tokens.claims import mint_token

SECRET = "a-secret-of-at-least-thirty-two-bytes!"
NOW = 1_800_000_000.0


# --- the rules ------------------------------------------------------------------------------


def test_a_jti_revocation_covers_that_token_whatever_its_holder_or_age() -> None:
    revoked = Revoked([Revocation("abc", None, NOW, NOW + 10)], NOW)
    assert revoked.covers("abc", None, None) and revoked.covers("abc", "alice", NOW + 5)
    assert not revoked.covers("abd", None, NOW - 5)


@pytest.mark.parametrize(
    ("iat", "covered"),
    [(NOW - 3600, True), (NOW - 0.001, True), (None, True), (NOW, False), (NOW + 0.001, False)],
)
def test_a_sub_revocation_covers_the_holders_tokens_issued_before_it(iat: float | None, covered: bool) -> None:
    revoked = Revoked([Revocation(None, "alice", NOW, NOW + 10)], NOW)
    assert revoked.covers(None, "alice", iat) is covered
    assert not revoked.covers(None, "bob", iat)
    assert not revoked.covers(None, None, iat)


def test_two_revocations_of_one_holder_count_from_the_later() -> None:
    revoked = Revoked(
        [Revocation(None, "alice", NOW, NOW + 10), Revocation(None, "alice", NOW + 5, NOW + 10)],
        NOW,
    )
    assert revoked.covers(None, "alice", NOW + 2)


def test_revocations_whose_time_is_up_are_left_out() -> None:
    revoked = Revoked([Revocation("old", None, NOW - 10, NOW), Revocation("new", None, NOW, NOW + 5)], NOW)
    assert not revoked.covers("old", None, None) and revoked.covers("new", None, None)
    assert (revoked.size, revoked.next_expiry) == (1, NOW + 5)


def test_merging_keeps_the_later_time_and_the_later_end() -> None:
    merged = Revocation(None, "a", NOW, NOW + 100).merged(Revocation(None, "a", NOW + 5, NOW + 50))
    assert merged == Revocation(None, "a", NOW + 5, NOW + 100)


def test_a_revocation_is_kept_until_the_given_expiry_else_for_the_longest_lifetime() -> None:
    assert keep_until(NOW, NOW + 3600) == NOW + 3600
    assert keep_until(NOW, None) == NOW + LONGEST_LIFETIME
    assert Revocation("x", None, NOW, NOW).key == "j:x" and Revocation(None, "x", NOW, NOW).key == "s:x"


@pytest.mark.parametrize("exp", [1000.0, NOW - 1, NOW])
def test_an_exp_not_in_the_future_is_a_problem_as_it_would_drop_the_revocation_at_once(exp: float) -> None:
    problem = exp_problem(NOW, exp)
    assert problem is not None and "is not in the future" in problem and "leave exp out" in problem
    assert exp_problem(NOW, NOW + 1) is None


# --- the broker's check ---------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def tokens() -> Tokens:
    store = MemoryStore()
    checks = Tokens(Config(secret=SECRET), store)
    await checks.refresh()
    return checks


async def refused(tokens: Tokens, token: str, role: str = "agent") -> str:
    with pytest.raises(BrokerError) as refusal:
        await tokens.verify(token, role=role)  # type: ignore[arg-type]
    assert refusal.value.code == "unauthorized"
    return refusal.value.message


async def test_a_revoked_jti_is_refused_and_others_are_not(tokens: Tokens) -> None:
    token, other = mint_token(SECRET, "s", "agent", 60), mint_token(SECRET, "s", "agent", 60)
    claims = await tokens.verify(token, role="agent")  # (and now cached)
    await tokens.revoke(jti=claims.jti)
    assert await refused(tokens, token) == "token revoked"
    assert (await tokens.verify(other, role="agent")).sid == "s"


async def test_revoking_a_holder_refuses_its_earlier_tokens_of_every_role_but_not_later_ones(tokens: Tokens) -> None:
    agent = mint_token(SECRET, "alice:*", "agent", 60, sub="alice")
    client = mint_token(SECRET, "alice:*", "client", 60, sub="alice")
    bobs = mint_token(SECRET, "bob:*", "client", 60, sub="bob")
    await tokens.revoke(sub="alice")
    assert await refused(tokens, agent) == "token revoked"
    assert await refused(tokens, client, "client") == "token revoked"
    assert (await tokens.verify(bobs, role="client")).sub == "bob"
    fresh = mint_token(SECRET, "alice:*", "client", 60, sub="alice")  # issued after the revocation
    assert (await tokens.verify(fresh, role="client")).sub == "alice"


async def test_a_watched_token_is_told_once_when_revoked_and_an_unwatched_one_never() -> None:
    store = MemoryStore()
    told: list[str] = []
    here, there = Tokens(Config(secret=SECRET), store), Tokens(Config(secret=SECRET), store)
    await here.refresh()
    await there.refresh()
    claims = await there.verify(mint_token(SECRET, "s", "client", 60, sub="alice"), role="client")
    gone = await there.verify(mint_token(SECRET, "s", "client", 60, sub="alice"), role="client")
    there.watch(claims, lambda: told.append("alice"))
    there.watch(gone, lambda: told.append("gone"))()  # (watched, then the connection ended)
    await here.revoke(sub="alice")  # on another broker
    assert told == []  # not until this one reads the list
    await there.refresh()
    await there.refresh()
    assert told == ["alice"]


async def test_a_revocation_whose_time_is_up_no_longer_refuses() -> None:
    clock = Clock()
    clock.now = 1000.0
    store = MemoryStore()
    tokens = Tokens(Config(secret=SECRET), store, clock)
    await tokens.refresh()
    token = mint_token(SECRET, "s", "agent")
    claims = await tokens.verify(token, role="agent")
    await tokens.revoke(jti=claims.jti, exp=1010.0)
    assert tokens.revocations_in_force == 1
    clock.now = 1010.0
    await tokens.refresh()  # (the list did not change: its first expiry did)
    assert tokens.revocations_in_force == 0
    assert (await tokens.verify(token, role="agent")).jti == claims.jti


async def test_an_exp_in_the_past_is_refused_and_one_at_the_tokens_expiry_holds(tokens: Tokens) -> None:
    token = mint_token(SECRET, "s", "agent", 60)
    claims = await tokens.verify(token, role="agent")
    with pytest.raises(BrokerError) as refusal:
        await tokens.revoke(jti=claims.jti, exp=1000.0)
    assert refusal.value.code == "invalid_arguments" and "not in the future" in refusal.value.message
    assert tokens.revocations_in_force == 0  # nothing was written
    await tokens.revoke(jti=claims.jti, exp=claims.exp)
    assert await refused(tokens, token) == "token revoked"


async def test_a_token_revoked_between_its_check_and_its_watch_is_told_at_once(tokens: Tokens) -> None:
    claims = await tokens.verify(mint_token(SECRET, "s", "client", 60), role="client")
    await tokens.revoke(jti=claims.jti)  # (while the connection was joining its session)
    told: list[bool] = []
    tokens.watch(claims, lambda: told.append(True))()
    assert told == [True]
