"""Revocations: which tokens are withdrawn before their time, and the in-memory check.

A revocation names a token's ``jti`` (that one token), or a holder's ``sub`` (every token
of that holder issued, by its ``iat``, before the revocation's time ``at``; a token of that
holder without an ``iat`` cannot show it came later, so it is revoked too). Each is kept
``until`` the tokens it covers have expired, then dropped: ``keep_until`` says when.

``Revoked`` is the set every token check consults: a dict lookup or two, no I/O, so the
agent API's per-call check stays in memory (broker/tokens/checks.py keeps it fresh).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

# A revocation whose covered tokens' expiry is not known is kept this long: the longest
# lifetime ``qbroker token --ttl`` gives (100 years; a token of ``--ttl never`` has no end).
LONGEST_LIFETIME: Final = 100 * 365 * 86400.0


class Revocation(msgspec.Struct, frozen=True):
    """One revocation: exactly one of ``jti`` and ``sub``; ``at`` and ``until`` in Unix seconds."""

    jti: str | None
    sub: str | None
    at: float
    until: float

    @property
    def key(self) -> str:
        """Its name in the store: ``j:<jti>`` or ``s:<sub>`` (one entry per token or holder)."""
        return f"j:{self.jti}" if self.jti is not None else f"s:{self.sub}"

    def merged(self, other: Revocation) -> Revocation:
        """This revocation and a later one of the same token or holder, as one: the later
        ``at`` (a holder revoked again loses the tokens issued in between) and ``until``."""
        return Revocation(self.jti, self.sub, max(self.at, other.at), max(self.until, other.until))


def exp_problem(now: float, exp: float) -> str | None:
    """Why ``exp`` cannot keep a revocation made ``now``, or None. An ``exp`` not after now
    would drop the revocation at once while its tokens (whose expiry the broker cannot see)
    may still be valid, so the call would say "revoked" and change nothing."""
    if exp > now:
        return None
    return (
        f"exp {exp:.0f} is not in the future (now {now:.0f}): a revocation is kept until exp, which must be"
        " the latest expiry of the tokens it covers (qbroker token --json prints a token's); leave exp out to"
        " keep it for the longest lifetime a token may have"
    )


def keep_until(now: float, exp: float | None) -> float:
    """When a revocation made ``now`` may be dropped: at ``exp``, the latest expiry of the
    tokens it covers when the operator gave it, else after ``LONGEST_LIFETIME``."""
    return exp if exp is not None else now + LONGEST_LIFETIME


class Revoked:
    """The revocations in force, for the per-token check."""

    __slots__ = ("_jtis", "_subs", "next_expiry", "size")

    def __init__(self, revocations: Iterable[Revocation] = (), now: float = 0.0) -> None:
        self._jtis: set[str] = set()
        self._subs: dict[str, float] = {}  # holder -> tokens issued before this are revoked
        self.next_expiry = float("inf")  # when the first of them may be dropped
        self.size = 0
        for revocation in revocations:
            if revocation.until <= now:
                continue
            self.size += 1
            self.next_expiry = min(self.next_expiry, revocation.until)
            if revocation.jti is not None:
                self._jtis.add(revocation.jti)
            elif revocation.sub is not None:
                self._subs[revocation.sub] = max(revocation.at, self._subs.get(revocation.sub, revocation.at))

    def covers(self, jti: str | None, sub: str | None, iat: float | None) -> bool:
        """Whether a token with these claims is revoked."""
        if jti is not None and jti in self._jtis:
            return True
        if sub is None:
            return False
        at = self._subs.get(sub)
        return at is not None and (iat is None or iat < at)
