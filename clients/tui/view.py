"""The whole screen, drawn from the state as prompt_toolkit styled lines (pure).

``render(state, width, height, now)`` returns exactly ``height`` lines, none wider than
``width`` cells: a header (the session and the connection), a body (the question, the wait
for the agent, the empty inbox, or the connection's trouble), a status line (the answer to
the last key, else the selection) and the keys that work right now. ``now`` is passed in
(for the reconnect countdown), so drawing reads no clock.
"""

from __future__ import annotations

from clients.tui import question_view
from clients.tui.lines import Line, center, fit, help_line, line_width, seconds_left
from clients.tui.state import TuiState
from clients.tui.text import truncate, wrap


def render(state: TuiState, width: int, height: int, now: float = 0.0) -> list[Line]:
    """Exactly ``height`` lines, none wider than ``width`` cells."""
    width = max(width, 20)
    height = max(height, 6)
    top = [_header(state, width, now)]
    body_height = height - len(top) - 2  # the footer: status and keys
    # The question body measures what it cuts (the key hints depend on it).
    state.scroll.text_cut = state.scroll.block_cut = False
    if state.view == "question" and state.frame is not None:
        body = question_view.question_body(state, width, body_height)
    elif state.view == "suspended" and state.suspended is not None:
        body = _suspended_body(state, width, body_height)
    elif state.view == "idle":
        body = _idle_body(state, width, body_height)
    else:
        body = _connecting_body(state, width, body_height, now)
    body = body[:body_height] + [[] for _ in range(body_height - len(body))]
    footer = [_status_line(state, width, now), _help_line(state, width)]
    return [fit(line, width) for line in top + body + footer]


def _header(state: TuiState, width: int, now: float) -> Line:
    left: Line = [
        ("class:header.brand", " ◆ qbroker "),
        ("class:header", f" session {state.session}"),
    ]
    if state.inbox_note is not None:
        left.append(("class:header", f" · {state.inbox_note}"))
    if state.fatal_message:
        right: Line = [("class:header.bad", " ✗ disconnected ")]
    elif state.conn == "connected":
        right = [("class:header.ok", " ● connected ")]
    elif state.conn == "connecting":
        right = [("class:header.wait", " ◌ connecting… ")]
    else:
        wait = seconds_left(state.retry_at, now)
        right = [("class:header.bad", f" ○ offline · retry in {wait}s ")]
    used = line_width(left) + line_width(right)
    if used > width and len(left) > 2:
        left = left[:2]
        used = line_width(left) + line_width(right)
    if used > width:
        left = [left[0]]
        used = line_width(left) + line_width(right)
    return left + [("class:header", " " * max(0, width - used))] + right


def _suspended_body(state: TuiState, width: int, height: int) -> list[Line]:
    assert state.suspended is not None
    inner = max(10, width - 4)
    frame = state.frame
    body: list[Line] = []
    label = ""
    if frame is not None and frame["questionnaireId"] == state.suspended["questionnaireId"]:
        body.append(question_view.progress(state, width))
        if frame["question"]["id"] == state.suspended.get("questionId"):
            label = str(frame["question"].get("label") or "")
    else:  # opened during the wait: the suspended frame names the question
        suspended = state.suspended
        place = ""
        if isinstance(suspended.get("index"), int) and isinstance(suspended.get("total"), int):
            place = f" · question {suspended['index'] + 1} of {suspended['total']}"
        body.append([("class:progress.head", truncate(f"  Questionnaire paused{place}", width))])
        label = str(suspended.get("label") or "")
    body.append([])
    if label:
        body += question_view.title(width, label, "paused")
        body.append([])
    body.append([("", "  "), ("class:wait", "◔ Waiting for the agent to answer your question…")])
    body.append([])
    body.append([("", "  "), ("class:clar.label", "You asked")])
    request: list[Line] = [
        [("", "    "), ("class:clar.request", text)]
        for text in wrap(str(state.suspended.get("request", "")), inner - 2)
    ]
    note: list[Line] = [
        [("", "  "), ("class:hint", text)]
        for text in wrap(
            "Your answers and current selections are kept. The question comes back "
            "here, with the agent's reply, as soon as the agent resumes.",
            inner,
        )
    ]
    # The request scrolls as the question's text does (PgUp/PgDn), above the note.
    return body + state.scroll.text_window(request, -1, max(2, height - len(body) - len(note))) + note


def _idle_body(state: TuiState, width: int, height: int) -> list[Line]:
    lines: list[Line] = [
        center([("class:idle.title", "Waiting for questions")], width),
        [],
        center(
            [
                (
                    "class:idle.text",
                    truncate(f"Questionnaires for session {state.session} appear here", width - 4),
                )
            ],
            width,
        ),
        center([("class:idle.text", "as soon as the agent asks.")], width),
    ]
    pad_top = max(0, (height - len(lines)) // 2)
    return [[] for _ in range(pad_top)] + lines


def _connecting_body(state: TuiState, width: int, height: int, now: float) -> list[Line]:
    if state.fatal_message:
        lines = [center([("class:status.error", truncate(f"✗ {state.fatal_message}", width - 4))], width)]
    elif state.conn == "offline":
        lines = [
            center([("class:idle.title", "Can't reach the broker")], width),
            [],
            center([("class:idle.text", truncate(state.offline_reason, width - 4))], width),
            center(
                [("class:idle.text", f"Retrying in {seconds_left(state.retry_at, now)}s…")],
                width,
            ),
        ]
    else:
        lines = [
            center([("class:idle.title", "Connecting…")], width),
            [],
            center([("class:idle.text", truncate(state.endpoint, width - 4))], width),
        ]
    pad_top = max(0, (height - len(lines)) // 2)
    return [[] for _ in range(pad_top)] + lines


def _status_line(state: TuiState, width: int, now: float) -> Line:
    if state.mode == "secret" and state.held is not None:
        # The keys first, so that they fit any width; what the text looks like is above.
        text = " ! Not sent: this looks like a secret.  [s] send anyway  [e] edit "
        return [("class:status.confirm", truncate(text, width))]
    if state.mode == "confirm":
        return [
            (
                "class:status.confirm",
                truncate(
                    " Cancel this questionnaire? The agent is told you cancelled.  [y] yes  [n] no ",
                    width,
                ),
            )
        ]
    if state.notice is not None:
        icon = {"info": "›", "ok": "✓", "warn": "!", "error": "✗"}[state.notice.kind]
        return [(f"class:status.{state.notice.kind}", truncate(f" {icon} {state.notice.text}", width))]
    if state.fatal_message:
        return [("class:status.error", truncate(f" ✗ {state.fatal_message}", width))]
    if state.conn == "offline" and state.view in ("question", "suspended"):
        wait = seconds_left(state.retry_at, now)
        return [
            (
                "class:status.warn",
                truncate(
                    f" ! Connection lost — retry in {wait}s. Answers already sent are saved by the broker.",
                    width,
                ),
            )
        ]
    if state.busy:
        return [("class:status.info", " Sending…")]
    if state.view == "question" and state.is_multi and state.mode == "list":
        low, high = state.bounds()
        count = state.selection_count()
        text = f" {count} selected"
        if count < low:
            text += f" · choose at least {low} to continue"
        elif high is not None:
            text += f" of at most {high}"
        return [("class:status.info", truncate(text, width))]
    return []


def _enter_does(state: TuiState, on_an_option: str) -> str:
    """What Enter does on the highlighted row, for the key-hint bar (the Other, clarify
    and cancel rows open something; they do not choose or continue)."""
    rows = state.rows()
    row = rows[state.highlight] if 0 <= state.highlight < len(rows) else None
    if row is None or row.kind == "option" or (row.kind == "other" and state.is_multi and state.other):
        return on_an_option
    return {"other": "type your answer", "clarify": "ask the agent", "cancel": "cancel"}[row.kind]


def _read_key(state: TuiState) -> list[tuple[str, str]]:
    """PageUp/PageDown, when the question's text is cut (they scroll it)."""
    return [("PgUp/PgDn", "read")] if state.scroll.text_cut or state.scroll.block_cut else []


def _help_line(state: TuiState, width: int) -> Line:
    if state.mode == "confirm":
        keys = [("y", "cancel questionnaire"), ("n/Esc", "keep answering")]
    elif state.mode == "secret":
        keys = [("s", "send anyway"), ("e/Esc", "edit"), ("Ctrl+C", "quit")]
    elif state.view == "question" and state.mode in ("other", "clarify"):
        keys = [
            ("Enter", "send" if state.mode == "clarify" or not state.is_multi else "done"),
            ("Esc", "back"),
            *_read_key(state),
            ("Ctrl+U", "clear"),
            ("Ctrl+C", "quit"),
        ]
    elif state.view == "question" and state.is_multi:
        keys = [
            ("↑↓", "move"),
            *_read_key(state),
            ("Space", "toggle"),
            ("Enter", _enter_does(state, "continue")),
            ("Esc", "cancel"),
            ("Ctrl+C", "quit"),
        ]
    elif state.view == "question":
        keys = [
            ("↑↓", "move"),
            *_read_key(state),
            ("Enter", _enter_does(state, "choose")),
            ("Esc", "cancel"),
            ("Ctrl+C", "quit"),
        ]
    elif state.view == "suspended":
        keys = [*_read_key(state), ("Esc", "cancel questionnaire"), ("Ctrl+C", "quit")]
    else:
        keys = [("Ctrl+C", "quit")]
    if state.inbox_note is not None and state.mode == "list":
        keys.insert(len(keys) - 1, ("←", "inbox"))
    return help_line(keys, width)
