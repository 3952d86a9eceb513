"""The Redis store's browser push subscriptions (keys.py: ``push_keys``), one script per call.

Every scope's keys share the ``{/push}`` hash tag, so the lookup for a session, which names
up to 130 scopes (the session, each prefix with ``*``, and ``*``), is one script on one slot
of a cluster; the scopes nobody subscribed under cost an HVALS of a missing key each.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec
from redis.typing import EncodableT

from broker.core.push import PushSubscription, subscription_id
from broker.core.scopes import covering_scopes
from broker.store.redis.commands import Commands, ms
from broker.store.redis.connections import reachable
from broker.store.redis.keys import push_keys
from broker.store.redis.scripts import PUSH_ADD, PUSH_LIST, PUSH_REMOVE

_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(PushSubscription)


class PushSubscriptions:
    def __init__(self, commands: Commands) -> None:
        self._commands = commands
        self._add = commands.register(PUSH_ADD)
        self._remove = commands.register(PUSH_REMOVE)
        self._list = commands.register(PUSH_LIST)

    async def add(self, subscription: PushSubscription, limit: int) -> None:
        lifetime = ms(max(subscription.expires - subscription.created, 1.0))
        args: list[EncodableT] = [
            subscription.id,
            _ENCODER.encode(subscription),
            repr(subscription.expires),
            repr(subscription.created),
            limit,
            lifetime,
        ]
        with reachable("add_push_subscription"):
            await self._commands.run(self._add, push_keys(subscription.scope), args)

    async def remove(self, scope: str, endpoint: str) -> bool:
        with reachable("remove_push_subscription"):
            removed = await self._commands.run(self._remove, push_keys(scope), [subscription_id(endpoint)])
        return int(removed) == 1

    async def covering(self, session_id: str, now: float) -> list[PushSubscription]:
        keys = [push_keys(scope)[0] for scope in covering_scopes(session_id)]
        with reachable("push_subscriptions"):
            packed = await self._commands.run(self._list, keys, [])
        found = []
        for record in packed:
            try:
                subscription = _DECODER.decode(bytes(record))
            except msgspec.DecodeError:
                continue  # (not one of ours: never sent to)
            if subscription.expires > now and math.isfinite(subscription.expires):
                found.append(subscription)
        return found
