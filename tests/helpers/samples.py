"""What tests send: session ids, questions and the agent's tool inputs (docs/protocol.md).

``single()`` and ``multi()`` build one question of the tool input; the keyword arguments
add or override any of its keys. ``start_body`` and ``resume_body`` are the two tool inputs.
"""

from __future__ import annotations

import uuid
from typing import Any


def new_sid(prefix: str = "t") -> str:
    """A fresh session id (tests isolate themselves by session, never by broker)."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def single(qid: str = "target", options: tuple[str, ...] = ("staging", "production"), **extra: Any) -> dict[str, Any]:
    """A single-choice question; no labels, so each label is its id (``label=`` sets one)."""
    return {
        "id": qid,
        "prompt": f"Pick one for {qid}?",
        "type": "single",
        "options": [{"id": o} for o in options],
        **extra,
    }


def multi(qid: str = "checks", options: tuple[str, ...] = ("unit", "e2e", "lint"), **extra: Any) -> dict[str, Any]:
    """A multi-choice question, no bounds (``minSelections=``/``maxSelections=`` set them)."""
    return {
        "id": qid,
        "prompt": f"Pick some for {qid}?",
        "type": "multi",
        "options": [{"id": o} for o in options],
        **extra,
    }


def start_body(*questions: dict[str, Any]) -> dict[str, Any]:
    """The ``start`` tool input (one ``single()`` when no question is given)."""
    return {"action": "start", "questions": list(questions) or [single()]}


def resume_body(qid: str, revision: int, response: str) -> dict[str, Any]:
    """The ``resume`` tool input."""
    return {"action": "resume", "questionnaireId": qid, "revision": revision, "clarificationResponse": response}


# Three questions as different agents might ask them: the inbox tests list them side by side.
TARGET: dict[str, Any] = {
    "id": "deploy_target",
    "label": "Target",
    "prompt": "Which environment should this release go to?",
    "type": "single",
    "options": [
        {"id": "staging", "label": "Staging"},
        {"id": "production", "label": "Production", "description": "Requires an approved release window"},
    ],
    "allowOther": False,
}
REVIEWER: dict[str, Any] = {
    "id": "reviewer",
    "label": "Reviewer",
    "prompt": "Who should review the database migration?",
    "type": "single",
    "options": [{"id": "ana", "label": "Ana (platform)"}, {"id": "bo", "label": "Bo (data)"}],
    "allowOther": False,
}
TONE: dict[str, Any] = {
    "id": "tone",
    "label": "Changelog tone",
    "prompt": "Which tone should the changelog take?",
    "type": "single",
    "options": [{"id": "plain", "label": "Plain"}, {"id": "upbeat", "label": "Upbeat"}],
}
