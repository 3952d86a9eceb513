"""The store's Lua scripts, one file each, read once when the store is imported (they ship
as package data; pyproject.toml).

Every write is one Lua script, so it is one round trip and atomic: compare-and-set checks
the version, maintains the queue and the inbox entry, counts the write, appends the write's
events, renews the retention TTL when it is due (expiry.lua) and publishes the notice in the
same step; one that closes a questionnaire also finds the session's next
head, and returns it with the write's number, so the writer needs no second read.

A retried script (the reply of the first attempt was lost) is harmless: create rewrites the
same record, and compare-and-set reports success again when it finds its own write.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final


def _read(name: str) -> str:
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


# The write scripts start with msgpack.lua (the encoders for what they append to a notice),
# expiry.lua (when a write renews its keys' expiry), write_keys.lua (the keys they were
# passed, or named from the one they were passed) and a prelude (``write_script``) that sets
# the store's publish command (PUBLISH) and how it passes keys (ONE_KEY), so that no call
# has to pass either.
_HELPERS: Final = _read("msgpack.lua") + _read("expiry.lua") + _read("write_keys.lua")
CREATE: Final = _HELPERS + _read("create.lua")
COMPARE_AND_SET: Final = _HELPERS + _read("compare_and_set.lua")

# The inbox's: a session's entries, and the index shard's (written beside the scripts above,
# as a cluster keeps the shard elsewhere; it publishes, so it takes the prelude too).
INBOX: Final = _read("inbox.lua")
INDEX: Final = _read("index.lua")

QUEUE: Final = _read("queue.lua")
EVENTS: Final = _read("events.lua")
HISTORY: Final = _read("history.lua")
HEARTBEAT: Final = _read("heartbeat.lua")
LEAVE: Final = _read("leave.lua")
PRESENCE: Final = _read("presence.lua")
REVOKE: Final = _read("revoke.lua")
REVOCATIONS: Final = _read("revocations.lua")
PUSH_ADD: Final = _read("push_add.lua")
PUSH_REMOVE: Final = _read("push_remove.lua")
PUSH_LIST: Final = _read("push_list.lua")
DELIVERY_ADD: Final = _read("delivery_add.lua")
DELIVERY_TAKE: Final = _read("delivery_take.lua")
DELIVERY_KEEP: Final = _read("delivery_keep.lua")
DELIVERY_FINISH: Final = _read("delivery_finish.lua")


def write_script(body: str, publish: str, *, indexed: bool = False, one_key: bool = False) -> str:
    """A write script with the store's constants: fewer arguments to pack on every call
    (``indexed``: the create also keeps the inbox's index, on one Redis; create.lua;
    ``one_key``: it is passed the questionnaire's hash alone, on one Redis; write_keys.lua)."""
    lua = {True: "true", False: "false"}
    return f"local PUBLISH = '{publish}'\nlocal INDEXED = {lua[indexed]}\nlocal ONE_KEY = {lua[one_key]}\n{body}"
