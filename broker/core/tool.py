"""The questionnaire tool as an MCP server publishes it, written once for both servers:
``qbroker mcp`` (stdio, ``clients/mcp/``) and the broker's own endpoint at ``/mcp``
(``broker/remote_mcp/``).

Everything here is plain JSON in MCP's field names (``name``, ``title``, ``description``,
``inputSchema``, ``annotations``; ``content``, ``_meta``, ``isError``), so that
neither server can drift from the other and the core needs no MCP SDK: each server wraps
these values in its SDK's types with one ``model_validate``.

- the tool: its name, title, description (when to use it, how to ask, how to read the
  result, the clarification rule) and the input's one JSON Schema (``schema``);
- a result: the broker's tool result (``results.tool_result``): its text as the only
  content, ``details`` in the result's ``_meta`` (``DETAILS_META_KEY``);
- a refusal: a tool error (``isError: true``) whose text is the broker's message and its
  wire code, so that the model can read it and fix its call;
- a progress report's message while the person is still answering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from broker.core.model import MAX_CLARIFICATION
from broker.core.schema import TOOL_INPUT_SCHEMA

TOOL_NAME: Final = "questionnaire"
TOOL_TITLE: Final = "Ask the user a questionnaire"
SERVER_NAME: Final = "qbroker"

TOOL_DESCRIPTION: Final = f"""\
Ask the user several related multiple-choice questions in one dialog (a terminal or browser \
UI the user has open) and get the answers back as the stable ids you declared.

Use it when:
- two or more related choices must be settled before you can continue;
- each choice has a known, bounded set of options you can name;
- the user asked to be prompted with a menu, list or form;
- a previous result was QUESTIONNAIRE_NEEDS_CLARIFICATION (then resume, see below).

Do not use it when:
- the question is open-ended and better answered in prose;
- one trivial yes/no confirmation is enough: just ask in normal text;
- you would be asking for secrets, passwords, API keys, tokens or other credentials \
(not even through the free-text Other answer);
- you already know the answer, or can find it by reading files or running a read-only command.
Ask only what changes what you will do.

How to ask: put every related question into ONE start call (never a chain of questionnaires \
for one decision). Give each question and option a stable, descriptive id; ids are what you \
read back, labels are only display text. Use type "single" when exactly one answer is valid \
and "multi" when several are; on multi set minSelections: 1 unless an empty answer is useful. \
allowOther defaults to true; set false when a custom answer is unusable.

Reading the result: the first line is `<MARKER> questionnaireId=<id> revision=<n>` with \
MARKER one of QUESTIONNAIRE_COMPLETED, QUESTIONNAIRE_NEEDS_CLARIFICATION, \
QUESTIONNAIRE_CANCELLED, QUESTIONNAIRE_UNAVAILABLE. Answers read \
`<questionId>: optionIds=[...] other="..."`. Cancelled and unavailable are real outcomes: \
never guess answers the user did not give.

After QUESTIONNAIRE_NEEDS_CLARIFICATION the user paused on a question to ask you something; \
earlier answers are stored. You MUST (1) answer their request in normal text, briefly, then \
(2) immediately call this tool with action "resume" and exactly the questionnaireId and \
revision from that result plus clarificationResponse (a summary of your answer, <= {MAX_CLARIFICATION} \
characters). Never resend questions, never start a new questionnaire instead, never guess \
the pending answer, and do not end your turn without resuming. It can happen again with a \
higher revision: answer and resume each time.\
"""

SERVER_INSTRUCTIONS: Final = (
    "qbroker lets you ask the user structured multiple-choice questions through the "
    "`questionnaire` tool; the call returns when the user has answered, cancelled, asked "
    "for a clarification (then answer and resume) or cannot be reached."
)

# MCP's tool annotations. Not idempotent: a start asks the person, and asking again after
# an outcome asks again (a repeat while the first is still open re-attaches on the
# broker's endpoint, which is retry safety, not idempotence).
ANNOTATIONS: Final[dict[str, Any]] = {
    "title": TOOL_TITLE,
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": True,
}


def tool_json() -> dict[str, Any]:
    """The tool as plain JSON: ``{name, description, inputSchema}`` (MCP's field names).

    Function-calling APIs take the same three things (Anthropic: ``input_schema``;
    OpenAI: ``function.parameters``).
    """
    return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "inputSchema": TOOL_INPUT_SCHEMA}


def tool_listing() -> dict[str, Any]:
    """The tool as MCP's ``tools/list`` shows it: ``tool_json()`` with title and annotations."""
    return {**tool_json(), "title": TOOL_TITLE, "annotations": dict(ANNOTATIONS)}


# Where a result keeps the versioned ``details`` object for programs. Not in
# ``structuredContent``: hosts (Claude Code, Codex) hand the model that JSON in place of the
# text, and the text is what the model must read (the marker line, the answers as ids, the
# rules for a clarification). Hosts do not show a result's ``_meta`` to the model.
DETAILS_META_KEY: Final = "qbroker/details"


def call_result(tool_result: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP ``CallToolResult`` from the broker's tool result (``{content, details,
    isError}``, the agent API's 200 body): the text as the only content, ``details`` in
    ``_meta[DETAILS_META_KEY]``."""
    return {
        "content": [dict(item) for item in tool_result["content"]],
        "_meta": {DETAILS_META_KEY: dict(tool_result["details"])},
        "isError": False,
    }


def error_result(message: str, code: str | None = None) -> dict[str, Any]:
    """A tool error (``isError: true``): the broker's message, then its wire code on a line
    of its own, ``(error code: invalid_arguments)``."""
    text = message if code is None else f"{message}\n(error code: {code})"
    return {"content": [{"type": "text", "text": text}], "isError": True}


def unknown_tool(name: str) -> dict[str, Any]:
    return error_result(f"unknown tool {name!r}; the only tool is {TOOL_NAME!r}")


def progress_message(questionnaire_id: str, revision: int, step: int) -> str:
    """What a progress notification says while the person is still answering."""
    return f"waiting for the user (questionnaireId={questionnaire_id} revision={revision} step={step})"
