"""The pure state machine for the core's unit tests (no event loop, no network, no clock).

Questionnaires are built the way the broker builds them: the agent's tool input goes
through ``parse_tool_input`` and then ``machine.start``. Times are plain floats passed in.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from broker.core.errors import BrokerError
from broker.core.machine import (
    AnswerQuestion,
    Cancel,
    Clarify,
    Command,
    Draft,
    Questionnaire,
    Resume,
    apply,
    start,
)
from broker.core.model import StartInput, parse_tool_input
from tests.helpers.samples import multi, single, start_body

QID = "qn-1"
SID = "sess-1"
T0 = 1000.0


def parse_start(*questions: dict[str, Any]) -> StartInput:
    parsed = parse_tool_input(start_body(*questions))
    assert isinstance(parsed, StartInput)
    return parsed


# The three questions most machine tests walk through:
#   pick    single, options a b c, Other allowed
#   checks  multi, options unit e2e lint, Other allowed, 1..2 choices
#   confirm single, options yes no, no Other
def standard_questions() -> list[dict[str, Any]]:
    return [
        single("pick", ("a", "b", "c")),
        multi("checks", ("unit", "e2e", "lint"), minSelections=1, maxSelections=2),
        single("confirm", ("yes", "no"), allowOther=False),
    ]


def new_questionnaire(*questions: dict[str, Any], now: float = T0) -> Questionnaire:
    parsed = parse_start(*(questions or tuple(standard_questions())))
    return start(QID, SID, parsed.questions, now)


# --- driving the machine ------------------------------------------------------------


def answer(state: Questionnaire, *option_ids: str, other: str | None = None, now: float | None = None) -> Questionnaire:
    question = state.current_question
    assert question is not None
    command = AnswerQuestion(state.id, state.step, question.id, tuple(option_ids), other)
    return apply(state, command, _later(state, now))


def draft(state: Questionnaire, *option_ids: str, other: str | None = None, now: float | None = None) -> Questionnaire:
    return apply(state, Draft(state.id, state.step, tuple(option_ids), other), _later(state, now))


def clarify(state: Questionnaire, request: str = "What does this mean?", now: float | None = None) -> Questionnaire:
    return apply(state, Clarify(state.id, state.step, request), _later(state, now))


def resume(state: Questionnaire, response: str = "It means this.", now: float | None = None) -> Questionnaire:
    return apply(state, Resume(state.revision, response), _later(state, now))


def cancel(state: Questionnaire, now: float | None = None) -> Questionnaire:
    return apply(state, Cancel(state.id, state.step), _later(state, now))


def _later(state: Questionnaire, now: float | None) -> float:
    return state.updated_at + 1.0 if now is None else now


# --- assertions ---------------------------------------------------------------------


def assert_transition(before: Questionnaire, command: Command, now: float, **changes: Any) -> Questionnaire:
    """Apply ``command`` and assert the WHOLE new state: ``before`` with exactly ``changes``."""
    snapshot = before.to_record()
    after = apply(before, command, now)
    changes.setdefault("updated_at", now)
    assert after == msgspec.structs.replace(before, **changes)
    assert before.to_record() == snapshot  # the old value is untouched
    return after


def assert_refused(state: Questionnaire, command: Command, code: str, *, now: float | None = None) -> BrokerError:
    """Apply ``command``, expect a ``BrokerError(code)`` and the state unchanged."""
    snapshot = copy.deepcopy(state)
    record = state.to_record()
    with pytest.raises(BrokerError) as info:
        apply(state, command, _later(state, now))
    assert info.value.code == code, info.value.message
    assert state == snapshot
    assert state.to_record() == record
    return info.value
