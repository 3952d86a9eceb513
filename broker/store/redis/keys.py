"""The Redis store's key schema: every name the store and its scripts use.

Keys of one session, all carrying the ``{sid}`` hash tag so that a session lives on one slot::

    qb:{sid}:q:<id>        hash  v = version, s = msgpack of Questionnaire.to_record(),
                                 x = when its keys expire (ms; scripts/expiry.lua), i = its
                                 inbox entry while open (broker/core/inbox.py; '' once ended),
                                 n = how many events it has, e = its events packed one after
                                 the other, oldest first (records.pack_event): one HSET
                                 writes them all
    qb:{sid}:queue         zset  open questionnaire ids, scored by qb:{sid}:seq (strict FIFO)
    qb:{sid}:seq           the session's write counter (every write; also the queue scores)
    qb:{sid}:ev:<id>       list  events an older broker kept apart (a hash without n: all of
                                 them); read after the hash's, in order by their time
    qb:{sid}:history       zset  every questionnaire id within retention, scored by the write
                                 number that created it (the history list, newest first)
    qb:{sid}:idem:<key>    string  Idempotency-Key -> questionnaire id
    qb:{sid}:clients       zset  client id -> heartbeat expiry (Unix seconds)
    qb:{sid}:seen          string  last time the session had a client (Unix seconds)
    qb:{sid}:claim:<name>  string  a name taken once across brokers (SET NX with an expiry)
    qb:{sid}:note:<name>   string  a text one broker leaves for the others (with an expiry)
    qb:{sid}:inbox         hash  open questionnaire id -> its inbox entry, as an older broker
                                 kept them (read for a questionnaire without i)
    qb:{sid}:events        channel  a notice after every write (notices.py)
    qb:{sid}:outcomes      channel  the same notice again after a write that reached an outcome

The inbox's index of sessions, sharded so that no one key serves every tenant::

    qb:inbox:{inbox-NN}         zset  ids of sessions with open questionnaires (all scored 0,
                                      so ZRANGEBYLEX finds those with a prefix, in id
                                      order: the inbox's pages walk it, index_pages.py)
    qb:inbox:{inbox-NN}:events  channel  the notice of every questionnaire created in those
                                      sessions, and every change of who is connected to them

A session's shard (``NN``, one of ``INBOX_SHARDS``) is a hash of its id's first segment (up
to the first ``:``), so the sessions of a tenant (``alice:build``, ``alice:review``) share one
shard, and the tenants spread over the shards and so over a cluster's masters. A prefix with
a ``:`` (``alice:``) is answered by its one shard; a shorter one (``ali``, or none for
``*``) by every shard. A session joins its shard when a questionnaire is created in it (on
one Redis in the create script itself; on a cluster, where a script cannot reach another
slot, in a second script right after it) and leaves it some seconds after nothing of it is
open any more (inbox_index.py); readers put right what a crash in between left out of step.

Browser push subscriptions are kept per scope (a session id, a prefix pattern, ``*``), not
per session, under one hash tag of their own, ``{/push}`` (``/`` is in no session id), so
that looking up every scope that covers a session is one script on one slot::

    qb:{/push}:s:<scope>   hash  endpoint's id -> msgpack of PushSubscription
    qb:{/push}:e:<scope>   zset  endpoint's id, scored by its expiry (Unix seconds)

A write that reached an outcome (completed, cancelled, unavailable, needs_clarification)
publishes its notice on the outcomes channel too: a process where only agent calls wait on
a session subscribes to that channel alone and is not woken by every answer.

Keys of no session, with a hash tag of their own that no session id can equal (``!`` is not
in the session-id alphabet), so that they share one slot::

    qb:{!revocations}:list     hash  j:<jti> / s:<sub> -> "<at> <until>" (broker/core/revocations.py)
    qb:{!revocations}:version  string  a fresh random id after every revocation

Every broker reads the version twice a second and the list only when the version changed
(revocations are rare): one GET, on one slot, per broker per half second.

    qb:{!notify}:deliveries    stream  notifications waiting for delivery, read by every
                               broker through the consumer group "brokers" (deliveries.py)

The session scripts only touch keys of one session (but for the create script on one Redis,
which also adds the session to its inbox shard, above). Every key known before the call is passed in
KEYS (that is what routes the script to the session's slot on a cluster, and what a cluster
checks is there, or moves the call, before the script runs); four scripts also read a
questionnaire (or its events) whose id they find inside (the idempotency key's target, the
queue's members) by building its name from the session's own prefix, which keeps the read
on the same slot, and so on the node that runs the script. On one Redis, where nothing
checks or moves keys, the write scripts (run with every answer) are passed only the
questionnaire's hash and name the session's other keys from it (scripts/write_keys.lua):
each key passed is one more argument to pack and to parse. (The write scripts find the
session's prefix in a key's name, and name the channels from it: scripts/*.lua spell
``q:``, ``ev:``, ``queue``, ``seq``, ``inbox``, ``history``, ``events`` and ``outcomes`` too.)

Every key of a session expires. A write renews the expiry of its questionnaire's keys (the
hash with its events, and an older broker's list of them) and of the session's (queue, seq,
history; an older broker's inbox hash) together, to the retention, but only once that is due (scripts/expiry.lua:
less than 7/8 of the retention left), not with every write; a create gives its
questionnaire the session's expiry. So the events expire with their questionnaire, and the
session's keys outlive every questionnaire they list.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from typing import Final

INBOX_SHARDS: Final = 32


def prefix(session_id: str) -> str:
    return "qb:{" + session_id + "}:"


def questionnaire_prefix(session_id: str) -> str:
    return prefix(session_id) + "q:"


def claim_key(session_id: str, name: str) -> str:
    return prefix(session_id) + "claim:" + name


def note_key(session_id: str, name: str) -> str:
    return prefix(session_id) + "note:" + name


@lru_cache(maxsize=4096)  # (a questionnaire's writes follow each other: its key is made once)
def questionnaire_key(session_id: str, questionnaire_id: str) -> bytes:
    """The questionnaire's hash, as a write script on one Redis takes it (write_keys.lua)."""
    return _session_keys(session_id)[0] + b"q:" + questionnaire_id.encode()


def write_keys(session_id: str, questionnaire_id: str) -> list[bytes]:
    """The keys a write script takes on a Redis Cluster (bytes: packed as they are): the
    questionnaire, queue, seq, inbox, its events, history (write_keys.lua)."""
    base, queue, seq, inbox, history = _session_keys(session_id)
    qid = questionnaire_id.encode()
    return [base + b"q:" + qid, queue, seq, inbox, base + b"ev:" + qid, history]


@lru_cache(maxsize=4096)
def _session_keys(session_id: str) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """A session's prefix and the keys of it every write passes (made once per session)."""
    base = prefix(session_id).encode()
    return base, base + b"queue", base + b"seq", base + b"inbox", base + b"history"


def channel_for(session_id: str, outcomes_only: bool = False) -> str:
    """The pub/sub channel of a session's notices: of every write, or of outcomes only."""
    return prefix(session_id) + ("outcomes" if outcomes_only else "events")


@lru_cache(maxsize=4096)
def channel_bytes(session_id: str, outcomes_only: bool = False) -> bytes:
    """``channel_for`` as the notice connections name it (made once per session: every write
    and every notice asks)."""
    return channel_for(session_id, outcomes_only).encode()


def queue_key(session_id: str) -> str:
    return prefix(session_id) + "queue"


def queue_keys(session_id: str) -> list[str]:
    return [queue_key(session_id), prefix(session_id) + "seq"]


def presence_keys(session_id: str) -> list[str]:
    return [prefix(session_id) + "clients", prefix(session_id) + "seen"]


REVOCATIONS_KEYS = ["qb:{!revocations}:list", "qb:{!revocations}:version"]
# The scopes of connected inbox sockets (a sorted set, scope -> until when): one small key,
# written once per heartbeat interval per broker (not per socket) and read only when a
# questionnaire nobody answers nears its deadline.
INBOX_SOCKETS_KEY = "qb:{!inbox-sockets}:scopes"
# Notifications waiting for delivery, shared by every broker (deliveries.py).
DELIVERIES_KEY = "qb:{!notify}:deliveries"


def inbox_key(session_id: str) -> str:
    return prefix(session_id) + "inbox"


def inbox_shard(session_id: str) -> int:
    """The index shard of a session (or of a prefix that has its first segment)."""
    return zlib.crc32(session_id.partition(":")[0].encode()) % INBOX_SHARDS


def inbox_shards(session_prefix: str) -> list[int]:
    """The shards that can hold sessions whose id starts with ``session_prefix``."""
    return [inbox_shard(session_prefix)] if ":" in session_prefix else list(range(INBOX_SHARDS))


def index_key(shard: int) -> str:
    return f"qb:inbox:{{inbox-{shard:02d}}}"


def inbox_channel(shard: int) -> str:
    """The shard's channel (the index key's name and ``:events``: its scripts spell it so)."""
    return index_key(shard) + ":events"


def push_keys(scope: str) -> list[str]:
    """A scope's push subscriptions and their expiries."""
    return ["qb:{/push}:s:" + scope, "qb:{/push}:e:" + scope]
