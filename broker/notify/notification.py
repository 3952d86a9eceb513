"""The ``Notification`` value: what one route is told about one questionnaire waiting for a person.

It is built from the questionnaire's state by ``triggers.py`` and carries only what a notice
may say: ids, who asked (the agent token's ``sub``), how many questions, the first waiting
question's label and prompt (unless the route leaves them out) and the link back. Never an
answer, an Other text, a clarification, or a token wider than the one session of the link.
Every channel renders it its own way; ``payload`` is the webhook's JSON (docs/notifications.md).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from broker.core.reminders import TRIGGERS, Trigger

__all__ = ["TRIGGERS", "Notification", "QuestionText", "Trigger"]
PAYLOAD_TYPE: Final = "questionnaire.waiting"
PAYLOAD_VERSION: Final = 1


class QuestionText(msgspec.Struct, frozen=True):
    label: str
    prompt: str


class Notification(msgspec.Struct, frozen=True):
    """``id``: one per route and trigger (a retry of it keeps it: the webhook's Idempotency-Key);
    ``at``: when it was made (Unix seconds); ``link_jti``: the id of the client token in the
    link (None: none), logged with the notification so that it can be revoked."""

    id: str
    trigger: Trigger
    session_id: str
    questionnaire_id: str
    asked_by: str | None
    questions: int
    question: QuestionText | None
    link: str
    at: float
    link_jti: str | None = None

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON body, key for key as docs/notifications.md gives it."""
        return {
            "type": PAYLOAD_TYPE,
            "version": PAYLOAD_VERSION,
            "id": self.id,
            "trigger": self.trigger,
            "sessionId": self.session_id,
            "questionnaireId": self.questionnaire_id,
            "askedBy": self.asked_by,
            "questions": self.questions,
            "question": None
            if self.question is None
            else {"label": self.question.label, "prompt": self.question.prompt},
            "link": self.link,
            "at": int(self.at),
        }

    @property
    def agent(self) -> str:
        """Who asked, for a sentence: the agent's name, or "An agent"."""
        return self.asked_by or "An agent"

    @property
    def headline(self) -> str:
        """One line for a title or a subject."""
        if self.trigger == "idle":
            return f"{self.agent} is still waiting for your answer"
        if self.trigger == "resumed":
            return f"{self.agent} answered your question and is waiting for you"
        return f"{self.agent} has {self.questions} question{'s' if self.questions != 1 else ''} for you"
