"""Records: states packed for the store and unpacked, each questionnaire's questions done once."""

from __future__ import annotations

from collections.abc import Callable

import msgpack
import msgspec
import pytest

from broker.core.actors import Actor, ClientInfo
from broker.core.machine import Questionnaire
from broker.store import records as records_module
from broker.store.records import Records, from_msgpack, to_msgpack
from tests.helpers.machine import answer, cancel, clarify, draft, new_questionnaire, resume
from tests.helpers.samples import REVIEWER, TARGET, TONE, multi, single

SAMPLES = {
    "new": lambda: new_questionnaire(),
    "drafted": lambda: draft(new_questionnaire(), "a"),
    "suspended": lambda: clarify(draft(new_questionnaire(), "a")),
    "resumed": lambda: resume(clarify(new_questionnaire())),
    "answered, with Other": lambda: answer(new_questionnaire(single(allowOther=True), multi()), other="mine"),
    "cancelled": lambda: cancel(new_questionnaire()),
    "asked by someone": lambda: msgspec.structs.replace(answer(new_questionnaire(), "a"), asked_by="build-agent"),
    "with its own client wait": lambda: msgspec.structs.replace(new_questionnaire(), client_wait=900.0),
    "answered by a client, in a host's form": lambda: msgspec.structs.replace(
        answer(
            answer(new_questionnaire(single(options=("a",)), multi(options=("b",)), single("last")), "a"),
            "b",
            other="x",
        ),
        answered_by=Actor("alice", "client", ClientInfo("web", "Firefox")),
        in_host_since=1_800_000_123.5,
    ),
    "options described, bounds set, no Other": lambda: new_questionnaire(
        TARGET,
        REVIEWER,
        TONE,
        multi("bounded", minSelections=1, maxSelections=2, allowOther=False),
        multi(minSelections=1, maxSelections=2, allowOther=False),
        multi("open", minSelections=0),
    ),
    "answered by an agent": lambda: msgspec.structs.replace(
        answer(new_questionnaire(), "a"), answered_by=Actor(None, "agent")
    ),
}


def plainly_packed(state: Questionnaire) -> bytes:
    """A record as packed without any remembering (and by brokers before it)."""
    packed: bytes = msgpack.packb(state.to_record(), use_bin_type=True)
    return packed


@pytest.mark.parametrize("make", SAMPLES.values(), ids=SAMPLES.keys())
def test_a_packed_record_holds_what_the_state_says(make: Callable[[], Questionnaire]) -> None:
    state = make()
    records = Records()
    for _ in range(2):  # first with the questions packed anew, then with them remembered
        assert msgpack.unpackb(records.pack(state), raw=False) == state.to_record()


@pytest.mark.parametrize("make", SAMPLES.values(), ids=SAMPLES.keys())
def test_a_record_is_packed_byte_for_byte_as_msgpack_python_packs_it(make: Callable[[], Questionnaire]) -> None:
    """Brokers before this one packed with msgpack-python: same map, same bytes."""
    state = make()
    record = state.to_record()
    record["questions"] = record.pop("questions")  # (packed last, after the rest)
    records = Records()
    for _ in range(2):
        assert records.pack(state) == msgpack.packb(record, use_bin_type=True)


def test_packing_a_notice_head_matches_msgpack_python() -> None:
    value = ["sid-1", "qn-1", 2**40, "in_progress", b"\x00" * 70_000, None, False, 1.5, -3]
    assert to_msgpack(value) == msgpack.packb(value, use_bin_type=True)
    assert from_msgpack(msgpack.packb(value, use_bin_type=True)) == value


@pytest.mark.parametrize("make", SAMPLES.values(), ids=SAMPLES.keys())
def test_a_record_unpacks_to_the_state_it_was_packed_from(make: Callable[[], Questionnaire]) -> None:
    state = make()
    assert Records().unpack(Records().pack(state)) == state  # by another process
    records = Records()
    assert records.unpack(records.pack(state)) == state  # by this one
    assert Records().unpack(plainly_packed(state)) == state  # packed by an older broker


@pytest.mark.parametrize("make", SAMPLES.values(), ids=SAMPLES.keys())
def test_questions_learned_from_a_record_pack_as_the_state_spells_them(make: Callable[[], Questionnaire]) -> None:
    """A process keeps the questions of a record it decoded as that record spelled them;
    its own later writes of that questionnaire are packed as any process would pack them."""
    receiver = Records()
    learned = receiver.unpack(Records().pack(make()))
    later = msgspec.structs.replace(learned, version=learned.version + 1)
    assert receiver.pack(later) == Records().pack(later)
    assert receiver.unpack(receiver.pack(later)) == later


def test_a_later_record_of_a_known_questionnaire_reuses_its_questions() -> None:
    records = Records()
    first = records.unpack(plainly_packed(new_questionnaire()))
    later = records.unpack(plainly_packed(answer(new_questionnaire(), "a")))
    assert later.questions is first.questions
    assert later.answers and later.step == 1


def counting_decodes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often records.py decodes, from now on: a record through a dict (from_msgpack),
    and questions straight into Question values."""
    counts = {"through a dict": 0, "questions": 0}
    decode_questions = records_module._decode_questions

    def through_a_dict(data: bytes) -> object:
        counts["through a dict"] += 1
        return from_msgpack(data)

    def questions(data: msgspec.Raw) -> object:
        counts["questions"] += 1
        return decode_questions(data)

    monkeypatch.setattr(records_module, "from_msgpack", through_a_dict)
    monkeypatch.setattr(records_module, "_decode_questions", questions)
    return counts


@pytest.mark.parametrize("questionnaire_id", ["qn-1", "0f9a3c1e-1111-2222-3333-444455556666", "q" * 300])
def test_a_record_packed_here_of_a_known_questionnaire_decodes_only_its_rest(
    questionnaire_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its questions are recognised by their bytes: no decoding them, no comparing them; the
    rest is read typed, through no dict. (An id longer than a str 8 holds is not looked up:
    its questions are found as bytes and decoded straight into questions.)"""
    state = msgspec.structs.replace(answer(new_questionnaire(), "a"), id=questionnaire_id)
    packer, receiver = Records(), Records()
    receiver.unpack(packer.pack(state))  # the receiver learns the questions
    decoded = counting_decodes(monkeypatch)
    unpacked = receiver.unpack(packer.pack(state))
    assert unpacked == state
    looked_up = len(questionnaire_id) < 256
    assert decoded == {"through a dict": 0, "questions": 0 if looked_up else 1}


@pytest.mark.parametrize("make", SAMPLES.values(), ids=SAMPLES.keys())
def test_a_record_another_process_packed_has_its_questions_decoded_straight_and_kept(
    make: Callable[[], Questionnaire], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No dict per question and option, none for the rest: the questions are decoded straight
    into Question values, then known, and the next record of that questionnaire reuses them."""
    state = make()
    packer, receiver = Records(), Records()
    decoded = counting_decodes(monkeypatch)
    first = receiver.unpack(packer.pack(state))
    assert first == state
    assert decoded == {"through a dict": 0, "questions": 1}
    if not state.is_terminal:  # (an ended questionnaire is forgotten at once)
        later = msgspec.structs.replace(state, version=state.version + 1)
        assert receiver.unpack(packer.pack(later)).questions is first.questions
        assert decoded == {"through a dict": 0, "questions": 1}


def test_a_record_of_a_known_questionnaire_packed_elsewhere_is_decoded_whole() -> None:
    records = Records()
    state = answer(new_questionnaire(), "a")
    records.unpack(records.pack(new_questionnaire()))
    assert records.unpack(plainly_packed(state)) == state  # questions in the middle: no tail to find


def test_questions_that_differ_from_the_remembered_ones_are_built_from_the_record() -> None:
    records = Records()
    known = new_questionnaire()
    records.pack(known)
    record = known.to_record()
    record["questions"][0] = {**record["questions"][0], "label": "Another label"}
    state = records.unpack(msgpack.packb(record, use_bin_type=True))
    assert state.questions[0].label == "Another label"
    assert state.questions is not known.questions


def test_a_state_with_other_questions_under_the_same_id_packs_its_own() -> None:
    records = Records()
    records.pack(new_questionnaire(single()))
    other = new_questionnaire(multi())
    assert msgpack.unpackb(records.pack(other), raw=False) == other.to_record()


def test_only_the_latest_questionnaires_are_remembered() -> None:
    records = Records(size=2)
    states = [msgspec.structs.replace(new_questionnaire(), id=f"qn-{n}") for n in range(3)]
    seen = [records.unpack(plainly_packed(state)) for state in states]
    assert records.unpack(plainly_packed(states[2])).questions is seen[2].questions
    assert records.unpack(plainly_packed(states[0])).questions is not seen[0].questions  # forgotten


def test_a_questionnaire_remembered_again_is_the_latest() -> None:
    """Its questions changed (another broker's record said otherwise): it goes to the back
    of the queue, and the oldest of the others is the one forgotten."""
    records = Records(size=2)
    first, second, third = (msgspec.structs.replace(new_questionnaire(), id=f"qn-{n}") for n in range(3))
    records.unpack(plainly_packed(first))
    seen_second = records.unpack(plainly_packed(second))
    changed = msgspec.structs.replace(new_questionnaire(single(allowOther=True), multi()), id="qn-0")
    kept = records.unpack(plainly_packed(changed))
    records.unpack(plainly_packed(third))
    assert records.unpack(plainly_packed(changed)).questions is kept.questions
    assert records.unpack(plainly_packed(second)).questions is not seen_second.questions  # forgotten


def test_a_malformed_record_raises() -> None:
    records = Records()
    with pytest.raises((KeyError, TypeError)):
        records.unpack(msgpack.packb({"id": "qn-1"}))
    with pytest.raises((KeyError, TypeError, AttributeError)):
        records.unpack(msgpack.packb([1, 2, 3]))
    with pytest.raises(ValueError):
        records.unpack(b"\x93\x01")  # cut short
    with pytest.raises(ValueError):
        records.unpack(msgpack.packb({"id": "qn-1"}) + b"\x00")  # trailing bytes


@pytest.mark.parametrize("asked_by", [None, "build-agent"])
def test_a_record_of_a_broker_before_asked_by_still_loads(asked_by: str | None) -> None:
    """Such a record has one field less: it is decoded whole, whoever packed the questions,
    and its questionnaire was asked by nobody said."""
    state = msgspec.structs.replace(answer(new_questionnaire(), "a"), asked_by=asked_by)
    old = state.to_record()
    del old["askedBy"]
    packed = msgpack.packb(old, use_bin_type=True)
    records = Records()
    records.pack(state)  # its questions remembered
    for reader in (records, Records()):
        assert reader.unpack(packed) == msgspec.structs.replace(state, asked_by=None)
