"""What each key does to the state, and the frames it sends (pure).

``press(state, name, data)`` takes one key (names: ``up down pageup pagedown home end enter
space escape backspace delete left right tab clear_line``, plus ``char`` and ``paste`` with
``data``) and returns the client frames to send: ``answer``, ``draft``, ``clarify`` or
``cancel``, each with the ``questionnaireId`` and ``step`` of the broker's latest frame and a
``ref`` of its own. Nothing advances here: an answer marks the state busy until the broker's
next frame, and while the connection is down nothing is sent and the person is told so. A
typed text that looks like a secret stops first and asks (``secret_stop``).
"""

from __future__ import annotations

from typing import Any, Literal

from broker.core.model import MAX_CLARIFICATION, MAX_OTHER
from clients.tui import secret_stop
from clients.tui.state import Frame, Notice, Row, TuiState
from clients.tui.text_input import TextInput


def press(state: TuiState, name: str, data: str = "") -> list[Frame]:
    """Handle one key press; returns the frames to send (possibly none)."""
    if state.fatal_message:
        return []
    state.notice = None  # a notice answers the previous key; this one may set a new one
    if state.mode == "confirm":
        return _key_confirm(state, name, data)
    if state.mode == "secret":
        return _key_secret(state, name, data)
    if state.view == "suspended":
        if name == "escape":
            _open_confirm(state)
        elif name in ("pageup", "pagedown") and state.scroll.text_cut:
            state.scroll.page_text(-1 if name == "pageup" else 1)
        return []
    if state.view != "question" or state.frame is None:
        return []
    if state.mode in ("other", "clarify"):
        return _key_input(state, name, data)
    return _key_list(state, name, data)


def _move(state: TuiState, delta: int) -> None:
    state.highlight = max(0, min(len(state.rows()) - 1, state.highlight + delta))


def _key_list(state: TuiState, name: str, data: str) -> list[Frame]:
    rows = state.rows()
    if name == "up":
        _move(state, -1)
    elif name == "down":
        _move(state, 1)
    elif name in ("pageup", "pagedown") and state.scroll.block_cut:
        state.scroll.page_block(-1 if name == "pageup" else 1)
    elif name in ("pageup", "pagedown") and state.scroll.text_cut:
        state.scroll.page_text(-1 if name == "pageup" else 1)
    elif name == "pageup":
        _move(state, -state.scroll.page)
    elif name == "pagedown":
        _move(state, state.scroll.page)
    elif name == "home":
        state.highlight = 0
    elif name == "end":
        state.highlight = len(rows) - 1
    elif name == "escape":
        _open_confirm(state)
    elif name == "char" and data.isdigit() and data != "0":
        index = int(data) - 1
        if index < len(state.frame["question"]["options"]):  # type: ignore[index]
            state.highlight = index
    elif name in ("enter", "space"):
        return _activate(state, rows[state.highlight], toggle=name == "space")
    return []


def _activate(state: TuiState, row: Row, *, toggle: bool) -> list[Frame]:
    if row.kind == "option":
        if state.is_multi:
            return _toggle(state, row.index) if toggle else _continue(state)
        if toggle:
            state.notice = Notice("info", "Press Enter to choose the highlighted option.")
            return []
        option = state.frame["question"]["options"][row.index]  # type: ignore[index]
        return _answer(state, [option["id"]], None)
    if row.kind == "other":
        if state.is_multi and state.other:
            # Multi: a filled Other row behaves like a checked option.
            if not toggle:
                return _continue(state)
            if _offline_refusal(state):
                return []
            state.last_other, state.other = state.other, None
            return _draft(state)
        _open_input(state, "other", state.last_other)
        return []
    if toggle:
        return []
    if row.kind == "clarify":
        _open_input(state, "clarify", state.last_clarify)
    else:
        _open_confirm(state)
    return []


def _open_input(state: TuiState, mode: Literal["other", "clarify"], text: str) -> None:
    state.mode = mode
    state.input = TextInput(MAX_OTHER if mode == "other" else MAX_CLARIFICATION, text)


def _open_confirm(state: TuiState) -> None:
    state.mode = "confirm"


def _offline_refusal(state: TuiState) -> bool:
    if state.conn == "connected":
        return False
    state.notice = Notice("warn", "Not connected — nothing was sent. Reconnecting…", conn=True)
    return True


def _toggle(state: TuiState, index: int) -> list[Frame]:
    if _offline_refusal(state):
        return []
    option_id = state.frame["question"]["options"][index]["id"]  # type: ignore[index]
    if option_id in state.selected:
        state.selected.discard(option_id)
    else:
        _, high = state.bounds()
        if high is not None and state.selection_count() >= high:
            state.notice = Notice("warn", f"You can choose at most {high} — clear one with Space first.")
            return []
        state.selected.add(option_id)
    return _draft(state)


def _continue(state: TuiState) -> list[Frame]:
    low, high = state.bounds()
    count = state.selection_count()
    if count < low:
        state.notice = Notice(
            "warn",
            f"Choose at least {low} (you have {count}) — Space toggles the highlighted option.",
        )
        return []
    if high is not None and count > high:
        state.notice = Notice("warn", f"Choose at most {high} (you have {count}).")
        return []
    return _answer(state, state.ordered_selection(), state.other)


def _command(state: TuiState, kind: str, **fields: Any) -> Frame:
    source = state.suspended if state.view == "suspended" else state.frame
    assert source is not None
    state.last_ref += 1
    frame = {
        "type": kind,
        "questionnaireId": source["questionnaireId"],
        "step": source["step"],
        **fields,
        "ref": state.last_ref,
    }
    return secret_stop.vouch(state, frame)


def _draft(state: TuiState) -> list[Frame]:
    fields: dict[str, Any] = {"selectedOptionIds": state.ordered_selection()}
    if state.other:
        fields["other"] = state.other
    frame = _command(state, "draft", **fields)
    state.draft_refs.add(frame["ref"])
    return [frame]


def _answer(state: TuiState, option_ids: list[str], other: str | None) -> list[Frame]:
    if state.busy or _offline_refusal(state):
        return []
    fields: dict[str, Any] = {
        "questionId": state.frame["question"]["id"],  # type: ignore[index]
        "selectedOptionIds": option_ids,
    }
    if other:
        fields["other"] = other
    state.busy = True
    frame = _command(state, "answer", **fields)
    state.sent_answer = (frame["questionnaireId"], frame["step"])
    return [frame]


def _key_input(state: TuiState, name: str, data: str) -> list[Frame]:
    box = state.input
    if name in ("char", "space", "paste"):
        if not box.insert(" " if name == "space" else data):
            state.notice = Notice("warn", f"The limit is {box.limit} characters.")
    elif name == "backspace":
        box.backspace()
    elif name == "delete":
        box.delete()
    elif name == "left":
        box.move(-1)
    elif name == "right":
        box.move(1)
    elif name == "home":
        box.home()
    elif name == "end":
        box.end()
    elif name == "clear_line":
        box.clear_line()
    elif name in ("pageup", "pagedown"):
        if state.scroll.text_cut:
            state.scroll.page_text(-1 if name == "pageup" else 1)
    elif name == "escape":
        if state.mode == "other":
            state.last_other = box.text
        else:
            state.last_clarify = box.text
        state.mode = "list"
    elif name == "enter":
        return _submit_input(state)
    return []


def _submit_input(state: TuiState) -> list[Frame]:
    text = state.input.text.strip()
    if state.mode == "clarify":
        if not text:
            state.notice = Notice("warn", "Type your question for the agent, or Esc to go back.")
            return []
        if state.busy or _offline_refusal(state):
            return []
        if secret_stop.holds(state, "clarify", text):
            return []
        fields: dict[str, Any] = {"request": text}
        if state.is_multi:
            draft: dict[str, Any] = {"selectedOptionIds": state.ordered_selection()}
            if state.other:
                draft["other"] = state.other
            fields["draft"] = draft
        state.busy = True
        state.last_clarify = ""  # sent: the next "Ask to clarify…" starts afresh
        return [_command(state, "clarify", **fields)]
    # Other
    if not state.is_multi:
        if not text:
            state.notice = Notice("warn", "Type an answer, or Esc to go back.")
            return []
        if state.busy or _offline_refusal(state) or secret_stop.holds(state, "other", text):
            return []
        return _answer(state, [], text)
    if _offline_refusal(state):
        return []
    if text and not state.other:
        _, high = state.bounds()
        if high is not None and state.selection_count() >= high:
            state.notice = Notice("warn", f"You can choose at most {high} — clear an option to add Other.")
            return []
    if secret_stop.holds(state, "other", text):
        return []
    state.other = text or None
    state.last_other = text
    state.mode = "list"
    return _draft(state)


def _key_secret(state: TuiState, name: str, data: str) -> list[Frame]:
    """The stop before a text that looks like a secret: s sends it anyway, e or Esc edits it."""
    held = state.held
    if held is None:
        state.mode = "list"
        return []
    if name == "char" and data.lower() == "s":
        state.confirmed_texts.add(held.text)
        state.held = None
        state.mode = held.kind
        return _submit_input(state)  # the same text, now with the person's word for it
    if name == "escape" or (name == "char" and data.lower() == "e"):
        state.held = None
        state.mode = held.kind  # back in the field, the text as typed
    return []


def _key_confirm(state: TuiState, name: str, data: str) -> list[Frame]:
    if name == "char" and data.lower() == "y":
        state.mode = "list"
        if _offline_refusal(state) or state.busy:
            return []
        if state.view not in ("question", "suspended"):
            return []
        state.busy = True
        return [_command(state, "cancel")]
    if name in ("escape", "enter") or (name == "char" and data.lower() == "n"):
        state.mode = "list"
    return []
