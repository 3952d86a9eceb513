"""The memory store's revocations on disk (``<data dir>/revocations``), so that a broker
restarted on the same data dir still refuses what was revoked.

The file is the whole list, msgpack, rewritten on every revocation (they are rare): written
to a temporary file, flushed to disk, then renamed over the old one, so a crash leaves the
old list or the new one, never half of one. Mode 0600, like the secret beside it. A file
that cannot be read stops the broker at start: forgetting revocations silently would let
revoked tokens back in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from broker.core.revocations import Revocation

FILE_NAME: Final = "revocations"
_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(list[Revocation])


class UnreadableRevocations(Exception):
    pass


def read(path: Path) -> list[Revocation]:
    """The revocations kept at ``path`` ([] when there is no file yet)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UnreadableRevocations(f"cannot read the revocations in {path}: {exc}") from exc
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise UnreadableRevocations(f"the revocations in {path} are damaged: {exc}") from exc


def write(path: Path, revocations: list[Revocation]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(_ENCODER.encode(revocations))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
