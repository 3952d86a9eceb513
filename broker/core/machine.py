"""One questionnaire's life, as a pure state machine.

Theory of operation
-------------------
A questionnaire is a frozen ``Questionnaire`` value. Every change is a function
``apply(state, command, now) -> new_state`` that either returns a new value or raises a
``BrokerError`` and leaves the old value untouched (it is immutable, so "unchanged" is
guaranteed by construction and checked by the tests anyway). Nothing here awaits, reads
the clock or touches a network: the broker's service, the stores and the tests all drive
this same code.

Statuses and the commands each accepts::

    in_progress          --draft-->    in_progress          (version + 1)
    in_progress          --answer-->   in_progress | completed   (step + 1)
    in_progress          --clarify-->  needs_clarification  (revision + 1, step + 1)
    needs_clarification  --resume-->   in_progress          (step + 1)
    in_progress | needs_clarification  --cancel-->      cancelled  (user_cancelled)
    in_progress | needs_clarification  --abort-->       cancelled  (aborted)
    in_progress | needs_clarification  --unavailable--> unavailable (ui_unavailable | ui_error)
    completed | cancelled | unavailable: terminal; every command is refused.

Three counters, each with its own job:

- ``revision`` counts clarification suspensions; the agent's ``resume`` must name the
  latest one, so of two resumes of one revision exactly one can succeed.
- ``step`` counts question transitions (answer, clarify, resume, cancel); a client command
  must carry the current step, so of two racing answers exactly one can succeed.
- ``version`` counts every stored change, drafts included; the stores compare-and-set
  on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec.structs import replace

from broker.core.actors import Actor, actor_from_wire
from broker.core.errors import BrokerError
from broker.core.model import MAX_CLARIFICATION, MAX_OTHER, Question, ResumeInput

Status = Literal["in_progress", "needs_clarification", "completed", "cancelled", "unavailable"]
CancellationReason = Literal["user_cancelled", "aborted", "ui_unavailable", "ui_error"]

TERMINAL: Final[frozenset[str]] = frozenset({"completed", "cancelled", "unavailable"})
OUTCOMES: Final[frozenset[str]] = TERMINAL | {"needs_clarification"}


# --- values -------------------------------------------------------------------------


class Selection(msgspec.Struct, frozen=True):
    """What the person picked for one question: option ids in declared order, optional Other."""

    selected_option_ids: tuple[str, ...] = ()
    other: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"selectedOptionIds": list(self.selected_option_ids)}
        if self.other is not None:
            wire["other"] = self.other
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Selection:
        return cls(tuple(wire["selectedOptionIds"]), wire.get("other"))


class Answer(msgspec.Struct, frozen=True):
    question_id: str
    selection: Selection

    def to_wire(self) -> dict[str, Any]:
        # (Selection.to_wire's keys, spelled here: every stored record has one per answer)
        selection = self.selection
        wire: dict[str, Any] = {
            "questionId": self.question_id,
            "selectedOptionIds": list(selection.selected_option_ids),
        }
        if selection.other is not None:
            wire["other"] = selection.other
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Answer:
        return cls(wire["questionId"], Selection.from_wire(wire))


class Clarification(msgspec.Struct, frozen=True):
    revision: int
    question_id: str
    request: str
    response: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "revision": self.revision,
            "questionId": self.question_id,
            "request": self.request,
        }
        if self.response is not None:
            wire["response"] = self.response
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Clarification:
        return cls(wire["revision"], wire["questionId"], wire["request"], wire.get("response"))


class Questionnaire(msgspec.Struct, frozen=True):
    id: str
    session_id: str
    questions: tuple[Question, ...]
    created_at: float
    updated_at: float
    status: Status = "in_progress"
    revision: int = 0
    step: int = 0
    version: int = 0
    answers: tuple[Answer, ...] = ()  # one per answered question, in question order
    draft: Selection | None = None  # the current question's toggles in progress
    clarifications: tuple[Clarification, ...] = ()
    cancellation_reason: CancellationReason | None = None
    asked_by: str | None = None  # the ``sub`` of the agent token that started it (None: not said)
    # How long it waits for a first client before ``ui_unavailable`` (core/availability.py);
    # None: the broker's QBROKER_CLIENT_WAIT. Set at start when the agent asked for its own
    # wait, or notifications may bring the person (docs/notifications.md).
    client_wait: float | None = None
    answered_by: Actor | None = None  # who gave the latest answer (None: nobody yet, or not said)
    # Since when an MCP host's own form asks it (None: no host's form does). While one does,
    # the person is there, in the host: it does not become unavailable (core/availability.py).
    in_host_since: float | None = None

    @property
    def current_index(self) -> int:
        """Index of the question being asked (== len(questions) once all are answered)."""
        return len(self.answers)

    @property
    def current_question(self) -> Question | None:
        index = self.current_index
        return self.questions[index] if index < len(self.questions) else None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def is_outcome(self) -> bool:
        return self.status in OUTCOMES

    @property
    def pending_clarification(self) -> Clarification | None:
        if self.status == "needs_clarification" and self.clarifications:
            return self.clarifications[-1]
        return None

    def to_record(self) -> dict[str, Any]:
        """A plain-data form for the stores (msgpack/JSON-friendly)."""
        record = self.to_record_but_questions()
        record["questions"] = list(map(Question.to_wire, self.questions))
        return record

    def to_record_but_questions(self) -> dict[str, Any]:
        """``to_record`` without its questions, which never change once a questionnaire
        starts (broker/store/records.py packs them once)."""
        return {
            "id": self.id,
            "sessionId": self.session_id,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "status": self.status,
            "revision": self.revision,
            "step": self.step,
            "version": self.version,
            "answers": list(map(Answer.to_wire, self.answers)),
            "draft": self.draft.to_wire() if self.draft is not None else None,
            "clarifications": list(map(Clarification.to_wire, self.clarifications)),
            "cancellationReason": self.cancellation_reason,
            "askedBy": self.asked_by,
            "clientWait": self.client_wait,
            "answeredBy": self.answered_by.to_wire() if self.answered_by is not None else None,
            "inHostSince": self.in_host_since,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], questions: tuple[Question, ...] | None = None) -> Questionnaire:
        """The state a record holds. ``questions``: its questions, already built by a caller
        that has checked they are the record's (they never change once a questionnaire starts)."""
        draft = record.get("draft")
        if questions is None:
            questions = tuple([Question.from_wire(q) for q in record["questions"]])
        return cls(
            id=record["id"],
            session_id=record["sessionId"],
            questions=questions,
            created_at=record["createdAt"],
            updated_at=record["updatedAt"],
            status=record["status"],
            revision=record["revision"],
            step=record["step"],
            version=record["version"],
            answers=tuple([Answer.from_wire(a) for a in record["answers"]]),
            draft=Selection.from_wire(draft) if draft is not None else None,
            clarifications=tuple([Clarification.from_wire(c) for c in record["clarifications"]]),
            cancellation_reason=record.get("cancellationReason"),
            # (these three: absent from records of brokers before them)
            asked_by=record.get("askedBy"),
            client_wait=record.get("clientWait"),
            answered_by=actor_from_wire(record.get("answeredBy")),
            in_host_since=record.get("inHostSince"),
        )


# --- commands -----------------------------------------------------------------------


class Draft(msgspec.Struct, frozen=True):
    questionnaire_id: str
    step: int
    selected_option_ids: tuple[str, ...]
    other: str | None = None


class AnswerQuestion(msgspec.Struct, frozen=True):
    questionnaire_id: str
    step: int
    question_id: str
    selected_option_ids: tuple[str, ...]
    other: str | None = None


class Clarify(msgspec.Struct, frozen=True):
    questionnaire_id: str
    step: int
    request: str
    draft: Selection | None = None


class Cancel(msgspec.Struct, frozen=True):
    questionnaire_id: str
    step: int


class Resume(msgspec.Struct, frozen=True):
    revision: int
    response: str

    @classmethod
    def from_input(cls, resume: ResumeInput) -> Resume:
        return cls(resume.revision, resume.clarification_response)


class Abort(msgspec.Struct, frozen=True):
    pass


class MarkUnavailable(msgspec.Struct, frozen=True):
    reason: Literal["ui_unavailable", "ui_error"]


class AskInHost(msgspec.Struct, frozen=True):
    """An MCP host's own form now asks the questionnaire (from ``step`` on)."""

    step: int


class LeaveHost(msgspec.Struct, frozen=True):
    """The host's form is done with it: answered, declined or dismissed."""


ClientCommand = Draft | AnswerQuestion | Clarify | Cancel
Command = ClientCommand | Resume | Abort | MarkUnavailable | AskInHost | LeaveHost


# --- transitions --------------------------------------------------------------------


def start(
    questionnaire_id: str,
    session_id: str,
    questions: Sequence[Question],
    now: float,
    *,
    asked_by: str | None = None,
    client_wait: float | None = None,
) -> Questionnaire:
    """A new questionnaire; ``asked_by``: who asked (the agent token's ``sub``); ``client_wait``:
    its own wait for a first client (None: the broker's)."""
    if not questions:
        raise BrokerError("invalid_arguments", "questionnaire: at least one question is required")
    return Questionnaire(
        id=questionnaire_id,
        session_id=session_id,
        questions=tuple(questions),
        created_at=now,
        updated_at=now,
        asked_by=asked_by,
        client_wait=client_wait,
    )


def apply(state: Questionnaire, command: Command, now: float, by: Actor | None = None) -> Questionnaire:
    """The one entry point: the new state after ``command``, or a ``BrokerError``.
    ``by``: who gives it (an answer keeps it as ``answered_by``)."""
    if isinstance(command, Resume):
        return _resume(state, command, now)
    if isinstance(command, Abort):
        _require_open(state, "abort")
        return _close(state, "cancelled", "aborted", now)
    if isinstance(command, MarkUnavailable):
        _require_open(state, "mark unavailable")
        return _close(state, "unavailable", command.reason, now)
    if isinstance(command, AskInHost):
        if state.status != "in_progress" or command.step != state.step:
            raise BrokerError("stale_step", f"questionnaire {state.id} moved on before the host's form was shown")
        return replace(state, in_host_since=now, version=state.version + 1, updated_at=now)
    if isinstance(command, LeaveHost):
        _require_open(state, "leave the host")
        return replace(state, in_host_since=None, version=state.version + 1, updated_at=now)
    # Client commands: they must name this questionnaire and its current step.
    _check_client_command(state, command)
    if isinstance(command, Cancel):
        return _close(state, "cancelled", "user_cancelled", now, step=state.step + 1)
    if state.status != "in_progress":
        raise BrokerError(
            "stale_step",
            f"{_name(command)} refused: questionnaire {state.id} is waiting for the agent's clarification",
        )
    question = state.current_question
    assert question is not None  # in_progress always has a current question
    if isinstance(command, Draft):
        selection = _selection(question, command.selected_option_ids, command.other, final=False)
        return replace(state, draft=selection, version=state.version + 1, updated_at=now)
    if isinstance(command, AnswerQuestion):
        return _answer(state, question, command, now, by)
    return _clarify(state, question, command, now)


def _answer(
    state: Questionnaire, question: Question, command: AnswerQuestion, now: float, by: Actor | None
) -> Questionnaire:
    if command.question_id != question.id:
        raise BrokerError(
            "invalid_answer",
            f'answer names question "{command.question_id}" but the current question is "{question.id}"',
        )
    selection = _selection(question, command.selected_option_ids, command.other, final=True)
    answers = (*state.answers, Answer(question.id, selection))
    done = len(answers) == len(state.questions)
    return replace(
        state,
        updated_at=now,
        status="completed" if done else "in_progress",
        step=state.step + 1,
        version=state.version + 1,
        answers=answers,
        draft=None,
        answered_by=by,
    )


def _clarify(state: Questionnaire, question: Question, command: Clarify, now: float) -> Questionnaire:
    request = _bounded_text(command.request, "clarification request", MAX_CLARIFICATION)
    if not request:
        raise BrokerError("invalid_answer", "clarification request must not be empty")
    draft = state.draft
    if command.draft is not None:
        draft = _selection(question, command.draft.selected_option_ids, command.draft.other, final=False)
    revision = state.revision + 1
    return replace(
        state,
        status="needs_clarification",
        revision=revision,
        step=state.step + 1,
        version=state.version + 1,
        draft=draft,
        clarifications=(*state.clarifications, Clarification(revision, question.id, request)),
        updated_at=now,
    )


def _resume(state: Questionnaire, command: Resume, now: float) -> Questionnaire:
    if command.revision != state.revision:
        raise BrokerError(
            "stale_revision",
            f"questionnaire: revision {command.revision} is "
            f"{'stale' if command.revision < state.revision else 'not a revision of it yet'}; "
            f"the latest revision of questionnaire {state.id} is {state.revision}",
        )
    if state.status != "needs_clarification":
        raise BrokerError(
            "not_awaiting_clarification",
            f"questionnaire: questionnaire {state.id} (revision {state.revision}) is "
            f"{_said(state.status)}, not awaiting clarification",
        )
    response = _bounded_text(command.response, "clarificationResponse", MAX_CLARIFICATION)
    if not response:
        raise BrokerError("invalid_arguments", 'questionnaire: "clarificationResponse" must not be empty')
    answered = replace(state.clarifications[-1], response=response)
    return replace(
        state,
        status="in_progress",
        step=state.step + 1,
        version=state.version + 1,
        clarifications=(*state.clarifications[:-1], answered),
        updated_at=now,
    )


def _close(
    state: Questionnaire,
    status: Status,
    reason: CancellationReason,
    now: float,
    *,
    step: int | None = None,
) -> Questionnaire:
    return replace(
        state,
        status=status,
        cancellation_reason=reason,
        step=state.step if step is None else step,
        version=state.version + 1,
        updated_at=now,
    )


# --- checks -------------------------------------------------------------------------


def _require_open(state: Questionnaire, action: str) -> None:
    if state.is_terminal:
        raise BrokerError(
            "questionnaire_closed", f"cannot {action}: questionnaire {state.id} is already {_said(state.status)}"
        )


def _said(status: str) -> str:
    """A status in a message for people: "in progress", not the identifier "in_progress"."""
    return status.replace("_", " ")


def _check_client_command(state: Questionnaire, command: ClientCommand) -> None:
    if command.questionnaire_id != state.id:
        raise BrokerError(
            "stale_step", f"{_name(command)} names questionnaire {command.questionnaire_id}, not {state.id}"
        )
    if state.is_terminal:
        raise BrokerError("stale_step", f"{_name(command)} refused: questionnaire {state.id} is {_said(state.status)}")
    if command.step != state.step:
        raise BrokerError("stale_step", f"{_name(command)} names step {command.step}; the current step is {state.step}")


def check_selection(question: Question, option_ids: Sequence[str], other: str | None) -> Selection:
    """An answer to ``question`` checked by the rules every answer passes (its options, Other,
    its bounds), ordered as declared; else a ``BrokerError`` saying which rule it breaks."""
    return _selection(question, option_ids, other, final=True)


def _selection(question: Question, option_ids: Sequence[str], other: str | None, *, final: bool) -> Selection:
    """Validate picks against ``question``; order them as declared. ``final`` checks bounds."""
    known = question.option_ids
    for option_id in option_ids:
        if option_id not in known:
            raise BrokerError("unknown_option", f'question "{question.id}" has no option "{option_id}"')
    if len(option_ids) > 1 and len(set(option_ids)) != len(option_ids):
        raise BrokerError("invalid_answer", f'question "{question.id}": option ids must be distinct')
    other_text = _bounded_text(other, "other", MAX_OTHER) if other is not None else None
    if other_text == "":
        other_text = None  # an emptied Other field is no Other answer
    if other_text is not None and not question.allow_other:
        raise BrokerError("other_not_allowed", f'question "{question.id}" does not allow an Other answer')
    if len(option_ids) <= 1:
        ordered = tuple(option_ids)  # (the usual single pick: already in declared order)
    else:
        chosen = frozenset(option_ids)
        ordered = tuple(option_id for option_id in known if option_id in chosen)
    count = len(ordered) + (1 if other_text is not None else 0)

    if question.type == "single":
        if len(ordered) > 1:
            raise BrokerError("invalid_answer", f'single question "{question.id}" takes at most one option')
        if final and ordered and other_text is not None:
            raise BrokerError(
                "invalid_answer",
                f'single question "{question.id}" takes one option or only Other, not both',
            )
        if final and count == 0:
            raise BrokerError(
                "invalid_answer",
                f'single question "{question.id}" needs exactly one option, or only Other',
            )
    elif final:
        if count < question.min_selections:
            raise BrokerError(
                "below_min_selections",
                f'question "{question.id}" needs at least {question.min_selections} choice(s), got {count}',
            )
        if question.max_selections is not None and count > question.max_selections:
            raise BrokerError(
                "above_max_selections",
                f'question "{question.id}" allows at most {question.max_selections} choice(s), got {count}',
            )
    return Selection(ordered, other_text)


def _bounded_text(value: str | None, name: str, limit: int) -> str:
    text = (value or "").strip()
    if len(text) > limit:
        raise BrokerError("text_too_long", f"{name} is {len(text)} characters; the limit is {limit}")
    return text


def _name(command: Command) -> str:
    return type(command).__name__.lower().replace("answerquestion", "answer")
