"""Who acts on a questionnaire: an ``Actor`` (the holder of a token, in a role, and for a
client, which program its hello named). The broker records one with every change
(events.py) and tells a session's clients who answered (``answeredBy``). Pure."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

ActorRole = Literal["agent", "client"]


class ClientInfo(msgspec.Struct, frozen=True):
    """What a client said of itself in its hello."""

    kind: str  # tui | web | bot
    name: str


class Actor(msgspec.Struct, frozen=True):
    """Who made a change: the holder of a token (its ``sub``; None when the token names
    nobody), in a role, and for a client, which program."""

    sub: str | None
    role: ActorRole
    client: ClientInfo | None = None

    def to_wire(self) -> dict[str, Any]:
        client = self.client
        return {
            "sub": self.sub,
            "role": self.role,
            "client": None if client is None else {"kind": client.kind, "name": client.name},
        }

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Actor:
        client = wire.get("client")
        return cls(
            wire.get("sub"), wire["role"], None if client is None else ClientInfo(client["kind"], client["name"])
        )


def actor_from_wire(wire: dict[str, Any] | None) -> Actor | None:
    return None if wire is None else Actor.from_wire(wire)
