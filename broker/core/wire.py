"""Wire identifiers that belong to no single message: the session id.

A session id travels in URL paths (``/v1/sessions/{sid}/...``), in tokens' ``sid`` claim and
in the store's keys (a Redis hash tag), so its alphabet needs no escaping in any of them.
The broker checks it on every request and connection, ``qbroker token`` before it signs, and
the agent API's OpenAPI document publishes the same pattern.
"""

from __future__ import annotations

import re
from typing import Final

MAX_SESSION_ID: Final = 128
SESSION_ID_ALPHABET: Final = "A-Za-z0-9._:-"  # the body of a regex character class
# One regular expression that means the same in Python, ECMA-262 and JSON Schema.
SESSION_ID_PATTERN: Final = rf"^[{SESSION_ID_ALPHABET}]{{1,{MAX_SESSION_ID}}}$"
SESSION_ID_RULE: Final = f"1-{MAX_SESSION_ID} characters of [{SESSION_ID_ALPHABET}]"  # for messages

_SESSION_ID: Final = re.compile(SESSION_ID_PATTERN)


def is_session_id(text: str) -> bool:
    return _SESSION_ID.fullmatch(text) is not None  # fullmatch: "$" alone would let "sid\n" through
