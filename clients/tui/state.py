"""What the person is doing, and what the broker last showed them: the TUI's state (pure).

One mutable object, read and changed by the modules around it: ``incoming`` applies the
broker's frames and the connection going up or down, ``keys`` applies key presses and
returns the frames they send, and ``view`` draws it (recording in ``scroll`` what it
measured). The broker is the authority: the state never advances on its own, and a choice
sent waits (``busy``) until the broker's next frame says what became of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from broker.core.model import MAX_OTHER
from clients.tui.scroll import Scroll
from clients.tui.text_input import TextInput

Frame = dict[str, Any]
# Where a text held back by the stop before a secret (secret_stop.py) was typed.
Kind = Literal["other", "clarify"]
WHAT: dict[Kind, str] = {"other": "Your answer", "clarify": "Your question for the agent"}


@dataclass(frozen=True)
class Held:
    """A text held back: which field it is in, and what it looks like (a rule's sentence)."""

    kind: Kind
    text: str
    sentence: str

    def message(self) -> str:
        return f"{WHAT[self.kind]} looks like {self.sentence}."


Mode = Literal["list", "other", "clarify", "confirm", "secret"]
View = Literal["connecting", "idle", "question", "suspended"]
Conn = Literal["connecting", "connected", "offline"]


@dataclass(frozen=True)
class Row:
    """One selectable row of the question screen."""

    kind: Literal["option", "other", "clarify", "cancel"]
    index: int = -1  # the option's index for kind == "option"


@dataclass
class Notice:
    kind: Literal["info", "ok", "warn", "error"]
    text: str
    about: object = None  # the questionnaire a "closed" notice is about (it goes with the next one's question)
    conn: bool = False  # about the connection being down: it goes when the broker welcomes the client again


class TuiState:
    def __init__(self, session: str, endpoint: str = "") -> None:
        self.session = session
        self.endpoint = endpoint
        # The connection.
        self.conn: Conn = "connecting"
        self.attempt = 0
        self.offline_reason = ""
        self.retry_at: float | None = None
        self.fatal_message: str | None = None
        # What the broker shows.
        self.view: View = "connecting"
        self.frame: Frame | None = None  # the latest question frame
        self.suspended: Frame | None = None  # the latest suspended frame (view == "suspended")
        # What the person is doing.
        self.mode: Mode = "list"
        self.highlight = 0
        self.selected: set[str] = set()
        self.other: str | None = None  # multi: the additive Other text
        self.last_other = ""  # what was typed last, to edit rather than retype
        self.last_clarify = ""  # an unsent clarification, kept across Esc until sent or the question changes
        self.input = TextInput(MAX_OTHER)
        # The stop before a text that looks like a secret (secret_stop.py): the text held back
        # (mode "secret"), and the texts the person chose to send anyway, for this question.
        self.held: Held | None = None
        self.confirmed_texts: set[str] = set()
        self.notice: Notice | None = None
        self.busy = False
        self.scroll = Scroll()
        # The frames sent: each carries a new ``ref``; the drafts' are kept until their echo.
        self.last_ref = 0
        self.draft_refs: set[int] = set()
        self.sent_answer: tuple[str, int] | None = None  # (questionnaire, step) of the last answer sent
        # The questionnaire on screen when the connection went down: if the broker, once back,
        # shows something else without a ``closed`` frame for it, the person is told it ended.
        self.lost: str | None = None
        # Opened from the inbox (``qbroker tui --inbox``): what the header says of it, and ←
        # goes back to it. None for a client of one session.
        self.inbox_note: str | None = None

    @property
    def is_multi(self) -> bool:
        return self.frame is not None and self.frame["question"].get("type") == "multi"

    def rows(self) -> list[Row]:
        if self.frame is None:
            return []
        q = self.frame["question"]
        rows = [Row("option", i) for i in range(len(q["options"]))]
        if q.get("allowOther", True):
            rows.append(Row("other"))
        rows.append(Row("clarify"))
        rows.append(Row("cancel"))
        return rows

    def selection_count(self) -> int:
        return len(self.selected) + (1 if self.other else 0)

    def bounds(self) -> tuple[int, int | None]:
        q = self.frame["question"] if self.frame else {}
        return int(q.get("minSelections") or 0), q.get("maxSelections")

    def ordered_selection(self) -> list[str]:
        assert self.frame is not None
        return [o["id"] for o in self.frame["question"]["options"] if o["id"] in self.selected]

    def first_selected_row(self) -> int:
        assert self.frame is not None
        for i, option in enumerate(self.frame["question"]["options"]):
            if option["id"] in self.selected:
                return i
        return 0
