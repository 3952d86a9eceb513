"""A client's answer frame in its plain shape (JSON), decoded and checked in one pass (pure).

Nearly every frame a client sends is an answer with option ids and no Other text. msgspec
decodes such a frame straight into its typed form, checking the keys, the types and the
bounds while it decodes, where decoding it to a dict (orjson) and then checking it key by
key (``frames.parse_client_frame``) cost several times as much, on the path of every answer.

Any other frame (another type, an Other text, a malformed or refused one) gives None, and
the caller takes the general path, which says what is wrong in its own words and checks an
Other text for a pasted credential; for a frame both take, both give the same value
(tests/unit/test_plain_answer.py holds them to it).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec
from msgspec import Meta

from broker.core.frames import CommandFrame
from broker.core.machine import AnswerQuestion

# The integers orjson reads as integers (the general path refuses the floats it makes of
# any other): a step or a ref out of this range is not plain.
_SIGNED_MIN: Final = -(2**63)
_UNSIGNED_MAX: Final = 2**64 - 1


class _Answer(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    type: Literal["answer"]
    questionnaire_id: str
    step: Annotated[int, Meta(ge=0)]
    question_id: str
    selected_option_ids: Annotated[list[str], Meta(max_length=64)] = []
    other: Literal[""] | None = None  # an Other text is not plain: it is checked for secrets
    confirmed_not_secret: bool = False
    ref: Annotated[str, Meta(max_length=128)] | int | None = None


_decode: Final = msgspec.json.Decoder(_Answer).decode


def plain_answer(data: str) -> CommandFrame | None:
    """The answer a JSON text frame ``data`` carries, when it is plain; None for any other."""
    try:
        answer = _decode(data)
    # (ValidationError is a DecodeError; an older msgspec raises UnicodeDecodeError on bad UTF-8)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    ref = answer.ref
    if answer.step > _UNSIGNED_MAX or (type(ref) is int and not _SIGNED_MIN <= ref <= _UNSIGNED_MAX):
        return None
    command = AnswerQuestion(
        answer.questionnaire_id, answer.step, answer.question_id, tuple(answer.selected_option_ids), answer.other
    )
    return CommandFrame(command, ref)
