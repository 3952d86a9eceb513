"""broker/core/frames.py: a client frame whose Other or clarification text looks like a
credential is refused with ``looks_like_secret`` unless it says the person confirmed it
(docs/protocol.md, "Pasted secrets")."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest

from broker.core.errors import BrokerError
from broker.core.frames import CommandFrame, LooksLikeSecret, parse_client_frame, refusal
from broker.core.machine import AnswerQuestion, Clarify, Draft
from broker.core.secret_shapes import RULES
from tests.helpers.processes import REPO_ROOT
from tests.helpers.secret_texts import secret_texts

KEY = "sk-proj-" + "Qv7xT2mWk9Lp4Rz8Ns3Bd6Hy1Jc5Fg0A"
PLAIN = "Postgres 16, please"


def answer(other: str, **extra: Any) -> dict[str, Any]:
    return {"type": "answer", "questionnaireId": "q1", "step": 0, "questionId": "db", "selectedOptionIds": [],
            "other": other, "ref": 7, **extra}  # fmt: skip


def draft(other: str, **extra: Any) -> dict[str, Any]:
    return {"type": "draft", "questionnaireId": "q1", "step": 0, "selectedOptionIds": ["a"], "other": other, **extra}


def clarify(request: str, draft_other: str | None = None, **extra: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "clarify", "questionnaireId": "q1", "step": 0, "request": request, **extra}
    if draft_other is not None:
        frame["draft"] = {"selectedOptionIds": [], "other": draft_other}
    return frame


def refused(value: dict[str, Any]) -> LooksLikeSecret:
    with pytest.raises(LooksLikeSecret) as caught:
        parse_client_frame(value)
    return caught.value


@pytest.mark.parametrize(
    ("value", "frame_type", "field"),
    [
        (answer(KEY), "answer", "other"),
        (draft(f"my key is {KEY}"), "draft", "other"),
        (clarify(f"is {KEY} the right key?"), "clarify", "request"),
        (clarify("Which one?", KEY), "clarify", "draft.other"),
    ],
    ids=["answer other", "draft other", "clarify request", "clarify draft other"],
)
def test_a_text_that_looks_like_a_key_refuses_its_frame(value: dict[str, Any], frame_type: str, field: str) -> None:
    exc = refused(value)
    assert (exc.code, exc.frame, exc.field, exc.rule) == ("looks_like_secret", frame_type, field, "openai_api_key")
    assert "confirmedNotSecret" in exc.message
    assert KEY not in exc.message and KEY[8:20] not in exc.message


def test_the_error_frame_names_the_rule_and_the_field_never_the_text() -> None:
    exc = refused(answer(KEY))
    frame = refusal(exc)
    assert frame == {
        "type": "error",
        "code": "looks_like_secret",
        "message": frame["message"],
        "ref": 7,
        "rule": "openai_api_key",
        "field": "other",
    }
    assert frame["message"].startswith("the Other text looks like an API key of the sk-… kind")
    assert KEY not in orjson.dumps(frame).decode()


def test_other_refusals_keep_the_error_frames_shape() -> None:
    with pytest.raises(BrokerError) as caught:
        parse_client_frame({"type": "answer", "ref": "r"})
    assert set(refusal(caught.value)) == {"type", "code", "message", "ref"}


@pytest.mark.parametrize(
    "value",
    [
        answer(KEY, confirmedNotSecret=True),
        draft(KEY, confirmedNotSecret=True),
        clarify(KEY, KEY, confirmedNotSecret=True),
    ],
    ids=["answer", "draft", "clarify"],
)
def test_a_frame_that_says_the_person_confirmed_is_taken_as_it_is(value: dict[str, Any]) -> None:
    frame = parse_client_frame(value)
    assert isinstance(frame, CommandFrame)
    command = frame.command
    assert isinstance(command, AnswerQuestion | Draft | Clarify)
    texts = [command.request] if isinstance(command, Clarify) else [command.other]
    assert any(KEY in (text or "") for text in texts)


def test_confirmed_false_is_the_same_as_leaving_it_out() -> None:
    assert refused(answer(KEY, confirmedNotSecret=False)).code == "looks_like_secret"


@pytest.mark.parametrize("flag", ["true", 1, None, [], {}])
def test_the_confirmation_must_be_a_boolean(flag: object) -> None:
    with pytest.raises(BrokerError) as caught:
        parse_client_frame(answer(PLAIN, confirmedNotSecret=flag))
    assert (caught.value.code, caught.value.field) == ("bad_frame", "confirmedNotSecret")


@pytest.mark.parametrize("frame_type", ["cancel", "ping"])
def test_frames_without_texts_take_no_confirmation(frame_type: str) -> None:
    value = {"type": frame_type, "questionnaireId": "q1", "step": 0, "confirmedNotSecret": True}
    if frame_type == "ping":
        value = {"type": "ping", "confirmedNotSecret": True}
    with pytest.raises(BrokerError) as caught:
        parse_client_frame(value)
    assert caught.value.code == "bad_frame"


def test_a_confirmation_without_a_text_is_harmless() -> None:
    value = {
        "type": "draft",
        "questionnaireId": "q1",
        "step": 0,
        "selectedOptionIds": ["a"],
        "confirmedNotSecret": True,
    }
    assert isinstance(parse_client_frame(value), CommandFrame)


def test_an_empty_or_missing_text_is_not_checked() -> None:
    assert isinstance(parse_client_frame(answer("")), CommandFrame)
    value = {"type": "answer", "questionnaireId": "q1", "step": 0, "questionId": "db", "selectedOptionIds": ["a"]}
    assert isinstance(parse_client_frame(value), CommandFrame)


def test_the_wire_refuses_exactly_what_the_table_says_looks_like_a_secret() -> None:
    for case in secret_texts():
        if not case.text.strip():
            continue
        try:
            parse_client_frame(answer(case.text))
        except LooksLikeSecret as exc:
            assert exc.rule == case.rule, case.why
        else:
            assert case.rule is None, case.why


def test_a_malformed_frame_is_a_bad_frame_before_its_text_is_read() -> None:
    with pytest.raises(BrokerError) as caught:
        parse_client_frame(answer(KEY, step=-1))
    assert caught.value.code == "bad_frame"


def test_protocol_md_shows_the_refusal_the_broker_sends() -> None:
    text = (REPO_ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = text[text.index("### Pasted secrets") :]
    example = json.loads(section[section.index("```json") + 7 : section.index("```", section.index("```json") + 7)])
    token = "ghp_" + "Zr4mQ8vNc2Lx7Tb1Wk9Hs3Jd6Fp0Ya5GeR2u"
    assert refusal(refused(answer(token) | {"ref": 4})) == example


def test_secrets_guard_md_lists_every_rule_in_order() -> None:
    text = (REPO_ROOT / "docs" / "secrets-guard.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z_]+)` \|", text, re.M)
    assert listed == [rule.code for rule in RULES]
