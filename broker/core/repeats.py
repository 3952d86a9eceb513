"""Which questionnaire a repeated start re-attaches to when the caller sends no key of its own.

An MCP host whose call broke (the broker serving it was stopped or died, the network
dropped) repeats the call; it cannot send an ``Idempotency-Key``, and the JSON-RPC request
id of a retry is a new one. What a retry does repeat is the tool's arguments. So the
broker's MCP endpoint derives the start's idempotency key from them: from the session, who
asks (the agent token's ``sub``) and the questions as validated (so key order, blanks
around texts and ``null`` for an absent optional field do not matter).

One key per set of questions would re-attach for ever, and an agent that asks the same
questions again after the first questionnaire ended (the person cancelled, or had no
client open) must get a new one. So the keys form a chain: ``first_key`` names the first
questionnaire asked with these questions; once that one has ended, the next start with the
same questions goes to ``next_key(first, its id)``, and so on. Every broker walks the same
chain (the keys are pure functions of what the store holds), stops at the first key that
is free (and creates the questionnaire there, atomically) or that names a questionnaire
still open (and re-attaches to it). Two identical starts at once therefore share one
questionnaire, as two retries must.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Final

from broker.core.model import Question

KEY_PREFIX: Final = "repeat:"
# How many ended questionnaires with the same questions a start walks past before it gives
# up re-attaching and starts one with no key (each link is one store round trip).
MAX_LINKS: Final = 64


def first_key(session_id: str, asked_by: str | None, questions: Sequence[Question]) -> str:
    """The key of the first questionnaire asked with ``questions`` in this session by
    ``asked_by`` (a token's ``sub``; None for tokens that name nobody)."""
    canonical = json.dumps(
        [session_id, asked_by, [question.to_wire() for question in questions]],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return _key(canonical)


def next_key(key: str, ended_questionnaire_id: str) -> str:
    """The key of the next questionnaire with the same questions, once the one under
    ``key`` (``ended_questionnaire_id``) has ended."""
    return _key(f"{key}\n{ended_questionnaire_id}")


def _key(text: str) -> str:
    # "surrogatepass": a lone surrogate in a text is valid JSON, and hashes as any other text.
    return KEY_PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
