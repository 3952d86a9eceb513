"""The inbox index read a page at a time: the sessions with open questionnaires under a
prefix, in id order, from a given id (``Store.inbox_sessions``).

The index shards (keys.py) hold their sessions all scored 0, so each is in lexicographic
order of the ids' bytes and a prefix is one range of it. A prefix with a ``:`` lives in one
shard: one ``ZRANGEBYLEX ... LIMIT``. A shorter one (or none) may be in every shard: each
gives its first ``count`` of the range, and the merge of those (each in order) gives the
first ``count`` of all. So a page costs one command per shard it may touch, a few bytes per
id, and never a read of a session it does not show.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from broker.store.redis.commands import Commands
from broker.store.redis.connections import reachable
from broker.store.redis.keys import inbox_shards, index_key


async def indexed_sessions(commands: Commands, prefix: str, start: str, count: int) -> list[str]:
    """The first ``count`` indexed sessions whose id starts with ``prefix``, from ``start``
    (included) on, in id order."""
    low = max(prefix, start).encode()
    high = b"[" + prefix.encode() + b"\xff" if prefix else b"+"
    with reachable("inbox_sessions"):
        replies = await asyncio.gather(
            *(
                commands.command("ZRANGEBYLEX", index_key(shard), b"[" + low if low else b"-", high, "LIMIT", 0, count)
                for shard in inbox_shards(prefix)
            )
        )
    ids = heapq.merge(*([bytes(sid) for sid in reply] for reply in replies))
    return [sid.decode() for sid in itertools.islice(ids, count)]
