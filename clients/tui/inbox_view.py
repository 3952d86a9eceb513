"""The inbox's screen, drawn from its state as prompt_toolkit styled lines (pure).

``render(state, width, height, now, wall)`` returns exactly ``height`` lines, none wider than
``width`` cells: a header (the count and the inbox socket's state), the list (two lines per
questionnaire: its label with the session and age, then its prompt), a status line (what
became of the questionnaire just answered and the next one offered, or a notice) and the
keys. ``now`` (monotonic, for the reconnect countdown) and ``wall`` (Unix seconds, for the
ages) are passed in, so drawing reads no clock.
"""

from __future__ import annotations

from clients.tui.inbox_state import WAITING, InboxState, Item, ended_text, item_key, seconds
from clients.tui.lines import Line, center, fit, help_line, line_width, seconds_left
from clients.tui.text import cells, clean, truncate

ITEM_ROWS = 3  # the label line, the prompt line, a blank


def ago(then: float | None, wall: float) -> str:
    if then is None:
        return ""
    elapsed = max(0, int(wall - then))
    if elapsed < 60:
        return "just now"
    if elapsed < 3600:
        return f"{elapsed // 60} min ago"
    if elapsed < 48 * 3600:
        return f"{elapsed // 3600} h ago"
    return f"{elapsed // 86400} days ago"


def render(state: InboxState, width: int, height: int, now: float, wall: float) -> list[Line]:
    width = max(width, 20)
    height = max(height, 6)
    body_height = height - 3
    if state.fatal_message:
        body = _message(width, body_height, "status.error", f"✗ {state.fatal_message}", "")
    elif not state.loaded:
        if state.conn == "offline":
            wait = seconds_left(state.retry_at, now)
            body = _message(width, body_height, "idle.title", "Can't reach the broker", f"Retrying in {wait}s…")
        else:
            body = _message(width, body_height, "idle.title", "Connecting…", "")
    elif not state.items:
        body = _message(
            width,
            body_height,
            "idle.title",
            "Nothing is waiting for you",
            "Questionnaires from every session your token covers appear here as soon as an agent asks.",
        )
    else:
        body = _list(state, width, body_height, wall)
    body = body[:body_height] + [[] for _ in range(body_height - len(body))]
    lines = [_header(state, width, now), *body, _status_line(state, width), _help_line(state, width)]
    return [fit(line, width) for line in lines]


def _header(state: InboxState, width: int, now: float) -> Line:
    waiting = state.waiting_count()
    left: Line = [
        ("class:header.brand", " ◆ qbroker "),
        ("class:header", f" inbox · {waiting} waiting" if state.loaded else " inbox"),
    ]
    if state.fatal_message:
        right: Line = [("class:header.bad", " ✗ disconnected ")]
    elif state.conn == "connected":
        right = [("class:header.ok", " ● connected ")]
    elif state.conn == "connecting":
        right = [("class:header.wait", " ◌ connecting… ")]
    else:
        right = [("class:header.bad", f" ○ offline · retry in {seconds_left(state.retry_at, now)}s ")]
    used = line_width(left) + line_width(right)
    if used > width:
        left = [left[0]]
        used = line_width(left) + line_width(right)
    return left + [("class:header", " " * max(0, width - used))] + right


def _message(width: int, height: int, style: str, title: str, text: str) -> list[Line]:
    lines: list[Line] = [center([(f"class:{style}", truncate(title, width - 4))], width)]
    if text:
        lines.append([])
        lines.append(center([("class:idle.text", truncate(text, width - 4))], width))
    pad_top = max(0, (height - len(lines)) // 2)
    return [[] for _ in range(pad_top)] + lines


def _item_lines(item: Item, highlighted: bool, width: int, wall: float) -> list[Line]:
    """Its label (with the session, who asked and how long ago on the right), then its prompt
    and place; the highlighted one on a lit band, as an option is."""
    waiting = item.get("status") == WAITING
    right = str(item["sessionId"])
    if item.get("askedBy"):
        right += f" · {clean(str(item['askedBy']))}"
    age = ago(seconds(item.get("createdAt")), wall)
    if age:
        right += f" · {age}"
    label = clean(str(item.get("label") or "Question"))
    status = "" if waiting else "  ◔ waiting for the agent"
    # The right side takes what the label leaves, and at least half the line.
    right = truncate(right, max(8, width // 2 - 2, width - 6 - cells(label) - cells(status))) + " "
    status = truncate(status, max(0, width - 8 - cells(right)))
    label = truncate(label, max(3, width - 4 - cells(status) - cells(right) - 1))
    first: Line = [
        ("", "  "),
        ("class:marker", "❯ ") if highlighted else ("", "  "),
        ("class:option.label", label),
        ("class:hint", status),
    ]
    first += [("", " " * max(1, width - line_width(first) - cells(right))), ("class:option.desc", right)]
    total, index = item.get("total"), item.get("index")
    place = ""
    if isinstance(total, int) and isinstance(index, int) and total > 1:
        place = f"  · question {index + 1} of {total}"
    prompt = truncate(clean(str(item.get("prompt") or "")), max(3, width - 6 - cells(place)))
    second: Line = [("", "      "), ("class:prompt" if waiting else "class:option.desc", prompt), ("class:hint", place)]
    lines = [first, second]
    if highlighted:
        style = "class:row.hl"
        lines = [[(f"{s} {style}" if s else style, t) for s, t in ln] for ln in lines]
        lines = [ln + [(style, " " * max(0, width - line_width(ln)))] for ln in lines]
    return [*lines, []]


def _list(state: InboxState, width: int, height: int, wall: float) -> list[Line]:
    top: list[Line] = [[], [("class:progress.head", truncate(f"  Inbox — {state.summary()}", width))], []]
    items = state.ordered()
    room = max(1, (height - len(top) - 1) // ITEM_ROWS)  # one line for a "↓ n more" marker
    selected = state.highlight_index(items)
    first = min(state.list_top, selected)
    if selected >= first + room:
        first = selected - room + 1
    first = max(0, min(first, max(0, len(items) - room)))
    state.list_top = first
    lines = list(top)
    if first > 0:
        lines[-1] = [("class:scroll", f"  ↑ {first} more")]
    for item in items[first : first + room]:
        lines += _item_lines(item, item_key(item) == state.highlight_key, width, wall)
    hidden = len(items) - first - room
    if hidden > 0:
        lines.append([("class:scroll", f"  ↓ {hidden} more")])
    return lines


def _status_line(state: InboxState, width: int) -> Line:
    if state.notice is not None:
        icon = {"info": "›", "ok": "✓", "warn": "!", "error": "✗"}[state.notice.kind]
        return [(f"class:status.{state.notice.kind}", truncate(f" {icon} {state.notice.text}", width))]
    if state.ended is not None:
        offer = state.offered()
        text = f" ✓ {ended_text(state.ended.status)} "
        if offer is not None:
            text += f"Next: {clean(str(offer.get('label') or 'Question'))} ({offer['sessionId']}) — Enter answers it"
        else:
            text += "Nothing else is waiting for you."
        return [("class:status.ok", truncate(text, width))]
    if state.fatal_message:
        return [("class:status.error", truncate(f" ✗ {state.fatal_message}", width))]
    return []


def _help_line(state: InboxState, width: int) -> Line:
    keys = [("↑↓", "move"), ("Enter", "answer"), ("Ctrl+C", "quit")] if state.items else [("Ctrl+C", "quit")]
    return help_line(keys, width)
