"""The inbox's pure rules (broker/core/inbox.py): entries, when they move, order, pages, cursors."""

from __future__ import annotations

import base64

import msgspec
import pytest

from broker.core import inbox
from broker.core.errors import BrokerError
from broker.core.inbox import Entry, entry_of, next_entry
from broker.core.machine import Abort, apply
from tests.helpers.machine import T0, answer, cancel, clarify, draft, new_questionnaire, resume


def an_entry(
    session_id: str = "s", questionnaire_id: str = "q", status: str = "in_progress", created_at: float = T0
) -> Entry:
    return Entry(0, status, session_id, questionnaire_id, "Label", "Prompt?", 0, 1, created_at, created_at)


# --- entries ------------------------------------------------------------------------


def test_a_new_questionnaire_s_entry_shows_its_first_question() -> None:
    state = new_questionnaire()
    assert entry_of(state) == Entry(
        step=0,
        status="in_progress",
        session_id=state.session_id,
        questionnaire_id=state.id,
        label="pick",
        prompt="Pick one for pick?",
        index=0,
        total=3,
        created_at=T0,
        updated_at=T0,
        asked_by=None,
    )


def test_the_wire_item_has_exactly_the_documented_fields() -> None:
    entry = entry_of(new_questionnaire())
    assert entry is not None
    assert entry.item(2) == {
        "sessionId": "sess-1",
        "questionnaireId": "qn-1",
        "status": "in_progress",
        "label": "pick",
        "prompt": "Pick one for pick?",
        "index": 0,
        "total": 3,
        "createdAt": T0,
        "updatedAt": T0,
        "askedBy": None,
        "clients": 2,
    }


def test_an_answer_moves_the_entry_to_the_next_question() -> None:
    before = new_questionnaire()
    after = answer(before, "a", now=T0 + 5)
    entry = next_entry(entry_of(before), after)
    assert entry is not None
    assert (entry.index, entry.label, entry.updated_at, entry.step) == (1, "checks", T0 + 5, 1)


def test_a_draft_leaves_the_entry_as_it_was() -> None:
    before = new_questionnaire()
    previous = entry_of(before)
    assert next_entry(previous, draft(before, "a", now=T0 + 9)) is previous


def test_without_a_previous_entry_a_draft_s_state_gives_one() -> None:
    drafted = draft(new_questionnaire(), "a", now=T0 + 9)
    entry = next_entry(None, drafted)
    assert entry is not None and entry.updated_at == T0 + 9


def test_a_clarification_request_makes_the_entry_wait_for_the_agent_on_the_same_question() -> None:
    before = answer(new_questionnaire(), "a")
    entry = next_entry(entry_of(before), clarify(before, now=T0 + 20))
    assert entry is not None
    assert (entry.status, entry.index, entry.label, entry.updated_at) == ("needs_clarification", 1, "checks", T0 + 20)


def test_a_resume_makes_the_entry_wait_for_the_person_again() -> None:
    asked = clarify(new_questionnaire())
    entry = next_entry(entry_of(asked), resume(asked, now=T0 + 30))
    assert entry is not None and (entry.status, entry.updated_at) == ("in_progress", T0 + 30)


@pytest.mark.parametrize(
    "end",
    [
        lambda s: cancel(s),
        lambda s: apply(s, Abort(), T0 + 1),
        lambda s: answer(answer(answer(s, "a"), "unit"), "yes"),
    ],
    ids=["cancelled", "aborted", "completed"],
)
def test_an_ended_questionnaire_has_no_entry(end: object) -> None:
    state = new_questionnaire()
    ended = end(state)  # type: ignore[operator]
    assert entry_of(ended) is None
    assert next_entry(entry_of(state), ended) is None


def test_an_entry_packs_and_unpacks_to_itself() -> None:
    entry = msgspec.structs.replace(an_entry(), asked_by="deploy-bot", prompt="Ünïcode ✓")
    assert inbox.unpack(inbox.pack(entry)) == entry


def test_unpacking_anything_else_raises_a_value_error() -> None:
    for junk in (b"", b"\x90", msgspec.msgpack.encode([1, 2, 3]), b"\xc1"):
        with pytest.raises(ValueError):
            inbox.unpack(junk)


def test_the_moment_is_the_packed_prefix_that_says_step_and_status() -> None:
    entry = an_entry()
    packed = inbox.pack(entry)
    n = inbox.moment_length(entry)
    moved_step = inbox.pack(msgspec.structs.replace(entry, step=300, updated_at=T0 + 1))
    moved_status = inbox.pack(msgspec.structs.replace(entry, status="needs_clarification"))
    drafted = inbox.pack(msgspec.structs.replace(entry, updated_at=T0 + 99))
    assert drafted[:n] == packed[:n]
    assert moved_step[:n] != packed[:n]
    assert moved_status[:n] != packed[:n]
    assert packed[n:] != drafted[n:]


# --- order and pages ----------------------------------------------------------------


def test_waiting_for_the_person_comes_first_then_oldest_first() -> None:
    rows = [
        (an_entry("a", "1", "needs_clarification", T0), 0),
        (an_entry("b", "2", "in_progress", T0 + 2), 0),
        (an_entry("c", "3", "in_progress", T0 + 1), 0),
        (an_entry("d", "4", "needs_clarification", T0 - 5), 0),
    ]
    assert [entry.questionnaire_id for entry, _ in inbox.ordered(rows)] == ["3", "2", "4", "1"]


def test_equal_times_are_ordered_by_session_then_questionnaire() -> None:
    rows = [(an_entry("b", "1"), 0), (an_entry("a", "2"), 0), (an_entry("a", "1"), 0)]
    assert [(e.session_id, e.questionnaire_id) for e, _ in inbox.ordered(rows)] == [("a", "1"), ("a", "2"), ("b", "1")]


def test_pages_go_by_session_then_as_the_list_within_it() -> None:
    rows = [
        (an_entry("b", "1", "in_progress", T0 + 5), 0),
        (an_entry("a", "2", "needs_clarification", T0), 0),
        (an_entry("a", "3", "in_progress", T0 + 9), 0),
        (an_entry("a", "4", "in_progress", T0 + 1), 0),
    ]
    assert [entry.questionnaire_id for entry, _ in inbox.paged(rows, None)] == ["4", "3", "2", "1"]


def test_a_page_goes_on_after_its_key_even_when_that_item_left() -> None:
    rows = [(an_entry(f"s{i % 3}", f"q{i}", created_at=T0 + i), 0) for i in range(9)]
    ordered = inbox.paged(rows, None)
    after = ordered[3][0].page_key
    remaining = [row for row in rows if row[0].questionnaire_id != ordered[3][0].questionnaire_id]
    assert inbox.paged(remaining, after) == ordered[4:]


def test_the_key_after_a_session_comes_after_its_every_item_and_before_the_next_session() -> None:
    rows = [(an_entry("a", "1", "needs_clarification", T0 + 1e9), 0), (an_entry("a:", "2"), 0)]
    assert [e.session_id for e, _ in inbox.paged(rows, inbox.after_session("a"))] == ["a:"]


@pytest.mark.parametrize("text", ["1", "100", "500"])
def test_a_limit_within_bounds_is_taken(text: str) -> None:
    assert inbox.parse_limit(text) == int(text)


@pytest.mark.parametrize("text", ["0", "501", "-1", "1.5", "", " 5", "abc", "٣"])
def test_a_limit_out_of_bounds_or_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(BrokerError) as info:
        inbox.parse_limit(text)
    assert info.value.code == "invalid_arguments"
    assert info.value.message.startswith("inbox: limit")


def test_a_cursor_is_opaque_url_safe_text() -> None:
    text = inbox.cursor(("alice:build", 1, T0 + 0.5, "7b1c"))
    assert text.isascii() and "=" not in text and "/" not in text and "+" not in text
    assert inbox.parse_cursor(text) == ("alice:build", 1, T0 + 0.5, "7b1c")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a cursor!",
        "AAAA",
        base64.urlsafe_b64encode(msgspec.msgpack.encode([1, 0, 1.0, "s", "q"])).decode(),  # (the list's order)
        base64.urlsafe_b64encode(msgspec.msgpack.encode([3, "s", 0, 1.0, "q"])).decode(),
        base64.urlsafe_b64encode(msgspec.msgpack.encode([2, "s", "0", 1.0, "q"])).decode(),
        base64.urlsafe_b64encode(msgspec.msgpack.encode([2, "s", 0, 1.0])).decode(),
        base64.urlsafe_b64encode(msgspec.msgpack.encode({"a": 1})).decode(),
    ],
)
def test_a_cursor_the_api_did_not_give_is_refused(text: str) -> None:
    with pytest.raises(BrokerError) as info:
        inbox.parse_cursor(text)
    assert info.value.code == "invalid_arguments"


# --- frames -------------------------------------------------------------------------


def test_the_inbox_frame_lists_the_items_in_order() -> None:
    rows = [(an_entry("b", "2", created_at=T0 + 1), 1), (an_entry("a", "1"), 0)]
    frame = inbox.inbox_frame(rows)
    assert frame["type"] == "inbox"
    assert [item["questionnaireId"] for item in frame["items"]] == ["1", "2"]
    assert frame["items"][1]["clients"] == 1


def test_an_item_frame_carries_the_item() -> None:
    entry = an_entry()
    assert inbox.item_frame(entry, 3) == {"type": "inbox_item", "item": entry.item(3)}


def test_a_removed_frame_says_how_it_ended() -> None:
    state = new_questionnaire()
    assert inbox.removed_frame(cancel(state)) == {
        "type": "inbox_removed",
        "sessionId": state.session_id,
        "questionnaireId": state.id,
        "status": "cancelled",
        "cancellationReason": "user_cancelled",
    }
    done = answer(answer(answer(state, "a"), "unit"), "yes")
    assert inbox.removed_frame(done) == {
        "type": "inbox_removed",
        "sessionId": state.session_id,
        "questionnaireId": state.id,
        "status": "completed",
    }


def test_the_entry_says_who_asked() -> None:
    state = msgspec.structs.replace(new_questionnaire(), asked_by="deploy-bot")
    entry = entry_of(state)
    assert entry is not None and entry.item(0)["askedBy"] == "deploy-bot"
