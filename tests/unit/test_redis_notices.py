"""A Redis store's notices as read off the wire (broker/store/redis/notices.py): whole ones
of this broker, an older broker's "look again", and what is not a notice at all."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from broker.store.base import Notice, Record
from broker.store.records import Records
from broker.store.redis.notices import decode_notice
from tests.helpers.machine import answer, new_questionnaire

RECORDS = Records()
STATE = new_questionnaire()
RECORD = RECORDS.pack(STATE)


def record_of(raw: bytes, questionnaire_id: str | None, version: int) -> Record:
    return Record(raw, RECORDS.unpack)


def decoded(*fields: Any) -> Notice | None:
    return decode_notice(msgpack.packb(list(fields), use_bin_type=True), record_of)


def said(notice: Notice | None) -> tuple[Any, ...] | None:
    """Everything a notice says (``==`` compares the first three alone)."""
    if notice is None:
        return None
    record = None if notice.record is None else notice.record.state()
    head = None if notice.head is None else (notice.head.state, notice.head.seq)
    return (notice.session_id, notice.questionnaire_id, notice.version, notice.status, notice.seq, record, head)


def test_a_whole_notice_says_its_status_write_number_and_record() -> None:
    notice = decoded("s1", STATE.id, 0, "in_progress", RECORD, 7, None)
    assert said(notice) == ("s1", STATE.id, 0, "in_progress", 7, STATE, None)


def test_a_notice_too_large_to_carry_its_record_says_the_rest() -> None:
    assert said(decoded("s1", "q1", 4, "in_progress", None, 9, None)) == ("s1", "q1", 4, "in_progress", 9, None, None)


def test_a_notice_that_ended_a_questionnaire_says_the_next_head_or_that_there_is_none() -> None:
    other = answer(new_questionnaire(), "a")
    assert said(decoded("s1", "q1", 5, "completed", None, 9, False)) == ("s1", "q1", 5, "completed", 9, None, (None, 9))
    after = said(decoded("s1", "q1", 5, "completed", None, 9, RECORDS.pack(other)))
    assert after is not None and after[-1] == (other, 9)


def test_extra_fields_after_the_seven_are_left_alone() -> None:
    assert said(decoded("s1", "q1", 4, "in_progress", None, 9, None, "later")) == said(
        decoded("s1", "q1", 4, "in_progress", None, 9, None)
    )


@pytest.mark.parametrize(
    "fields",
    [
        ("s1", "q1", 3),  # an older broker's
        ("s1", "q1", 3, "in_progress"),
        ("s1", "q1", 3, "in_progress", None, 7),  # six fields: no head, not even a nil one
        ("s1", "q1", 3, 7, RECORD, 7, None),  # a status that is no string
        ("s1", "q1", 3, "in_progress", "not bytes", 7, None),
        ("s1", "q1", 3, "in_progress", None, -1, None),  # a negative write number
        ("s1", "q1", 3, "in_progress", None, "7", None),
        ("s1", "q1", 3, "in_progress", None, 7, True),  # a head that is neither bytes nor false
        ("s1", "q1", 3, "in_progress", None, 7, 12),
    ],
)
def test_what_says_less_than_a_whole_notice_means_look_again(fields: tuple[Any, ...]) -> None:
    assert said(decoded(*fields)) == ("s1", "q1", 3, None, 0, None, None)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never used in msgpack
        msgpack.packb({"s": 1}),
        msgpack.packb(["s1", "q1"]),
        msgpack.packb([1, "q1", 3]),
        msgpack.packb(["s1", "q1", "3"]),
        msgpack.packb(["s1", "q1", 3.0]),
    ],
)
def test_what_is_no_notice_is_none(data: bytes) -> None:
    assert decode_notice(data, record_of) is None


def test_a_malformed_head_record_leaves_the_head_unsaid() -> None:
    assert said(decoded("s1", "q1", 5, "completed", None, 9, b"\xc1")) == ("s1", "q1", 5, "completed", 9, None, None)
