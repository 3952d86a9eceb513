"""The SDK's results: what a call returns, read from the broker's tool result into typed,
read-only values (``QuestionnaireResult`` and its ``Answer``/``Clarification`` parts; a
``202``'s ``Pending`` is in pending.py, as the errors carry it too).

Kept apart from the exchange so that a caller (the CLI, the MCP server) can read and print
results without the HTTP machinery.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from clients.agent.errors import ProtocolError

Status = Literal["completed", "needs_clarification", "cancelled", "unavailable"]
STATUSES: Final[tuple[Status, ...]] = (
    "completed",
    "needs_clarification",
    "cancelled",
    "unavailable",
)

# Exit codes of `qbroker ask` / `qbroker resume` per outcome (1 is any error).
EXIT_CODES: Final[dict[str, int]] = {
    "completed": 0,
    "needs_clarification": 2,
    "cancelled": 3,
    "unavailable": 4,
}


def _freeze(value: Any) -> Any:
    """Read-only deep copy of decoded JSON (dicts -> mappingproxy, lists -> tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """Plain JSON-ready copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Answer:
    """One answered question: option ids in declared order, plus the trimmed Other text."""

    question_id: str
    selected_option_ids: tuple[str, ...]
    other: str | None = None

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Answer:
        other = wire.get("other")
        return cls(
            question_id=str(wire["questionId"]),
            selected_option_ids=tuple(str(o) for o in wire.get("selectedOptionIds") or ()),
            other=other if isinstance(other, str) else None,
        )

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "questionId": self.question_id,
            "selectedOptionIds": list(self.selected_option_ids),
        }
        if self.other is not None:
            wire["other"] = self.other
        return wire


@dataclass(frozen=True, slots=True)
class Clarification:
    """A question the person asked the agent (and, once resumed, the agent's response)."""

    revision: int
    question_id: str
    request: str
    response: str | None = None

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Clarification:
        response = wire.get("response")
        return cls(
            revision=int(wire["revision"]),
            question_id=str(wire["questionId"]),
            request=str(wire["request"]),
            response=response if isinstance(response, str) else None,
        )


@dataclass(frozen=True, slots=True)
class QuestionnaireResult:
    """An outcome: the tool result the broker returned, read into typed fields.

    ``text`` is the tool-result text for a model (first line ``<MARKER> questionnaireId=..
    revision=..``); ``details`` the versioned details object (read-only);
    ``tool_result()`` rebuilds the whole ``{content, details, isError}`` JSON.
    """

    status: Status
    questionnaire_id: str
    revision: int
    answers: tuple[Answer, ...]
    text: str
    details: Mapping[str, Any] = field(repr=False)
    clarification_request: Clarification | None = None
    cancellation_reason: str | None = None
    clarifications: tuple[Clarification, ...] = ()
    content: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)

    @classmethod
    def from_tool_result(cls, body: Any) -> QuestionnaireResult:
        """Parse a ``200`` body; raises ``ProtocolError`` when it is not a tool result."""
        try:
            if not isinstance(body, Mapping):
                raise TypeError("not an object")
            details = body["details"]
            content = body.get("content") or []
            text = "\n".join(
                str(item.get("text", ""))
                for item in content
                if isinstance(item, Mapping) and item.get("type") == "text"
            )
            status = details["status"]
            if status not in STATUSES:
                raise ValueError(f"unknown status {status!r}")
            request = details.get("clarificationRequest")
            if isinstance(request, str):  # tolerate a bare request text
                request = {
                    "revision": details["revision"],
                    "questionId": _current_question_id(details),
                    "request": request,
                }
            reason = details.get("cancellationReason")
            return cls(
                status=status,
                questionnaire_id=str(details["questionnaireId"]),
                revision=int(details["revision"]),
                answers=tuple(Answer.from_wire(a) for a in details.get("answers") or ()),
                text=text,
                details=_freeze(details),
                clarification_request=Clarification.from_wire(request) if request else None,
                cancellation_reason=reason if isinstance(reason, str) else None,
                clarifications=tuple(Clarification.from_wire(c) for c in details.get("clarifications") or ()),
                content=tuple(_freeze(item) for item in content if isinstance(item, Mapping)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"the broker returned a malformed tool result ({exc})") from None

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def needs_clarification(self) -> bool:
        return self.status == "needs_clarification"

    @property
    def cancelled(self) -> bool:
        return self.status == "cancelled"

    @property
    def unavailable(self) -> bool:
        return self.status == "unavailable"

    @property
    def exit_code(self) -> int:
        """The ``qbroker ask`` exit code for this outcome (0, 2, 3 or 4)."""
        return EXIT_CODES[self.status]

    def answer(self, question_id: str) -> Answer | None:
        """The answer to ``question_id``, or ``None`` when it was not answered."""
        for answer in self.answers:
            if answer.question_id == question_id:
                return answer
        return None

    def tool_result(self) -> dict[str, Any]:
        """The tool result as the broker sent it: ``{content, details, isError}``."""
        content = [_thaw(c) for c in self.content] or [{"type": "text", "text": self.text}]
        return {"content": content, "details": _thaw(self.details), "isError": False}


def _current_question_id(details: Mapping[str, Any]) -> str:
    questions = details.get("questions") or []
    index = details.get("currentQuestionIndex")
    if isinstance(index, int) and 0 <= index < len(questions):
        return str(questions[index].get("id", ""))
    return ""


def dumps_result(result: QuestionnaireResult) -> str:
    """The whole tool result as pretty JSON (what ``qbroker ask --json`` prints)."""
    return json.dumps(result.tool_result(), indent=2, ensure_ascii=False)
