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
