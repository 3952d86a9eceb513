"""Questionnaire states as stored records (msgpack), each questionnaire's questions done once.

A record holds the whole state, questions included, and every write stores it again; every
notice carries it to the other processes. The questions are most of it and never change
once a questionnaire starts, so a process keeps, for the questionnaires it has seen lately,
their questions packed (a write packs the rest and appends them) and built (a record whose
questions equal them reuses them instead of building some forty objects again). A record
packed here ends with those very bytes, so for one of a known questionnaire only the rest is
decoded. One packed so by another process, of a questionnaire not known here yet, has its
questions found as bytes and decoded straight into Question values (msgspec, typed: no dict
per question and option to build them from), and is known from then on. The rest, too, is
packed from and read into typed fields (``_RestRecord``), not through a dict built for it.

A questionnaire is forgotten as soon as a record of it ends it (no write follows an end):
its forty-odd objects are freed while they are still in the processor's cache, not a
thousand questionnaires later, when freeing them costs a cache miss each (under load, ~4% of
a Redis broker's CPU went to that, on the path of every start).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final, NamedTuple

import msgspec

from broker.core.actors import Actor
from broker.core.events import Event
from broker.core.machine import Answer, Clarification, Questionnaire, Selection
from broker.core.model import Question

KNOWN_QUESTIONNAIRES: Final = 1024  # questionnaires whose questions a process keeps

# msgpack, as msgpack-python's packb(use_bin_type=True) / unpackb(raw=False) spell it, byte for
# byte, at a third of the cost: records and notices are packed on every write and unpacked
# on every notice. A malformed input raises msgspec.DecodeError (a ValueError).
to_msgpack: Final = msgspec.msgpack.Encoder().encode
from_msgpack: Final = msgspec.msgpack.Decoder().decode

# Events as the stores keep them: msgpack maps of the Event struct's fields (those left at
# their defaults left out), decoded straight into Event values.
pack_event: Final = msgspec.msgpack.Encoder().encode
unpack_event: Final = msgspec.msgpack.Decoder(Event).decode


def _map_head(entries: int) -> bytes:
    """How msgpack starts a map of ``entries`` entries: a fixmap up to 15, then a map 16."""
    return bytes((0x80 + entries,)) if entries <= 15 else b"\xde" + entries.to_bytes(2, "big")


# A record is a map of one entry per field; without its questions, of one entry less. A
# record of a broker before a field was added has fewer: it does not start with
# ``_ID_HEAD`` and is decoded whole (``from_record`` fills in what it lacks).
_FIELDS: Final = len(Questionnaire("", "", (), 0.0, 0.0).to_record())
_REST_HEAD: Final = _map_head(_FIELDS - 1)
_WHOLE_HEAD: Final = _map_head(_FIELDS)
_QUESTIONS_KEY: Final[bytes] = to_msgpack("questions")


# A record packed here starts with its id: {"id": <str 8 or fixstr>, ...
_ID_HEAD: Final = _WHOLE_HEAD + to_msgpack("id")


class _AnswerRecord(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    """An answer as a record spells it (``Answer.to_wire``: ``other`` only when given)."""

    question_id: str
    selected_option_ids: tuple[str, ...]
    other: str | None = None


class _SelectionRecord(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    """A draft as a record spells it (``Selection.to_wire``)."""

    selected_option_ids: tuple[str, ...]
    other: str | None = None


class _ClarificationRecord(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    """A clarification as a record spells it (``Clarification.to_wire``)."""

    revision: int
    question_id: str
    request: str
    response: str | None = None


class _RestRecord(msgspec.Struct, frozen=True, rename="camel"):
    """A record but its questions: ``Questionnaire.to_record_but_questions``'s map, its keys
    in that order, packed and read by msgspec from and into these fields rather than through
    a dict built for it (the byte-for-byte tests hold both ways to the same bytes). An Actor
    packs and reads as ``Actor.to_wire`` spells it."""

    id: str
    session_id: str
    created_at: float
    updated_at: float
    status: str
    revision: int
    step: int
    version: int
    answers: tuple[_AnswerRecord, ...]
    draft: _SelectionRecord | None
    clarifications: tuple[_ClarificationRecord, ...]
    cancellation_reason: str | None
    asked_by: str | None
    client_wait: float | None
    answered_by: Actor | None
    in_host_since: float | None


class _Record(_RestRecord, frozen=True):
    """A whole record of this layout, its questions left as bytes (skipped, not decoded)."""

    questions: msgspec.Raw


_decode_record: Final = msgspec.msgpack.Decoder(_Record).decode


def _rest_of(state: Questionnaire) -> _RestRecord:
    draft, clarifications = state.draft, state.clarifications
    return _RestRecord(
        state.id,
        state.session_id,
        state.created_at,
        state.updated_at,
        state.status,
        state.revision,
        state.step,
        state.version,
        tuple(
            [_AnswerRecord(a.question_id, a.selection.selected_option_ids, a.selection.other) for a in state.answers]
        ),
        None if draft is None else _SelectionRecord(draft.selected_option_ids, draft.other),
        tuple([_ClarificationRecord(c.revision, c.question_id, c.request, c.response) for c in clarifications])
        if clarifications
        else (),
        state.cancellation_reason,
        state.asked_by,
        state.client_wait,
        state.answered_by,
        state.in_host_since,
    )


def _state_of(record: _RestRecord, questions: tuple[Question, ...]) -> Questionnaire:
    """The state a record of this layout holds (``Questionnaire.from_record``, typed)."""
    draft = record.draft
    return Questionnaire(
        record.id,
        record.session_id,
        questions,
        record.created_at,
        record.updated_at,
        record.status,  # type: ignore[arg-type]  # (a status this broker wrote, or one like it)
        record.revision,
        record.step,
        record.version,
        tuple([Answer(a.question_id, Selection(a.selected_option_ids, a.other)) for a in record.answers]),
        None if draft is None else Selection(draft.selected_option_ids, draft.other),
        tuple([Clarification(c.revision, c.question_id, c.request, c.response) for c in record.clarifications]),
        record.cancellation_reason,  # type: ignore[arg-type]
        record.asked_by,
        record.client_wait,
        record.answered_by,
        record.in_host_since,
    )


class _Known(NamedTuple):
    questions: tuple[Question, ...]
    tail: bytes  # how a record packed here ends: the "questions" key, then the questions packed


# A record's questions, found as bytes (``_Record``) and decoded straight into Question values
# (no dict per question and option, no Python to build them from those).
_decode_questions: Final = msgspec.msgpack.Decoder(tuple[Question, ...]).decode


class Records:
    """Packs states into records and unpacks them, remembering recent questions."""

    def __init__(self, size: int = KNOWN_QUESTIONNAIRES) -> None:
        self._size = size
        # Questionnaire id -> its questions, oldest first (an OrderedDict: the oldest is one
        # link away, where a dict used as a queue scans past every slot deleted before it).
        self._known: OrderedDict[str, _Known] = OrderedDict()

    def pack(self, state: Questionnaire) -> bytes:
        rest = to_msgpack(_rest_of(state))  # (starts with _REST_HEAD)
        if state.is_terminal:  # its last write: used once more, then forgotten
            known = self._known.pop(state.id, None)
            if known is None or known.questions is not state.questions:
                known = _spelled(state.questions)
        else:
            known = self._known.get(state.id)
            if known is None or known.questions is not state.questions:
                known = self._remember(state.id, state.questions)
        return b"".join((_WHOLE_HEAD, rest[len(_REST_HEAD) :], known.tail))

    def unpack(self, packed: bytes) -> Questionnaire:
        known = self._known_by_tail(packed)
        fresh = known is None
        record = None
        if packed.startswith(_ID_HEAD):  # this layout: the rest read typed, the questions skipped
            try:
                record = _decode_record(packed)
            except (msgspec.DecodeError, msgspec.ValidationError):
                known = None  # (decoded whole instead, which says what is wrong)
            else:
                if fresh:
                    known = self._packed_alike(packed, record.questions)
        if record is not None and known is not None:  # only the rest decoded: a twelfth of the objects
            state = _state_of(record, known.questions)
            if fresh and not state.is_terminal:
                self._keep(state.id, known)
        else:  # (a record of a broker before this layout)
            record = from_msgpack(packed)
            known = self._known.get(record["id"]) if type(record) is dict else None
            if known is not None and [q.to_wire() for q in known.questions] == record["questions"]:
                state = Questionnaire.from_record(record, known.questions)
            else:
                state = Questionnaire.from_record(record)
                if not state.is_terminal:
                    self._remember(state.id, state.questions)
        if state.is_terminal:
            self._known.pop(state.id, None)
        return state

    def _known_by_tail(self, packed: bytes) -> _Known | None:
        """The remembered questions ``packed`` ends with, when it was packed here (its id
        first, its questions last: the id finds them, the bytes prove them the same)."""
        if not packed.startswith(_ID_HEAD):
            return None
        at = len(_ID_HEAD)
        kind = packed[at]
        if 0xA0 <= kind <= 0xBF:  # fixstr
            length, at = kind - 0xA0, at + 1
        elif kind == 0xD9:  # str 8 (a UUID's 36 characters)
            length, at = packed[at + 1], at + 2
        else:
            return None
        try:
            known = self._known.get(packed[at : at + length].decode())
        except UnicodeDecodeError:
            return None
        return known if known is not None and packed.endswith(known.tail) else None

    def _packed_alike(self, packed: bytes, questions: msgspec.Raw) -> _Known | None:
        """The ``questions`` of a record packed as this process packs them (its id first, its
        questions last), by another process: decoded, and the bytes they end it with."""
        tail = _QUESTIONS_KEY + bytes(questions)
        if not packed.endswith(tail):
            return None
        try:
            return _Known(_decode_questions(questions), tail)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return None  # (decoded whole instead, which says what is wrong)

    def _remember(self, questionnaire_id: str, questions: tuple[Question, ...]) -> _Known:
        """Keep ``questions``."""
        return self._keep(questionnaire_id, _spelled(questions))

    def _keep(self, questionnaire_id: str, known: _Known) -> _Known:
        remembered = self._known
        remembered[questionnaire_id] = known
        remembered.move_to_end(questionnaire_id)
        if len(remembered) > self._size:
            remembered.popitem(last=False)  # the oldest
        return known


def _spelled(questions: tuple[Question, ...]) -> _Known:
    """``questions`` with their wire forms packed."""
    return _Known(questions, _QUESTIONS_KEY + to_msgpack([question.to_wire() for question in questions]))
