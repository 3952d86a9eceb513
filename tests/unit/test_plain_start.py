"""The plain start's one-pass decoding: the same value as the general path for every body it
takes, and None (the general path's turn) for every other."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.errors import BrokerError
from broker.core.model import MAX_DESCRIPTION, MAX_ID, MAX_LABEL, MAX_OPTIONS, MAX_PROMPT, parse_tool_input
from broker.core.plain_start import plain_start


def _plain() -> dict[str, Any]:
    return {
        "action": "start",
        "questions": [
            {
                "id": "target",
                "label": "Target",
                "prompt": "Which environment?",
                "type": "single",
                "options": [{"id": "staging", "label": "Staging"}, {"id": "prod", "label": "Production \u00e9"}],
                "allowOther": True,
            },
            {
                "id": "checks",
                "label": "Checks",
                "prompt": "Which checks?",
                "type": "multi",
                "options": [
                    {"id": "unit", "label": "Unit", "description": "fast"},
                    {"id": "e2e", "label": "E2E", "description": None},
                ],
                "minSelections": 1,
                "maxSelections": 2,
            },
        ],
    }


def _general(body: bytes) -> Any:
    """What the general path makes of ``body``: its value, or the error's code and message."""
    try:
        return parse_tool_input(orjson.loads(body))
    except BrokerError as exc:
        return (exc.code, exc.message)
    except orjson.JSONDecodeError:
        return "not JSON"


def _check(body: bytes) -> Any:
    plain = plain_start(body)
    if plain is not None:
        assert plain == _general(body)
    return plain


def test_a_plain_start_is_taken_in_one_pass() -> None:
    body = orjson.dumps(_plain())
    assert _check(body) is not None


def _edit(change: Callable[[dict[str, Any]], None]) -> bytes:
    payload = _plain()
    change(payload)
    return orjson.dumps(payload)


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "no label (it defaults to the id)": lambda p: p["questions"][0].pop("label"),
    "an option without a label": lambda p: p["questions"][0]["options"][0].pop("label"),
    "a label to trim": lambda p: p["questions"][0].update(label=" Target"),
    "a prompt to trim": lambda p: p["questions"][0].update(prompt="Which?\n"),
    "an id to trim": lambda p: p["questions"][0].update(id="target\u00a0"),
    "an option id to trim": lambda p: p["questions"][0]["options"][0].update(id="\tstaging"),
    "a description to trim": lambda p: p["questions"][1]["options"][0].update(description="fast "),
    "an empty description": lambda p: p["questions"][1]["options"][0].update(description=""),
    "a question id twice": lambda p: p["questions"][1].update(id="target"),
    "an option id twice": lambda p: p["questions"][0]["options"][1].update(id="staging"),
    "an unknown question key": lambda p: p["questions"][0].update(extra=1),
    "an unknown option key": lambda p: p["questions"][0]["options"][0].update(extra=1),
    "an unknown top-level key": lambda p: p.update(extra=1),
    "a resume": lambda p: p.update(action="resume"),
    "no action": lambda p: p.pop("action"),
    "a null label": lambda p: p["questions"][0].update(label=None),
    "a null minSelections": lambda p: p["questions"][1].update(minSelections=None),
    "a null maxSelections": lambda p: p["questions"][1].update(maxSelections=None),
    "a boolean minSelections": lambda p: p["questions"][1].update(minSelections=True),
    "a float maxSelections": lambda p: p["questions"][1].update(maxSelections=2.0),
    "bounds on a single question": lambda p: p["questions"][0].update(minSelections=0),
    "minSelections over the choices": lambda p: p["questions"][1].update(minSelections=3, maxSelections=None),
    "maxSelections over the choices": lambda p: p["questions"][1].update(maxSelections=4),
    "minSelections above maxSelections": lambda p: p["questions"][1].update(minSelections=2, maxSelections=1),
    "a zero maxSelections": lambda p: p["questions"][1].update(maxSelections=0),
    "a negative minSelections": lambda p: p["questions"][1].update(minSelections=-1),
    "other allowed counts as a choice": lambda p: p["questions"][1].update(allowOther=True, maxSelections=3),
    "no other": lambda p: p["questions"][1].update(allowOther=False, minSelections=2),
    "allowOther not a boolean": lambda p: p["questions"][0].update(allowOther=1),
    "another type": lambda p: p["questions"][0].update(type="radio"),
    "no options": lambda p: p["questions"][0].update(options=[]),
    "too many options": lambda p: p["questions"][0].update(
        options=[{"id": f"o{n}", "label": "x"} for n in range(MAX_OPTIONS + 1)]
    ),
    "the most options": lambda p: p["questions"][0].update(
        options=[{"id": f"o{n}", "label": "x"} for n in range(MAX_OPTIONS)]
    ),
    "no questions": lambda p: p.update(questions=[]),
    "questions not a list": lambda p: p.update(questions={}),
    "an option not an object": lambda p: p["questions"][0]["options"].append("x"),
    "an id at its limit": lambda p: p["questions"][0].update(id="i" * MAX_ID),
    "an id over its limit": lambda p: p["questions"][0].update(id="i" * (MAX_ID + 1)),
    "a label of emoji at its limit": lambda p: p["questions"][0].update(label="\U0001f600" * MAX_LABEL),
    "a label over its limit": lambda p: p["questions"][0].update(label="l" * (MAX_LABEL + 1)),
    "a prompt over its limit": lambda p: p["questions"][0].update(prompt="p" * (MAX_PROMPT + 1)),
    "a description over its limit": lambda p: p["questions"][1]["options"][0].update(
        description="d" * (MAX_DESCRIPTION + 1)
    ),
    "an empty id": lambda p: p["questions"][0].update(id=""),
    "a blank label": lambda p: p["questions"][0].update(label="   "),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_any_other_start_gives_the_general_paths_answer(name: str) -> None:
    _check(_edit(EDITS[name]))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"null",
        b'{"action":"start","questions":[]} x',
        b'{"action":"start","action":"start","questions":[{"id":"a","label":"A","prompt":"P","type":"single",'
        b'"options":[{"id":"o","label":"O","label":"P"}]}]}',
        b'{"action":"start","questions":[{"id":"\\ud800","label":"A","prompt":"P","type":"single",'
        b'"options":[{"id":"o","label":"O"}]}]}',
        b'{"action":"start","questions":[{"id":"\xff","label":"A","prompt":"P","type":"single",'
        b'"options":[{"id":"o","label":"O"}]}]}',
        b'{"action":"start","questions":[{"id":"a\x01","label":"A","prompt":"P","type":"single",'
        b'"options":[{"id":"o","label":"O"}]}]}',
        b'{"action":"start","questions":[{"id":"\\u0000","label":"A","prompt":"P","type":"single",'
        b'"options":[{"id":"o","label":"O"}]}]}',
    ],
)
def test_bodies_at_the_edges_of_json_agree(body: bytes) -> None:
    _check(body)


_TEXT = st.text(alphabet=st.sampled_from(["a", "b", " ", "\u00a0", "\t", "\u00e9", "\U0001f600"]), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    qid=_TEXT,
    label=_TEXT | st.none(),
    oid=_TEXT,
    second=_TEXT,
    description=_TEXT | st.none(),
    qtype=st.sampled_from(["single", "multi"]),
    bounds=st.tuples(st.none() | st.integers(-1, 4), st.none() | st.integers(-1, 4)),
)
def test_either_path_gives_one_answer(
    qid: str, label: str | None, oid: str, second: str, description: str | None, qtype: str, bounds: Any
) -> None:
    payload = _plain()
    question = copy.deepcopy(payload["questions"][1])
    question.update(id=qid, type=qtype, options=[{"id": oid, "label": "O"}, {"id": second, "label": "S"}])
    question.pop("minSelections")
    question.pop("maxSelections")
    if label is not None:
        question["label"] = label
    else:
        question.pop("label")
    if description is not None:
        question["options"][0]["description"] = description
    if bounds[0] is not None:
        question["minSelections"] = bounds[0]
    if bounds[1] is not None:
        question["maxSelections"] = bounds[1]
    payload["questions"] = [question]
    _check(orjson.dumps(payload))
