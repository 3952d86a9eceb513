"""The questionnaire tool's input as a JSON Schema (draft 2020-12), built once from the rules
``broker.core.model`` enforces.

Two readers publish it unchanged: the MCP tool (``qbroker mcp``, and ``--print-tool`` for
agents that take a function definition) and the agent API's OpenAPI document (the body of
``POST /v1/sessions/{sid}/questionnaire``). docs/protocol.md shows a copy, which a test
holds equal to this one.

**One flat object, plain keywords.** Tool hosts refuse or silently drop a tool whose input
schema has ``oneOf``/``anyOf``/``allOf`` or ``if``/``then`` at its root (Claude's API and
Claude Code among them), and many take little of such keywords anywhere; so the schema
uses none of them, nor ``$ref``: ``start`` and ``resume`` share one object (``action`` is an
enum), and single and multi questions one question object. The rules that would need them
are said in the descriptions and enforced by the broker (400 ``invalid_arguments``):

- a start carries only ``questions``; a resume only ``questionnaireId``, ``revision`` and
  ``clarificationResponse``, all three;
- ``minSelections``/``maxSelections`` only on multi questions, ``minSelections <=
  maxSelections``, neither above the number of options (+1 when Other is allowed);
- ids unique after trimming (``uniqueItems`` compares whole objects, untrimmed);
- integers written with a fraction (``1.0``): JSON Schema counts them as integers.

Everything else the validator checks, the schema says, and it accepts every input the
validator accepts (tests/unit/test_schema.py holds both directions):

- **Texts** are trimmed before their limits apply, and must not be empty once trimmed. A
  ``maxLength`` would count the padding, so a pattern says it instead: at most N characters
  from the first non-blank one to the last. ``\\s`` is what ``str.strip()`` removes in
  Python's regex engine (jsonschema's and schemathesis'); ECMA-262's ``\\s`` differs on a few
  rare characters (U+001C-U+001F, U+0085, U+FEFF).
- **Optional** ``label``, ``description`` and ``maxSelections`` may also be ``null``, which
  the validator reads as left out; ``allowOther`` and ``minSelections`` may not.
"""

from __future__ import annotations

from typing import Any, Final

from broker.core.model import (
    MAX_CLARIFICATION,
    MAX_DESCRIPTION,
    MAX_ID,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_PROMPT,
    MAX_QUESTIONS,
)

Schema = dict[str, Any]


def trimmed_text_pattern(limit: int) -> str:
    """A pattern for a text that is 1-``limit`` characters once leading and trailing blanks
    are trimmed (any blanks around it are fine)."""
    if limit < 1:
        raise ValueError(f"a text limit must be at least 1, got {limit}")
    if limit == 1:
        return r"^\s*\S\s*$"
    return rf"^\s*\S(?:[\s\S]{{0,{limit - 2}}}\S)?\s*$"


def _text(limit: int, description: str, *, nullable: bool = False) -> Schema:
    return {
        "type": ["string", "null"] if nullable else "string",
        "minLength": 1,
        "pattern": trimmed_text_pattern(limit),
        "description": f"{description} At most {limit} characters.",
    }


def _option() -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id"],
        "properties": {
            "id": _text(MAX_ID, "Stable option id, unique within its question; what you read back."),
            "label": _text(MAX_LABEL, "Short display text (defaults to the id).", nullable=True),
            "description": _text(
                MAX_DESCRIPTION, "Optional one-line hint, only when the label is not self-explanatory.", nullable=True
            ),
        },
    }


def _question() -> Schema:
    ceiling = MAX_OPTIONS + 1  # every option and Other
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "prompt", "type", "options"],
        "properties": {
            "id": _text(MAX_ID, "Stable, descriptive question id, unique in the call (e.g. deploy_target)."),
            "label": _text(MAX_LABEL, "Short label shown in the progress list (defaults to the id).", nullable=True),
            "prompt": _text(MAX_PROMPT, "One clear question sentence."),
            "type": {
                "type": "string",
                "enum": ["single", "multi"],
                "description": "single: exactly one answer is valid. multi: several may be chosen.",
            },
            "options": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_OPTIONS,
                "items": _option(),
                "description": f"1-{MAX_OPTIONS} options, in the order to show them.",
            },
            "allowOther": {
                "type": "boolean",
                "default": True,
                "description": "Offer a free-text Other answer (default true). "
                "Set false when a custom answer is meaningless.",
            },
            "minSelections": {
                "type": "integer",
                "minimum": 0,
                "maximum": ceiling,
                "default": 0,
                "description": "multi only. Set 1 whenever an empty answer is not useful. Other counts as one "
                "choice. At most maxSelections and the number of options (+1 when Other is allowed).",
            },
            "maxSelections": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": ceiling,
                "description": "multi only, and only when the task needs a ceiling (null: none). At most the "
                "number of options (+1 when Other is allowed).",
            },
        },
    }


def tool_input_schema() -> Schema:
    """The schema, built afresh: a copy its caller may embed or change."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["action"],
        "properties": {
            "action": {
                "type": "string",
                "enum": ["start", "resume"],
                "description": "start: send only `questions`. resume: send only `questionnaireId`, "
                "`revision` and `clarificationResponse`, copied from the latest "
                "QUESTIONNAIRE_NEEDS_CLARIFICATION result.",
            },
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_QUESTIONS,
                "items": _question(),
                "description": f"start only: 1-{MAX_QUESTIONS} related questions, asked in this order.",
            },
            "questionnaireId": _text(MAX_ID, "resume only: the exact questionnaireId from the latest result."),
            "revision": {
                "type": "integer",
                "minimum": 1,
                "description": "resume only: the exact revision from the latest result.",
            },
            "clarificationResponse": _text(
                MAX_CLARIFICATION, "resume only: a concise summary of the explanation you just gave the user."
            ),
        },
    }


# The one schema of the tool input (shared: never change it; ``tool_input_schema()`` for a copy).
TOOL_INPUT_SCHEMA: Final[Schema] = tool_input_schema()
