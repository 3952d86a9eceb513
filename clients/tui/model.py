"""The one object ``app.py`` drives: the state, with the broker's frames, the keys and the drawing attached.

``TuiModel`` is the terminal client without a terminal or a socket, so that all of it is
tested alone. It holds the state (``state.py``) and hands each input to the module that owns
what it does:

* ``apply(frame)``: a decoded broker frame (``welcome``, ``question``, ``suspended``,
  ``closed``, ``idle``, ``error``, ``pong``), and ``connecting()/disconnected()/fatal()``:
  what the websocket is doing (``incoming.py``);
* ``key(name, data)``: a key press; returns the client frames to send (``keys.py``);
* ``render(width, height, now)``: exactly ``height`` lines of prompt_toolkit fragments,
  none wider than ``width`` cells (``view.py``).
"""

from __future__ import annotations

from clients.tui import incoming, keys, view
from clients.tui.lines import Line
from clients.tui.state import Frame, TuiState


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

    def render(self, width: int, height: int, now: float = 0.0) -> list[Line]:
        """Exactly ``height`` lines, none wider than ``width`` cells."""
        return view.render(self, width, height, now)


__all__ = ["TuiModel"]
