"""Notices: what a store tells the brokers about a write, and how two of them compare."""

from __future__ import annotations

import pytest

from broker.store.base import Head, Notice, Record
from tests.helpers.machine import new_questionnaire


def test_a_notice_is_known_by_its_session_questionnaire_and_version_alone() -> None:
    state = new_questionnaire()
    full = Notice("s1", "q1", 3, "in_progress", 7, Record.of(state), Head(state, 7))
    bare = Notice("s1", "q1", 3)  # an older broker's "look again"
    assert full == bare and hash(full) == hash(bare) and len({full, bare}) == 1
    assert (bare.status, bare.seq, bare.record, bare.head) == (None, 0, None, None)
    assert full != Notice("s1", "q1", 4) and full != Notice("s2", "q1", 3) and full != Notice("s1", "q2", 3)
    assert full != ("s1", "q1", 3)
    assert repr(full) == "Notice(session_id='s1', questionnaire_id='q1', version=3, status='in_progress', seq=7)"
    with pytest.raises(AttributeError):
        full.seq = 8  # type: ignore[misc]  # frozen
