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
