"""The inbox on Redis: its index of sessions with something open (keys.py: 32 shards), what a
page of it reads, the shards' channels a watched prefix needs, the inbox sockets' heartbeats,
and presence messages on the shards' channels.

A session joins its shard when a questionnaire is created in it (on one Redis in the create
script itself; on a cluster, where a script cannot reach another slot, here right after it)
and leaves it ``unindex_after`` seconds after nothing of it is open any more, a batch at a
time (a session asked again meanwhile, the usual case, costs nothing); readers put right
what a crash in between left out of step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, Final

from redis.commands.core import AsyncScript
from redis.typing import EncodableT

from broker.core import inbox
from broker.core.scopes import covering_scopes
from broker.store.base import INBOX_SOCKETS_KEPT, SessionInbox, StoreUnavailable
from broker.store.redis.commands import Commands
from broker.store.redis.connections import reachable
from broker.store.redis.index_pages import indexed_sessions
from broker.store.redis.keys import (
    INBOX_SOCKETS_KEY,
    inbox_channel,
    inbox_key,
    inbox_shard,
    inbox_shards,
    index_key,
    prefix,
    questionnaire_prefix,
    queue_key,
)
from broker.store.redis.notices import presence_message
from broker.store.redis.subscriptions import Subscriptions

logger = logging.getLogger(__name__)

UNINDEX_AFTER: Final = 10.0  # seconds a session with nothing open stays in the inbox's index


class InboxIndex:
    """The inbox's reads and upkeep for ``RedisStore``; ``chore`` runs work beside its caller
    (the store's: a failure is a warning)."""

    def __init__(
        self,
        commands: Commands,
        subscriptions: Subscriptions,
        *,
        publish: str,
        index: AsyncScript,
        inbox_script: AsyncScript,
        chore: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._commands = commands
        self._subscriptions = subscriptions
        self._publish = publish
        self._index = index
        self._inbox = inbox_script
        self._chore = chore
        self._watched: Counter[str] = Counter()  # watch's prefixes
        self._watching: Counter[int] = Counter()  # ... and the index shards they need
        # Sessions whose last open questionnaire ended, by when (monotonic).
        self.unindex_after = UNINDEX_AFTER
        self.emptied: dict[str, float] = {}
        self._unindex_timer: asyncio.TimerHandle | None = None

    # --- reads --------------------------------------------------------------------------

    async def open_sessions(self, prefix: str) -> list[str]:
        low, high = (b"[" + prefix.encode(), b"[" + prefix.encode() + b"\xff") if prefix else (b"-", b"+")
        with reachable("open_sessions"):
            replies = await asyncio.gather(
                *(self._commands.command("ZRANGEBYLEX", index_key(shard), low, high) for shard in inbox_shards(prefix))
            )
        return [bytes(sid).decode() for reply in replies for sid in reply]

    async def sessions(self, prefix: str, start: str, count: int) -> list[str]:
        return await indexed_sessions(self._commands, prefix, start, count)

    async def session_inboxes(self, session_ids: list[str], now: float) -> list[SessionInbox]:
        with reachable("session_inboxes"):
            replies = await asyncio.gather(
                *(
                    self._commands.run(
                        self._inbox,
                        [prefix(sid) + "queue", prefix(sid) + "clients", prefix(sid) + "seq", inbox_key(sid)],
                        [questionnaire_prefix(sid), repr(now)],
                    )
                    for sid in session_ids
                )
            )
        inboxes = []
        for sid, (seq, clients, *packed) in zip(session_ids, replies, strict=True):
            entries = []
            for data in packed:
                try:
                    entries.append(inbox.unpack(data))
                except ValueError:
                    logger.warning("ignoring a malformed inbox entry", extra={"session": sid})
            if not entries:  # (a session the index still lists: its last questionnaire ended)
                self._chore(self.remove(sid))
            inboxes.append(SessionInbox(sid, tuple(entries), int(clients), int(seq)))
        return inboxes

    # --- watching prefixes --------------------------------------------------------------

    async def watch(self, prefix: str) -> None:
        """Subscribes the prefix's index shards' channels (counted: several prefixes share one)."""
        self._watched[prefix] += 1
        shards = inbox_shards(prefix)
        fresh = [shard for shard in shards if self._watching[shard] == 0]
        self._watching.update(shards)
        try:
            await asyncio.gather(
                *(self._subscriptions.subscribe_inbox(inbox_channel(shard).encode()) for shard in fresh)
            )
        except BaseException:
            await self.unwatch(prefix)
            raise

    async def unwatch(self, prefix: str) -> None:
        if self._watched[prefix] <= 0:
            return
        self._watched[prefix] -= 1
        if self._watched[prefix] == 0:
            del self._watched[prefix]
        for shard in inbox_shards(prefix):
            self._watching[shard] -= 1
            if self._watching[shard] <= 0:
                del self._watching[shard]
                await self._subscriptions.unsubscribe_inbox(inbox_channel(shard).encode())

    # --- inbox sockets and presence -------------------------------------------------------

    async def heartbeat(self, scopes: list[str], ttl: float, now: float) -> None:
        if not scopes:
            return
        pairs: list[EncodableT] = []
        for scope in scopes:
            pairs += [repr(now + ttl), scope]
        with reachable("inbox heartbeat"):
            await self._commands.command("ZADD", INBOX_SOCKETS_KEY, "GT", *pairs)
            await self._commands.command("ZREMRANGEBYSCORE", INBOX_SOCKETS_KEY, "-inf", repr(now - INBOX_SOCKETS_KEPT))

    async def until(self, session_id: str) -> float | None:
        with reachable("inbox_until"):
            kept = await self._commands.command("ZMSCORE", INBOX_SOCKETS_KEY, *covering_scopes(session_id))
        return max((float(until) for until in kept if until is not None), default=None)

    async def tell_presence(self, session_id: str, clients: int) -> None:
        channel = inbox_channel(inbox_shard(session_id))
        with reachable("presence notice"):
            await self._commands.command(self._publish, channel, presence_message(session_id, clients))

    # --- the index's upkeep -------------------------------------------------------------

    async def add(self, session_id: str, created: bytes) -> None:
        """Add the session to its index shard (and publish ``created``, a create's notice, on
        the shard's channel). A failure here leaves the questionnaire out of the inbox until
        the agent retries (a create repeated by its Idempotency-Key indexes it again): it
        does not fail the start."""
        try:
            with reachable("index"):
                await self._commands.run(self._index, [index_key(inbox_shard(session_id))], [session_id, created])
        except StoreUnavailable as exc:
            logger.warning("inbox index not updated: %s", exc, extra={"session": session_id})

    def empty(self, session_id: str) -> None:
        """Nothing of the session is open now: it leaves the index soon, if still empty."""
        self.emptied[session_id] = time.monotonic()
        if self._unindex_timer is None:
            self._unindex_timer = asyncio.get_running_loop().call_later(self.unindex_after, self._unindex_due)

    def _unindex_due(self) -> None:
        """Take the sessions emptied ``unindex_after`` ago (and still empty) out of the index."""
        self._unindex_timer = None
        now = time.monotonic()
        due = [sid for sid, at in self.emptied.items() if now - at >= self.unindex_after]
        for sid in due:
            del self.emptied[sid]
        if due:
            self._chore(self._unindex_if_empty(due))
        if self.emptied:
            wait = min(self.emptied.values()) + self.unindex_after - now
            self._unindex_timer = asyncio.get_running_loop().call_later(max(0.01, wait), self._unindex_due)

    async def _unindex_if_empty(self, session_ids: list[str]) -> None:
        with reachable("unindex"):
            found = await asyncio.gather(*(self._commands.command("EXISTS", queue_key(sid)) for sid in session_ids))
        for sid, exists in zip(session_ids, found, strict=True):
            if not int(exists):
                await self.remove(sid)

    async def remove(self, session_id: str) -> None:
        """Take a session with nothing open out of its index shard, then look again: a
        questionnaire created meanwhile (its create indexes it after it is stored, and may
        have done so just before the removal) puts it back."""
        key = index_key(inbox_shard(session_id))
        with reachable("unindex"):
            await self._commands.command("ZREM", key, session_id)
            if int(await self._commands.command("EXISTS", queue_key(session_id))):
                await self._commands.command("ZADD", key, 0, session_id)

    def close(self) -> None:
        if self._unindex_timer is not None:
            self._unindex_timer.cancel()
            self._unindex_timer = None
