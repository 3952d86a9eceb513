"""A session's history: each questionnaire summed up from its first and last events.

The stores keep every questionnaire's events (events.py) and an index of a session's
questionnaires, newest first; the history list needs no more than the first event (when,
who asked, how many questions) and the latest (where it stands now, and when it ended).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from broker.core.events import Event

STATUSES: Final = ("in_progress", "needs_clarification", "completed", "cancelled", "unavailable")
# What the latest event says of a questionnaire: its status and cancellation reason.
_STANDING: Final[dict[str, tuple[str, str | None]]] = {
    "started": ("in_progress", None),
    "answered": ("in_progress", None),
    "resumed": ("in_progress", None),
    "clarification_requested": ("needs_clarification", None),
    "completed": ("completed", None),
    "cancelled": ("cancelled", "user_cancelled"),
    "aborted": ("cancelled", "aborted"),
    "unavailable": ("unavailable", None),  # (the reason is the event's own)
}
_ENDED: Final = frozenset({"completed", "cancelled", "unavailable"})


class Summary(msgspec.Struct, frozen=True):
    """What a store returns of one questionnaire for the history: its id, its place in the
    session's index (``seq``: larger is newer; the paging cursor), and its first and latest
    events."""

    questionnaire_id: str
    seq: int
    first: Event
    last: Event

    @property
    def status(self) -> str:
        return _STANDING[self.last.type][0]

    def to_wire(self) -> dict[str, Any]:
        last = self.last
        status, reason = _STANDING[last.type]
        if last.type == "unavailable":
            reason = last.reason
        asker = self.first.by
        return {
            "id": self.questionnaire_id,
            "status": status,
            "reason": reason,
            "createdAt": self.first.at,
            "endedAt": last.at if status in _ENDED else None,
            "askedBy": asker.sub if asker is not None else None,
            "questions": self.first.questions,
        }
