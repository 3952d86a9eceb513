"""``qbroker tui --inbox`` without a terminal or a socket: the list, and the one questionnaire
being answered from it (pure, tested alone).

Two sockets feed it: the inbox socket (``InboxSocket``: every questionnaire open in the
sessions the token covers) and, while the person answers one, that session's socket
(``SessionSocket``, the same token), whose frames go to a ``TuiModel`` exactly as in
``qbroker tui --session``. The program (``app.py``) keeps the session socket in step with
``session_wanted`` after every input:

    list --Enter--> session_wanted = the item's session: its questionnaire, as ever
         <--its ``closed`` (or ``idle``: nothing open any more): the next waiting one offered--
         <--← (Left) while choosing: the questionnaire stays open, for later--
"""

from __future__ import annotations

from collections.abc import Callable

from clients.tui import inbox_view, keys
from clients.tui.inbox_state import WAITING, InboxState, Item, Key, item_key
from clients.tui.lines import Line
from clients.tui.model import TuiModel
from clients.tui.state import Frame, Notice
from clients.tui.text import clean


class InboxModel:
    def __init__(self, endpoint: str, session_endpoint: Callable[[str], str], wall: Callable[[], float]) -> None:
        """``endpoint``: the inbox socket's URL (shown while connecting); ``session_endpoint``:
        a session's socket URL; ``wall``: the Unix time, for "3 min ago"."""
        self.inbox = InboxState()
        self.endpoint = endpoint
        self.session_endpoint = session_endpoint
        self.wall = wall
        self.session: TuiModel | None = None

    @property
    def session_wanted(self) -> str | None:
        """The session whose socket should be open (None: none)."""
        return self.session.session if self.session is not None else None

    @property
    def fatal_message(self) -> str | None:
        return self.inbox.fatal_message

    # ------------------------------------------------------------------ the inbox socket

    def inbox_connecting(self, attempt: int) -> None:
        self.inbox.conn = "connecting"
        self.inbox.retry_at = None

    def inbox_disconnected(self, reason: str, retry_at: float | None) -> None:
        self.inbox.conn = "offline"
        self.inbox.offline_reason = reason
        self.inbox.retry_at = retry_at

    def inbox_fatal(self, message: str) -> None:
        self.inbox.conn = "offline"
        self.inbox.fatal_message = message
        self.session = None  # the token is refused: the session's socket would be too

    def inbox_apply(self, frame: Frame) -> None:
        arrived = self.inbox.apply(frame)
        notice = self.inbox.notice
        if arrived and self.session is None and (notice is None or notice.kind == "info"):
            latest = arrived[-1]
            more = f" (and {len(arrived) - 1} more)" if len(arrived) > 1 else ""
            label = clean(str(latest.get("label") or "a questionnaire"))
            self.inbox.notice = Notice("info", f"New: {label} in {latest['sessionId']}{more}")
        self._note()

    # ------------------------------------------------------------------ the session socket

    def session_connecting(self, sid: str, attempt: int) -> None:
        if self._current(sid):
            assert self.session is not None
            self.session.connecting(attempt)

    def session_disconnected(self, sid: str, reason: str, retry_at: float | None) -> None:
        if self._current(sid):
            assert self.session is not None
            self.session.disconnected(reason, retry_at)

    def session_fatal(self, sid: str, message: str) -> None:
        """The broker refused the session's socket for good: back to the list, saying why."""
        if not self._current(sid):
            return
        self.session = None
        self.inbox.back()
        self.inbox.notice = Notice("error", f"Could not open {sid}: {message}")

    def session_apply(self, sid: str, frame: Frame) -> None:
        if not self._current(sid):
            return
        assert self.session is not None
        self.session.apply(frame)
        if frame.get("type") == "closed":
            self._ended(str(frame.get("status") or "") or None)
        elif frame.get("type") == "idle":
            self._ended(None)

    def _current(self, sid: str) -> bool:
        return self.session is not None and self.session.session == sid

    def _ended(self, status: str | None) -> None:
        self.session = None
        self.inbox.end(status)

    # ------------------------------------------------------------------ keys and drawing

    def key(self, name: str, data: str = "") -> list[Frame]:
        """One key press; returns the frames for the session's socket (possibly none)."""
        if self.inbox.fatal_message:
            return []
        if self.session is not None:
            if name == "left" and self.session.mode == "list":
                self._back()
                return []
            return keys.press(self.session, name, data)
        self.inbox.notice = None
        if name in ("up", "down"):
            self.inbox.move(-1 if name == "up" else 1)
        elif name in ("pageup", "pagedown"):
            self.inbox.move(-5 if name == "pageup" else 5)
        elif name == "home":
            self.inbox.move(0, to=0)
        elif name == "end":
            self.inbox.move(0, to=len(self.inbox.items) - 1)
        elif name == "char" and data.isdigit() and data != "0":
            self.inbox.move(0, to=int(data) - 1)
        elif name in ("enter", "right"):
            item = self.inbox.highlighted()
            if item is not None:
                self._open(item)
        return []

    def _open(self, item: Item) -> None:
        sid = str(item["sessionId"])
        self.inbox.open(item_key(item))
        self.session = TuiModel(sid, self.session_endpoint(sid))
        self._note()

    def _back(self) -> None:
        self.session = None
        key: Key | None = self.inbox.back()
        if key is not None:
            self.inbox.highlight_key = key

    def _note(self) -> None:
        """The line the session's header carries: how many others wait in the inbox."""
        if self.session is None:
            return
        open_item = self.inbox.items.get(self.inbox.answering) if self.inbox.answering else None
        others = self.inbox.waiting_count() - (1 if open_item and open_item.get("status") == WAITING else 0)
        self.session.inbox_note = f"{others} other{'' if others == 1 else 's'} waiting" if others else "inbox"

    def render(self, width: int, height: int, now: float = 0.0) -> list[Line]:
        """Exactly ``height`` lines, none wider than ``width`` cells."""
        if self.session is not None:
            return self.session.render(width, height, now)
        return inbox_view.render(self.inbox, width, height, now, self.wall())


class InboxSocket:
    """What the inbox socket's ``Connection`` reports, into the model."""

    def __init__(self, model: InboxModel) -> None:
        self.model = model

    def connecting(self, attempt: int) -> None:
        self.model.inbox_connecting(attempt)

    def disconnected(self, reason: str, retry_at: float | None) -> None:
        self.model.inbox_disconnected(reason, retry_at)

    def fatal(self, message: str) -> None:
        self.model.inbox_fatal(message)

    def apply(self, frame: Frame) -> None:
        self.model.inbox_apply(frame)


class SessionSocket:
    """What one session socket's ``Connection`` reports, into the model (ignored once the
    person has moved on from that session)."""

    def __init__(self, model: InboxModel, sid: str) -> None:
        self.model = model
        self.sid = sid

    def connecting(self, attempt: int) -> None:
        self.model.session_connecting(self.sid, attempt)

    def disconnected(self, reason: str, retry_at: float | None) -> None:
        self.model.session_disconnected(self.sid, reason, retry_at)

    def fatal(self, message: str) -> None:
        self.model.session_fatal(self.sid, message)

    def apply(self, frame: Frame) -> None:
        self.model.session_apply(self.sid, frame)
