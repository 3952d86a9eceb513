"""When is a person told that a questionnaire waits for them? (pure: ``now`` is passed in)

Three moments, each announced once per questionnaire across every broker (the service
takes the ``claim_name`` in the store before it sends anything):

- ``started``: a questionnaire starts while no client of its session is connected;
- ``resumed``: the agent answered a clarification while no client is connected (each
  resume is a moment of its own: one notice per revision);
- ``idle``: a client is connected, but nobody has acted on the question shown for a
  route's ``after`` seconds (the tab is open, nobody is looking).

Only a questionnaire in progress is worth a notice: one that ended, or waits for the agent
again, is not announced (``wanted``), however late a delivery comes.
"""

from __future__ import annotations

from typing import Final, Literal

from broker.core.machine import Questionnaire
from broker.core.model import Question

Trigger = Literal["started", "resumed", "idle"]
TRIGGERS: Final[tuple[Trigger, ...]] = ("started", "resumed", "idle")


def claim_name(state: Questionnaire, trigger: Trigger, route: int) -> str:
    """The name a notice of ``trigger`` for ``state`` on route number ``route`` is claimed under."""
    moment = f"{trigger}.{state.revision}" if trigger == "resumed" else trigger
    return f"notify:{state.id}:{moment}:{route}"


def wanted(state: Questionnaire) -> bool:
    """Whether a notice about ``state`` may still go out: it waits for the person."""
    return state.status == "in_progress"


def waiting_question(state: Questionnaire) -> Question | None:
    """The question the person would see first, or None when none waits for them."""
    return state.current_question if wanted(state) else None


def idle_at(state: Questionnaire, shown_since: float, after: float) -> float | None:
    """When ``state``, shown to a connected client since ``shown_since``, counts as left
    alone for ``after`` seconds (its last change or its showing, whichever came later);
    None when it cannot (it does not wait for the person)."""
    if not wanted(state):
        return None
    return max(state.updated_at, shown_since) + after


def is_idle(state: Questionnaire, shown_since: float, after: float, now: float) -> bool:
    due = idle_at(state, shown_since, after)
    return due is not None and now >= due
