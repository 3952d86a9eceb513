"""Tool-input validation and normalization: every rule, the accepted and the rejected side."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest

from broker.core.errors import BrokerError
from broker.core.model import (
    MAX_CLARIFICATION,
    MAX_DESCRIPTION,
    MAX_ID,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_PROMPT,
    MAX_QUESTIONS,
    Option,
    Question,
    ResumeInput,
    StartInput,
    parse_tool_input,
)
from tests.helpers.machine import parse_start
from tests.helpers.samples import multi, single
from tests.helpers.samples import start_body as start_payload

SEED_EXAMPLE: dict[str, Any] = {
    "action": "start",
    "questions": [
        {
            "id": "deploy_target",
            "label": "Target",
            "prompt": "Which environment should this release go to?",
            "type": "single",
            "options": [
                {"id": "staging", "label": "Staging"},
                {
                    "id": "production",
                    "label": "Production",
                    "description": "Requires an approved release window",
                },
            ],
            "allowOther": False,
        },
        {
            "id": "checks",
            "label": "Pre-flight checks",
            "prompt": "Which checks must pass before the deploy?",
            "type": "multi",
            "options": [
                {"id": "unit", "label": "Unit tests"},
                {"id": "e2e", "label": "End-to-end tests"},
                {"id": "lint", "label": "Lint and types"},
            ],
            "minSelections": 1,
            "maxSelections": 3,
        },
    ],
}


def resume_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "action": "resume",
        "questionnaireId": "qn-1",
        "revision": 1,
        "clarificationResponse": "Staging needs no window.",
    }
    payload.update(overrides)
    return {key: value for key, value in payload.items() if value is not _DROP}


_DROP = object()


def rejection(payload: Any) -> str:
    """Parse ``payload``, expect a rejection, return its message (checked for the prefix)."""
    with pytest.raises(BrokerError) as info:
        parse_tool_input(payload)
    assert info.value.code == "invalid_arguments"
    assert info.value.http_status == 400
    assert info.value.message.startswith("questionnaire: "), info.value.message
    assert str(info.value) == info.value.message
    return info.value.message


def first_question(*questions: dict[str, Any]) -> Question:
    return parse_start(*questions).questions[0]


# --- the accepted side --------------------------------------------------------------


def test_the_seed_example_parses_to_its_normalized_snapshot() -> None:
    parsed = parse_tool_input(SEED_EXAMPLE)
    assert parsed == StartInput(
        (
            Question(
                id="deploy_target",
                label="Target",
                prompt="Which environment should this release go to?",
                type="single",
                options=(
                    Option("staging", "Staging"),
                    Option("production", "Production", "Requires an approved release window"),
                ),
                allow_other=False,
            ),
            Question(
                id="checks",
                label="Pre-flight checks",
                prompt="Which checks must pass before the deploy?",
                type="multi",
                options=(
                    Option("unit", "Unit tests"),
                    Option("e2e", "End-to-end tests"),
                    Option("lint", "Lint and types"),
                ),
                allow_other=True,
                min_selections=1,
                max_selections=3,
            ),
        )
    )


def test_a_minimal_question_gets_every_default() -> None:
    assert first_question({"id": "q", "prompt": "P?", "type": "single", "options": [{"id": "o"}]}) == (
        Question("q", "q", "P?", "single", (Option("o", "o", None),), True, 0, None)
    )


def test_a_minimal_multi_question_defaults_to_no_minimum_and_no_ceiling() -> None:
    question = first_question(multi("m", ("x",)))
    assert (question.min_selections, question.max_selections, question.allow_other) == (0, None, True)


def test_label_defaults_to_the_id_for_questions_and_options() -> None:
    question = first_question(single("q", ("o1", "o2")))
    assert question.label == "q"
    assert [option.label for option in question.options] == ["o1", "o2"]


def test_an_explicit_null_label_or_description_falls_back_to_the_default() -> None:
    question = first_question(
        {
            "id": "q",
            "label": None,
            "prompt": "P?",
            "type": "single",
            "options": [{"id": "o", "label": None, "description": None}],
        }
    )
    assert question.label == "q"
    assert question.options == (Option("o", "o", None),)


def test_ids_and_texts_are_trimmed() -> None:
    question = first_question(
        {
            "id": "  q1\t",
            "label": " Label ",
            "prompt": "\n Prompt? \n",
            "type": "single",
            "options": [{"id": " o1 ", "label": "  One  ", "description": "  desc  "}],
        }
    )
    assert question == Question("q1", "Label", "Prompt?", "single", (Option("o1", "One", "desc"),))


def test_a_trimmed_id_is_the_label_default() -> None:
    assert first_question(single("  spaced  ", (" o ",))).label == "spaced"
    assert first_question(single("  spaced  ", (" o ",))).options[0].label == "o"


def test_allow_other_can_be_switched_off() -> None:
    assert first_question(single(allowOther=False)).allow_other is False
    assert first_question(single(allowOther=True)).allow_other is True


def test_one_and_twenty_questions_are_accepted() -> None:
    assert len(parse_start(single("q0")).questions) == 1
    many = [single(f"q{i}") for i in range(MAX_QUESTIONS)]
    assert [q.id for q in parse_start(*many).questions] == [f"q{i}" for i in range(20)]


def test_one_and_fifty_options_are_accepted() -> None:
    assert first_question(single("q", ("only",))).option_ids == ("only",)
    ids = tuple(f"o{i}" for i in range(MAX_OPTIONS))
    assert first_question(single("q", ids)).option_ids == ids


def test_same_option_id_in_two_questions_is_fine() -> None:
    parsed = parse_start(single("q1", ("yes", "no")), single("q2", ("yes", "no")))
    assert [q.option_ids for q in parsed.questions] == [("yes", "no"), ("yes", "no")]


def test_question_order_and_option_order_are_kept_as_declared() -> None:
    parsed = parse_start(single("z", ("c", "a", "b")), single("a", ("y", "x")))
    assert [q.id for q in parsed.questions] == ["z", "a"]
    assert parsed.questions[0].option_ids == ("c", "a", "b")


@pytest.mark.parametrize(
    ("build", "read"),
    [
        pytest.param(lambda t: single(t), lambda q: q.id, id="question id"),
        pytest.param(lambda t: single("q", (t,)), lambda q: q.options[0].id, id="option id"),
    ],
)
def test_ids_of_exactly_128_characters_are_accepted(
    build: Callable[[str], dict[str, Any]], read: Callable[[Question], str]
) -> None:
    text = "i" * MAX_ID
    assert read(first_question(build(text))) == text


@pytest.mark.parametrize(
    ("key", "limit", "read"),
    [
        ("label", MAX_LABEL, lambda q: q.label),
        ("prompt", MAX_PROMPT, lambda q: q.prompt),
    ],
)
def test_question_texts_at_exactly_their_limit_are_accepted(
    key: str, limit: int, read: Callable[[Question], str]
) -> None:
    text = "t" * limit
    assert read(first_question(single("q", **{key: text}))) == text  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "limit"), [("label", MAX_LABEL), ("description", MAX_DESCRIPTION)])
def test_option_texts_at_exactly_their_limit_are_accepted(key: str, limit: int) -> None:
    text = "t" * limit
    raw = single("q")
    raw["options"] = [{"id": "o", key: text}]
    option = first_question(raw).options[0]
    assert getattr(option, key) == text


def test_limits_count_characters_after_trimming() -> None:
    question = first_question(single("  " + "q" * MAX_ID + "  ", prompt=" " + "p" * MAX_PROMPT + " "))
    assert len(question.id) == MAX_ID
    assert len(question.prompt) == MAX_PROMPT


def test_limits_count_characters_not_bytes() -> None:
    question = first_question(single("q", label="é" * MAX_LABEL))
    assert question.label == "é" * MAX_LABEL


# --- multi bounds, accepted side ---------------------------------------------------------


@pytest.mark.parametrize(
    ("allow_other", "extra", "expected"),
    [
        (True, {"minSelections": 0}, (0, None)),
        (True, {"minSelections": 1, "maxSelections": 1}, (1, 1)),  # min == max
        (True, {"minSelections": 4}, (4, None)),  # 3 options + Other
        (True, {"maxSelections": 4}, (0, 4)),
        (True, {"minSelections": 4, "maxSelections": 4}, (4, 4)),
        (False, {"minSelections": 3, "maxSelections": 3}, (3, 3)),  # 3 options, no Other
        (True, {"maxSelections": None}, (0, None)),  # explicit "no ceiling"
    ],
)
def test_multi_bounds_within_the_rules_are_accepted(
    allow_other: bool, extra: dict[str, Any], expected: tuple[int, int | None]
) -> None:
    question = first_question(multi("m", ("x", "y", "z"), allowOther=allow_other, **extra))
    assert (question.min_selections, question.max_selections) == expected


# --- resume, accepted side -----------------------------------------------------------


def test_a_resume_call_parses_to_its_three_fields() -> None:
    assert parse_tool_input(resume_payload()) == ResumeInput("qn-1", 1, "Staging needs no window.")


def test_a_resume_call_trims_its_texts() -> None:
    parsed = parse_tool_input(resume_payload(questionnaireId=" qn-1 ", clarificationResponse=" ok "))
    assert parsed == ResumeInput("qn-1", 1, "ok")


def test_resume_texts_at_exactly_their_limit_are_accepted() -> None:
    parsed = parse_tool_input(
        resume_payload(questionnaireId="i" * MAX_ID, clarificationResponse="r" * MAX_CLARIFICATION)
    )
    assert parsed == ResumeInput("i" * MAX_ID, 1, "r" * MAX_CLARIFICATION)


def test_a_large_resume_revision_is_accepted() -> None:
    assert isinstance(parsed := parse_tool_input(resume_payload(revision=10**6)), ResumeInput)
    assert parsed.revision == 10**6


# --- snapshots are detached ----------------------------------------------------------


def test_mutating_the_input_after_parsing_changes_nothing() -> None:
    payload = copy.deepcopy(SEED_EXAMPLE)
    parsed = parse_tool_input(payload)
    before = copy.deepcopy(parsed)
    payload["questions"][0]["id"] = "changed"
    payload["questions"][0]["options"].append({"id": "extra"})
    payload["questions"][0]["options"][0]["label"] = "changed"
    payload["questions"][1]["maxSelections"] = 1
    payload["questions"].clear()
    assert parsed == before


def test_normalized_values_are_frozen() -> None:
    question = first_question(single())
    with pytest.raises(AttributeError):
        question.id = "other"  # type: ignore[misc]


# --- wire form of the normalized snapshot ---------------------------------------------


def test_a_single_question_on_the_wire_has_no_selection_bounds() -> None:
    question = parse_tool_input(SEED_EXAMPLE).questions[0]  # type: ignore[union-attr]
    assert question.to_wire() == {
        "id": "deploy_target",
        "label": "Target",
        "prompt": "Which environment should this release go to?",
        "type": "single",
        "options": [
            {"id": "staging", "label": "Staging"},
            {"id": "production", "label": "Production", "description": "Requires an approved release window"},
        ],
        "allowOther": False,
    }


def test_a_multi_question_on_the_wire_has_both_bounds_even_without_a_ceiling() -> None:
    wire = first_question(multi("m", ("x",))).to_wire()
    assert wire["minSelections"] == 0
    assert wire["maxSelections"] is None


def test_a_questions_wire_form_keeps_its_keys_in_the_protocols_order() -> None:
    """Records pack it as it is: brokers that spell it in the same order recognise each
    other's questions by their bytes (broker/store/records.py)."""
    single_wire, multi_wire = (question.to_wire() for question in parse_tool_input(SEED_EXAMPLE).questions)  # type: ignore[union-attr]
    assert list(single_wire) == ["id", "label", "prompt", "type", "options", "allowOther"]
    assert list(multi_wire) == [
        "id",
        "label",
        "prompt",
        "type",
        "options",
        "allowOther",
        "minSelections",
        "maxSelections",
    ]
    assert [list(option) for option in single_wire["options"]] == [["id", "label"], ["id", "label", "description"]]
    assert type(single_wire["options"]) is list


def test_a_questions_derived_values_are_made_once_and_take_no_part_in_equality() -> None:
    question = parse_tool_input(SEED_EXAMPLE).questions[1]  # type: ignore[union-attr]
    twin = Question.from_wire(question.to_wire())  # equal, nothing derived yet
    assert question.to_wire() is question.to_wire()  # made once, then kept
    assert question.option_ids is question.option_ids == ("unit", "e2e", "lint")
    assert set(vars(question)) == {"_wire", "option_ids"} and not vars(twin)
    assert twin == question and hash(twin) == hash(question)
    with pytest.raises(AttributeError):
        question.id = "changed"  # type: ignore[misc]  # the fields stay frozen


@pytest.mark.parametrize("index", [0, 1])
def test_a_question_survives_the_wire_round_trip(index: int) -> None:
    question = parse_tool_input(SEED_EXAMPLE).questions[index]  # type: ignore[union-attr]
    assert Question.from_wire(question.to_wire()) == question


# --- the rejected side --------------------------------------------------------------


def _with_option(**option: Any) -> dict[str, Any]:
    raw = single("q")
    raw["options"] = [option]
    return start_payload(raw)


def _question_without(key: str) -> dict[str, Any]:
    raw = single("q")
    del raw[key]
    return start_payload(raw)


# (payload, fragments the message must contain). Every one must be refused with a message
# starting "questionnaire:"; the fragments pin the offending id and the rule.
REJECTIONS: list[Any] = [
    # the envelope
    pytest.param(None, ["JSON object"], id="payload not an object"),
    pytest.param(["start"], ["JSON object"], id="payload is a list"),
    pytest.param({}, ['"action" is required'], id="action missing"),
    pytest.param({"action": "stop"}, ['got "stop"', '"start" or "resume"'], id="action unknown"),
    pytest.param({"action": ["start"]}, ['"start" or "resume"'], id="action not a string"),
    pytest.param({"action": "start"}, ['"questions" must be a list'], id="start without questions"),
    pytest.param({"action": "start", "questions": {}}, ['"questions" must be a list'], id="questions a map"),
    pytest.param(start_payload(single()) | {"questionnaireId": "x"}, ['"questionnaireId"', "start carries only"], id="start with questionnaireId"),
    pytest.param(start_payload(single()) | {"revision": 1}, ['"revision"', "start carries only"], id="start with revision"),
    pytest.param(start_payload(single()) | {"title": "x"}, ['unknown key "title"'], id="start with unknown key"),
    # question count
    pytest.param({"action": "start", "questions": []}, ["1-20 questions, got 0"], id="zero questions"),
    pytest.param({"action": "start", "questions": [single(f"q{i}") for i in range(21)]}, ["1-20 questions, got 21"], id="21 questions"),
    # question shape
    pytest.param(start_payload("q"), ["question 1 must be an object"], id="question not an object"),  # type: ignore[arg-type]
    pytest.param({"action": "start", "questions": [single("q1"), 7]}, ["question 2 must be an object"], id="second question not an object"),
    pytest.param(_question_without("id"), ['question 1: "id" is required'], id="question id missing"),
    pytest.param(start_payload(single(5)), ['question 1: "id" must be a string'], id="question id not a string"),  # type: ignore[arg-type]
    pytest.param(start_payload(single("")), ['question 1: "id" must not be empty'], id="question id empty"),
    pytest.param(start_payload(single(" \t\n")), ['question 1: "id" must not be empty'], id="question id blank"),
    pytest.param(start_payload(single("i" * 129)), ['question 1: "id" is 129 characters; the limit is 128'], id="question id 129"),
    pytest.param(start_payload(single("q"), single(" q ")), ['question id "q" is used twice'], id="question ids equal after trim"),
    pytest.param(start_payload(single("q", colour="red")), ['question "q": unknown key "colour"'], id="question unknown key"),
    pytest.param(start_payload(single("q", label="")), ['question "q": "label" must not be empty'], id="label empty"),
    pytest.param(start_payload(single("q", label="   ")), ['question "q": "label" must not be empty'], id="label blank"),
    pytest.param(start_payload(single("q", label=3)), ['question "q": "label" must be a string'], id="label not a string"),
    pytest.param(start_payload(single("q", label="l" * 201)), ['question "q": "label" is 201 characters; the limit is 200'], id="label 201"),
    pytest.param(_question_without("prompt"), ['question "q": "prompt" is required'], id="prompt missing"),
    pytest.param(start_payload(single("q", prompt="  ")), ['question "q": "prompt" must not be empty'], id="prompt blank"),
    pytest.param(start_payload(single("q", prompt="p" * 2001)), ['question "q": "prompt" is 2001 characters; the limit is 2000'], id="prompt 2001"),
    pytest.param(_question_without("type"), ['question "q": "type" must be "single" or "multi"', "got null"], id="type missing"),
    pytest.param(start_payload(single("q", type="radio")), ['question "q": "type"', 'got "radio"'], id="type unknown"),
    pytest.param(start_payload(single("q", allowOther="yes")), ['question "q": "allowOther" must be true or false'], id="allowOther string"),
    pytest.param(start_payload(single("q", allowOther=1)), ['question "q": "allowOther" must be true or false'], id="allowOther integer"),
    pytest.param(start_payload(single("q", allowOther=None)), ['question "q": "allowOther" must be true or false'], id="allowOther null"),
    # options
    pytest.param(_question_without("options"), ['question "q": "options" must be a list'], id="options missing"),
    pytest.param(start_payload(single("q") | {"options": "a,b"}), ['question "q": "options" must be a list'], id="options a string"),
    pytest.param(start_payload(single("q", ())), ['question "q": "options" must hold 1-50 options, got 0'], id="zero options"),
    pytest.param(start_payload(single("q", tuple(f"o{i}" for i in range(51)))), ['question "q": "options" must hold 1-50 options, got 51'], id="51 options"),
    pytest.param(start_payload(single("q") | {"options": [{"id": "a"}, "b"]}), ['question "q": option 2 must be an object'], id="option not an object"),
    pytest.param(_with_option(label="x"), ['question "q", option 1: "id" is required'], id="option id missing"),
    pytest.param(_with_option(id=["a"]), ['question "q", option 1: "id" must be a string'], id="option id not a string"),
    pytest.param(_with_option(id="  "), ['question "q", option 1: "id" must not be empty'], id="option id blank"),
    pytest.param(_with_option(id="o" * 129), ['question "q", option 1: "id" is 129 characters'], id="option id 129"),
    pytest.param(start_payload(single("q", ("a", " a"))), ['question "q": option id "a" is used twice'], id="option ids equal after trim"),
    pytest.param(_with_option(id="o", value=1), ['question "q", option "o": unknown key "value"'], id="option unknown key"),
    pytest.param(_with_option(id="o", label=""), ['question "q", option "o": "label" must not be empty'], id="option label empty"),
    pytest.param(_with_option(id="o", label="l" * 201), ['question "q", option "o": "label" is 201 characters'], id="option label 201"),
    pytest.param(_with_option(id="o", description=" "), ['question "q", option "o": "description" must not be empty'], id="description blank"),
    pytest.param(_with_option(id="o", description="d" * 501), ['question "q", option "o": "description" is 501 characters; the limit is 500'], id="description 501"),
    pytest.param(_with_option(id="o", description=5), ['question "q", option "o": "description" must be a string'], id="description not a string"),
    # selection bounds
    pytest.param(start_payload(single("s", minSelections=0)), ['question "s": "minSelections" is only allowed on multi'], id="minSelections on single"),
    pytest.param(start_payload(single("s", maxSelections=1)), ['question "s": "maxSelections" is only allowed on multi'], id="maxSelections on single"),
    pytest.param(start_payload(single("s", maxSelections=None)), ['question "s": "maxSelections" is only allowed on multi'], id="null maxSelections on single"),
    pytest.param(start_payload(multi("m", minSelections=-1)), ['question "m": "minSelections" must be an integer >= 0', "-1"], id="minSelections negative"),
    pytest.param(start_payload(multi("m", minSelections=True)), ['question "m": "minSelections" must be an integer', "got true"], id="minSelections boolean"),
    pytest.param(start_payload(multi("m", minSelections=1.0)), ['question "m": "minSelections" must be an integer'], id="minSelections float"),
    pytest.param(start_payload(multi("m", minSelections="1")), ['question "m": "minSelections" must be an integer'], id="minSelections string"),
    pytest.param(start_payload(multi("m", minSelections=None)), ['question "m": "minSelections" must be an integer'], id="minSelections null"),
    pytest.param(start_payload(multi("m", maxSelections=0)), ['question "m": "maxSelections" must be an integer >= 1', "0"], id="maxSelections zero"),
    pytest.param(start_payload(multi("m", maxSelections=True)), ['question "m": "maxSelections" must be an integer >= 1', "got true"], id="maxSelections boolean"),
    pytest.param(start_payload(multi("m", maxSelections=2.0)), ['question "m": "maxSelections" must be an integer'], id="maxSelections float"),
    pytest.param(start_payload(multi("m", minSelections=2, maxSelections=1)), ['question "m": "minSelections" (2) is above "maxSelections" (1)'], id="min above max"),
    pytest.param(start_payload(multi("m", ("x", "y", "z"), minSelections=5)), ['question "m": "minSelections" (5) is more than the 4 possible choices'], id="min above options plus Other"),
    pytest.param(start_payload(multi("m", ("x", "y", "z"), maxSelections=5)), ['question "m": "maxSelections" (5) is more than the 4 possible choices'], id="max above options plus Other"),
    pytest.param(start_payload(multi("m", ("x", "y", "z"), allowOther=False, minSelections=4)), ['question "m": "minSelections" (4) is more than the 3 possible choices'], id="min above options without Other"),
    pytest.param(start_payload(multi("m", ("x", "y", "z"), allowOther=False, maxSelections=4)), ['question "m": "maxSelections" (4) is more than the 3 possible choices'], id="max above options without Other"),
    # resume
    pytest.param(resume_payload(questions=[single()]), ["resume must not resend questions"], id="resume with questions"),
    pytest.param(resume_payload(questions=None), ["resume must not resend questions"], id="resume with null questions"),
    pytest.param(resume_payload(note="x"), ['unknown key "note"', "resume carries only"], id="resume unknown key"),
    pytest.param(resume_payload(questionnaireId=_DROP), ['resume: "questionnaireId" is required'], id="resume id missing"),
    pytest.param(resume_payload(questionnaireId=7), ['resume: "questionnaireId" must be a string'], id="resume id not a string"),
    pytest.param(resume_payload(questionnaireId=" "), ['resume: "questionnaireId" must not be empty'], id="resume id blank"),
    pytest.param(resume_payload(questionnaireId="i" * 129), ['resume: "questionnaireId" is 129 characters'], id="resume id 129"),
    pytest.param(resume_payload(revision=_DROP), ['"revision" must be an integer >= 1', "got null"], id="revision missing"),
    pytest.param(resume_payload(revision=0), ['"revision" must be an integer >= 1', "got 0"], id="revision zero"),
    pytest.param(resume_payload(revision=-3), ['"revision" must be an integer >= 1', "got -3"], id="revision negative"),
    pytest.param(resume_payload(revision=True), ['"revision" must be an integer >= 1', "got true"], id="revision boolean"),
    pytest.param(resume_payload(revision=1.0), ['"revision" must be an integer >= 1', "got 1.0"], id="revision float"),
    pytest.param(resume_payload(revision="1"), ['"revision" must be an integer >= 1', 'got "1"'], id="revision string"),
    pytest.param(resume_payload(clarificationResponse=_DROP), ['resume: "clarificationResponse" is required'], id="response missing"),
    pytest.param(resume_payload(clarificationResponse=""), ['resume: "clarificationResponse" must not be empty'], id="response empty"),
    pytest.param(resume_payload(clarificationResponse="r" * 1001), ['resume: "clarificationResponse" is 1001 characters; the limit is 1000'], id="response 1001"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "fragments"), REJECTIONS)
def test_invalid_tool_input_is_rejected_with_a_message_naming_the_culprit(payload: Any, fragments: list[str]) -> None:
    message = rejection(payload)
    for fragment in fragments:
        assert fragment in message, message


def test_a_rejection_in_a_later_question_names_that_question() -> None:
    message = rejection(start_payload(single("first"), single("second", label="")))
    assert '"second"' in message
    assert '"first"' not in message


def test_a_rejection_in_an_option_names_the_question_and_the_option() -> None:
    message = rejection(_with_option(id="opt", label="x" * 201))
    assert 'question "q", option "opt"' in message


def test_unknown_keys_are_all_named_in_sorted_order() -> None:
    message = rejection(start_payload(single("q", zeta=1, alpha=2)))
    assert 'unknown key "alpha", "zeta"' in message


def test_a_long_offending_value_is_shortened_in_the_message() -> None:
    message = rejection({"action": "x" * 500})
    assert 'got "' + "x" * 36 + "..." in message
    assert len(message) < 200


def test_duplicate_question_ids_after_trimming_name_the_trimmed_id() -> None:
    message = rejection(start_payload(single("  dup"), single("dup  ")))
    assert message == 'questionnaire: question id "dup" is used twice; question ids must be unique'


def test_duplicate_option_ids_after_trimming_name_the_trimmed_id() -> None:
    message = rejection(start_payload(single("q", ("x ", " x"))))
    assert message == 'questionnaire: question "q": option id "x" is used twice; option ids must be unique'


def test_a_deeply_nested_value_is_refused_with_a_message_not_a_crash() -> None:
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(BrokerError) as refused:
        parse_tool_input({"action": nested})
    assert refused.value.code == "invalid_arguments"
    assert "deeply nested list" in refused.value.message


def test_text_of_a_str_subclass_is_checked_like_any_string() -> None:
    """The usual plain string takes a shortcut; a str subclass (not from JSON, but a str all
    the same) goes the long way and comes out the same."""

    class Text(str):
        pass

    parsed = parse_tool_input(start_payload(single("q") | {"prompt": Text("  Pick one  ")}))
    assert isinstance(parsed, StartInput)
    assert parsed.questions[0].prompt == "Pick one"


# --- the usual option's one pass -------------------------------------------------------

_ABSENT = object()
_OPTION_IDS = ["a", " a ", "", "  ", _ABSENT, None, 5, "x" * MAX_ID, "x" * (MAX_ID + 1), " " + "x" * MAX_ID]
_OPTION_LABELS = ["L", " L ", "", "  ", _ABSENT, None, 5, "y" * MAX_LABEL, "y" * (MAX_LABEL + 1)]
_OPTION_DESCRIPTIONS = [_ABSENT, None, "d", " d ", "", 3, "z" * (MAX_DESCRIPTION + 1)]


def _option(oid: object, label: object, description: object, extra: bool) -> dict[str, Any]:
    fields = {"id": oid, "label": label, "description": description}
    option = {key: value for key, value in fields.items() if value is not _ABSENT}
    if extra:
        option["extra"] = 1
    return option


def _outcome(parse: Callable[[], Any]) -> Any:
    try:
        return parse()
    except BrokerError as exc:
        return exc.code, exc.message


@pytest.mark.parametrize("after", [None, {"id": "a"}, {"id": "b", "label": "B"}], ids=["alone", "after-a", "after-b"])
def test_the_usual_options_one_pass_takes_exactly_what_the_full_checks_take(after: dict[str, Any] | None) -> None:
    """``_parse_options`` takes a plain option in one pass and hands any other to
    ``_parse_option``: for every mix of good and bad fields (and an option id already used),
    the result, or the refusal's sentence, is the one the full checks give."""
    from broker.core.model import _parse_option, _parse_options

    def full_checks(raw: list[Any]) -> tuple[Option, ...]:
        seen: set[str] = set()
        options = []
        for position, item in enumerate(raw, start=1):
            option = _parse_option(item, position, 'question "q"', seen)
            seen.add(option.id)
            options.append(option)
        return tuple(options)

    accepted = refused = 0
    for oid in _OPTION_IDS:
        for label in _OPTION_LABELS:
            for description in _OPTION_DESCRIPTIONS:
                for extra in (False, True):
                    raw = ([after] if after else []) + [_option(oid, label, description, extra)]
                    expected = _outcome(functools.partial(full_checks, raw))
                    assert _outcome(functools.partial(_parse_options, raw, 'question "q"')) == expected, raw
                    if type(expected[0]) is Option:
                        accepted += 1
                    else:
                        refused += 1
    assert accepted > 30 and refused > 30  # both sides were exercised
