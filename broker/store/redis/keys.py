"""The Redis store's key schema: every name the store and its scripts use.

Keys of one session, all carrying the ``{sid}`` hash tag so that a session lives on one slot::

    qb:{sid}:q:<id>        hash  v = version, s = msgpack of Questionnaire.to_record()
    qb:{sid}:queue         zset  open questionnaire ids, scored by qb:{sid}:seq (strict FIFO)
    qb:{sid}:seq           the session's write counter (every write; also the queue scores)
    qb:{sid}:idem:<key>    string  Idempotency-Key -> questionnaire id
    qb:{sid}:clients       zset  client id -> heartbeat expiry (Unix seconds)
    qb:{sid}:seen          string  last time the session had a client (Unix seconds)
    qb:{sid}:claim:<name>  string  a name taken once across brokers (SET NX with an expiry)
    qb:{sid}:events        channel  a notice after every write (notices.py)
    qb:{sid}:outcomes      channel  the same notice again after a write that reached an outcome

A write that reached an outcome (completed, cancelled, unavailable, needs_clarification)
publishes its notice on the outcomes channel too: a process where only agent calls wait on
a session subscribes to that channel alone and is not woken by every answer.

Keys of no session, with a hash tag of their own that no session id can equal (``!`` is not
in the session-id alphabet), so that they share one slot::

    qb:{!revocations}:list     hash  j:<jti> / s:<sub> -> "<at> <until>" (broker/core/revocations.py)
    qb:{!revocations}:version  string  a fresh random id after every revocation

Every broker reads the version twice a second and the list only when the version changed
(revocations are rare): one GET, on one slot, per broker per half second.

The session scripts only touch keys of one session. Every key known before the call is passed in
KEYS (that is what routes the script to the session's slot on a cluster); three scripts
also read a questionnaire whose id they find inside (the idempotency key's target, the
queue's members) by building its name from the session's own prefix, which keeps the read
on the same slot, and so on the node that runs the script. (The write scripts find that
prefix in the seq key's name, and name the channels from it: scripts/*.lua spell
``q:``, ``events`` and ``outcomes`` too.)
"""

from __future__ import annotations


def prefix(session_id: str) -> str:
    return "qb:{" + session_id + "}:"


def questionnaire_prefix(session_id: str) -> str:
    return prefix(session_id) + "q:"


def claim_key(session_id: str, name: str) -> str:
    return prefix(session_id) + "claim:" + name


def channel_for(session_id: str, outcomes_only: bool = False) -> str:
    """The pub/sub channel of a session's notices: of every write, or of outcomes only."""
    return prefix(session_id) + ("outcomes" if outcomes_only else "events")


def queue_keys(session_id: str) -> list[str]:
    return [prefix(session_id) + "queue", prefix(session_id) + "seq"]


def presence_keys(session_id: str) -> list[str]:
    return [prefix(session_id) + "clients", prefix(session_id) + "seen"]


REVOCATIONS_KEYS = ["qb:{!revocations}:list", "qb:{!revocations}:version"]
