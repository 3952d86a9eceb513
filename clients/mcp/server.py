"""``qbroker mcp``: the questionnaire tool for any MCP host (Claude Code, Claude Desktop, ...).

A stdio Model Context Protocol server built on the official ``mcp`` Python SDK's low-level
``Server`` (which lets us publish an exact ``inputSchema``). It exposes one tool,
``questionnaire``, whose input is the seed's tool input verbatim and whose result is the
broker's tool result: the text (first line ``<MARKER> questionnaireId=.. revision=..``) as
content and the versioned ``details`` object in the result's ``_meta`` (never as structured
content, which hosts hand the model in place of the text). A call blocks until the
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

from broker.core import tool
from broker.core.host_form import IN_HOST_MODES
from broker.core.schema import TOOL_INPUT_SCHEMA
from broker.core.tool import SERVER_INSTRUCTIONS, TOOL_DESCRIPTION, TOOL_NAME, tool_json
from clients.cli_args import add_client_wait, add_retries, add_url_and_session

if TYPE_CHECKING:
    import mcp_types as types

# The tool's name, description, schema, results and errors are the core's (broker/core/tool.py),
# shared with the broker's own MCP endpoint; the names stay importable from here.
__all__ = ["INPUT_SCHEMA", "SERVER_INSTRUCTIONS", "TOOL_DESCRIPTION", "TOOL_NAME", "build_server", "tool_json"]
INPUT_SCHEMA: Final = TOOL_INPUT_SCHEMA


def tool_definition() -> Any:
    import mcp_types as types

    return types.Tool.model_validate(tool.tool_listing())


def build_server(client: Any, endpoint: str | None = None, token: str | None = None) -> Any:
    """The MCP server around an ``AsyncQBrokerClient`` (``client``). ``endpoint``: the
    broker's MCP endpoint URL, through which calls from a host that shows forms go (so the
    broker may ask in the host's form; ``in_host.py``); None: never."""
    import mcp_types as types
    from mcp.server import Server

    from clients.agent.sdk import QBrokerError, QBrokerTimeout
    from clients.mcp.in_host import call_through_endpoint, host_shows_forms

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_definition()])

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != TOOL_NAME:
            return types.CallToolResult.model_validate(tool.unknown_tool(params.name))
        if endpoint is not None and host_shows_forms(ctx.session):
            try:
                return await call_through_endpoint(ctx, params, endpoint, token)
            except Exception as exc:  # the endpoint unreachable, refusing the token, or gone mid-call
                print(f"qbroker mcp: the broker's MCP endpoint failed: {exc!r}", file=sys.stderr)
                return _tool_error(
                    "questionnaire: the broker could not be reached or the call broke; call questionnaire again"
                    " with exactly the same arguments (a repeated call re-attaches to an open questionnaire)",
                    "ui_error",
                )
        arguments = dict(params.arguments or {})
        progress = 0

        async def on_pending(pending: Any) -> None:
            nonlocal progress
            progress += 1
            await ctx.session.report_progress(
                progress,
                message=tool.progress_message(pending.questionnaire_id, pending.revision, pending.step),
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
        return types.CallToolResult.model_validate(tool.call_result(result.tool_result()))

    return Server(
        tool.SERVER_NAME,
        version=_version(),
        instructions=SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool_error(message: str, code: str | None = None) -> types.CallToolResult:
    import mcp_types as types

    return types.CallToolResult.model_validate(tool.error_result(message, code))


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
        "--in-host",
        choices=IN_HOST_MODES,
        default=None,
        help="when to put the questionnaire into the host's own form, for hosts that show forms"
        " (fallback: when no qbroker client has the session open; race: as well; off: never;"
        " default: the broker's QBROKER_IN_HOST)",
    )
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

        from clients.mcp.in_host import endpoint_url

        async with AsyncQBrokerClient(
            args.url,
            args.session,
            token,
            wait=args.wait,
            client_wait=args.client_wait,
            timeout=args.timeout,
            retries=args.retries,
        ) as client:
            endpoint = None
            if args.in_host != "off":
                endpoint = endpoint_url(args.url, args.session, args.timeout, args.in_host)
            server = build_server(client, endpoint, token)
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
