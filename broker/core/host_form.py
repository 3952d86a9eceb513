"""The questionnaire as an MCP host's own form (MCP elicitation, form mode), and what a
submitted form means. Pure: no I/O, no clock.

One form asks every question still open (from the current one on). Each question is one
property, keyed by its id, titled with its label, described by its prompt:

- single: ``{"type": "string", "oneOf": [{"const": OPTION_ID, "title": LABEL}, ...]}``;
- multi: ``{"type": "array", "items": {"anyOf": [{"const": ..., "title": ...}, ...]},
  "minItems": .., "maxItems": ..}`` (the question's bounds);
- where Other is allowed, one more optional string property, the free-text answer;
- one optional string property to ask the agent something instead (the clarification);
- one optional boolean property, "Cancel this questionnaire".

No property is required (a person who asks the agent something, or cancels, leaves the
questions empty) and the schema has no top-level ``title`` (Codex refuses a form with one):
the form's message names the questionnaire.

The form cannot say every rule (Other counts as one choice against a multi question's
bounds; a single question answered with Other has no option), so ``read_reply`` checks a
submitted form against the questionnaire's own rules (the state machine's), and a form that
breaks one is a ``FormProblem`` whose message says why: the broker asks again with it, and
stores nothing of that form. ``next_command`` then turns an accepted reply into the state
machine's commands one at a time, from whatever state the questionnaire is in by then (the
same questionnaire may have moved on in a qbroker client: answers to questions answered
elsewhere are never applied).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from broker.core.errors import BrokerError
from broker.core.machine import AnswerQuestion, Cancel, Clarify, Command, Questionnaire, Selection, check_selection
from broker.core.model import MAX_CLARIFICATION, Question

# When the broker asks in the host (QBROKER_IN_HOST, and per host ?inHost= on /mcp):
# fallback, when no qbroker client has the session open; race, as well as every open
# client; off, never.
IN_HOST_MODES: Final = ("fallback", "race", "off")
# The key MCP's multi round-trip pattern files the form under (``inputRequests``).
INPUT_KEY: Final = "questionnaire"
CANCEL_TITLE: Final = "Cancel this questionnaire"
CLARIFY_TITLE: Final = "Ask the agent something instead"


class FormProblem(Exception):
    """A submitted form the questionnaire's rules refuse; ``reason`` says why, for the person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FormKeys(msgspec.Struct, frozen=True):
    """The form's property names beside the questions' ids: each question's Other, the
    clarification and the cancel choice (made unlike every question id)."""

    other: dict[str, str]
    clarify: str
    cancel: str


class FormReply(msgspec.Struct, frozen=True):
    """What an accepted form says: the answers it gave (by question id), a request to the
    agent, or the person's cancel."""

    answers: dict[str, Selection]
    clarification: str | None = None
    cancel: bool = False
    # The question a clarification pauses at: the first the form left unanswered, else its last.
    pause_at: str | None = None


def open_questions(state: Questionnaire) -> tuple[Question, ...]:
    """The questions a form asks: from the current one on (none unless in progress)."""
    if state.status != "in_progress":
        return ()
    return state.questions[state.current_index :]


def form_keys(questions: Sequence[Question]) -> FormKeys:
    taken = {question.id for question in questions}

    def unique(base: str) -> str:
        key = base
        while key in taken:
            key += "_"
        taken.add(key)
        return key

    other = {question.id: unique(f"{question.id}__other") for question in questions if question.allow_other}
    return FormKeys(other, unique("qbroker__ask_the_agent"), unique("qbroker__cancel"))


def form(
    state: Questionnaire, problem: str | None = None, kept: Mapping[str, Selection] | None = None
) -> dict[str, Any]:
    """``elicitation/create``'s params for the open questions of ``state``: ``mode``,
    ``message`` and ``requestedSchema``. ``problem``: why the last form was not taken;
    ``kept``: answers an earlier form gave to questions still open (``kept_answers``), filled
    in as the fields' defaults, as is the current question's draft."""
    questions = open_questions(state)
    keys = form_keys(questions)
    filled = dict(kept or {})
    if state.draft is not None and questions:
        filled[questions[0].id] = state.draft
    properties: dict[str, Any] = {}
    for question in questions:
        properties[question.id] = _question_property(question)
        if question.allow_other:
            properties[keys.other[question.id]] = {
                "type": "string",
                "title": f"{question.label}: Other (your own answer, as free text)",
                "description": "Instead of an option"
                + (" (counts as one choice)" if question.type == "multi" else "")
                + ".",
            }
        given = filled.get(question.id)
        if given is not None:
            _fill(properties[question.id], question, given)
            if given.other is not None and question.allow_other:
                properties[keys.other[question.id]]["default"] = given.other
    properties[keys.clarify] = {
        "type": "string",
        "title": CLARIFY_TITLE,
        "description": "The questionnaire pauses at the first question left empty until the agent answers;"
        " the answers given here are kept.",
        "maxLength": MAX_CLARIFICATION,
    }
    properties[keys.cancel] = {"type": "boolean", "title": CANCEL_TITLE, "default": False}
    return {
        "mode": "form",
        "message": _message(state, len(questions), problem),
        "requestedSchema": {"type": "object", "properties": properties},
    }


def _fill(prop: dict[str, Any], question: Question, given: Selection) -> None:
    if question.type == "multi":
        prop["default"] = list(given.selected_option_ids)
    elif given.selected_option_ids:
        prop["default"] = given.selected_option_ids[0]


def kept_answers(reply: FormReply, state: Questionnaire) -> dict[str, Selection]:
    """What a reply answered that ``state`` (after the reply was applied) has not stored: the
    answers after the question a clarification paused at, kept for the next form."""
    stored = {answer.question_id for answer in state.answers}
    current = state.current_question
    return {
        question_id: selection
        for question_id, selection in reply.answers.items()
        if question_id not in stored and (current is None or question_id != current.id)
    }


def kept_answers_to_wire(kept: Mapping[str, Selection]) -> str:
    return msgspec.json.encode({question_id: s.to_wire() for question_id, s in kept.items()}).decode()


def kept_answers_from_wire(text: str | None) -> dict[str, Selection]:
    if not text:
        return {}
    return {question_id: Selection.from_wire(wire) for question_id, wire in msgspec.json.decode(text).items()}


def _question_property(question: Question) -> dict[str, Any]:
    choices = [{"const": option.id, "title": option.label} for option in question.options]
    if question.type == "single":
        return {"type": "string", "title": question.label, "description": question.prompt, "oneOf": choices}
    prop: dict[str, Any] = {
        "type": "array",
        "title": question.label,
        "description": question.prompt,
        "items": {"anyOf": choices},
        "minItems": question.min_selections,
    }
    if question.max_selections is not None:
        prop["maxItems"] = question.max_selections
    return prop


def _message(state: Questionnaire, open_count: int, problem: str | None) -> str:
    total = len(state.questions)
    which = f"{open_count} question{'s' if open_count != 1 else ''}"
    if open_count < total:
        which = f"{open_count} more question{'s' if open_count != 1 else ''}; {total - open_count} of {total} answered"
    text = (
        f"The agent asks {which} (questionnaire {state.id}). Answer here or in any qbroker client: "
        f'the first answer counts. To ask the agent something first, use "{CLARIFY_TITLE}".'
    )
    if problem is not None:
        text = f"Your answer could not be used: {problem}. Please answer again.\n\n{text}"
    return text


def read_reply(questions: Sequence[Question], content: Mapping[str, Any] | None) -> FormReply:
    """The accepted form ``content`` of a form that asked ``questions`` as a ``FormReply``,
    checked against the questionnaire's rules; a ``FormProblem`` saying why not."""
    if not questions:
        raise FormProblem("the form asked nothing")
    keys = form_keys(questions)
    content = dict(content or {})
    known = {q.id for q in questions} | set(keys.other.values()) | {keys.clarify, keys.cancel}
    unknown = sorted(set(content) - known)
    if unknown:
        raise FormProblem(f"the form has no field {unknown[0]!r}")
    cancel = content.get(keys.cancel)
    if cancel not in (None, False, True):
        raise FormProblem(f"{CANCEL_TITLE!r} must be true or false")
    if cancel is True:
        return FormReply({}, cancel=True)
    clarification = content.get(keys.clarify)
    if clarification is not None and not isinstance(clarification, str):
        raise FormProblem("the request to the agent must be text")
    clarification = (clarification or "").strip() or None
    if clarification is not None and len(clarification) > MAX_CLARIFICATION:
        length = len(clarification)
        raise FormProblem(f"the request to the agent is {length} characters; the limit is {MAX_CLARIFICATION}")
    answers: dict[str, Selection] = {}
    for question in questions:
        selection = _selection(question, content.get(question.id), content.get(keys.other.get(question.id, "")))
        if selection is not None:
            answers[question.id] = selection
    unanswered = [question for question in questions if question.id not in answers]
    if clarification is None:
        if unanswered:
            raise FormProblem(
                f'"{unanswered[0].label}" has no answer (answer every question, ask the agent something, or cancel)'
            )
        return FormReply(answers)
    pause_at = unanswered[0].id if unanswered else questions[-1].id
    return FormReply(answers, clarification, pause_at=pause_at)


def _selection(question: Question, picked: Any, other: Any) -> Selection | None:
    """One question's answer from the form (None: left empty), by the machine's own rules."""
    if other is not None and not isinstance(other, str):
        raise FormProblem(f'"{question.label}": the Other answer must be text')
    other_text = (other or "").strip() or None
    if question.type == "single":
        if picked is not None and not isinstance(picked, str):
            raise FormProblem(f'"{question.label}" takes one option')
        option_ids: tuple[str, ...] = () if picked in (None, "") else (picked,)
    else:
        if picked is not None and not (isinstance(picked, list) and all(isinstance(p, str) for p in picked)):
            raise FormProblem(f'"{question.label}" takes a list of options')
        option_ids = tuple(picked or ())
    if not option_ids and other_text is None and (question.type == "single" or picked is None):
        return None  # left empty (an empty list is a multi question's answer: none of them)
    try:
        return check_selection(question, option_ids, other_text)
    except BrokerError as exc:
        raise FormProblem(f'"{question.label}": {exc.message}') from None


def next_command(state: Questionnaire, reply: FormReply) -> Command | None:
    """The next command that applies ``reply`` to ``state`` as it is now, or None when
    nothing of it is left to apply (it was all applied, or the questionnaire moved on)."""
    question = state.current_question
    if state.status != "in_progress" or question is None:
        return None
    if reply.cancel:
        return Cancel(state.id, state.step)
    answer = reply.answers.get(question.id)
    if reply.clarification is not None and (question.id == reply.pause_at or answer is None):
        # (or, when a client moved past where the form paused, the first the form left empty)
        return Clarify(state.id, state.step, reply.clarification, draft=answer)
    if answer is None:
        return None
    return AnswerQuestion(state.id, state.step, question.id, answer.selected_option_ids, answer.other)
