"""broker/core/repeats.py: the keys that make a repeated start (an MCP host's retry) the same
questionnaire, while it is open, and a new one once it has ended."""

from __future__ import annotations

from typing import Any

from broker.core import repeats
from broker.core.model import Question, StartInput, parse_tool_input
from tests.helpers.samples import multi, single, start_body


def questions(*items: dict[str, Any]) -> tuple[Question, ...]:
    parsed = parse_tool_input(start_body(*items))
    assert isinstance(parsed, StartInput)
    return parsed.questions


def test_the_same_call_repeated_gives_the_same_first_key() -> None:
    one = repeats.first_key("s", "alice", questions(single(), multi()))
    assert one == repeats.first_key("s", "alice", questions(single(), multi()))
    assert one.startswith(repeats.KEY_PREFIX) and len(one) == len(repeats.KEY_PREFIX) + 64


def test_what_validation_normalizes_does_not_change_the_key() -> None:
    plain = single("target", label="Target")
    # Keys in another order, blanks around texts, null for an absent optional field.
    shuffled = {key: plain[key] for key in reversed(list(plain))}
    padded = {**plain, "prompt": f"  {plain['prompt']}\n", "label": " Target ", "options": plain["options"]}
    nulled = {**plain, "options": [{**option, "description": None} for option in plain["options"]]}
    keys = {repeats.first_key("s", None, questions(q)) for q in (plain, shuffled, padded, nulled)}
    assert len(keys) == 1


def test_another_session_asker_question_or_order_gives_another_key() -> None:
    base = repeats.first_key("s", "alice", questions(single(), multi()))
    others = [
        repeats.first_key("t", "alice", questions(single(), multi())),
        repeats.first_key("s", "bob", questions(single(), multi())),
        repeats.first_key("s", None, questions(single(), multi())),
        repeats.first_key("s", "alice", questions(multi(), single())),
        repeats.first_key("s", "alice", questions(single(), multi(options=("unit", "e2e")))),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_the_next_key_follows_from_the_key_and_the_ended_questionnaire() -> None:
    first = repeats.first_key("s", None, questions(single()))
    second = repeats.next_key(first, "q-1")
    assert second == repeats.next_key(first, "q-1")
    assert len({first, second, repeats.next_key(first, "q-2"), repeats.next_key(second, "q-1")}) == 4
    assert second.startswith(repeats.KEY_PREFIX)


def test_a_key_fits_the_idempotency_key_limit_and_any_text_hashes() -> None:
    lone_surrogate = single(label="\ud800 odd")
    key = repeats.first_key("s" * 128, "x" * 500, questions(lone_surrogate))
    assert len(key) <= 200
