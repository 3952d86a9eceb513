"""Who answered, as the terminal says it: "answered by alice in the browser" (pure).

The broker sends it as ``answeredBy`` (``{"sub", "role", "client": {"kind", "name"}}``) on
the frame that moves on after an answer (docs/protocol.md); the browser page says it the
same way (clients/web/who.mjs).
"""

from __future__ import annotations

from typing import Any

_PLACES = {"tui": "in the terminal", "web": "in the browser"}


def answered_by_phrase(by: Any) -> str | None:
    """ "answered by alice in the terminal", "answered in the browser" (a token that names
    nobody), "answered by ci with qbroker-bots 2" (a program); None when ``by`` says nothing."""
    if not isinstance(by, dict):
        return None
    sub = by.get("sub")
    sub = sub.strip() if isinstance(sub, str) and sub.strip() else None
    client = by.get("client") if isinstance(by.get("client"), dict) else None
    place = ""
    if client is not None:
        kind, name = client.get("kind"), client.get("name")
        name = name.strip() if isinstance(name, str) else ""
        place = _PLACES.get(kind, "") if isinstance(kind, str) else ""
        if not place:
            place = "with " + (name or "a script")
    words = ["answered", *([f"by {sub}"] if sub else []), *([place] if place else [])]
    return " ".join(words) if len(words) > 1 else None


def own_answer(sent: tuple[str, int] | None, questionnaire_id: object, answered_step: object) -> bool:
    """Whether the answer the broker moved on after is this client's own: it sent one
    (``sent``: questionnaire, step) for that step."""
    return sent is not None and sent == (questionnaire_id, answered_step)
