"""The tool input's one JSON Schema against the validator it is built from (broker/core/model.py).

Both directions: every input the validator accepts satisfies the schema, and every input it
refuses is refused by the schema too, but for the rules the schema leaves to the broker
(broker/core/schema.py says which and why); that list is exact, so a schema that learns a
rule must take it off. The MCP tool, the OpenAPI document and docs/protocol.md all carry
this very schema.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core import model
from broker.core.errors import BrokerError
from broker.core.model import (
    MAX_CLARIFICATION,
    MAX_DESCRIPTION,
    MAX_ID,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_PROMPT,
    MAX_QUESTIONS,
    parse_tool_input,
)
from broker.core.schema import TOOL_INPUT_SCHEMA, tool_input_schema, trimmed_text_pattern
from broker.http.routes import openapi_document
from clients.mcp.server import INPUT_SCHEMA, tool_json
from tests.helpers.samples import multi, single
from tests.helpers.samples import start_body as start_payload
from tests.unit.test_model import REJECTIONS, SEED_EXAMPLE, resume_payload

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(TOOL_INPUT_SCHEMA)

# Hypothesis reports a failing example through mypy_extensions.TypedDict, whose
# DeprecationWarning (an error under filterwarnings=error) would hide the report.
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")


def accepted_by_the_validator(payload: Any) -> bool:
    try:
        parse_tool_input(payload)
    except BrokerError:
        return False
    return True


def schema_errors(payload: Any) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(payload)]


# --- the schema itself -------------------------------------------------------------------


def test_it_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(TOOL_INPUT_SCHEMA)


def _nodes(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        return [schema, *(node for value in schema.values() for node in _nodes(value))]
    if isinstance(schema, list):
        return [node for value in schema for node in _nodes(value)]
    return []


def test_it_is_one_flat_object_in_plain_keywords_every_tool_host_takes() -> None:
    for node in _nodes(TOOL_INPUT_SCHEMA):
        assert not {"anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$defs"} & node.keys(), node
    objects = [node for node in _nodes(TOOL_INPUT_SCHEMA) if node.get("type") == "object"]
    assert len(objects) == 3  # the tool input, a question, an option
    assert all(node["additionalProperties"] is False for node in objects)


def test_its_keys_are_the_validators_keys() -> None:
    question = TOOL_INPUT_SCHEMA["properties"]["questions"]["items"]
    option = question["properties"]["options"]["items"]
    assert TOOL_INPUT_SCHEMA["properties"].keys() == model._START_KEYS | model._RESUME_KEYS
    assert question["properties"].keys() == model._QUESTION_KEYS
    assert option["properties"].keys() == model._OPTION_KEYS


def test_its_bounds_are_the_models_limits() -> None:
    props = TOOL_INPUT_SCHEMA["properties"]
    question = props["questions"]["items"]["properties"]
    option = question["options"]["items"]["properties"]
    assert (props["questions"]["minItems"], props["questions"]["maxItems"]) == (1, MAX_QUESTIONS)
    assert (question["options"]["minItems"], question["options"]["maxItems"]) == (1, MAX_OPTIONS)
    texts = {
        MAX_ID: [props["questionnaireId"], question["id"], option["id"]],
        MAX_LABEL: [question["label"], option["label"]],
        MAX_PROMPT: [question["prompt"]],
        MAX_DESCRIPTION: [option["description"]],
        MAX_CLARIFICATION: [props["clarificationResponse"]],
    }
    for limit, schemas in texts.items():
        for text in schemas:
            assert text["pattern"] == trimmed_text_pattern(limit)
            assert f"At most {limit} characters." in text["description"]


def test_a_copy_is_a_copy() -> None:
    copy = tool_input_schema()
    assert copy == TOOL_INPUT_SCHEMA and copy is not TOOL_INPUT_SCHEMA
    copy["properties"]["questions"]["items"]["required"].append("x")
    assert "x" not in TOOL_INPUT_SCHEMA["properties"]["questions"]["items"]["required"]


# --- one schema, everywhere -------------------------------------------------------------


def test_the_mcp_tool_and_the_openapi_document_publish_this_schema() -> None:
    assert INPUT_SCHEMA is TOOL_INPUT_SCHEMA and tool_json()["inputSchema"] == TOOL_INPUT_SCHEMA
    openapi = json.loads(json.dumps(openapi_document()))
    assert openapi["components"]["schemas"]["ToolInput"] == TOOL_INPUT_SCHEMA
    body = openapi["paths"]["/v1/sessions/{sid}/questionnaire"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ToolInput"}


def test_the_copy_in_the_protocol_document_is_this_schema() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = text.split("### The tool input's JSON Schema", 1)[1]
    block = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert block is not None
    assert json.loads(block.group(1)) == TOOL_INPUT_SCHEMA, (
        "docs/protocol.md shows an old schema; paste the output of: "
        "python -c 'import json; from broker.core.schema import TOOL_INPUT_SCHEMA as s; print(json.dumps(s, indent=2))'"
    )


# --- texts: trimmed, then counted ----------------------------------------------------------


def test_blank_in_the_pattern_is_what_strip_removes() -> None:
    # The patterns' \s and \S stand for what str.strip() removes and keeps (in Python's
    # regex engine, which JSON Schema validators written in Python use).
    blank = re.compile(r"\s")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert (blank.fullmatch(char) is not None) == (char.strip() == ""), hex(code)


@pytest.mark.parametrize("limit", [1, 2, 3, MAX_ID])
def test_a_trimmed_text_pattern_counts_from_the_first_non_blank_to_the_last(limit: int) -> None:
    pattern = re.compile(trimmed_text_pattern(limit))
    for text in ["", " ", "\t\n", "\u3000", "x" * (limit + 1), " " + "x" * (limit + 1) + " "]:
        assert not pattern.search(text), (limit, text)
    for text in ["x", " x ", "x" * limit, "\n" + "x" * limit + " \t", "x" + " " * max(0, limit - 2) + "y"[: limit - 1]]:
        assert pattern.search(text), (limit, text)
    assert pattern.search("a b" if limit >= 3 else "ab"[:limit])


# --- the accepted side: everything the validator takes ---------------------------------------


ACCEPTED: list[Any] = [
    pytest.param(SEED_EXAMPLE, id="the seed's example"),
    *(
        pytest.param(json.loads(path.read_text(encoding="utf-8")), id=path.name)
        for path in sorted((ROOT / "examples").glob("*.json"))
    ),
    pytest.param(start_payload({"id": "q", "prompt": "P?", "type": "single", "options": [{"id": "o"}]}), id="minimal"),
    pytest.param(start_payload(multi("m", ("x",))), id="minimal multi"),
    pytest.param(
        start_payload(
            {
                "id": "q",
                "label": None,
                "prompt": "P?",
                "type": "single",
                "options": [{"id": "o", "label": None, "description": None}],
            }
        ),
        id="null label and description",
    ),
    pytest.param(
        start_payload(
            {
                "id": "  q1\t",
                "label": " Label ",
                "prompt": "\n Prompt? \n",
                "type": "single",
                "options": [{"id": " o1 ", "label": "  One  ", "description": "  desc  "}],
            }
        ),
        id="texts to trim",
    ),
    pytest.param(start_payload(*(single(f"q{i}") for i in range(MAX_QUESTIONS))), id="20 questions"),
    pytest.param(start_payload(single("q", tuple(f"o{i}" for i in range(MAX_OPTIONS)))), id="50 options"),
    pytest.param(start_payload(single("i" * MAX_ID, ("o" * MAX_ID,))), id="ids at their limit"),
    pytest.param(start_payload(single("q", label="t" * MAX_LABEL, prompt="p" * MAX_PROMPT)), id="texts at their limit"),
    pytest.param(
        start_payload(single("q") | {"options": [{"id": "o", "label": "l" * MAX_LABEL, "description": "d" * 500}]}),
        id="option texts at their limit",
    ),
    pytest.param(
        start_payload(single("  " + "q" * MAX_ID + "  ", prompt=" " + "p" * MAX_PROMPT + " ")),
        id="limits count after trimming",
    ),
    pytest.param(start_payload(single("q", label="é" * MAX_LABEL)), id="limits count characters"),
    pytest.param(start_payload(single("q", label="\U0001f600" * MAX_LABEL)), id="limits count code points"),
    pytest.param(
        start_payload(multi("m", ("x", "y", "z"), minSelections=4, maxSelections=4)), id="min = max = ceiling"
    ),
    pytest.param(start_payload(multi("m", ("x", "y", "z"), maxSelections=None)), id="explicit no ceiling"),
    pytest.param(
        start_payload(multi("m", ("x", "y", "z"), allowOther=False, minSelections=3, maxSelections=3)),
        id="ceiling without Other",
    ),
    pytest.param(start_payload(single("q1", ("yes", "no")), single("q2", ("yes", "no"))), id="same option ids"),
    pytest.param(resume_payload(), id="resume"),
    pytest.param(resume_payload(questionnaireId=" qn-1 ", clarificationResponse=" ok "), id="resume to trim"),
    pytest.param(
        resume_payload(questionnaireId="i" * MAX_ID, clarificationResponse="r" * MAX_CLARIFICATION),
        id="resume at its limits",
    ),
    pytest.param(resume_payload(revision=10**6), id="a large revision"),
]


@pytest.mark.parametrize("payload", ACCEPTED)
def test_every_input_the_validator_accepts_satisfies_the_schema(payload: Any) -> None:
    assert accepted_by_the_validator(payload)
    assert schema_errors(payload) == []


# --- the refused side: everything the schema can say --------------------------------------

# The validator's rejections (tests/unit/test_model.py) that the schema lets through, by
# design (broker/core/schema.py): a flat object with no conditionals, ids unique only after
# trimming, bounds that depend on other fields, and JSON Schema's integers.
LEFT_TO_THE_BROKER = {
    # a start carries only questions; a resume only its three fields, all of them
    "start without questions",
    "start with questionnaireId",
    "start with revision",
    "resume with questions",
    "resume id missing",
    "revision missing",
    "response missing",
    # selection bounds only on multi questions
    "minSelections on single",
    "maxSelections on single",
    "null maxSelections on single",
    # ids unique after trimming
    "question ids equal after trim",
    "option ids equal after trim",
    # bounds against other fields
    "min above max",
    "min above options plus Other",
    "max above options plus Other",
    "min above options without Other",
    "max above options without Other",
    # 1.0 is an integer to JSON Schema
    "minSelections float",
    "maxSelections float",
    "revision float",
}


@pytest.mark.parametrize(
    ("payload", "left_to_the_broker"),
    [pytest.param(case.values[0], case.id in LEFT_TO_THE_BROKER, id=case.id) for case in REJECTIONS],
)
def test_every_refusal_the_schema_can_express_it_makes_too(payload: Any, left_to_the_broker: bool) -> None:
    assert not accepted_by_the_validator(payload)
    if left_to_the_broker:
        assert schema_errors(payload) == [], "the schema refuses this now: take it off LEFT_TO_THE_BROKER"
    else:
        assert schema_errors(payload) != []


def test_the_list_of_rules_left_to_the_broker_names_only_real_cases() -> None:
    assert {str(case.id) for case in REJECTIONS} >= LEFT_TO_THE_BROKER


# --- any input: what the validator takes, the schema takes -------------------------------------
#
# Inputs near the edges, mostly valid (a random one hardly ever is): every kind of text the
# validator takes (padded, at its limit, blanks it does or does not trim, astral characters),
# optional keys present, absent or null, bounds around the ceiling; now and then one thing
# wrong.


def _good_texts(limit: int) -> list[str]:
    return ["a", " a ", "x" * limit, " " + "x" * limit + "\n", "\U0001f600" * limit, "\ufeff", "\u2028x\u2029", "a b"]


def _texts(limit: int) -> st.SearchStrategy[Any]:
    bad = ["", "   ", "\u3000", "\x1c", "x" * (limit + 1), None, 5]
    return st.sampled_from(_good_texts(limit) * 4 + bad) | st.text(min_size=1, max_size=4)


def _maybe(draw: st.DrawFn, raw: dict[str, Any], key: str, values: st.SearchStrategy[Any]) -> None:
    if draw(st.integers(0, 2)) == 0:
        raw[key] = draw(values)


@st.composite
def _options(draw: st.DrawFn) -> list[Any]:
    count = draw(st.sampled_from([1, 1, 2, 3, 3, 0, MAX_OPTIONS, MAX_OPTIONS + 1]))
    options: list[Any] = []
    for n in range(count):
        option: dict[str, Any] = {"id": draw(st.sampled_from([f"o{n}", f" o{n} ", f"o{n}" + "x" * (MAX_ID - 3)]))}
        if count <= 3:
            _maybe(draw, option, "label", _texts(MAX_LABEL))
            _maybe(draw, option, "description", _texts(MAX_DESCRIPTION))
        options.append(option)
    if count and draw(st.integers(0, 9)) == 0:
        options[0] = draw(st.sampled_from([{}, {"id": "o0", "extra": 1}, {"id": "o1"}, "o", None]))
    return options


@st.composite
def _question(draw: st.DrawFn, n: int) -> Any:
    kind = draw(st.sampled_from(["single", "multi"]))
    raw: dict[str, Any] = {
        "id": draw(st.sampled_from([f"q{n}", f"  q{n} "]) | _texts(MAX_ID)),
        "prompt": draw(_texts(MAX_PROMPT)),
        "type": kind,
        "options": draw(_options()),
    }
    _maybe(draw, raw, "label", _texts(MAX_LABEL))
    _maybe(draw, raw, "allowOther", st.sampled_from([True, False, True, False, None]))
    if kind == "multi" or draw(st.integers(0, 9)) == 0:
        bounds = st.integers(0, 5) | st.sampled_from([-1, True, 1.0, MAX_OPTIONS + 1, MAX_OPTIONS + 2])
        _maybe(draw, raw, "minSelections", bounds)
        _maybe(draw, raw, "maxSelections", bounds | st.none())
    if draw(st.integers(0, 19)) == 0:
        del raw[draw(st.sampled_from(sorted(raw)))]
    return raw


@st.composite
def tool_inputs(draw: st.DrawFn) -> Any:
    action = draw(st.sampled_from(["start", "resume"] * 5 + ["stop", None]))
    payload: dict[str, Any] = {} if action is None else {"action": action}
    if action == "start" or draw(st.integers(0, 9)) == 0:
        count = draw(st.sampled_from([1, 1, 2, 3, 0, MAX_QUESTIONS, MAX_QUESTIONS + 1]))
        if count > 3:
            payload["questions"] = [single(f"q{n}") for n in range(count)]
        else:
            payload["questions"] = [draw(_question(n)) for n in range(count)]
    if action != "start" or draw(st.integers(0, 9)) == 0:
        payload["questionnaireId"] = draw(_texts(MAX_ID))
        payload["revision"] = draw(st.integers(1, 3) | st.sampled_from([0, True, 1.0, 2**40]))
        payload["clarificationResponse"] = draw(_texts(MAX_CLARIFICATION))
        if draw(st.integers(0, 9)) == 0:
            del payload[draw(st.sampled_from(["questionnaireId", "revision", "clarificationResponse"]))]
    return payload


ACCEPTED_SEEN = [0]


# One worker runs both: the second reads the tally the first keeps.
@pytest.mark.xdist_group("schema_tally")
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=tool_inputs())
def test_any_input_the_validator_accepts_satisfies_the_schema(payload: Any) -> None:
    if accepted_by_the_validator(payload):
        ACCEPTED_SEEN[0] += 1
        assert schema_errors(payload) == [], payload


@pytest.mark.xdist_group("schema_tally")
def test_the_inputs_above_were_mostly_ones_the_validator_accepts() -> None:
    if not ACCEPTED_SEEN[0]:
        pytest.skip("runs after test_any_input_the_validator_accepts_satisfies_the_schema")
    assert ACCEPTED_SEEN[0] >= 100
