"""The terminal client's view-model: state, keys and drawing, with no terminal and no I/O.

Theory of operation
-------------------
``TuiModel`` is driven by three kinds of input and produces two kinds of output:

* ``apply(frame)`` feeds it a decoded broker frame (``welcome``, ``question``,
  ``suspended``, ``closed``, ``idle``, ``error``, ``pong``);
* ``key(name, data)`` feeds it a key press (names below) and returns the client frames
  to send (``answer``, ``draft``, ``clarify``, ``cancel``), already carrying the
  ``questionnaireId`` and ``step`` of the latest question/suspended frame;
* ``connecting()/disconnected()/fatal()`` tell it what the websocket is doing;
* ``render(width, height, now)`` returns exactly ``height`` lines of prompt_toolkit
  style/text fragments, none wider than ``width`` cells.

The broker is the authority: the model never advances on its own. Choosing an answer
sends a frame and marks the model *busy* until the broker's next frame arrives (a new
``question``, ``suspended``, ``closed`` or ``idle``, or an ``error`` that explains why
nothing changed). Multi-select toggles are applied locally at once and sent as ``draft``
frames; the broker echoes every draft to every client of the session, and the model
ignores the echoes of its own drafts still in flight so that fast toggling never flickers.

Key names: ``up down pageup pagedown home end enter space escape backspace delete left
right tab clear_line`` plus ``char`` and ``paste`` with ``data``.
"""

from __future__ import annotations

from clients.tui import incoming, keys
from clients.tui.lines import Line, center, fit, line_width
from clients.tui.state import Frame, TuiState
from clients.tui.text import cells, clean, hard_wrap, truncate, wrap


class TuiModel(TuiState):
    def connecting(self, attempt: int) -> None:
        incoming.connecting(self, attempt)

    def disconnected(self, reason: str, retry_at: float | None) -> None:
        incoming.disconnected(self, reason, retry_at)

    def fatal(self, message: str) -> None:
        incoming.fatal(self, message)

    def apply(self, frame: Frame) -> None:
        incoming.apply(self, frame)

    def key(self, name: str, data: str = "") -> list[Frame]:
        """Handle one key press; returns the frames to send (possibly none)."""
        return keys.press(self, name, data)

    # ------------------------------------------------------------------ rows and bounds

    def bounds_text(self) -> str:
        if not self.is_multi:
            return "choose one"
        low, high = self.bounds()
        if high is None:
            return f"choose at least {low}" if low else "choose any"
        if low == high:
            return f"choose exactly {low}"
        return f"choose {low}–{high}" if low else f"choose up to {high}"

    # ------------------------------------------------------------------ drawing

    def render(self, width: int, height: int, now: float = 0.0) -> list[Line]:
        """Exactly ``height`` lines, none wider than ``width`` cells."""
        width = max(width, 20)
        height = max(height, 6)
        top = [self._header(width, now)]
        body_height = height - len(top) - 2  # the footer: status and keys
        # The question body measures what it cuts (the key hints depend on it).
        self.scroll.text_cut = self.scroll.block_cut = False
        if self.view == "question" and self.frame is not None:
            body = self._question_body(width, body_height)
        elif self.view == "suspended" and self.suspended is not None:
            body = self._suspended_body(width, body_height)
        elif self.view == "idle":
            body = self._idle_body(width, body_height)
        else:
            body = self._connecting_body(width, body_height, now)
        body = body[:body_height] + [[] for _ in range(body_height - len(body))]
        footer = [self._status_line(width, now), self._help_line(width)]
        return [fit(line, width) for line in top + body + footer]

    def _header(self, width: int, now: float) -> Line:
        left: Line = [
            ("class:header.brand", " ◆ qbroker "),
            ("class:header", f" session {self.session}"),
        ]
        if self.fatal_message:
            right: Line = [("class:header.bad", " ✗ disconnected ")]
        elif self.conn == "connected":
            right = [("class:header.ok", " ● connected ")]
        elif self.conn == "connecting":
            right = [("class:header.wait", " ◌ connecting… ")]
        else:
            wait = _seconds_left(self.retry_at, now)
            right = [("class:header.bad", f" ○ offline · retry in {wait}s ")]
        used = line_width(left) + line_width(right)
        if used > width:
            left = [left[0]]
            used = line_width(left) + line_width(right)
        return left + [("class:header", " " * max(0, width - used))] + right

    def _progress(self, width: int) -> Line:
        assert self.frame is not None
        frame = self.frame
        head = f"  Question {int(frame['index']) + 1} of {frame['total']}"
        line: Line = [("class:progress.head", head)]
        items = frame.get("progress") or []
        room = width - cells(head) - 3
        marks = {"answered": "✓", "current": "●", "pending": "○"}
        for limit in (40, 20, 12, 6, 3):
            parts = [
                (
                    f"class:progress.{it.get('state', 'pending')}",
                    f"{marks.get(it.get('state'), '○')} " + truncate(clean(str(it.get("label", ""))), limit),
                )
                for it in items
            ]
            if sum(cells(text) + 2 for _, text in parts) <= room:
                break
        else:
            # Marks only; when even those do not fit, a window around the current one with
            # "…" where marks are left out.
            parts = [(f"class:progress.{it.get('state', 'pending')}", marks.get(it.get("state"), "○")) for it in items]
            if 3 * len(parts) - 2 > room:  # a mark and its separator take three cells
                current = next((i for i, it in enumerate(items) if it.get("state") == "current"), 0)
                fit = max(1, (room + 2) // 3 - 2)  # room for the two "…" too
                start = max(0, min(current - fit // 2, len(parts) - fit))
                window = parts[start : start + fit]
                before = [("class:progress.pending", "…")] if start > 0 else []
                after = [("class:progress.pending", "…")] if start + fit < len(parts) else []
                parts = before + window + after
        line.append(("", "   "))
        for i, part in enumerate(parts):
            if i:
                line.append(("class:progress.sep", "  "))
            line.append(part)
        return line

    def _title(self, width: int, label: str, hint: str) -> list[Line]:
        """The question's label, wrapped in full, with ``hint`` on the right of its first line."""
        inner = width - 4
        hint_text = f"  {hint}" if hint else ""
        chunks = wrap(clean(label), max(4, inner - cells(hint_text)))
        gap = max(0, inner - cells(chunks[0]) - cells(hint_text))
        first: Line = [("", "  "), ("class:title", chunks[0]), ("", " " * gap), ("class:hint", hint_text)]
        return [first] + [[("", "  "), ("class:title", chunk)] for chunk in chunks[1:]]

    def _clarification_lines(self, inner: int) -> list[Line]:
        """The latest answered clarification for this question, in full."""
        assert self.frame is not None
        qid = self.frame["question"]["id"]
        answered = [
            c for c in self.frame.get("clarifications") or [] if c.get("questionId") == qid and c.get("response")
        ]
        if not answered:
            return []
        latest = answered[-1]
        lines: list[Line] = []
        for label, style, text in (
            ("You asked ", "class:clar.request", str(latest["request"])),
            ("Agent     ", "class:clar.response", str(latest["response"])),
        ):
            for i, chunk in enumerate(wrap(text, inner - 11)):
                lines.append(
                    [("", "  "), ("class:clar.label", label if i == 0 else " " * 10), ("", " "), (style, chunk)]
                )
        return lines

    def _text_window(self, text: list[Line], reply_at: int, budget: int) -> list[Line]:
        """The question's text in ``budget`` lines: all of it, or a scrolled part and a marker."""
        if len(text) + 1 <= budget:
            self.scroll.text_cut, self.scroll.text_max, self.scroll.to_reply = False, 0, False
            return text + [[]]
        visible = max(1, budget - 1)
        self.scroll.text_cut = True
        self.scroll.text_max = len(text) - visible
        self.scroll.text_page = max(1, visible - 1)  # a page keeps one line of context
        if self.scroll.to_reply and reply_at >= 0:
            self.scroll.text_top = reply_at
        self.scroll.to_reply = False
        self.scroll.text_top = max(0, min(self.scroll.text_top, self.scroll.text_max))
        top = self.scroll.text_top
        above, below = top, len(text) - top - visible
        marker: Line = [("", "  "), ("class:scroll", _more_lines(above, below))]
        return text[top : top + visible] + [marker]

    def _question_body(self, width: int, height: int) -> list[Line]:
        assert self.frame is not None
        q = self.frame["question"]
        inner = max(10, width - 4)
        head: list[Line] = [self._progress(width), []]
        title = self._title(width, str(q.get("label") or q["id"]), self.bounds_text())
        text: list[Line] = [[("", "  "), ("class:prompt", t)] for t in wrap(str(q.get("prompt", "")), inner)]
        clar = self._clarification_lines(inner)
        reply_at = -1
        if clar:
            text.append([])
            reply_at = len(text)
            text += clar
        avail = height - len(head) - len(title)  # for the text, its spacer and what is below
        if self.mode in ("other", "clarify"):
            lower = self._input_box(width)
            return head + title + self._text_window(text, reply_at, max(2, avail - len(lower))) + lower
        blocks = self._row_blocks(width)
        total = sum(len(lines) for _, lines in blocks)
        hl_lines = sum(len(lines) for r, lines in blocks if r == self.highlight)
        lower_min = min(total, max(7, hl_lines + 2))  # the highlighted option whole, and its neighbours
        upper = head + title + self._text_window(text, reply_at, max(2, avail - lower_min))
        room = max(1, height - len(upper))
        return upper + self._viewport(blocks, room, width)

    def _row_blocks(self, width: int) -> list[tuple[int | None, list[Line]]]:
        assert self.frame is not None
        q = self.frame["question"]
        multi = self.is_multi
        blocks: list[tuple[int | None, list[Line]]] = []
        box = 4 if multi else 0
        rows = self.rows()
        for r, row in enumerate(rows):
            hl = r == self.highlight
            if row.kind != "option" and (r == 0 or rows[r - 1].kind == "option"):
                blocks.append((None, [[("", "  "), ("class:separator", "─" * min(30, width - 4))]]))
            style = "class:row.hl" if hl else "class:row"
            marker = ("class:marker", "❯ ") if hl else ("", "  ")
            line: Line = [("", "  "), marker]
            lines: list[Line] = [line]
            label_room = width - 4 - box
            if row.kind == "option":
                option = q["options"][row.index]
                if multi:
                    on = option["id"] in self.selected
                    line.append(("class:check.on" if on else "class:check.off", "[✓] " if on else "[ ] "))
                label = clean(str(option["label"]))
                # The highlighted option shows its label and description in full, the others a line each.
                label_lines = wrap(label, label_room) if hl else [truncate(label, label_room)]
                line.append(("class:option.label", label_lines[0]))
                for text in label_lines[1:]:
                    lines.append([("", "    " + " " * box), ("class:option.label", text)])
                desc = option.get("description")
                if desc:
                    for text in wrap(str(desc), label_room - 2, max_lines=None if hl else 1):
                        lines.append([("", "      " + " " * box), ("class:option.desc", text)])
            elif row.kind == "other":
                if multi:
                    on = bool(self.other)
                    line.append(("class:check.on" if on else "class:check.off", "[✓] " if on else "[ ] "))
                if self.other:
                    line.append(("class:action", "Other: "))
                    # Highlighted, the answer typed shows in full, as an option's label does.
                    quoted, other_room = f"“{clean(self.other)}”", label_room - 7
                    other_lines = wrap(quoted, other_room) if hl else [truncate(quoted, other_room)]
                    line.append(("class:option.label", other_lines[0]))
                    for text in other_lines[1:]:
                        lines.append([("", "    " + " " * box + " " * 7), ("class:option.label", text)])
                else:
                    line.append(("class:action", "Other…"))
            elif row.kind == "clarify":
                line.append(("", " " * box))
                line.append(("class:action", "Ask to clarify…"))
            else:
                line.append(("", " " * box))
                line.append(("class:action.cancel", "Cancel questionnaire"))
            if hl:
                lines = [[(f"{s} {style}" if s else style, t) for s, t in ln] for ln in lines]
                lines = [ln + [(style, " " * max(0, width - line_width(ln)))] for ln in lines]
            blocks.append((r, lines))
        return blocks

    def _viewport(self, blocks: list[tuple[int | None, list[Line]]], room: int, width: int) -> list[Line]:
        flat: list[tuple[int | None, Line]] = [(r, ln) for r, lines in blocks for ln in lines]
        if len(flat) <= room:
            self.scroll.list_top = 0
            self.scroll.page = max(1, len(blocks) - 1)
            return [ln for _, ln in flat]
        space = max(1, room - 2)
        hl = [i for i, (r, _) in enumerate(flat) if r == self.highlight]
        if len(hl) > space:
            return self._tall_block(flat, hl, space)
        first, last = (hl[0], hl[-1] + 1) if hl else (0, 1)
        if first > 0 and flat[first - 1][0] is None:
            first -= 1  # keep the separator above the first action row in view
        top = min(self.scroll.list_top, len(flat) - space)
        top = min(top, first)
        if last > top + space:
            top = last - space
        top = max(0, min(top, len(flat) - space, hl[0] if hl else len(flat)))  # a tall block shows its start
        self.scroll.list_top = top
        shown = flat[top : top + space]
        visible_rows = {r for r, _ in shown if r is not None}
        self.scroll.page = max(1, len(visible_rows) - 1)
        above = len({r for r, _ in flat[:top] if r is not None} - visible_rows)
        below = len({r for r, _ in flat[top + space :] if r is not None} - visible_rows)
        up: Line = [("", "  "), ("class:scroll", f"↑ {above} more")] if above else []
        down: Line = [("", "  "), ("class:scroll", f"↓ {below} more")] if below else []
        return [up] + [ln for _, ln in shown] + [down]

    def _tall_block(self, flat: list[tuple[int | None, Line]], hl: list[int], space: int) -> list[Line]:
        """The highlighted option alone is taller than the space: it scrolls on its own (PgUp/PgDn)."""
        if self.scroll.block_of != self.highlight:
            self.scroll.block_of, self.scroll.block_top = self.highlight, 0
        visible = max(1, space - 1)
        self.scroll.block_cut = True
        self.scroll.block_max = len(hl) - visible
        self.scroll.block_page = max(1, visible - 1)
        self.scroll.block_top = max(0, min(self.scroll.block_top, self.scroll.block_max))
        start = hl[0] + self.scroll.block_top
        self.scroll.list_top = hl[0]
        self.scroll.page = 1
        shown = [ln for _, ln in flat[start : start + visible]]
        marker: Line = [("", "      "), ("class:scroll", _more_lines(start - hl[0], hl[-1] + 1 - start - visible))]
        above = len({r for r, _ in flat[: hl[0]] if r is not None})
        below = len({r for r, _ in flat[hl[-1] + 1 :] if r is not None})
        up: Line = [("", "  "), ("class:scroll", f"↑ {above} more")] if above else []
        down: Line = [("", "  "), ("class:scroll", f"↓ {below} more")] if below else []
        return [up] + shown + [marker, down]

    def _input_box(self, width: int) -> list[Line]:
        inner = max(10, width - 8)
        box = self.input
        title = "Your own answer" if self.mode == "other" else "Ask the agent about this question"
        count = f" {len(box.text)}/{box.limit} "
        chunks = hard_wrap(box.text + " ", inner)
        # Which chunk holds the cursor?
        pos, cursor_line, cursor_col = 0, 0, 0
        for i, chunk in enumerate(chunks):
            if box.cursor < pos + len(chunk) or i == len(chunks) - 1:
                cursor_line, cursor_col = i, box.cursor - pos
                break
            pos += len(chunk)
        visible = 4
        first = max(0, min(cursor_line - visible + 1, len(chunks) - visible))
        lines: list[Line] = []
        top_rule = max(0, inner - cells(title) - cells(count))
        lines.append(
            [
                ("", "  "),
                ("class:input.frame", "┌ "),
                ("class:input.title", title),
                ("class:input.frame", " " + "─" * top_rule),
                ("class:input.count", count),
                ("class:input.frame", "┐"),
            ]
        )
        for i in range(first, min(len(chunks), first + visible)):
            chunk = chunks[i]
            body: Line = []
            if i == cursor_line:
                before, at, after = (
                    chunk[:cursor_col],
                    chunk[cursor_col : cursor_col + 1],
                    chunk[cursor_col + 1 :],
                )
                body = [
                    ("class:input.text", before),
                    ("class:input.cursor", at or " "),
                    ("class:input.text", after),
                ]
            else:
                body = [("class:input.text", chunk)]
            fill = " " * max(0, inner - line_width(body))
            lines.append(
                [("", "  "), ("class:input.frame", "│ ")]
                + body
                + [("class:input.text", fill), ("class:input.frame", " │")]
            )
        lines.append([("", "  "), ("class:input.frame", "└" + "─" * (inner + 2) + "┘")])
        if self.mode == "other" and self.is_multi:
            note = "Counts as one choice; leave empty to remove it."
        elif self.mode == "other":
            note = "Enter sends this as your answer."
        else:
            note = "The agent answers in the chat; this question waits here meanwhile."
        lines.append([("", "  "), ("class:hint", truncate(note, width - 4))])
        return lines

    def _suspended_body(self, width: int, height: int) -> list[Line]:
        assert self.suspended is not None
        inner = max(10, width - 4)
        frame = self.frame
        body: list[Line] = []
        label = ""
        if frame is not None and frame["questionnaireId"] == self.suspended["questionnaireId"]:
            body.append(self._progress(width))
            if frame["question"]["id"] == self.suspended.get("questionId"):
                label = str(frame["question"].get("label") or "")
        else:  # opened during the wait: the suspended frame names the question
            suspended = self.suspended
            place = ""
            if isinstance(suspended.get("index"), int) and isinstance(suspended.get("total"), int):
                place = f" · question {suspended['index'] + 1} of {suspended['total']}"
            body.append([("class:progress.head", truncate(f"  Questionnaire paused{place}", width))])
            label = str(suspended.get("label") or "")
        body.append([])
        if label:
            body += self._title(width, label, "paused")
            body.append([])
        body.append([("", "  "), ("class:wait", "◔ Waiting for the agent to answer your question…")])
        body.append([])
        body.append([("", "  "), ("class:clar.label", "You asked")])
        request: list[Line] = [
            [("", "    "), ("class:clar.request", text)]
            for text in wrap(str(self.suspended.get("request", "")), inner - 2)
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
        return body + self._text_window(request, -1, max(2, height - len(body) - len(note))) + note

    def _idle_body(self, width: int, height: int) -> list[Line]:
        lines: list[Line] = [
            center([("class:idle.title", "Waiting for questions")], width),
            [],
            center(
                [
                    (
                        "class:idle.text",
                        truncate(f"Questionnaires for session {self.session} appear here", width - 4),
                    )
                ],
                width,
            ),
            center([("class:idle.text", "as soon as the agent asks.")], width),
        ]
        pad_top = max(0, (height - len(lines)) // 2)
        return [[] for _ in range(pad_top)] + lines

    def _connecting_body(self, width: int, height: int, now: float) -> list[Line]:
        if self.fatal_message:
            lines = [center([("class:status.error", truncate(f"✗ {self.fatal_message}", width - 4))], width)]
        elif self.conn == "offline":
            lines = [
                center([("class:idle.title", "Can't reach the broker")], width),
                [],
                center([("class:idle.text", truncate(self.offline_reason, width - 4))], width),
                center(
                    [("class:idle.text", f"Retrying in {_seconds_left(self.retry_at, now)}s…")],
                    width,
                ),
            ]
        else:
            lines = [
                center([("class:idle.title", "Connecting…")], width),
                [],
                center([("class:idle.text", truncate(self.endpoint, width - 4))], width),
            ]
        pad_top = max(0, (height - len(lines)) // 2)
        return [[] for _ in range(pad_top)] + lines

    def _status_line(self, width: int, now: float) -> Line:
        if self.mode == "confirm":
            return [
                (
                    "class:status.confirm",
                    truncate(
                        " Cancel this questionnaire? The agent is told you cancelled.  [y] yes  [n] no ",
                        width,
                    ),
                )
            ]
        if self.notice is not None:
            icon = {"info": "›", "ok": "✓", "warn": "!", "error": "✗"}[self.notice.kind]
            return [(f"class:status.{self.notice.kind}", truncate(f" {icon} {self.notice.text}", width))]
        if self.fatal_message:
            return [("class:status.error", truncate(f" ✗ {self.fatal_message}", width))]
        if self.conn == "offline" and self.view in ("question", "suspended"):
            wait = _seconds_left(self.retry_at, now)
            return [
                (
                    "class:status.warn",
                    truncate(
                        f" ! Connection lost — retry in {wait}s. Answers already sent are saved by the broker.",
                        width,
                    ),
                )
            ]
        if self.busy:
            return [("class:status.info", " Sending…")]
        if self.view == "question" and self.is_multi and self.mode == "list":
            low, high = self.bounds()
            count = self.selection_count()
            text = f" {count} selected"
            if count < low:
                text += f" · choose at least {low} to continue"
            elif high is not None:
                text += f" of at most {high}"
            return [("class:status.info", truncate(text, width))]
        return []

    def _enter_does(self, on_an_option: str) -> str:
        """What Enter does on the highlighted row, for the key-hint bar (the Other, clarify
        and cancel rows open something; they do not choose or continue)."""
        rows = self.rows()
        row = rows[self.highlight] if 0 <= self.highlight < len(rows) else None
        if row is None or row.kind == "option" or (row.kind == "other" and self.is_multi and self.other):
            return on_an_option
        return {"other": "type your answer", "clarify": "ask the agent", "cancel": "cancel"}[row.kind]

    def _read_key(self) -> list[tuple[str, str]]:
        """PageUp/PageDown, when the question's text is cut (they scroll it)."""
        return [("PgUp/PgDn", "read")] if self.scroll.text_cut or self.scroll.block_cut else []

    def _help_line(self, width: int) -> Line:
        if self.mode == "confirm":
            keys = [("y", "cancel questionnaire"), ("n/Esc", "keep answering")]
        elif self.view == "question" and self.mode in ("other", "clarify"):
            keys = [
                ("Enter", "send" if self.mode == "clarify" or not self.is_multi else "done"),
                ("Esc", "back"),
                *self._read_key(),
                ("Ctrl+U", "clear"),
                ("Ctrl+C", "quit"),
            ]
        elif self.view == "question" and self.is_multi:
            keys = [
                ("↑↓", "move"),
                *self._read_key(),
                ("Space", "toggle"),
                ("Enter", self._enter_does("continue")),
                ("Esc", "cancel"),
                ("Ctrl+C", "quit"),
            ]
        elif self.view == "question":
            keys = [
                ("↑↓", "move"),
                *self._read_key(),
                ("Enter", self._enter_does("choose")),
                ("Esc", "cancel"),
                ("Ctrl+C", "quit"),
            ]
        elif self.view == "suspended":
            keys = [*self._read_key(), ("Esc", "cancel questionnaire"), ("Ctrl+C", "quit")]
        else:
            keys = [("Ctrl+C", "quit")]
        line: Line = [("class:help", " ")]
        for key, what in keys:
            piece = [("class:help.key", key), ("class:help", f" {what}   ")]
            if line_width(line) + line_width(piece) > width:
                break
            line += piece
        return line


def _more_lines(above: int, below: int) -> str:
    """The marker under text cut to fit: how much more there is, and the keys that show it."""
    if above and below:
        return f"↑ {above} · ↓ {below} more lines · PgUp/PgDn"
    if below:
        return f"↓ {below} more line{'s' if below > 1 else ''} · PgDn"
    return f"↑ {above} line{'s' if above > 1 else ''} above · PgUp"


def _seconds_left(deadline: float | None, now: float) -> int:
    if deadline is None:
        return 0
    return max(0, int(deadline - now + 0.999))


__all__ = ["TuiModel"]
