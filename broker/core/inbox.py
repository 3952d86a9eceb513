"""The inbox: what waits in the sessions a token covers, one entry per open questionnaire.

An entry is what the inbox shows of an open questionnaire: its session, id and status, the
question being asked (label, prompt, its index of the total), when it began and when it
last moved, and who asked. The stores keep one beside each open questionnaire's state, so
listing an inbox reads a few hundred bytes per questionnaire and never its questions; the
broker keeps its inbox sockets in step with them (broker/service/inbox.py).

An entry moves only when its questionnaire does: it starts, a question is answered, a
clarification is asked or answered (its ``step`` or ``status`` changes). A draft (options
toggled, Other typed) leaves it as it is: ``updatedAt`` is when the questionnaire last
moved, and nobody watching an inbox is sent a frame per toggle.

Two orders, each total:

- the list (the inbox socket's ``inbox`` frame, what a person is shown): waiting for the
  person (``in_progress``) first, then waiting for the agent (``needs_clarification``);
  within each, oldest first (``createdAt``), then by session and questionnaire id;
- pages (``GET /v1/inbox``): by session id, then as the list within the session. The stores
  keep the sessions with something open in id order (an index), so a page reads the
  sessions it shows and a few more, never every session its scope covers
  (broker/service/inbox_pages.py).

A cursor is the page key of the last item of a page, opaque to clients; a page starts
after it whatever changed meanwhile (an item that moved behind the cursor is on a later
page, one that moved before it is not shown again: the websocket is the live view).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Final

import msgspec

from broker.core.errors import BrokerError
from broker.core.machine import Questionnaire

DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 500
_RANK: Final = {"in_progress": 0, "needs_clarification": 1}  # waiting for the person first
# A rank above every item's: a page key with it stands after every item of its session.
AFTER_SESSION: Final = 3
# 2: page keys lead with the session id (1 was the list's order, whose pages read every session).
_CURSOR_VERSION: Final = 2

SortKey = tuple[int, float, str, str]  # the list's order
PageKey = tuple[str, int, float, str]  # the pages' order: session, rank, createdAt, questionnaire


class Entry(msgspec.Struct, frozen=True, array_like=True):
    """An open questionnaire as the inbox shows it (``step``: the core's, not on the wire).

    Stored as a msgpack array in this field order: ``step`` and ``status`` first, so that a
    store can tell from a prefix of the bytes whether the entry moved (``moment_length``).
    """

    step: int
    status: str
    session_id: str
    questionnaire_id: str
    label: str
    prompt: str
    index: int
    total: int
    created_at: float
    updated_at: float
    asked_by: str | None = None

    def item(self, clients: int) -> dict[str, Any]:
        """The wire item (``GET /v1/inbox``, the inbox socket's frames)."""
        return {
            "sessionId": self.session_id,
            "questionnaireId": self.questionnaire_id,
            "status": self.status,
            "label": self.label,
            "prompt": self.prompt,
            "index": self.index,
            "total": self.total,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "askedBy": self.asked_by,
            "clients": clients,
        }

    @property
    def sort_key(self) -> SortKey:
        return (_RANK.get(self.status, 2), self.created_at, self.session_id, self.questionnaire_id)

    @property
    def page_key(self) -> PageKey:
        return (self.session_id, _RANK.get(self.status, 2), self.created_at, self.questionnaire_id)


def entry_of(state: Questionnaire) -> Entry | None:
    """The entry of ``state`` as it stands; None once it has ended."""
    index, questions = len(state.answers), state.questions  # (current_index, without a property call)
    if index >= len(questions) or state.is_terminal:
        return None
    question = questions[index]
    # (Positional, in the fields' order: every write makes one.)
    return Entry(
        state.step,
        state.status,
        state.session_id,
        state.id,
        question.label,
        question.prompt,
        index,
        len(questions),
        state.created_at,
        state.updated_at,
        state.asked_by,
    )


def next_entry(previous: Entry | None, state: Questionnaire) -> Entry | None:
    """The entry after ``state`` was written, given the one before: None once it ended,
    ``previous`` itself when the write did not move it (a draft)."""
    if state.is_terminal:
        return None
    if previous is not None and previous.step == state.step and previous.status == state.status:
        return previous
    return entry_of(state)


# --- the stored form --------------------------------------------------------------

_encode: Final = msgspec.msgpack.Encoder().encode
_decode: Final = msgspec.msgpack.Decoder(Entry).decode


def pack(entry: Entry) -> bytes:
    return _encode(entry)


def unpack(packed: bytes) -> Entry:
    """The entry ``pack`` made; raises ``ValueError`` (msgspec's errors are ValueErrors) on
    anything else."""
    return _decode(packed)


def moment_length(entry: Entry) -> int:
    """How many leading bytes of ``pack(entry)`` say its step and status: a store compares
    them with the stored entry's to keep the entry a draft did not move."""
    return _moment_length(entry.step, entry.status)


@lru_cache(maxsize=1024)  # (a few steps and statuses: every write asks)
def _moment_length(step: int, status: str) -> int:
    return 1 + len(_encode(step)) + len(_encode(status))  # (1: the array's header)


# --- order and pages --------------------------------------------------------------

Row = tuple[Entry, int]  # an entry and its session's connected clients


def ordered(rows: Iterable[Row]) -> list[Row]:
    """In the list's order."""
    return sorted(rows, key=lambda row: row[0].sort_key)


def paged(rows: Iterable[Row], after: PageKey | None) -> list[Row]:
    """In the pages' order, those after ``after`` only."""
    rest = sorted(rows, key=lambda row: row[0].page_key)
    return rest if after is None else [row for row in rest if row[0].page_key > after]


def after_session(session_id: str) -> PageKey:
    """The page key after every item of ``session_id`` (and before the next session's)."""
    return (session_id, AFTER_SESSION, 0.0, "")


def parse_limit(text: str) -> int:
    if not (text.isascii() and text.isdecimal()) or not 1 <= int(text) <= MAX_LIMIT:
        raise invalid_request(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {text[:40]!r}")
    return int(text)


def cursor(key: PageKey) -> str:
    """An opaque cursor for ``key``: URL-safe base64 of msgpack, no padding."""
    packed = _encode([_CURSOR_VERSION, *key])
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def parse_cursor(text: str) -> PageKey:
    """The key of a cursor this module made, or ``invalid_arguments``."""
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        version, session_id, rank, created_at, questionnaire_id = msgspec.msgpack.decode(packed)
    except (binascii.Error, ValueError, TypeError):
        raise _bad_cursor() from None
    if (
        version != _CURSOR_VERSION
        or type(session_id) is not str
        or type(rank) is not int
        or type(created_at) not in (int, float)
        or type(questionnaire_id) is not str
    ):
        raise _bad_cursor()
    return (session_id, rank, float(created_at), questionnaire_id)


def invalid_request(message: str) -> BrokerError:
    """A refused inbox request: one sentence starting with ``inbox:``."""
    return BrokerError("invalid_arguments", f"inbox: {message}")


def _bad_cursor() -> BrokerError:
    return invalid_request("cursor is not one this API gave (take it from a page's next)")


# --- frames -----------------------------------------------------------------------


def inbox_frame(rows: Iterable[Row]) -> dict[str, Any]:
    """The whole list, in order: sent on connect (and whenever the broker had to re-read)."""
    return {"type": "inbox", "items": [entry.item(clients) for entry, clients in ordered(rows)]}


def item_frame(entry: Entry, clients: int) -> dict[str, Any]:
    """An item added or changed."""
    return {"type": "inbox_item", "item": entry.item(clients)}


def removed_frame(state: Questionnaire) -> dict[str, Any]:
    """A questionnaire left the inbox: it ended (``state`` is its final state)."""
    frame: dict[str, Any] = {
        "type": "inbox_removed",
        "sessionId": state.session_id,
        "questionnaireId": state.id,
        "status": state.status,
    }
    if state.cancellation_reason is not None:
        frame["cancellationReason"] = state.cancellation_reason
    return frame
