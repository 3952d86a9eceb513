"""A long wait that holds only while the caller's token does: an MCP tool call's slices
(broker/remote_mcp/calls.py) and the agent API's long polls.

A token is checked when a request arrives; a call that then waits (a slice of an MCP tool
call, a long poll) must not outlive a revocation or the token's ``exp``: the person's
answers would reach a caller that no longer may have them. ``while_token_holds`` checks the
token first, then runs the wait while watching it (``Tokens.watch``: told within the
revocation refresh, about half a second) and its expiry, and ends the wait with
``unauthorized`` ("questionnaire: token revoked" / "... token expired", the agent API's
words) as soon as either comes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from broker.core.errors import BrokerError
from broker.tokens.checks import Tokens
from broker.tokens.claims import Claims, check_use

T = TypeVar("T")


def token_problem(tokens: Tokens, claims: Claims, now: float) -> BrokerError | None:
    """Why the token with ``claims`` no longer holds at ``now``, or None."""
    if tokens.revoked(claims):
        return BrokerError("unauthorized", "questionnaire: token revoked")
    try:
        check_use(claims, None, now)
    except BrokerError as exc:
        return BrokerError("unauthorized", f"questionnaire: {exc.message}")
    return None


async def while_token_holds(
    tokens: Tokens, claims: Claims | None, clock: Callable[[], float], wait: Callable[[], Awaitable[T]]
) -> T:
    """``await wait()``, ended with ``unauthorized`` once the token is revoked or expires
    (None: a caller without a token to watch)."""
    if claims is None:
        return await wait()
    problem = token_problem(tokens, claims, clock())
    if problem is not None:
        raise problem
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    expiry = None if claims.exp is None else loop.call_later(max(claims.exp - clock(), 0.0), ended.set)
    unwatch = tokens.watch(claims, ended.set)
    waiting = asyncio.ensure_future(wait())
    guard = asyncio.ensure_future(ended.wait())
    try:
        await asyncio.wait((waiting, guard), return_when=asyncio.FIRST_COMPLETED)
    finally:
        unwatch()
        if expiry is not None:
            expiry.cancel()
        guard.cancel()
        if not waiting.done():
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
    if waiting.cancelled():  # (the token ended first)
        raise token_problem(tokens, claims, clock()) or BrokerError("unauthorized", "questionnaire: token expired")
    return waiting.result()
