"""The secrets guard's shared table (``secret_texts.json``): texts and the rule each must
match (None: none), read by the Python tests here and by the page's Node tests alike.

The fabricated credentials in the table are cut into pieces, joined here, so that no secret
scanner flags the repository for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("secret_texts.json")


@dataclass(frozen=True)
class SecretText:
    text: str
    rule: str | None  # the code of the rule it must match, or None: it must pass
    why: str


def secret_texts() -> list[SecretText]:
    entries = json.loads(TABLE.read_text(encoding="utf-8"))["texts"]
    return [
        SecretText(e["text"] if isinstance(e["text"], str) else "".join(e["text"]), e["rule"], e["why"])
        for e in entries
    ]
