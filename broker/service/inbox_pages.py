"""A page of the inbox (``GET /v1/inbox``): the open questionnaires of the sessions a scope
covers, in the pages' order (broker/core/inbox.py), after a cursor.

A page walks the store's index of the sessions with something open, in id order, from the
cursor's session (``Store.inbox_sessions``), and reads those sessions only: the ``limit``
it may show and one more, to tell whether another page follows. A session in the index
with nothing open any more (its last questionnaire has just ended) gives no item, so the
walk goes on past it, but for ``LOOK_AHEAD`` sessions at most: a page that did not fill
then ends there, with a cursor after the last session read. So a page reads at most
``limit + 1 + LOOK_AHEAD`` sessions, whatever its scope covers, in rounds of at most
``READ_AT_ONCE``; what it shows depends on the store alone, so any broker goes on from a
cursor another gave.
"""

from __future__ import annotations

from typing import Final

from broker.core import inbox
from broker.core.inbox import PageKey, Row
from broker.core.scopes import scope_prefix
from broker.store.base import Store

# Sessions a page may read beyond the ``limit + 1`` it needs at most (those the index still
# lists with nothing open).
LOOK_AHEAD: Final = 32
# Sessions whose entries one read asks the store for at once (on Redis, one script each,
# in flight together).
READ_AT_ONCE: Final = 256


async def read_page(
    store: Store, scope: str, after: PageKey | None, limit: int, now: float
) -> tuple[list[Row], PageKey | None]:
    """Up to ``limit`` rows after ``after`` of the sessions ``scope`` covers, in the pages'
    order, and the key the next page starts after (None: nothing more)."""
    prefix = scope_prefix(scope)
    if prefix is None:  # one session
        (found,) = await store.session_inboxes([scope], now)
        rows = inbox.paged(((entry, found.clients) for entry in found.entries), after)
        return rows[:limit], (rows[limit - 1][0].page_key if len(rows) > limit else None)
    rows = []
    start = prefix if after is None else max(prefix, after[0])
    budget = limit + 1 + LOOK_AHEAD
    last_read: str | None = None
    more = True
    while more and len(rows) <= limit and budget > 0:
        wanted = min(budget, limit + 1 - len(rows), READ_AT_ONCE)
        session_ids = await store.inbox_sessions(prefix, start, wanted)
        more = len(session_ids) == wanted
        budget -= len(session_ids)
        for found in await store.session_inboxes(session_ids, now) if session_ids else ():
            rows += inbox.paged(((entry, found.clients) for entry in found.entries), after)
        if session_ids:
            last_read = session_ids[-1]
            start = last_read + "\0"  # (the least id after it)
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1][0].page_key
    if more and last_read is not None:  # the look-ahead ran out: go on after what was read
        return rows, inbox.after_session(last_read)
    return rows, None
