"""Scrolling: where each window over too-tall content starts, and what the last drawing measured.

Three things on the question screen can be taller than their room: the question's text (its
prompt and the agent's reply; on the waiting screen, the person's request), the list of rows,
and the highlighted option alone on a small terminal. Only the drawing knows the room, so the
view records here, as it draws, whether it cut something, how far it can scroll and how long
a page is; PageUp/PageDown then move within those bounds, and a new question resets the
offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from clients.tui.lines import Line

# A row of the list drawn: its index in ``TuiState.rows()`` (None for a separator) and its lines.
Block = tuple[int | None, list[Line]]


@dataclass
class Scroll:
    list_top: int = 0  # the first line of the list of rows in view
    page: int = 5  # rows in view: how far PageUp/PageDown move the highlight when nothing is cut
    # The question's text.
    text_top: int = 0
    text_max: int = 0
    text_page: int = 1
    text_cut: bool = False
    to_reply: bool = False  # after a resume, the next drawing scrolls the text to the agent's reply
    # The highlighted option, when it alone is taller than the room for the list.
    block_of: int = -1  # the row it was measured for: another row starts at its top
    block_top: int = 0
    block_max: int = 0
    block_page: int = 1
    block_cut: bool = False

    def page_text(self, direction: int) -> None:
        self.text_top = max(0, min(self.text_max, self.text_top + direction * self.text_page))

    def page_block(self, direction: int) -> None:
        self.block_top = max(0, min(self.block_max, self.block_top + direction * self.block_page))

    def text_window(self, text: list[Line], reply_at: int, budget: int) -> list[Line]:
        """The question's text in ``budget`` lines: all of it, or a scrolled part and a marker."""
        if len(text) + 1 <= budget:
            self.text_cut, self.text_max, self.to_reply = False, 0, False
            return text + [[]]
        visible = max(1, budget - 1)
        self.text_cut = True
        self.text_max = len(text) - visible
        self.text_page = max(1, visible - 1)  # a page keeps one line of context
        if self.to_reply and reply_at >= 0:
            self.text_top = reply_at
        self.to_reply = False
        self.text_top = max(0, min(self.text_top, self.text_max))
        top = self.text_top
        above, below = top, len(text) - top - visible
        marker: Line = [("", "  "), ("class:scroll", more_lines(above, below))]
        return text[top : top + visible] + [marker]

    def rows_window(self, blocks: list[Block], room: int, highlight: int) -> list[Line]:
        """The rows in ``room`` lines: all of them, or a part around the highlighted one with
        ``↑ n more`` / ``↓ n more`` markers; it moves only as far as keeps the highlight in view."""
        flat: list[tuple[int | None, Line]] = [(r, ln) for r, lines in blocks for ln in lines]
        if len(flat) <= room:
            self.list_top = 0
            self.page = max(1, len(blocks) - 1)
            return [ln for _, ln in flat]
        space = max(1, room - 2)
        hl = [i for i, (r, _) in enumerate(flat) if r == highlight]
        if len(hl) > space:
            return self._tall_block(flat, hl, space, highlight)
        first, last = (hl[0], hl[-1] + 1) if hl else (0, 1)
        if first > 0 and flat[first - 1][0] is None:
            first -= 1  # keep the separator above the first action row in view
        top = min(self.list_top, len(flat) - space)
        top = min(top, first)
        if last > top + space:
            top = last - space
        top = max(0, min(top, len(flat) - space, hl[0] if hl else len(flat)))  # a tall block shows its start
        self.list_top = top
        shown = flat[top : top + space]
        visible_rows = {r for r, _ in shown if r is not None}
        self.page = max(1, len(visible_rows) - 1)
        above = len({r for r, _ in flat[:top] if r is not None} - visible_rows)
        below = len({r for r, _ in flat[top + space :] if r is not None} - visible_rows)
        up: Line = [("", "  "), ("class:scroll", f"↑ {above} more")] if above else []
        down: Line = [("", "  "), ("class:scroll", f"↓ {below} more")] if below else []
        return [up] + [ln for _, ln in shown] + [down]

    def _tall_block(self, flat: list[tuple[int | None, Line]], hl: list[int], space: int, highlight: int) -> list[Line]:
        """The highlighted option alone is taller than the space: it scrolls on its own (PgUp/PgDn)."""
        if self.block_of != highlight:
            self.block_of, self.block_top = highlight, 0
        visible = max(1, space - 1)
        self.block_cut = True
        self.block_max = len(hl) - visible
        self.block_page = max(1, visible - 1)
        self.block_top = max(0, min(self.block_top, self.block_max))
        start = hl[0] + self.block_top
        self.list_top = hl[0]
        self.page = 1
        shown = [ln for _, ln in flat[start : start + visible]]
        marker: Line = [("", "      "), ("class:scroll", more_lines(start - hl[0], hl[-1] + 1 - start - visible))]
        above = len({r for r, _ in flat[: hl[0]] if r is not None})
        below = len({r for r, _ in flat[hl[-1] + 1 :] if r is not None})
        up: Line = [("", "  "), ("class:scroll", f"↑ {above} more")] if above else []
        down: Line = [("", "  "), ("class:scroll", f"↓ {below} more")] if below else []
        return [up] + shown + [marker, down]


def more_lines(above: int, below: int) -> str:
    """The marker under text cut to fit: how much more there is, and the keys that show it."""
    if above and below:
        return f"↑ {above} · ↓ {below} more lines · PgUp/PgDn"
    if below:
        return f"↓ {below} more line{'s' if below > 1 else ''} · PgDn"
    return f"↑ {above} line{'s' if above > 1 else ''} above · PgUp"
