"""A start call's body in its plain shape, decoded and checked in one pass (pure).

Nearly every start an agent sends is plain: each question has its id, label, prompt, type
and options, each option its id and label (and maybe a description), every text already
trimmed and within its limit, no id used twice. ``plain_start`` decodes such a body straight
into a ``StartInput``: msgspec checks the shape, the types, the unknown keys and the lengths
in C while it decodes, where decoding to dicts and then checking them key by key in Python
(``parse_tool_input``) cost three times as much: a tenth of the broker's work for a whole
questionnaire went to it.

Anything else, valid or not, gives None, and the caller takes the general path, which says
what is wrong in its own words; for a body that both take, both give the same value
(tests/unit/test_plain_start.py holds them to it).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from broker.core.model import (
    MAX_ID,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_PROMPT,
    MAX_QUESTIONS,
    Option,
    Question,
    StartInput,
)

_Id = Annotated[str, Meta(min_length=1, max_length=MAX_ID)]
_Label = Annotated[str, Meta(min_length=1, max_length=MAX_LABEL)]


class _Question(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    id: _Id
    label: _Label
    prompt: Annotated[str, Meta(min_length=1, max_length=MAX_PROMPT)]
    type: Literal["single", "multi"]
    options: Annotated[tuple[Option, ...], Meta(min_length=1, max_length=MAX_OPTIONS)]
    allow_other: bool = True
    # UNSET: absent (a null is not plain: the general path says what is wrong with it)
    min_selections: int | UnsetType = UNSET
    max_selections: int | UnsetType = UNSET


class _Start(msgspec.Struct, forbid_unknown_fields=True):
    action: Literal["start"]
    questions: Annotated[list[_Question], Meta(min_length=1, max_length=MAX_QUESTIONS)]


_decode: Final = msgspec.json.Decoder(_Start).decode


def plain_start(body: bytes) -> StartInput | None:
    """The start ``body`` asks for, when it is plain; None for any other body."""
    try:
        start = _decode(body)
    # (ValidationError is a DecodeError; an older msgspec raises UnicodeDecodeError on bad UTF-8)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    questions: list[Question] = []
    question_ids: set[str] = set()
    for raw in start.questions:
        qid, label, prompt = raw.id, raw.label, raw.prompt
        # str.strip() gives back the very string when there is nothing to trim
        if qid.strip() is not qid or label.strip() is not label or prompt.strip() is not prompt:
            return None
        if qid in question_ids:
            return None
        question_ids.add(qid)
        options = raw.options
        option_ids: set[str] = set()
        for option in options:
            oid, option_label, description = option.id, option.label, option.description
            if (
                oid.strip() is not oid
                or option_label.strip() is not option_label
                or (description is not None and description.strip() is not description)
                or oid in option_ids
            ):
                return None
            option_ids.add(oid)
        allow_other = raw.allow_other
        if raw.type == "single":
            if raw.min_selections is not UNSET or raw.max_selections is not UNSET:
                return None
            questions.append(Question(qid, label, prompt, "single", options, allow_other))
            continue
        min_sel = 0 if raw.min_selections is UNSET else raw.min_selections
        max_sel = None if raw.max_selections is UNSET else raw.max_selections
        if not _bounds_fine(len(options) + (1 if allow_other else 0), min_sel, max_sel):
            return None
        questions.append(Question(qid, label, prompt, "multi", options, allow_other, min_sel, max_sel))
    return StartInput(tuple(questions))


def _bounds_fine(ceiling: int, min_sel: int, max_sel: int | None) -> bool:
    """A multi question's bounds as ``parse_tool_input`` takes them (``ceiling``: its choices)."""
    return 0 <= min_sel <= ceiling and (max_sel is None or 1 <= max_sel <= ceiling and min_sel <= max_sel)
