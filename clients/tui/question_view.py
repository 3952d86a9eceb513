"""The question on screen: progress, label and text, the rows to choose from, the text field (pure).

``question_body`` draws the part between the header and the status line. The room is
shared out so that the rows stay in view: the question's text gives up lines first (down to
one line and its ``more lines`` marker), so that the highlighted option fits whole with its
neighbours; the highlighted option shows its whole label and description, the others one
line each. What is cut is measured and recorded in ``state.scroll`` for PageUp/PageDown.
"""

from __future__ import annotations

from clients.tui.lines import Line, line_width
from clients.tui.scroll import Block
from clients.tui.state import TuiState
from clients.tui.text import cells, clean, hard_wrap, truncate, wrap


def bounds_text(state: TuiState) -> str:
    """The question's bounds in words, beside its label: ``choose one``, ``choose 1–3``…"""
    if not state.is_multi:
        return "choose one"
    low, high = state.bounds()
    if high is None:
        return f"choose at least {low}" if low else "choose any"
    if low == high:
        return f"choose exactly {low}"
    return f"choose {low}–{high}" if low else f"choose up to {high}"


def progress(state: TuiState, width: int) -> Line:
    assert state.frame is not None
    frame = state.frame
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


def title(width: int, label: str, hint: str) -> list[Line]:
    """The question's label, wrapped in full, with ``hint`` on the right of its first line."""
    inner = width - 4
    hint_text = f"  {hint}" if hint else ""
    chunks = wrap(clean(label), max(4, inner - cells(hint_text)))
    gap = max(0, inner - cells(chunks[0]) - cells(hint_text))
    first: Line = [("", "  "), ("class:title", chunks[0]), ("", " " * gap), ("class:hint", hint_text)]
    return [first] + [[("", "  "), ("class:title", chunk)] for chunk in chunks[1:]]


def _clarification_lines(state: TuiState, inner: int) -> list[Line]:
    """The latest answered clarification for this question, in full."""
    assert state.frame is not None
    qid = state.frame["question"]["id"]
    answered = [c for c in state.frame.get("clarifications") or [] if c.get("questionId") == qid and c.get("response")]
    if not answered:
        return []
    latest = answered[-1]
    lines: list[Line] = []
    for label, style, text in (
        ("You asked ", "class:clar.request", str(latest["request"])),
        ("Agent     ", "class:clar.response", str(latest["response"])),
    ):
        for i, chunk in enumerate(wrap(text, inner - 11)):
            lines.append([("", "  "), ("class:clar.label", label if i == 0 else " " * 10), ("", " "), (style, chunk)])
    return lines


def question_body(state: TuiState, width: int, height: int) -> list[Line]:
    assert state.frame is not None
    q = state.frame["question"]
    inner = max(10, width - 4)
    head: list[Line] = [progress(state, width), []]
    heading = title(width, str(q.get("label") or q["id"]), bounds_text(state))
    text: list[Line] = [[("", "  "), ("class:prompt", t)] for t in wrap(str(q.get("prompt", "")), inner)]
    clar = _clarification_lines(state, inner)
    reply_at = -1
    if clar:
        text.append([])
        reply_at = len(text)
        text += clar
    avail = height - len(head) - len(heading)  # for the text, its spacer and what is below
    if state.mode in ("other", "clarify", "secret"):
        lower = _input_box(state, width)
        return head + heading + state.scroll.text_window(text, reply_at, max(2, avail - len(lower))) + lower
    blocks = _row_blocks(state, width)
    total = sum(len(lines) for _, lines in blocks)
    hl_lines = sum(len(lines) for r, lines in blocks if r == state.highlight)
    lower_min = min(total, max(7, hl_lines + 2))  # the highlighted option whole, and its neighbours
    upper = head + heading + state.scroll.text_window(text, reply_at, max(2, avail - lower_min))
    room = max(1, height - len(upper))
    return upper + state.scroll.rows_window(blocks, room, state.highlight)


def _row_blocks(state: TuiState, width: int) -> list[Block]:
    assert state.frame is not None
    q = state.frame["question"]
    multi = state.is_multi
    blocks: list[Block] = []
    box = 4 if multi else 0
    rows = state.rows()
    for r, row in enumerate(rows):
        hl = r == state.highlight
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
                on = option["id"] in state.selected
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
                on = bool(state.other)
                line.append(("class:check.on" if on else "class:check.off", "[✓] " if on else "[ ] "))
            if state.other:
                line.append(("class:action", "Other: "))
                # Highlighted, the answer typed shows in full, as an option's label does.
                quoted, other_room = f"“{clean(state.other)}”", label_room - 7
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


def _input_box(state: TuiState, width: int) -> list[Line]:
    inner = max(10, width - 8)
    box = state.input
    held = state.held if state.mode == "secret" else None
    kind = held.kind if held is not None else state.mode
    caption = "Your own answer" if kind == "other" else "Ask the agent about this question"
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
    top_rule = max(0, inner - cells(caption) - cells(count))
    lines.append(
        [
            ("", "  "),
            ("class:input.frame", "┌ "),
            ("class:input.title", caption),
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
            [("", "  "), ("class:input.frame", "│ ")] + body + [("class:input.text", fill), ("class:input.frame", " │")]
        )
    lines.append([("", "  "), ("class:input.frame", "└" + "─" * (inner + 2) + "┘")])
    if held is not None:
        return lines + _secret_warning(held.message(), width)
    if state.mode == "other" and state.is_multi:
        note = "Counts as one choice; leave empty to remove it."
    elif state.mode == "other":
        note = "Enter sends this as your answer."
    else:
        note = "The agent answers in the chat; this question waits here meanwhile."
    lines.append([("", "  "), ("class:hint", truncate(note, width - 4))])
    return lines


def _secret_warning(message: str, width: int) -> list[Line]:
    """Under the field whose text was held back: what it looks like, and the two ways on."""
    text = (
        f"{message} Whatever you send goes into the agent's context, and agents should never be "
        "given passwords, keys or tokens."
    )
    lines: list[Line] = [[("", "  "), ("class:status.warn", "⚠ This looks like a secret — nothing was sent")]]
    lines += [[("", "  "), ("class:prompt", chunk)] for chunk in wrap(text, max(10, width - 4))]
    lines.append(
        [
            ("", "  "),
            ("class:help.key", "s"),
            ("class:hint", " send it anyway   "),
            ("class:help.key", "e"),
            ("class:hint", " or "),
            ("class:help.key", "Esc"),
            ("class:hint", " edit it"),
        ]
    )
    return lines
