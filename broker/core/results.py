"""What the agent reads back: the tool-result text and the versioned ``details`` object.

The text is written for a model: a first line it can match (``<MARKER>
questionnaireId=<id> revision=<n>``), then plain sentences saying what happened and, after a
clarification request, the exact resume call to make. ``details`` carries the same facts as
data for programs.
"""

from __future__ import annotations

import json
from typing import Any, Final

from broker.core.machine import Answer, Questionnaire
from broker.core.model import MAX_CLARIFICATION

DETAILS_VERSION: Final = 1

MARKERS: Final[dict[str, str]] = {
    "completed": "QUESTIONNAIRE_COMPLETED",
    "needs_clarification": "QUESTIONNAIRE_NEEDS_CLARIFICATION",
    "cancelled": "QUESTIONNAIRE_CANCELLED",
    "unavailable": "QUESTIONNAIRE_UNAVAILABLE",
}


def tool_result(state: Questionnaire) -> dict[str, Any]:
    """The 200 body for a questionnaire that has an outcome."""
    if not state.is_outcome:
        raise ValueError(f"questionnaire {state.id} is {state.status}: no outcome yet")
    return {
        "content": [{"type": "text", "text": result_text(state)}],
        "details": details(state),
        "isError": False,
    }


def pending(state: Questionnaire) -> dict[str, Any]:
    """The 202 body: still with the person."""
    return {
        "status": "pending",
        "questionnaireId": state.id,
        "revision": state.revision,
        "step": state.step,
    }


def details(state: Questionnaire) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": DETAILS_VERSION,
        "questionnaireId": state.id,
        "revision": state.revision,
        "status": state.status,
    }
    if state.status in ("cancelled", "unavailable"):
        out["cancellationReason"] = state.cancellation_reason
    out["currentQuestionIndex"] = state.current_index
    out["questions"] = [question.to_wire() for question in state.questions]
    out["answers"] = [answer.to_wire() for answer in state.answers]
    out["draftAnswer"] = state.draft.to_wire() if state.draft is not None else None
    pending_request = state.pending_clarification
    if pending_request is not None:
        out["clarificationRequest"] = pending_request.to_wire()
    out["clarifications"] = [c.to_wire() for c in state.clarifications]
    return out


def result_text(state: Questionnaire) -> str:
    lines = [f"{MARKERS[state.status]} questionnaireId={state.id} revision={state.revision}"]
    total = len(state.questions)
    if state.status == "completed":
        lines.append(f"The user answered all {total} question(s). Answers, in question order:")
        lines.extend(_answer_line(answer) for answer in state.answers)
        lines.append("Option ids are the ids you declared; act on them, not on the labels.")
    elif state.status == "needs_clarification":
        lines.extend(_clarification_lines(state))
    elif state.status == "cancelled":
        if state.cancellation_reason == "aborted":
            lines.append("The questionnaire was aborted by the agent before the user finished it.")
            lines.extend(_partial_answers(state))
            # The agent's own doing, not the person's: nothing to respect as their choice.
            lines.append("The user did not decline these questions. Do not guess the missing answers.")
        else:
            lines.append(f"The user cancelled the questionnaire at question {state.current_index + 1} of {total}.")
            lines.extend(_partial_answers(state))
            lines.append("Treat this as the user's real decision. Do not guess the missing answers.")
    else:  # unavailable
        if state.cancellation_reason == "ui_unavailable":
            lines.append(
                f"No user interface was connected to session {state.session_id}, so the user could not be asked."
            )
        else:
            lines.append(
                "The user's interface disconnected and did not come back in time; the "
                "questionnaire could not be finished."
            )
        lines.extend(_partial_answers(state))
        lines.append("Do not guess the answers. Ask in normal text, or try again later when the user has qbroker open.")
    return "\n".join(lines)


def _clarification_lines(state: Questionnaire) -> list[str]:
    request = state.pending_clarification
    assert request is not None  # needs_clarification always has one
    question = state.questions[state.current_index]
    lines = [
        f"The user paused at question {state.current_index + 1} of {len(state.questions)} "
        f"({question.id}: {json.dumps(question.label, ensure_ascii=False)}) and asks:",
        json.dumps(request.request, ensure_ascii=False),
    ]
    if state.answers:
        lines.append("Answers so far (already stored):")
        lines.extend(_answer_line(answer) for answer in state.answers)
    resume_call = {
        "action": "resume",
        "questionnaireId": state.id,
        "revision": state.revision,
        "clarificationResponse": f"<a concise summary of your explanation, at most {MAX_CLARIFICATION} characters>",
    }
    lines += [
        "Answer the user's request now in normal assistant text, concretely and briefly. Then "
        "immediately call questionnaire again with exactly:",
        json.dumps(resume_call, ensure_ascii=False),
        "Do not resend questions, do not start a new questionnaire and do not guess the pending "
        "answer: the user still has to choose.",
    ]
    return lines


def _partial_answers(state: Questionnaire) -> list[str]:
    if not state.answers:
        return ["No question had been answered."]
    return ["Answers given before it ended:", *(_answer_line(a) for a in state.answers)]


def _answer_line(answer: Answer) -> str:
    ids = ", ".join(answer.selection.selected_option_ids)
    line = f"{answer.question_id}: optionIds=[{ids}]"
    if answer.selection.other is not None:
        # JSON quoting keeps a multi-line Other text on one line and unambiguous.
        line += f" other={json.dumps(answer.selection.other, ensure_ascii=False)}"
    return line
