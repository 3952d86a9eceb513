"""The questionnaire tool's input: validation and normalization (pure, no I/O).

``parse_tool_input`` turns the agent's JSON (already decoded) into a ``StartInput`` or a
``ResumeInput``, or raises ``BrokerError("invalid_arguments", "questionnaire: ...")`` with
one sentence naming the offending question/option id and the rule it broke.

The normalized values are frozen: once a questionnaire has started, nothing the caller
still holds (their dicts and lists) can change its snapshot. Values are ``msgspec.Struct``
classes with ``frozen=True`` (as across the broker: states, commands, frames): built in
C, one costs an eighth of a frozen dataclass, and a questionnaire makes some forty.
``Question`` also keeps what is derived from it once (its option ids, its wire form): it is a
Struct with an instance dict, where ``_derived`` keeps them, outside its fields (so they
take no part in equality, and the frozen fields stay frozen).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from broker.core.errors import invalid

MAX_QUESTIONS: Final = 20
MAX_OPTIONS: Final = 50
MAX_ID: Final = 128
MAX_LABEL: Final = 200
MAX_PROMPT: Final = 2000
MAX_DESCRIPTION: Final = 500
MAX_OTHER: Final = 2000
MAX_CLARIFICATION: Final = 1000

QuestionType = Literal["single", "multi"]

_START_KEYS: Final = frozenset({"action", "questions"})
_RESUME_KEYS: Final = frozenset({"action", "questionnaireId", "revision", "clarificationResponse"})
_QUESTION_KEYS: Final = frozenset(
    {"id", "label", "prompt", "type", "options", "allowOther", "minSelections", "maxSelections"}
)
_OPTION_KEYS: Final = frozenset({"id", "label", "description"})


_Value = TypeVar("_Value")


class _derived(Generic[_Value]):  # noqa: N801 - used as a decorator, like cached_property
    """``functools.cached_property`` without its lock: on Python 3.11 every first use takes
    an RLock (3.12 dropped it), and a question's two derived values are first used on the
    path of every start. They are computed from frozen fields, so two threads that computed
    one at once would store equal values."""

    def __init__(self, compute: Callable[[Any], _Value]) -> None:
        self.compute = compute
        self.name = compute.__name__

    def __get__(self, instance: Any, owner: type | None = None) -> _Value:
        if instance is None:  # looked up on the class (by introspection)
            return self  # type: ignore[return-value]
        value = self.compute(instance)
        instance.__dict__[self.name] = value  # found there from now on, before this descriptor
        return value


class Option(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    # The bounds (and the unknown keys refused) hold where a start's body is decoded straight
    # into options (core/plain_start.py); making an Option checks nothing. Its wire form is
    # what msgspec.to_builtins makes of it (no description when it has none): Question._wire.
    id: Annotated[str, Meta(min_length=1, max_length=MAX_ID)]
    label: Annotated[str, Meta(min_length=1, max_length=MAX_LABEL)]
    description: Annotated[str, Meta(min_length=1, max_length=MAX_DESCRIPTION)] | None = None


class Question(msgspec.Struct, frozen=True, dict=True, rename="camel"):
    # (rename: msgspec spells the fields as the wire does, so a stored record's questions
    # decode straight into Question values: broker/store/records.py.)
    id: str
    label: str
    prompt: str
    type: QuestionType
    options: tuple[Option, ...]
    allow_other: bool = True
    min_selections: int = 0  # meaningful for multi only
    max_selections: int | None = None  # multi only; None = no ceiling

    @_derived
    def option_ids(self) -> tuple[str, ...]:
        """Derived once: answers are checked against them on every command."""
        return tuple([option.id for option in self.options])

    def to_wire(self) -> dict[str, Any]:
        """The question as the protocol spells it. One dict, shared: never change it."""
        return self._wire

    @_derived
    def _wire(self) -> dict[str, Any]:
        """Made on first use: every question frame and stored record embeds it. (Its dicts
        made by msgspec from the fields, in C: a third cheaper than building them here.)"""
        options = list(self.options)
        if self.type == "multi":
            wire = _MultiWire(
                self.id,
                self.label,
                self.prompt,
                self.type,
                options,
                self.allow_other,
                self.min_selections,
                self.max_selections,
            )
            return _builtins(wire)  # type: ignore[no-any-return]
        return _builtins(_SingleWire(self.id, self.label, self.prompt, self.type, options, self.allow_other))  # type: ignore[no-any-return]

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Question:
        """Rebuild a stored, already-normalized question (trusted input)."""
        return cls(
            id=wire["id"],
            label=wire["label"],
            prompt=wire["prompt"],
            type=wire["type"],
            options=tuple([Option(o["id"], o["label"], o.get("description")) for o in wire["options"]]),
            allow_other=wire["allowOther"],
            min_selections=wire.get("minSelections", 0),
            max_selections=wire.get("maxSelections"),
        )


class _SingleWire(msgspec.Struct, rename="camel"):
    """A single-choice question as the protocol spells it (``Question.to_wire``)."""

    id: str
    label: str
    prompt: str
    type: str
    options: list[Option]
    allow_other: bool


class _MultiWire(_SingleWire):
    """A multi-choice question as the protocol spells it: its bounds too."""

    min_selections: int
    max_selections: int | None


_builtins: Final = msgspec.to_builtins


class StartInput(msgspec.Struct, frozen=True):
    questions: tuple[Question, ...]


class ResumeInput(msgspec.Struct, frozen=True):
    questionnaire_id: str
    revision: int
    clarification_response: str


ToolInput = StartInput | ResumeInput


def parse_tool_input(payload: Any) -> ToolInput:
    if type(payload) is not dict and not isinstance(payload, Mapping):  # (the ABC check is slow)
        raise invalid("the tool input must be a JSON object")
    action = payload.get("action")
    if action == "start":
        _reject_unknown_keys(payload, _START_KEYS, "a start call", "start carries only action and questions")
        return StartInput(_parse_questions(payload.get("questions")))
    if action == "resume":
        if "questions" in payload:
            raise invalid("resume must not resend questions; the stored snapshot is authoritative")
        _reject_unknown_keys(
            payload,
            _RESUME_KEYS,
            "a resume call",
            "resume carries only action, questionnaireId, revision and clarificationResponse",
        )
        return _parse_resume(payload)
    if action is None:
        raise invalid('"action" is required and must be "start" or "resume"')
    raise invalid(f'"action" must be "start" or "resume", got {_show(action)}')


def _parse_resume(payload: Mapping[str, Any]) -> ResumeInput:
    questionnaire_id = _text(payload.get("questionnaireId"), "questionnaireId", MAX_ID, where="resume")
    revision = payload.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise invalid(f'resume "revision" must be an integer >= 1, got {_show(revision)}')
    response = _text(payload.get("clarificationResponse"), "clarificationResponse", MAX_CLARIFICATION, where="resume")
    return ResumeInput(questionnaire_id, revision, response)


def _parse_questions(raw: Any) -> tuple[Question, ...]:
    if not isinstance(raw, list):
        raise invalid('"questions" must be a list of 1-20 questions')
    if not 1 <= len(raw) <= MAX_QUESTIONS:
        raise invalid(f'"questions" must hold 1-{MAX_QUESTIONS} questions, got {len(raw)}')
    questions: list[Question] = []
    seen: set[str] = set()
    for position, item in enumerate(raw, start=1):
        question = _parse_question(item, position)
        if question.id in seen:
            raise invalid(f'question id "{question.id}" is used twice; question ids must be unique')
        seen.add(question.id)
        questions.append(question)
    return tuple(questions)


def _parse_question(raw: Any, position: int) -> Question:
    if type(raw) is not dict and not isinstance(raw, Mapping):  # (the ABC check is slow)
        raise invalid(f"question {position} must be an object")
    qid = _text(raw.get("id"), "id", MAX_ID, where=f"question {position}")
    where = f'question "{qid}"'
    if not raw.keys() <= _QUESTION_KEYS:
        _reject_unknown_keys(raw, _QUESTION_KEYS, where)
    label = _optional_text(raw.get("label"), "label", MAX_LABEL, where) or qid
    prompt = _text(raw.get("prompt"), "prompt", MAX_PROMPT, where=where)
    qtype = raw.get("type")
    if qtype not in ("single", "multi"):
        raise invalid(f'{where}: "type" must be "single" or "multi", got {_show(qtype)}')
    allow_other = raw.get("allowOther", True)
    if not isinstance(allow_other, bool):
        raise invalid(f'{where}: "allowOther" must be true or false')
    options = _parse_options(raw.get("options"), where)

    if qtype == "single":
        for key in ("minSelections", "maxSelections"):
            if key in raw:
                raise invalid(f'{where}: "{key}" is only allowed on multi questions')
        return Question(qid, label, prompt, "single", options, allow_other)

    ceiling = len(options) + (1 if allow_other else 0)
    min_sel = raw.get("minSelections", 0)
    if not _is_int(min_sel) or min_sel < 0:
        raise invalid(f'{where}: "minSelections" must be an integer >= 0, got {_show(min_sel)}')
    max_sel = raw.get("maxSelections")
    if max_sel is not None and (not _is_int(max_sel) or max_sel < 1):
        raise invalid(f'{where}: "maxSelections" must be an integer >= 1, got {_show(max_sel)}')
    if min_sel > ceiling:
        raise invalid(f'{where}: "minSelections" ({min_sel}) is more than the {ceiling} possible choices')
    if max_sel is not None and max_sel > ceiling:
        raise invalid(f'{where}: "maxSelections" ({max_sel}) is more than the {ceiling} possible choices')
    if max_sel is not None and min_sel > max_sel:
        raise invalid(f'{where}: "minSelections" ({min_sel}) is above "maxSelections" ({max_sel})')
    return Question(qid, label, prompt, "multi", options, allow_other, min_sel, max_sel)


def _parse_options(raw: Any, where: str) -> tuple[Option, ...]:
    if not isinstance(raw, list):
        raise invalid(f'{where}: "options" must be a list of 1-{MAX_OPTIONS} options')
    if not 1 <= len(raw) <= MAX_OPTIONS:
        raise invalid(f'{where}: "options" must hold 1-{MAX_OPTIONS} options, got {len(raw)}')
    options: list[Option] = []
    seen: set[str] = set()
    for item in raw:
        # A start call carries dozens of options, nearly all of them as plain as this: string
        # id and label (and description), each fine once trimmed. Such an option is taken
        # here in one pass; any other goes through ``_parse_option``'s checks, which would
        # accept this one as the same Option (tests/unit/test_model.py holds the two to that).
        if type(item) is dict and item.keys() <= _OPTION_KEYS:
            oid, label, description = item.get("id"), item.get("label"), item.get("description")
            if type(oid) is str and type(label) is str and (description is None or type(description) is str):
                oid, label = oid.strip(), label.strip()
                if description is not None:
                    description = description.strip()
                if (
                    oid
                    and label
                    and len(oid) <= MAX_ID
                    and len(label) <= MAX_LABEL
                    and (description is None or 0 < len(description) <= MAX_DESCRIPTION)
                    and oid not in seen
                ):
                    seen.add(oid)
                    options.append(Option(oid, label, description))
                    continue
        option = _parse_option(item, len(options) + 1, where, seen)  # (every option before it is in)
        seen.add(option.id)
        options.append(option)
    return tuple(options)


def _parse_option(item: Any, position: int, where: str, seen: set[str]) -> Option:
    """Every check of an option, with the sentence for the first that fails (``seen``: the
    ids of the question's options before it)."""
    if not isinstance(item, Mapping):
        raise invalid(f"{where}: option {position} must be an object")
    oid = _text(item.get("id"), "id", MAX_ID, where=where, option=position)
    _reject_unknown_keys(item, _OPTION_KEYS, _option_place(where, oid))
    if oid in seen:
        raise invalid(f'{where}: option id "{oid}" is used twice; option ids must be unique')
    label = _optional_text(item.get("label"), "label", MAX_LABEL, where, option=oid) or oid
    description = _optional_text(item.get("description"), "description", MAX_DESCRIPTION, where, option=oid)
    return Option(oid, label, description)


# --- small checks -------------------------------------------------------------------


def _option_place(where: str, option: int | str) -> str:
    """An option in a message: by its position (no id yet) or by its id."""
    return f"{where}, option {option}" if isinstance(option, int) else f'{where}, option "{option}"'


def _text(value: Any, name: str, limit: int, *, where: str, option: int | str | None = None) -> str:
    if type(value) is str:  # the usual case first: a plain string, fine as it is
        text = value.strip()
        if text and len(text) <= limit:
            return text
    if option is not None:
        where = _option_place(where, option)
    if value is None:
        raise invalid(f'{where}: "{name}" is required')
    if not isinstance(value, str):
        raise invalid(f'{where}: "{name}" must be a string, got {_show(value)}')
    text = value.strip()
    if not text:
        raise invalid(f'{where}: "{name}" must not be empty')
    if len(text) > limit:
        raise invalid(f'{where}: "{name}" is {len(text)} characters; the limit is {limit}')
    return text


def _optional_text(value: Any, name: str, limit: int, where: str, *, option: int | str | None = None) -> str | None:
    if value is None:
        return None
    return _text(value, name, limit, where=where, option=option)


def _reject_unknown_keys(raw: Mapping[str, Any], allowed: frozenset[str], where: str, hint: str = "") -> None:
    if raw.keys() <= allowed:
        return  # the common case, without building a list
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(f'"{key}"' for key in unknown)
        suffix = f" ({hint})" if hint else ""
        raise invalid(f"{where}: unknown key {names}{suffix}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """``value`` as the agent wrote it (JSON: true, null, "radio"), cut to 40 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except RecursionError:  # a value nested ~1000 levels deep
        text = f"<a deeply nested {type(value).__name__}>"
    except (TypeError, ValueError):  # not from JSON (a direct call)
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
