"""The stop before a text that looks like a secret (pure).

When the person sends an Other answer or a clarification that has the shape of a credential
(broker/core/secret_shapes.py, the broker's own rules), nothing is sent: the screen says what
the text looks like and asks, ``s`` to send anyway, ``e`` or Esc to edit. The broker refuses
such a text unless the frame carries ``confirmedNotSecret: true``, which every frame with a
text the person confirmed carries from then on (for this question). A text the broker sent
back in a draft was checked, or confirmed on another screen, already.
"""

from __future__ import annotations

from broker.core.frames import CONFIRMED_NOT_SECRET
from broker.core.secret_shapes import looks_like_secret
from clients.tui.state import Frame, Held, Kind, TuiState


def holds(state: TuiState, kind: Kind, text: str) -> bool:
    """True, and the stop is up, when ``text`` looks like a secret not yet confirmed."""
    if not text or text in state.confirmed_texts:
        return False
    rule = looks_like_secret(text)
    if rule is None:
        return False
    state.held = Held(kind, text, rule.sentence)
    state.mode = "secret"
    return True


def vouch(state: TuiState, frame: Frame) -> Frame:
    """``frame`` with ``confirmedNotSecret: true`` when it carries a text the person confirmed."""
    draft = frame.get("draft")
    texts = (frame.get("other"), frame.get("request"), draft.get("other") if isinstance(draft, dict) else None)
    if any(text in state.confirmed_texts for text in texts if text):
        frame[CONFIRMED_NOT_SECRET] = True
    return frame


def accept(state: TuiState, text: object) -> None:
    """A text the broker holds (a draft it echoed) was checked, or confirmed, already."""
    if isinstance(text, str) and text and looks_like_secret(text) is not None:
        state.confirmed_texts.add(text)


def drop(state: TuiState) -> None:
    """The question moved on under the stop: it goes, and nothing was sent."""
    if state.held is not None:
        state.held = None
        if state.mode == "secret":
            state.mode = "list"
