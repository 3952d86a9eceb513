"""The plain answer frame's one-pass decoding: the same frame as the general path for every
frame it takes, and None (the general path's turn) for every other."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.plain_answer import plain_answer


def _general(data: str) -> Any:
    try:
        return frames.parse_client_frame(frames.decode(data, "json"))
    except BrokerError as exc:
        return (exc.code, exc.message)


def _check(data: str) -> Any:
    plain = plain_answer(data)
    if plain is not None:
        assert plain == _general(data)
    return plain


def _frame(**change: Any) -> str:
    frame: dict[str, Any] = {
        "type": "answer",
        "questionnaireId": "7f1c",
        "step": 2,
        "questionId": "q1",
        "selectedOptionIds": ["o2"],
        "ref": 7,
    }
    for key, value in change.items():
        if value is _ABSENT:
            frame.pop(key, None)
        else:
            frame[key] = value
    return json.dumps(frame, separators=(",", ":"))  # (orjson writes no integer past 64 bits)


_ABSENT = object()


def test_a_plain_answer_is_taken_in_one_pass() -> None:
    assert _check(_frame()) is not None
    assert _check(_frame(ref=_ABSENT, selectedOptionIds=_ABSENT)) is not None
    assert _check(_frame(other="", confirmedNotSecret=False, ref="r-1")) is not None


@pytest.mark.parametrize(
    "change",
    [
        {"type": "draft"},
        {"type": "cancel"},
        {"other": "an Other text"},  # (checked for a pasted secret: the general path's)
        {"other": "sk-ant-api03-" + "a" * 40, "confirmedNotSecret": True},
        {"other": None},
        {"other": 3},
        {"step": -1},
        {"step": True},
        {"step": 1.0},
        {"step": 2**64 - 1},
        {"step": "2"},
        {"ref": True},
        {"ref": 2.5},
        {"ref": "r" * 128},
        {"ref": "r" * 129},
        {"ref": -(2**63)},
        {"ref": 2**64 - 1},
        {"ref": None},
        {"ref": []},
        {"questionnaireId": 3},
        {"questionnaireId": _ABSENT},
        {"questionId": None},
        {"selectedOptionIds": None},
        {"selectedOptionIds": "o1"},
        {"selectedOptionIds": [1]},
        {"selectedOptionIds": ["o"] * 64},
        {"selectedOptionIds": ["o"] * 65},
        {"confirmedNotSecret": 1},
        {"unknown": 1},
    ],
)
def test_any_other_frame_gives_the_general_paths_answer(change: dict[str, Any]) -> None:
    _check(_frame(**change))


@pytest.mark.parametrize(
    "data",
    [
        "",
        "[]",
        "null",
        '{"type":"answer"}',
        '{"type":"answer","questionnaireId":"q","step":0,"questionId":"a"} x',
        '{"type":"answer","questionnaireId":"q","step":18446744073709551616,"questionId":"a"}',
        '{"type":"answer","questionnaireId":"q","step":0,"questionId":"a","ref":18446744073709551616}',
        '{"type":"answer","questionnaireId":"q","step":0,"questionId":"a","ref":-9223372036854775809}',
        '{"type":"answer","questionnaireId":"q","step":1e0,"questionId":"a"}',
        '{"type":"answer","questionnaireId":"q","step":0,"step":1,"questionId":"a"}',
        '{"type":"answer","questionnaireId":"q\\ud800","step":0,"questionId":"a"}',
        '{"type":"answer","questionnaireId":"\\u0000","step":0,"questionId":"a"}',
        '{"type":"answer","questionnaireId":"q","step":0,"questionId":"a\x01"}',
    ],
)
def test_frames_at_the_edges_of_json_agree(data: str) -> None:
    _check(data)


_ANY = st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.text(max_size=3) | st.lists(st.text(max_size=2))


@settings(max_examples=300, deadline=None)
@given(
    step=_ANY,
    ref=_ANY,
    ids=_ANY,
    other=_ANY,
    confirmed=_ANY,
    absent=st.sets(st.sampled_from(["step", "ref", "selectedOptionIds", "other", "confirmedNotSecret"])),
)
def test_either_path_gives_one_answer(step: Any, ref: Any, ids: Any, other: Any, confirmed: Any, absent: Any) -> None:
    change = {"step": step, "ref": ref, "selectedOptionIds": ids, "other": other, "confirmedNotSecret": confirmed}
    for key in absent:
        change[key] = _ABSENT
    _check(_frame(**change))
