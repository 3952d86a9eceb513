"""broker/core/tool.py: the one definition of the questionnaire tool that both MCP servers
(``qbroker mcp`` over stdio and the broker's endpoint at /mcp) publish."""

from __future__ import annotations

import mcp_types as types

from broker.core import machine, results, tool
from broker.core.model import StartInput, parse_tool_input
from broker.core.schema import TOOL_INPUT_SCHEMA
from tests.helpers.samples import single, start_body


def test_the_listing_is_the_plain_definition_plus_title_and_annotations() -> None:
    listing = tool.tool_listing()
    assert {k: listing[k] for k in ("name", "description", "inputSchema")} == tool.tool_json()
    assert listing["name"] == "questionnaire" and listing["inputSchema"] is TOOL_INPUT_SCHEMA
    assert listing["title"] == tool.TOOL_TITLE == listing["annotations"]["title"]
    assert listing["annotations"]["idempotentHint"] is False and listing["annotations"]["readOnlyHint"] is False
    # The SDK's own model takes it whole: no field is lost or renamed on the way.
    parsed = types.Tool.model_validate(listing)
    assert parsed.model_dump(by_alias=True, exclude_none=True) == listing


def test_the_listing_is_a_fresh_copy_each_time() -> None:
    tool.tool_listing()["annotations"]["title"] = "changed"
    assert tool.tool_listing()["annotations"]["title"] == tool.TOOL_TITLE


def test_a_result_carries_only_the_text_as_content_and_the_details_in_its_meta() -> None:
    tool_input = parse_tool_input(start_body(single()))
    assert isinstance(tool_input, StartInput)
    state = machine.start("q-1", "s", tool_input.questions, now=1.0)
    state = machine.apply(state, machine.AnswerQuestion("q-1", 0, "target", ("staging",)), now=2.0)
    broker_result = results.tool_result(state)

    mcp = tool.call_result(broker_result)

    assert mcp == {
        "content": [{"type": "text", "text": results.result_text(state)}],
        "_meta": {"qbroker/details": results.details(state)},
        "isError": False,
    }
    assert mcp["content"][0]["text"].startswith("QUESTIONNAIRE_COMPLETED questionnaireId=q-1 revision=0")
    parsed = types.CallToolResult.model_validate(mcp)
    # No structuredContent: hosts hand the model that JSON instead of the text.
    assert parsed.structured_content is None and parsed.is_error is False
    assert parsed.meta == {tool.DETAILS_META_KEY: results.details(state)}


def test_a_refusal_is_a_tool_error_with_the_message_and_the_code_on_its_own_line() -> None:
    assert tool.error_result("questionnaire: no", "invalid_arguments") == {
        "content": [{"type": "text", "text": "questionnaire: no\n(error code: invalid_arguments)"}],
        "isError": True,
    }
    assert tool.error_result("plain")["content"][0]["text"] == "plain"
    assert types.CallToolResult.model_validate(tool.error_result("x", "y")).is_error is True


def test_another_tool_name_is_a_tool_error_naming_the_only_tool() -> None:
    error = tool.unknown_tool("ask")
    assert error["isError"] is True
    assert error["content"][0]["text"] == "unknown tool 'ask'; the only tool is 'questionnaire'"


def test_the_progress_message_names_the_questionnaire_revision_and_step() -> None:
    assert tool.progress_message("q-1", 2, 5) == "waiting for the user (questionnaireId=q-1 revision=2 step=5)"
