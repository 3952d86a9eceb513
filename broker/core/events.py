"""Who changed a questionnaire, and how: its events, derived from its states.

Every change a broker writes (a start, an answer, a clarification and its reply, an end)
becomes one or two ``Event`` values, each saying when (``at``), at which step, about which
question, and who (``by``, an ``Actor``: the token's ``sub`` and role, and for a client the
kind and name its hello gave; None for the broker's own outcomes, such as closing a
questionnaire nobody was there to answer). Drafts are not events: they are toggles on the
way to an answer.

``events_of(before, after, by)`` tells them from the two states, so the state machine needs
no second output and every writer (an agent's call, a client's command, the broker closing
a questionnaire) gets the same events. Events hold ids, steps and times only: never an
answer, an Other text or a clarification's words.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

import msgspec

from broker.core.actors import Actor, actor_from_wire
from broker.core.machine import Questionnaire

EventType = Literal[
    "started",
    "answered",
    "clarification_requested",
    "resumed",
    "cancelled",
    "aborted",
    "unavailable",
    "completed",
]
EVENT_TYPES: Final[tuple[str, ...]] = get_args(EventType)


class Event(msgspec.Struct, frozen=True, omit_defaults=True):
    """One change. ``step``: the questionnaire's step the change was made at (what a
    client's command names); ``question_id``: the question it concerns, where one does;
    ``revision``: of a clarification and its reply; ``reason``: why it became unavailable;
    ``questions``: how many a started questionnaire asks."""

    type: EventType
    at: float
    step: int
    by: Actor | None
    question_id: str | None = None
    revision: int | None = None
    reason: str | None = None
    questions: int | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"type": self.type, "at": self.at, "step": self.step}
        if self.question_id is not None:
            wire["questionId"] = self.question_id
        if self.revision is not None:
            wire["revision"] = self.revision
        if self.reason is not None:
            wire["reason"] = self.reason
        if self.questions is not None:
            wire["questions"] = self.questions
        wire["by"] = None if self.by is None else self.by.to_wire()
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Event:
        return cls(
            wire["type"],
            wire["at"],
            wire["step"],
            actor_from_wire(wire.get("by")),
            wire.get("questionId"),
            wire.get("revision"),
            wire.get("reason"),
            wire.get("questions"),
        )


def started(state: Questionnaire, by: Actor | None) -> Event:
    return Event("started", state.created_at, state.step, by, questions=len(state.questions))


def events_of(before: Questionnaire | None, after: Questionnaire, by: Actor | None) -> tuple[Event, ...]:
    """The events of the change from ``before`` (None: a start) to ``after``; () for a
    draft, which changes nothing an event records."""
    if before is None:
        return (started(after, by),)
    at, step = after.updated_at, before.step
    if len(after.answers) > len(before.answers):
        answered = Event("answered", at, step, by, question_id=after.answers[-1].question_id)
        if after.status == "completed":
            return answered, Event("completed", at, step, by)
        return (answered,)
    if after.status == before.status:
        return ()  # a draft
    question = before.current_question
    question_id = question.id if question is not None else None
    if after.status == "needs_clarification":
        clarification = after.clarifications[-1]
        return (
            Event(
                "clarification_requested",
                at,
                step,
                by,
                question_id=clarification.question_id,
                revision=clarification.revision,
            ),
        )
    if after.status == "in_progress":  # back from a clarification
        clarification = after.clarifications[-1]
        return (Event("resumed", at, step, by, question_id=clarification.question_id, revision=after.revision),)
    if after.status == "unavailable":
        return (Event("unavailable", at, step, by, question_id=question_id, reason=after.cancellation_reason),)
    kind: EventType = "aborted" if after.cancellation_reason == "aborted" else "cancelled"
    return (Event(kind, at, step, by, question_id=question_id),)
