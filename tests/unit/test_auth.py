"""Token roles: a token of the wrong role is refused, and the refusal reads as English."""

from __future__ import annotations

import pytest

from broker.auth import mint_token, verify_token
from broker.errors import BrokerError

SECRET = "a-secret-of-at-least-thirty-two-bytes!"


@pytest.mark.parametrize(
    ("minted", "used_as", "says"),
    [
        ("client", "agent", "a client token cannot be used by an agent"),
        ("agent", "client", "an agent token cannot be used by a client"),
    ],
)
def test_a_token_of_the_other_role_is_refused_in_plain_words(minted: str, used_as: str, says: str) -> None:
    with pytest.raises(BrokerError) as refused:
        verify_token(SECRET, mint_token(SECRET, "s-1", minted), role=used_as)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.message) == ("unauthorized", says)
