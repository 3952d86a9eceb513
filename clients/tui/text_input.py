"""The text field of "Other…" and "Ask to clarify…": one paragraph, a cursor, a limit (pure).

Its limit counts characters, as the broker's limits do (the caller passes
``broker.core.model``'s ``MAX_OTHER`` or ``MAX_CLARIFICATION``), so the field stops where the
broker would refuse the text; what is typed or pasted is cleaned to one line first.
"""

from __future__ import annotations

from clients.tui.text import clean


class TextInput:
    """A one-paragraph editable text with a cursor and a length limit (in characters)."""

    def __init__(self, limit: int, text: str = "") -> None:
        self.limit = limit
        self.text = text[:limit]
        self.cursor = len(self.text)

    def insert(self, data: str) -> bool:
        """Insert at the cursor; returns False when (part of) it did not fit the limit."""
        data = clean(data)
        room = self.limit - len(self.text)
        fits = data[: max(room, 0)]
        self.text = self.text[: self.cursor] + fits + self.text[self.cursor :]
        self.cursor += len(fits)
        return len(fits) == len(data)

    def backspace(self) -> None:
        if self.cursor > 0:
            self.text = self.text[: self.cursor - 1] + self.text[self.cursor :]
            self.cursor -= 1

    def delete(self) -> None:
        self.text = self.text[: self.cursor] + self.text[self.cursor + 1 :]

    def move(self, delta: int) -> None:
        self.cursor = max(0, min(len(self.text), self.cursor + delta))

    def home(self) -> None:
        self.cursor = 0

    def end(self) -> None:
        self.cursor = len(self.text)

    def clear_line(self) -> None:
        self.text = self.text[self.cursor :]
        self.cursor = 0
