"""The inbox in the terminal: every questionnaire open in the sessions the token covers (pure).

The broker's inbox socket is the authority: an ``inbox`` frame (on every connect and
reconnect) replaces the list, ``inbox_item`` adds or replaces one item, ``inbox_removed``
drops one. The list is shown waiting-for-the-person first, oldest first (the order of the
socket's ``inbox`` list). The highlight follows its item, not its row, so that items
arriving or leaving never move it to another questionnaire under the person's finger.

When the questionnaire answered from the list ends, ``ended`` records how, and the first
other item still waiting is offered (``offered``), recomputed from the live list so that
one answered elsewhere meanwhile is never offered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from clients.tui.state import Notice

Item = dict[str, Any]
Key = tuple[str, str]
Conn = Literal["connecting", "connected", "offline"]

WAITING = "in_progress"  # waiting for the person
WITH_AGENT = "needs_clarification"  # the person asked; waiting for the agent's reply


def item_key(item: Item) -> Key:
    return (str(item["sessionId"]), str(item["questionnaireId"]))


def seconds(value: object) -> float | None:
    """Unix seconds from what the broker sends: seconds or milliseconds, or an ISO 8601 time."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value) / 1000 if value > 1e11 else float(value)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.timestamp() if parsed.tzinfo is not None else None
    return None


def order(item: Item) -> tuple[int, float, str, str]:
    """Waiting for the person first, then oldest first; ties by session and id (stable)."""
    created = seconds(item.get("createdAt"))
    return (
        0 if item.get("status") == WAITING else 1,
        math.inf if created is None else created,
        str(item["sessionId"]),
        str(item["questionnaireId"]),
    )


def _usable(item: object) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("sessionId"), str)
        and isinstance(item.get("questionnaireId"), str)
    )


@dataclass
class Ended:
    key: Key | None
    status: str | None  # the closed frame's status; None when the session had nothing open


class InboxState:
    def __init__(self) -> None:
        self.items: dict[Key, Item] = {}
        self.loaded = False  # an ``inbox`` frame came
        # The inbox socket.
        self.conn: Conn = "connecting"
        self.offline_reason = ""
        self.retry_at: float | None = None
        self.fatal_message: str | None = None
        # The person.
        self.highlight_key: Key | None = None
        self.highlight_row = 0  # where the highlight was, for when its item goes
        self.answering: Key | None = None
        self.ended: Ended | None = None
        self.notice: Notice | None = None
        self.list_top = 0  # the first item drawn (the view keeps the highlight in sight)

    # ------------------------------------------------------------------ frames

    def apply(self, frame: dict[str, Any]) -> list[Item]:
        """A frame of the inbox socket; returns the items that started waiting for the person
        (never those of the first list, which were there when the client opened)."""
        kind = frame.get("type")
        arrived: list[Item] = []
        if kind == "welcome":
            self.conn = "connected"
        elif kind == "inbox":
            self.conn = "connected"
            before, first = self.items, not self.loaded
            items = frame.get("items")
            self.items = {item_key(i): i for i in (items if isinstance(items, list) else []) if _usable(i)}
            self.loaded = True
            if not first:
                arrived = [i for k, i in self.items.items() if _starts_waiting(before.get(k), i)]
        elif kind == "inbox_item":
            item = frame.get("item")
            if _usable(item):
                assert isinstance(item, dict)
                key = item_key(item)
                if _starts_waiting(self.items.get(key), item):
                    arrived.append(item)
                self.items[key] = item
        elif kind == "inbox_removed":
            self.items.pop((str(frame.get("sessionId")), str(frame.get("questionnaireId"))), None)
        elif kind == "error":
            self.notice = Notice("error", f"{frame.get('message') or 'error'} [{frame.get('code', 'error')}]")
        self._keep_highlight()
        return arrived

    # ------------------------------------------------------------------ reading

    def ordered(self) -> list[Item]:
        return sorted(self.items.values(), key=order)

    def waiting_count(self) -> int:
        return sum(1 for item in self.items.values() if item.get("status") == WAITING)

    def with_agent_count(self) -> int:
        return len(self.items) - self.waiting_count()

    def next_waiting(self, except_key: Key | None = None) -> Item | None:
        for item in self.ordered():
            if item.get("status") == WAITING and item_key(item) != except_key:
                return item
        return None

    def summary(self) -> str:
        waiting, with_agent = self.waiting_count(), self.with_agent_count()
        if not waiting and not with_agent:
            return "Nothing is waiting for you."
        parts = []
        if waiting:
            parts.append(f"{waiting} questionnaire{' waits' if waiting == 1 else 's wait'} for you")
        if with_agent:
            parts.append(f"{with_agent} wait{'s' if with_agent == 1 else ''} for the agent's reply")
        return " · ".join(parts) + "."

    def highlighted(self) -> Item | None:
        items = self.ordered()
        if not items:
            return None
        return items[self.highlight_index(items)]

    def highlight_index(self, items: list[Item] | None = None) -> int:
        items = self.ordered() if items is None else items
        for i, item in enumerate(items):
            if item_key(item) == self.highlight_key:
                return i
        return max(0, min(self.highlight_row, len(items) - 1))

    # ------------------------------------------------------------------ the person

    def move(self, delta: int, *, to: int | None = None) -> None:
        items = self.ordered()
        if not items:
            return
        row = to if to is not None else self.highlight_index(items) + delta
        row = max(0, min(len(items) - 1, row))
        self.highlight_key = item_key(items[row])
        self.highlight_row = row

    def open(self, key: Key) -> None:
        self.answering = key
        self.ended = None
        self.notice = None

    def end(self, status: str | None) -> None:
        """The questionnaire answered ended: back to the list, the next waiting one offered
        (and highlighted)."""
        self.ended = Ended(self.answering, status)
        self.answering = None
        offer = self.offered()
        if offer is not None:
            self.highlight_key = item_key(offer)

    def back(self) -> Key | None:
        key, self.answering = self.answering, None
        return key

    def offered(self) -> Item | None:
        if self.ended is None:
            return None
        return self.next_waiting(self.ended.key)

    def _keep_highlight(self) -> None:
        items = self.ordered()
        if not items:
            self.highlight_key = None
            self.highlight_row = 0
            return
        row = self.highlight_index(items)
        self.highlight_key = item_key(items[row])
        self.highlight_row = row


def _starts_waiting(before: Item | None, item: Item) -> bool:
    return item.get("status") == WAITING and (before is None or before.get("status") != WAITING)


def ended_text(status: str | None) -> str:
    if status == "completed":
        return "Answers sent."
    if status == "cancelled":
        return "Questionnaire cancelled."
    if status:
        return "That questionnaire closed."
    return "That questionnaire is no longer open."
