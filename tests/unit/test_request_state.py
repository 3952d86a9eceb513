"""broker/core/request_state.py: the broker's own requestState for MCP's multi round-trip
pattern, signed with the broker secret and bound to the session, holder and form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.request_state import PREFIX, HostAsk, InvalidRequestState, key_from_secret, seal, unseal

KEY = key_from_secret("the deployment's secret")
ASK = HostAsk("sess-1", "alice", "qn-1", revision=2, step=5, first=1, expires_at=1000.0 + 3600)


def test_a_state_opens_on_any_broker_with_the_same_secret_for_the_same_session_and_holder() -> None:
    state = seal(KEY, ASK)
    assert state.startswith(PREFIX)
    assert (
        unseal(key_from_secret("the deployment's secret"), state, session_id="sess-1", sub="alice", now=1000.0) == ASK
    )


@pytest.mark.parametrize(
    ("session_id", "sub", "now", "reason"),
    [
        ("sess-2", "alice", 1000.0, "another session or holder"),
        ("sess-1", "bob", 1000.0, "another session or holder"),
        ("sess-1", None, 1000.0, "another session or holder"),
        ("sess-1", "alice", 1000.0 + 3600, "expired"),
    ],
)
def test_a_foreign_or_expired_state_is_refused(session_id: str, sub: str | None, now: float, reason: str) -> None:
    with pytest.raises(InvalidRequestState, match=reason):
        unseal(KEY, seal(KEY, ASK), session_id=session_id, sub=sub, now=now)


def test_another_deployment_s_state_is_refused() -> None:
    with pytest.raises(InvalidRequestState, match="signature"):
        unseal(key_from_secret("another secret"), seal(KEY, ASK), session_id="sess-1", sub="alice", now=1000.0)


@pytest.mark.parametrize("state", ["", "qb1.", "qb1.a.b.c", "v1.abc.def", "qb1.!!!.abc", 42])
def test_a_malformed_state_is_refused(state: object) -> None:
    with pytest.raises(InvalidRequestState):
        unseal(KEY, state, session_id="sess-1", sub="alice", now=1000.0)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_state_altered_in_any_one_character_is_refused(data: st.DataObject) -> None:
    state = seal(KEY, ASK)
    at = data.draw(st.integers(0, len(state) - 1))
    replacement = data.draw(st.sampled_from("AQgw_-.0aZ=x"))
    altered = state[:at] + replacement + state[at + 1 :]
    if altered == state:
        return
    with pytest.raises(InvalidRequestState):
        unseal(KEY, altered, session_id="sess-1", sub="alice", now=1000.0)


def test_a_forged_claim_with_a_valid_looking_signature_is_refused() -> None:
    """Re-signing other claims needs the key: a state whose claims were swapped is refused."""
    other = seal(KEY, HostAsk("sess-1", "alice", "qn-2", 2, 5, 1, 1e12))
    mine = seal(KEY, ASK)
    swapped = other.rsplit(".", 1)[0] + "." + mine.rsplit(".", 1)[1]
    with pytest.raises(InvalidRequestState, match="signature"):
        unseal(KEY, swapped, session_id="sess-1", sub="alice", now=1000.0)
