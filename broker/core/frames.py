"""The websocket wire: typed client frames in, plain server frames out, two codecs.

Parsing happens here, at the edge: ``decode`` + ``parse_client_frame`` turn bytes or text
into one frozen value (a ``msgspec.Struct``) per frame type, or raise ``BrokerError("bad_frame", ...)``.
Nothing malformed gets further, and no other exception escapes. Server frames are built
as plain dicts by the functions at the bottom, and ``encode`` serializes each once (a
fan-out to many clients reuses the same bytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import msgpack
import msgspec
import orjson

from broker.core.errors import BrokerError
from broker.core.machine import (
    AnswerQuestion,
    Cancel,
    Clarify,
    ClientCommand,
    Draft,
    Questionnaire,
    Selection,
)
from broker.core.secret_shapes import SecretRule, looks_like_secret

PROTOCOL_VERSION: Final = 1
Codec = Literal["json", "msgpack"]
JSON_SUBPROTOCOL: Final = "qbroker.v1.json"
MSGPACK_SUBPROTOCOL: Final = "qbroker.v1.msgpack"
# The websocket subprotocol that names each codec: what a client offers for the codec it
# speaks. Every program on either side of the wire takes the strings from here.
SUBPROTOCOL_BY_CODEC: Final[Mapping[Codec, str]] = MappingProxyType(
    {"json": JSON_SUBPROTOCOL, "msgpack": MSGPACK_SUBPROTOCOL}
)
SUBPROTOCOLS: Final = tuple(SUBPROTOCOL_BY_CODEC.values())  # every subprotocol the broker accepts
CLIENT_KINDS: Final = ("tui", "web", "bot")


def codec_for(subprotocol: str | None) -> Codec:
    """The codec of an accepted subprotocol; none at all (a client that offered none) is JSON."""
    return "msgpack" if subprotocol == MSGPACK_SUBPROTOCOL else "json"


# --- codecs -------------------------------------------------------------------------
#
# JSON is orjson's (several times faster than the stdlib's at both ends, and stricter in
# ways the wire wants: NaN/Infinity, lone surrogates (\ud800), and numbers that overflow a
# double are not JSON it takes; it reads integers beyond 64 bits as floats, so they are
# refused wherever the protocol wants an integer; it stops at 1024 levels of nesting).


def decode(data: str | bytes, codec: Codec) -> Any:
    """Raw websocket message -> Python value, or ``bad_frame``."""
    try:
        if codec == "json":
            if not isinstance(data, str):
                raise BrokerError("bad_frame", "the json subprotocol takes text frames")
            return orjson.loads(data)
        if not isinstance(data, bytes):
            raise BrokerError("bad_frame", "the msgpack subprotocol takes binary frames")
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except BrokerError:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoder failure is the client's bad frame
        raise BrokerError("bad_frame", f"frame is not valid {codec}: {type(exc).__name__}") from None


def encode(frame: Mapping[str, Any], codec: Codec) -> str | bytes:
    """A server frame as a text (json) or binary (msgpack) websocket message."""
    if codec == "json":
        return orjson.dumps(frame).decode()
    return encode_bytes(frame, codec)


# Server frames in msgpack, as msgpack-python's packb(use_bin_type=True) spells them, byte for
# byte, at a quarter of its cost (it builds a Packer per call). Client frames are still read
# by msgpack-python: its strict map keys are part of how a malformed frame is refused.
_to_msgpack: Final = msgspec.msgpack.Encoder().encode


def encode_bytes(frame: Mapping[str, Any], codec: Codec) -> bytes:
    """A server frame as the payload bytes of its websocket message: UTF-8 JSON text for
    the json subprotocol (to send as a text frame, with no str round trip), msgpack else."""
    if codec == "json":
        return orjson.dumps(frame)  # compact, UTF-8, nothing \u-escaped but control characters
    return _to_msgpack(frame)


# --- client frames ------------------------------------------------------------------


class Hello(msgspec.Struct, frozen=True):
    token: str
    client_kind: str
    client_name: str
    ref: object = None


class Ping(msgspec.Struct, frozen=True):
    ref: object = None


class CommandFrame(msgspec.Struct, frozen=True):
    """A frame that becomes a state-machine command (draft, answer, clarify, cancel)."""

    command: ClientCommand
    ref: object = None


ClientFrame = Hello | Ping | CommandFrame

_COMMON: Final = frozenset({"type", "ref"})
# The keys each frame may carry (beside the common ones, where they apply).
_HELLO_KEYS: Final = _COMMON | {"token", "client"}
# C0 and C1 controls, DEL, the line and paragraph separators, and the bidi controls: marks
# (ALM, LRM, RLM), embeddings and overrides (LRE..RLO) and isolates (LRI..PDI).
_NOT_SHOWN: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_HELLO_CLIENT_KEYS: Final = frozenset({"kind", "name"})
# The person saw that a text looks like a credential and chose to send it (docs/protocol.md,
# "Pasted secrets"): the frames that carry texts may say so.
CONFIRMED_NOT_SECRET: Final = "confirmedNotSecret"
_SELECTION_KEYS: Final = frozenset({"selectedOptionIds", "other"})
_DRAFT_KEYS: Final = _COMMON | {"questionnaireId", "step", CONFIRMED_NOT_SECRET} | _SELECTION_KEYS
_ANSWER_KEYS: Final = _DRAFT_KEYS | {"questionId"}
_CLARIFY_KEYS: Final = _COMMON | {"questionnaireId", "step", "request", "draft", CONFIRMED_NOT_SECRET}
_CANCEL_KEYS: Final = _COMMON | {"questionnaireId", "step"}
_COMMAND_TYPES: Final[dict[type, str]] = {
    Draft: "draft",
    AnswerQuestion: "answer",
    Clarify: "clarify",
    Cancel: "cancel",
}


def frame_type(frame: ClientFrame) -> str:
    """The wire ``type`` of a parsed client frame."""
    if isinstance(frame, CommandFrame):
        return _COMMAND_TYPES[type(frame.command)]
    return "hello" if isinstance(frame, Hello) else "ping"


def peek(value: Any) -> tuple[object, str | int | None]:
    """A decoded frame's ``type`` (None when it is not a map) and its ``ref`` when that is a
    valid one, without parsing the rest: for a socket that refuses a frame by its type alone."""
    if not isinstance(value, Mapping):
        return None, None
    ref = value.get("ref")
    valid = isinstance(ref, int | str) and not isinstance(ref, bool) and not (isinstance(ref, str) and len(ref) > 128)
    return value.get("type"), ref if valid else None


def parse_client_frame(value: Any) -> ClientFrame:
    """A decoded frame -> its typed form; anything off raises ``bad_frame``."""
    if type(value) is not dict and not isinstance(value, Mapping):  # (the ABC check is slow)
        raise BrokerError("bad_frame", "a frame must be a map with a 'type'")
    ref = value.get("ref")
    if ref is not None and (not isinstance(ref, (str, int)) or isinstance(ref, bool)):
        raise BrokerError("bad_frame", "'ref' must be a string or an integer", field="ref")
    if isinstance(ref, str) and len(ref) > 128:
        raise BrokerError("bad_frame", "'ref' is longer than 128 characters", field="ref")
    kind = value.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise BrokerError("bad_frame", f"unknown frame type {_show(kind)}", ref=ref)
    try:
        return parser(value, ref)
    except BrokerError as exc:
        exc.ref, exc.frame = ref, kind
        raise


def _hello(value: Mapping[str, Any], ref: object) -> Hello:
    _only(value, _HELLO_KEYS, "hello")
    token = _field(value, "token", str, "hello")
    client = value.get("client", {})
    if not isinstance(client, Mapping):
        raise BrokerError("bad_frame", "hello 'client' must be a map", field="client")
    _only(client, _HELLO_CLIENT_KEYS, "hello client")
    kind = client.get("kind", "bot")
    if kind not in CLIENT_KINDS:
        raise BrokerError(
            "bad_frame", f"hello client 'kind' must be one of {', '.join(CLIENT_KINDS)}", field="client.kind"
        )
    name = client.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        raise BrokerError(
            "bad_frame", "hello client 'name' must be a string of at most 200 characters", field="client.name"
        )
    return Hello(token, kind, shown_name(name), ref)


def shown_name(name: str) -> str:
    """A client's name as others are shown it ("answered by ..."): without control
    characters (line breaks, escape codes) and bidi controls, which could make it read as
    another name or reorder the text around it."""
    return _NOT_SHOWN.sub("", name)


def _ping(value: Mapping[str, Any], ref: object) -> Ping:
    _only(value, _COMMON, "ping")
    return Ping(ref)


def _draft(value: Mapping[str, Any], ref: object) -> CommandFrame:
    _only(value, _DRAFT_KEYS, "draft")
    draft = Draft(
        _field(value, "questionnaireId", str, "draft"),
        _step(value, "draft"),
        _option_ids(value, "draft"),
        _other(value, "draft"),
    )
    if not _confirmed(value, "draft"):
        _guard(draft.other, "other", "the Other text")
    return CommandFrame(draft, ref)


def _answer(value: Mapping[str, Any], ref: object) -> CommandFrame:
    _only(value, _ANSWER_KEYS, "answer")
    answer = AnswerQuestion(
        _field(value, "questionnaireId", str, "answer"),
        _step(value, "answer"),
        _field(value, "questionId", str, "answer"),
        _option_ids(value, "answer"),
        _other(value, "answer"),
    )
    if not _confirmed(value, "answer"):
        _guard(answer.other, "other", "the Other text")
    return CommandFrame(answer, ref)


def _clarify(value: Mapping[str, Any], ref: object) -> CommandFrame:
    _only(value, _CLARIFY_KEYS, "clarify")
    draft = value.get("draft")
    selection = None
    if draft is not None:
        if not isinstance(draft, Mapping):
            raise BrokerError("bad_frame", "clarify 'draft' must be a map", field="draft")
        _only(draft, _SELECTION_KEYS, "clarify draft")
        selection = Selection(_option_ids(draft, "clarify draft"), _other(draft, "clarify draft"))
    clarify = Clarify(
        _field(value, "questionnaireId", str, "clarify"),
        _step(value, "clarify"),
        _field(value, "request", str, "clarify"),
        selection,
    )
    if not _confirmed(value, "clarify"):
        _guard(clarify.request, "request", "the clarification request")
        if selection is not None:
            _guard(selection.other, "draft.other", "the draft's Other text")
    return CommandFrame(clarify, ref)


def _cancel(value: Mapping[str, Any], ref: object) -> CommandFrame:
    _only(value, _CANCEL_KEYS, "cancel")
    return CommandFrame(Cancel(_field(value, "questionnaireId", str, "cancel"), _step(value, "cancel")), ref)


_PARSERS: Final[dict[str, Callable[[Mapping[str, Any], object], ClientFrame]]] = {
    "hello": _hello,
    "ping": _ping,
    "draft": _draft,
    "answer": _answer,
    "clarify": _clarify,
    "cancel": _cancel,
}


def _only(value: Mapping[str, Any], keys: frozenset[str], what: str) -> None:
    if keys.issuperset(value):
        return
    unknown = sorted(str(key) for key in value if key not in keys)
    raise BrokerError("bad_frame", f"{what} frame has unknown key(s): {', '.join(unknown)}")


_KIND_NAMES: Final = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _path(what: str, name: str) -> str:
    """A field's path in its frame, for ``BrokerError.field``: what="clarify draft",
    name="other" -> "draft.other" (``what`` starts with the frame's type)."""
    return ".".join([*what.split()[1:], name])


def _field(value: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    field = value.get(name)
    if not isinstance(field, kind) or isinstance(field, bool):
        raise BrokerError(
            "bad_frame", f"{what} '{name}' must be {_KIND_NAMES.get(kind, kind.__name__)}", field=_path(what, name)
        )
    return field


def _step(value: Mapping[str, Any], what: str) -> int:
    step: int = _field(value, "step", int, what)
    if step < 0:
        raise BrokerError("bad_frame", f"{what} 'step' must be >= 0", field=_path(what, "step"))
    return step


def _option_ids(value: Mapping[str, Any], what: str) -> tuple[str, ...]:
    ids = value.get("selectedOptionIds", [])
    # (A loop, not all() over a generator: this runs on every answer, for a list of one or two.)
    if not isinstance(ids, list):
        raise _bad_option_ids(what, "must be a list of strings")
    for option_id in ids:
        if not isinstance(option_id, str):
            raise _bad_option_ids(what, "must be a list of strings")
    if len(ids) > 64:
        raise _bad_option_ids(what, "has too many entries")
    return tuple(ids)


def _bad_option_ids(what: str, problem: str) -> BrokerError:
    return BrokerError("bad_frame", f"{what} 'selectedOptionIds' {problem}", field=_path(what, "selectedOptionIds"))


def _other(value: Mapping[str, Any], what: str) -> str | None:
    other = value.get("other")
    if other is not None and not isinstance(other, str):
        raise BrokerError("bad_frame", f"{what} 'other' must be a string", field=_path(what, "other"))
    return other


def _confirmed(value: Mapping[str, Any], what: str) -> bool:
    confirmed = value.get(CONFIRMED_NOT_SECRET, False)
    if type(confirmed) is not bool:
        raise BrokerError("bad_frame", f"{what} '{CONFIRMED_NOT_SECRET}' must be a boolean", field=CONFIRMED_NOT_SECRET)
    return confirmed


class LooksLikeSecret(BrokerError):
    """A text of a client frame has the shape of a credential, and the person has not
    confirmed it: the frame is refused (its ``rule`` and ``field`` go in the error frame).
    The message names the rule, never the text."""

    def __init__(self, rule: SecretRule, field: str, said: str) -> None:
        super().__init__(
            "looks_like_secret",
            f"{said} looks like {rule.sentence}, so it was not sent. If the person confirms "
            f'it is safe to give the agent, send it again with "{CONFIRMED_NOT_SECRET}": true.',
            field=field,
        )
        self.rule = rule.code


def _guard(text: str | None, field: str, said: str) -> None:
    """Refuse ``text`` if it looks like a credential (only texts that are there are read)."""
    if text:
        rule = looks_like_secret(text)
        if rule is not None:
            raise LooksLikeSecret(rule, field, said)


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a list nested ~1000 deep: both codecs decode that much
        return f"<deeply nested {type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


# --- server frames ------------------------------------------------------------------


def welcome(client_id: str, session_id: str) -> dict[str, Any]:
    return {"type": "welcome", "clientId": client_id, "sessionId": session_id, "protocol": PROTOCOL_VERSION}


def idle() -> dict[str, Any]:
    return {"type": "idle"}


def pong() -> dict[str, Any]:
    return {"type": "pong"}


def error(code: str, message: str, ref: object = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if ref is not None:
        frame["ref"] = ref
    return frame


def refusal(exc: BrokerError) -> dict[str, Any]:
    """The ``error`` frame for a refused client frame: ``code``, ``message``, ``ref``, and for
    a text that looks like a secret the ``rule`` it matched and the ``field`` that holds it."""
    frame = error(exc.code, exc.message, exc.ref)
    if isinstance(exc, LooksLikeSecret):
        frame["rule"] = exc.rule
        frame["field"] = exc.field
    return frame


def question(state: Questionnaire) -> dict[str, Any]:
    """The current question. ``answeredBy``: who answered the question before it (only
    when the broker knows), so that the session's other clients can say so."""
    current = state.current_question
    if current is None or state.status != "in_progress":
        raise ValueError(f"questionnaire {state.id} has no question to show")
    index = state.current_index
    frame = {
        "type": "question",
        "questionnaireId": state.id,
        "revision": state.revision,
        "step": state.step,
        "index": index,
        "total": len(state.questions),
        "question": current.to_wire(),
        "draft": state.draft.to_wire() if state.draft is not None else None,
        "progress": [
            {
                "questionId": q.id,
                "label": q.label,
                "state": "answered" if i < index else "current" if i == index else "pending",
            }
            for i, q in enumerate(state.questions)
        ],
        "clarifications": [c.to_wire() for c in state.clarifications],
    }
    if state.answered_by is not None:
        frame["answeredBy"] = state.answered_by.to_wire()
    return frame


def suspended(state: Questionnaire) -> dict[str, Any]:
    request = state.pending_clarification
    if request is None:
        raise ValueError(f"questionnaire {state.id} is not suspended")
    # The question's label and place too: a client that opens now has no question frame to
    # take them from, and "you asked about this question" alone says little.
    index = next(i for i, q in enumerate(state.questions) if q.id == request.question_id)
    return {
        "type": "suspended",
        "questionnaireId": state.id,
        "revision": state.revision,
        "step": state.step,
        "questionId": request.question_id,
        "label": state.questions[index].label,
        "index": index,
        "total": len(state.questions),
        "request": request.request,
    }


def closed(state: Questionnaire) -> dict[str, Any]:
    """How a questionnaire ended; a completed one says who gave the last answer
    (``answeredBy``, only when the broker knows)."""
    frame: dict[str, Any] = {"type": "closed", "questionnaireId": state.id, "status": state.status}
    if state.cancellation_reason is not None:
        frame["reason"] = state.cancellation_reason
    if state.status == "completed" and state.answered_by is not None:
        frame["answeredBy"] = state.answered_by.to_wire()
    return frame


def view(state: Questionnaire | None) -> dict[str, Any]:
    """What a client should see for the session's shown questionnaire (None = idle)."""
    if state is None or state.is_terminal:
        return idle()
    if state.status == "needs_clarification":
        return suspended(state)
    return question(state)
