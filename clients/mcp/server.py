"""``qbroker mcp``: the questionnaire tool for any MCP host (Claude Code, Claude Desktop, ...).

A stdio Model Context Protocol server built on the official ``mcp`` Python SDK's low-level
``Server`` (which lets us publish an exact ``inputSchema``). It exposes one tool,
``questionnaire``, whose input is the seed's tool input verbatim and whose result is the
broker's tool result: the text (first line ``<MARKER> questionnaireId=.. revision=..``) as
content and the versioned ``details`` object as structured content. A call blocks until the
questionnaire has an outcome (202s are followed); while it waits, progress notifications
go out when the host asked for them, so hosts that reset their timeout on progress keep
waiting. Broker refusals (``invalid_arguments``, ``stale_revision``,
``unknown_questionnaire``, ...) come back as tool errors (``isError: true``) carrying the
broker's message, so the model can read and fix its call.

    qbroker mcp --url http://127.0.0.1:8700 --session demo --token "$AGENT_TOKEN"

Nothing but JSON-RPC may reach stdout: diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import TYPE_CHECKING, Any, Final

from broker.core.model import MAX_CLARIFICATION
from broker.core.schema import TOOL_INPUT_SCHEMA
from clients.cli_args import add_client_wait, add_retries, add_url_and_session

if TYPE_CHECKING:
    import mcp_types as types

TOOL_NAME: Final = "questionnaire"
# The tool input's one JSON Schema, built in the core from the validator's own limits and
# rules: the broker's OpenAPI document publishes the same (a plain, flat object that every
# MCP host takes; broker/core/schema.py says what that leaves to the broker).
INPUT_SCHEMA: Final = TOOL_INPUT_SCHEMA

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


def tool_definition() -> Any:
    import mcp_types as types

    return types.Tool(
        name=TOOL_NAME,
        title="Ask the user a questionnaire",
        description=TOOL_DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        annotations=types.ToolAnnotations(
            title="Ask the user a questionnaire",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=True,
        ),
    )


def tool_json() -> dict[str, Any]:
    """The tool as plain JSON: ``{name, description, inputSchema}`` (MCP's field names).

    Function-calling APIs take the same three things (Anthropic: ``input_schema``;
    OpenAI: ``function.parameters``).
    """
    return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "inputSchema": INPUT_SCHEMA}


def build_server(client: Any) -> Any:
    """The MCP server around an ``AsyncQBrokerClient`` (``client``)."""
    import mcp_types as types
    from mcp.server import Server

    from clients.agent.sdk import QBrokerError, QBrokerTimeout, _thaw

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_definition()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != TOOL_NAME:
            return _tool_error(f"unknown tool {params.name!r}; the only tool is {TOOL_NAME!r}")
        arguments = dict(params.arguments or {})
        progress = 0

        async def on_pending(pending: Any) -> None:
            nonlocal progress
            progress += 1
            await ctx.session.report_progress(
                progress,
                message=f"waiting for the user (questionnaireId={pending.questionnaire_id} "
                f"revision={pending.revision} step={pending.step})",
            )

        try:
            result = await client.call(arguments, idempotency_key=str(uuid.uuid4()), on_pending=on_pending)
        except QBrokerTimeout as exc:
            hint = ""
            if exc.pending is not None:
                hint = (
                    f" The questionnaire {exc.pending.questionnaire_id} is still open with the "
                    "user; do not start a new one for the same decision."
                )
            return _tool_error(f"questionnaire: {exc.message}.{hint}", exc.code)
        except QBrokerError as exc:
            return _tool_error(exc.message, exc.code)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=_thaw(result.details),
            is_error=False,
        )

    return Server(
        "qbroker",
        version=_version(),
        instructions=SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool_error(message: str, code: str | None = None) -> types.CallToolResult:
    import mcp_types as types

    text = message if code is None else f"{message}\n(error code: {code})"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("qbroker")
    except Exception:  # not installed as a distribution: running from a checkout
        return "0.1.0"


# --- qbroker mcp ------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Serve the `questionnaire` tool to an MCP host over stdio (the host starts this\n"
        "command; it speaks JSON-RPC on stdin/stdout)."
    )
    parser.epilog = """\
example host configuration (Claude Code: .mcp.json; Claude Desktop: claude_desktop_config.json):
  {"mcpServers": {"qbroker": {
      "command": "qbroker",
      "args": ["mcp", "--url", "http://127.0.0.1:8700", "--session", "demo"],
      "env": {"QBROKER_TOKEN": "<agent token from `qbroker token --session demo --role agent`>"}}}}

try it by hand:
  npx @modelcontextprotocol/inspector qbroker mcp --url http://127.0.0.1:8700 --session demo
"""
    # Not required by argparse: --print-tool needs neither (run() checks them otherwise).
    add_url_and_session(parser, "session id the questionnaires belong to", required=False)
    parser.add_argument("--token", default=None, help="agent token (default: $QBROKER_TOKEN)")
    parser.add_argument(
        "--wait",
        type=float,
        default=25.0,
        metavar="SECONDS",
        help="long-poll window of each broker request; a progress notification follows each (default: 25)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end a tool call with an error after this long (default: wait for the outcome)",
    )
    add_client_wait(parser)
    add_retries(parser)
    parser.add_argument(
        "--print-tool",
        action="store_true",
        help="print the tool definition (name, description, inputSchema) as JSON and exit; "
        "handy for agents that are not MCP hosts",
    )


def run(args: argparse.Namespace) -> int:
    if args.print_tool:
        print(json.dumps(tool_json(), indent=2, ensure_ascii=False))
        return 0
    missing = [flag for flag in ("url", "session") if not getattr(args, flag)]
    if missing:
        names = ", ".join(f"--{flag}" for flag in missing)
        print(f"qbroker mcp: error: the following arguments are required: {names}", file=sys.stderr)
        return 1

    import anyio

    from clients.agent.sdk import AsyncQBrokerClient

    token = args.token or os.environ.get("QBROKER_TOKEN") or None
    if not token:
        print(
            "qbroker mcp: warning: no --token and no $QBROKER_TOKEN; the broker will refuse the calls (unauthorized)",
            file=sys.stderr,
        )

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        async with AsyncQBrokerClient(
            args.url,
            args.session,
            token,
            wait=args.wait,
            client_wait=args.client_wait,
            timeout=args.timeout,
            retries=args.retries,
        ) as client:
            server = build_server(client)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    except ValueError as exc:
        print(f"qbroker mcp: error bad_arguments: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if not _host_gone(exc):
            raise
        # The host closed our stdout (it quit, or dropped us mid-call): like the end of
        # stdin, a normal end. The questionnaire goes on; the agent can re-attach later.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        print("qbroker mcp: the host closed the connection", file=sys.stderr)
    return 0


def _host_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is only the host's end of the pipe closing (in anyio's task groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_host_gone(inner) for inner in exc.exceptions)
    return isinstance(exc, (BrokenPipeError, ConnectionResetError))
