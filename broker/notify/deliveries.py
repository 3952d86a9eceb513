"""Durable delivery: a notification waits in the store until a broker delivered it or gave
it up, so one that a stopped (or killed) broker was holding is sent by another.

The broker that claims a moment (triggers.py) adds the notification to the store's
deliveries (``Store.add_delivery``: on Redis a stream read by one consumer group) and
returns: nothing on the answer path waits for it. Every broker with routes takes
deliveries as its dispatcher has room (at once when it added one itself, else every
``POLL`` seconds) under a consumer name of its own, hands each to its dispatcher, marks
those it still holds alive every quarter of the visibility timeout, and finishes each once
it is sent, skipped or given up. A delivery whose broker stopped marking it alive is taken
over by the next broker that asks after ``visibility`` seconds (its attempts start again;
the notification's id, the webhook's Idempotency-Key, stays the same).

Each moment is still claimed once per route (the claim), so each is added once; a broker
killed in the middle of an attempt is the one case where a receiver may get it twice, with
the same id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from typing import Final

import msgspec

from broker.notify.channel import Channel
from broker.notify.dispatch import Dispatcher
from broker.notify.notification import Notification
from broker.store.base import Store, StoreUnavailable

log = logging.getLogger("qbroker.notify")

POLL: Final = 0.5  # seconds between looks for deliveries added or left by other brokers
_TAKE_AT_MOST: Final = 100


class Delivery(msgspec.Struct, frozen=True):
    """What the store keeps of one notification to deliver: the route (its number in the
    routes file, the same on every broker) and the notification (with its link token's ``jti``)."""

    route: int
    note: Notification


_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(Delivery)


def consumer_name() -> str:
    """This process's name among the brokers taking deliveries: the host, the pid (which
    an operator, or a test, can find) and a random part (a restart is someone else)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class DeliveryQueue:
    """Moves deliveries between the store and this process's dispatcher (``start`` .. ``stop``)."""

    def __init__(
        self, store: Store, channels: Mapping[int, Channel], dispatcher: Dispatcher, *, visibility: float
    ) -> None:
        self.store = store
        self.channels = channels
        self.dispatcher = dispatcher
        self.visibility = visibility
        self.consumer = consumer_name()
        dispatcher.finished = self._finished
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def put(self, route: int, note: Notification) -> None:
        """Keep ``note`` for delivery through ``route`` (raises ``StoreUnavailable``)."""
        await self.store.add_delivery(_ENCODER.encode(Delivery(route, note)))
        self._wake.set()

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._take_loop(), name="qbroker-notify-take"))
        self._tasks.append(asyncio.create_task(self._keep_loop(), name="qbroker-notify-keep"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    async def _take_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL)
            self._wake.clear()
            try:
                await self.take()
            except StoreUnavailable:
                pass  # the next look tries again
            except Exception:  # the loop must survive anything
                log.exception("taking notification deliveries failed")

    async def take(self) -> None:
        """Hand the deliveries this process may take now to its dispatcher."""
        room = min(self.dispatcher.room, _TAKE_AT_MOST)
        if room == 0:
            return
        for delivery_id, record in await self.store.take_deliveries(self.consumer, room, self.visibility):
            try:
                delivery = _DECODER.decode(record)
            except msgspec.DecodeError:
                log.warning("notification delivery unreadable: dropped", extra={"delivery": delivery_id})
                await self.store.finish_delivery(delivery_id)
                continue
            channel = self.channels.get(delivery.route)
            if channel is None:  # (brokers with different routes files)
                log.warning(
                    "notification dropped: no such route here",
                    extra={"route": delivery.route, "notification": delivery.note.id},
                )
                await self.store.finish_delivery(delivery_id)
                continue
            self.dispatcher.submit(channel, delivery.note, ticket=delivery_id)

    async def _keep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.visibility / 4)
            try:
                await self.store.keep_deliveries(self.consumer, self.dispatcher.tickets())
            except StoreUnavailable:
                pass
            except Exception:
                log.exception("marking notification deliveries alive failed")

    async def _finished(self, delivery_id: str) -> None:
        await self.store.finish_delivery(delivery_id)
