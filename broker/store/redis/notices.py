"""Notices as the Redis store sends and reads them, and the states of its own writes whose
notices come back to it.

A notice is a msgpack array ``[sid, id, version, status, record, seq, head]``: the record
is the written state (nil when larger than ``NOTICE_STATE_LIMIT``), ``seq`` the write's
number in the session, and ``head`` the next head's record after a write that closed a
questionnaire (false: none; nil: not said). The writer packs the first four; the script
appends the rest (it alone knows the number). A notice of only the first three (an older
broker) is understood too, as "look again". A notice holds answers: it is never logged,
and the notice connections do not let redis-py trace what they read (links.py).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Container
from typing import Any, Final, NamedTuple

import msgspec

from broker.core.machine import Questionnaire
from broker.store.base import NOTICE_STATE_LIMIT, Head, Notice, Record
from broker.store.records import Records, from_msgpack, to_msgpack
from broker.store.redis.keys import channel_bytes

_OWN_RECORDS: Final = 512  # records of this process's latest writes kept to recognise their notices
_SHOWN_KEPT: Final = 64  # notices of shown writes awaited per session (the oldest go: lost ones)


def head_of(state: Questionnaire, seq: int) -> Head:
    """A session's head as a write script names it: the oldest open questionnaire's record."""
    return Head(None if state.is_terminal else state, seq)


def notice_prefix(state: Questionnaire) -> bytes:
    """The notice's first four fields, under the header of the whole 7-field array (the
    script appends the record, the write number and the head)."""
    packed = to_msgpack([state.session_id, state.id, state.version, state.status])
    return b"\x97" + packed[1:]  # fixarray 4 -> fixarray 7


def created_notice(state: Questionnaire, record: bytes, seq: int) -> bytes:
    """The notice of a create, as the create script published it on the session's channel
    (``record``: the state as stored; ``seq``: its write number), for the index shard's."""
    carried = record if len(record) <= NOTICE_STATE_LIMIT else None
    return notice_prefix(state) + to_msgpack(carried) + to_msgpack(seq) + b"\xc0"  # (head: nil)


def notice_start(prefix: bytes, record: bytes) -> bytes:
    """How the notice of a write of ``record`` starts, up to and with its record (one small
    enough to carry), as the write scripts spell it (msgpack.lua: a bin 32)."""
    return b"".join((prefix, b"\xc6", len(record).to_bytes(4, "big"), record))  # (one copy of the record)


def presence_message(session_id: str, clients: int) -> bytes:
    return to_msgpack([session_id, clients])


def decode_presence(data: Any) -> tuple[str, int] | None:
    """A presence message's session id and clients, or None when it is not one (never raises)."""
    if not data or data[0] != 0x92:  # a fixarray of 2; a notice is one of 3 or more
        return None
    try:
        session_id, clients = from_msgpack(data)
    except (ValueError, TypeError):
        return None
    if not isinstance(session_id, str) or type(clients) is not int or clients < 0:
        return None
    return session_id, clients


class _NoticeFields(msgspec.Struct, array_like=True):
    """A whole notice's seven fields, read typed (a shorter array, such as an older broker's
    three, is refused here and read loosely)."""

    session_id: str
    questionnaire_id: str
    version: int
    status: str | None
    record: bytes | None
    seq: int
    head: bytes | bool | None


_decode_fields: Final = msgspec.msgpack.Decoder(_NoticeFields).decode


def decode_notice(data: Any, record_of: Callable[[bytes, str | None, int], Record]) -> Notice | None:
    """The notice in a published message, or None when it is not one (never raises);
    ``record_of`` makes a record's bytes (of a questionnaire and version, when known) a
    ``Record`` (decoded when a receiver asks)."""
    try:
        fields = _decode_fields(data)
    except (ValueError, TypeError):  # (msgspec's errors are ValueErrors)
        return _decode_loosely(data, record_of)  # (which tells a malformed one from a partial one)
    status, seq, head = fields.status, fields.seq, fields.head
    if status is None or seq < 0 or head is True:
        return _decode_loosely(data, record_of)
    return _notice(
        fields.session_id, fields.questionnaire_id, fields.version, status, fields.record, seq, head, record_of
    )


def _decode_loosely(data: Any, record_of: Callable[[bytes, str | None, int], Record]) -> Notice | None:
    """``decode_notice`` for what is not a whole notice of this broker's."""
    try:
        fields = from_msgpack(data)
    except (ValueError, TypeError):
        return None
    if not isinstance(fields, list) or len(fields) < 3:
        return None
    session_id, questionnaire_id, version = fields[:3]
    if not (isinstance(session_id, str) and isinstance(questionnaire_id, str) and type(version) is int):
        return None
    if len(fields) < 7:
        return Notice(session_id, questionnaire_id, version)  # an older broker's: "look again"
    status, record, seq, head = fields[3:7]
    if not (
        isinstance(status, str)
        and (record is None or isinstance(record, bytes))
        and type(seq) is int
        and seq >= 0
        and (head is None or head is False or isinstance(head, bytes))
    ):
        return Notice(session_id, questionnaire_id, version)
    return _notice(session_id, questionnaire_id, version, status, record, seq, head, record_of)


def _notice(
    session_id: str,
    questionnaire_id: str,
    version: int,
    status: str,
    record: bytes | None,
    seq: int,
    head: bytes | bool | None,
    record_of: Callable[[bytes, str | None, int], Record],
) -> Notice:
    next_head: Head | None = None
    if head is False:
        next_head = Head(None, seq)
    elif isinstance(head, bytes):
        try:
            next_head = head_of(record_of(head, None, 0).state(), seq)
        except Exception:  # a malformed record: the receiver reads instead
            next_head = None
    return Notice(
        session_id,
        questionnaire_id,
        version,
        status,
        seq,
        None if record is None else record_of(record, questionnaire_id, version),
        next_head,
    )


class Kept(NamedTuple):
    raw: bytes  # the record as packed
    state: Questionnaire


class OwnWrites:
    """The states of this process's latest writes whose notices will come back here, by
    questionnaire id and version, and the starts of the notices of those whose writer showed
    them itself, by channel; ``followed``: the channels this process subscribes to."""

    def __init__(self, records: Records, followed: Container[bytes]) -> None:
        self.states: OrderedDict[tuple[str, int], Kept] = OrderedDict()
        self.shown: dict[bytes, deque[bytes]] = {}
        self._records = records
        self._followed = followed
        self._unpack = records.unpack

    def pack(self, state: Questionnaire, shown: bool = False) -> bytes:
        """``state`` packed for a write of ours. When the notice of that write will come back
        to this process (it follows the session's every write, or this one is an outcome and
        it follows the session's outcomes), either

        - the write is ``shown``: its writer shows it to this process's clients and wakes
          this process's waiting calls itself, so its notice is nothing new here (as on the
          memory store, which does not tell the writer's process): the store expects it
          (``expect``), and it is recognised by its first bytes and dropped unread; or
        - the state is kept until then: that notice costs a lookup rather than a decoding,
          and takes the state away with it. (Kept any longer, a state is freed when it has
          long left the processor's cache: a miss per object.)"""
        packed = self._records.pack(state)
        if shown:
            return packed
        followed = self._followed
        if channel_bytes(state.session_id) in followed or (
            state.is_outcome and channel_bytes(state.session_id, True) in followed
        ):
            own = self.states
            own[(state.id, state.version)] = Kept(packed, state)
            if len(own) > _OWN_RECORDS:
                own.popitem(last=False)  # the oldest: a notice that did not come
        return packed

    def expect(self, session_id: str, start: bytes) -> bool:
        """Expect the notice of a shown write, which starts with ``start`` (notice_start);
        False: it will not come here (this process does not follow the session)."""
        channel = channel_bytes(session_id)
        if channel not in self._followed:
            return False
        expected = self.shown.get(channel)
        if expected is None:
            expected = self.shown[channel] = deque(maxlen=_SHOWN_KEPT)
        expected.append(start)
        return True

    def unexpect(self, session_id: str, start: bytes) -> bool:
        """A shown write that did not happen, or may not have (then its notice, should it
        come, is read as any other). False: its notice is no longer awaited (it came and was
        dropped unread, or too many came after it), so the write did happen, or may have."""
        expected = self.shown.get(channel_bytes(session_id))
        if expected is None:
            return False
        try:
            expected.remove(start)
        except ValueError:
            return False
        return True

    def seen(self, channel: bytes, data: bytes) -> bool:
        """Whether ``data`` is the notice of a shown write of ours (and forget it)."""
        expected = self.shown.get(channel)
        if not expected:
            return False
        for start in expected:  # (in the order written: the first, nearly always)
            if data.startswith(start):
                expected.remove(start)
                return True
        return False

    def forget(self, channel: bytes | None = None) -> None:
        """The channel (None: every channel) is no longer followed, or its notices may have
        been lost: the shown writes' notices awaited on it will not come."""
        if channel is None:
            self.shown.clear()
        else:
            self.shown.pop(channel, None)

    def record_of(self, raw: bytes, questionnaire_id: str | None = None, version: int = 0) -> Record:
        """A notice's record (of ``questionnaire_id`` at ``version``, when the notice says):
        for a write of ours, the very state it packed (the same bytes, so the same state),
        taken out of the kept ones; any other, decoded when asked for. (Found by id and
        version, then compared: hashing a kilobyte of record twice a write cost more.)"""
        if questionnaire_id is not None:
            kept = self.states.pop((questionnaire_id, version), None)
            if kept is not None and kept.raw == raw:
                return Record.of(kept.state)
        return Record(raw, self._unpack)
