"""``qbroker ask`` and ``qbroker resume``: the agent side of qbroker from a shell.

Both print the tool-result text (or, with ``--json``, the whole tool result) and exit with a
code that says what happened, so shell scripts and agents that can only run commands can
branch on it:

    0  completed            2  needs_clarification    3  cancelled    4  unavailable
    1  error (the broker refused, could not be reached, or the input file is unreadable)

Usage errors also exit 1 here (argparse's default is 2), so 2 always means "the person asked
a question: answer it and run ``qbroker resume``".
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

from broker.core.model import MAX_CLARIFICATION
from clients.cli_args import add_client_wait, add_retries, add_url_and_session

EXIT_ERROR = 1

_EXIT_HELP = """\
exit status:
  0  QUESTIONNAIRE_COMPLETED            the person answered every question
  2  QUESTIONNAIRE_NEEDS_CLARIFICATION  the person asked something: answer, then `qbroker resume`
  3  QUESTIONNAIRE_CANCELLED            the person cancelled (or the agent aborted)
  4  QUESTIONNAIRE_UNAVAILABLE          nobody could be asked (no client connected in time)
  1  error                              refused by the broker, unreachable, or bad input;
                                        the message on stderr names the error code
"""

_ASK_EPILOG = (
    """\
FILE holds the questionnaire tool input exactly as an agent would send it:
  {"action": "start", "questions": [...]}   (or a resume call)
For convenience a bare {"questions": [...]} or a bare list of questions is a start call.

examples:
  export QBROKER_TOKEN=$(qbroker token --session demo --role agent)
  qbroker ask examples/deploy.json --url http://127.0.0.1:8700 --session demo
  cat examples/single.json | qbroker ask - --url http://127.0.0.1:8700 --session demo --json
  qbroker ask examples/onboarding.json --url http://127.0.0.1:8700 --session demo \\
      --idempotency-key onboarding-42 --timeout 600

"""
    + _EXIT_HELP
)

_RESUME_EPILOG = (
    """\
After exit status 2 the first line of the output reads
  QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId=<ID> revision=<N>
Explain the answer to the person's request, then resume with that exact id and revision.

examples:
  qbroker resume --id 3f2a6f2c-... --revision 1 \\
      --response "Production needs an approved release window; staging does not." \\
      --url http://127.0.0.1:8700 --session demo
  echo "Staging is the default." | qbroker resume --id ID --revision 2 --response - \\
      --url http://127.0.0.1:8700 --session demo --json

"""
    + _EXIT_HELP
)


def _exit_one_on_usage_error(parser: argparse.ArgumentParser) -> None:
    def error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _exit_one_on_usage_error(parser)
    add_url_and_session(parser, "session id the questionnaire belongs to")
    parser.add_argument(
        "--token",
        default=None,
        help="agent token (default: $QBROKER_TOKEN); mint one with `qbroker token --role agent`",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the whole tool result {content, details, isError} as JSON instead of the text",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long each HTTP request long-polls for the outcome, 0-300 (default: 30); "
        "on a 202 the command re-attaches and keeps waiting",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="give up (exit 1, code timeout) after this long; the questionnaire goes on "
        "(default: wait for the outcome)",
    )
    add_retries(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")


def configure_ask(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Start a questionnaire (or send any questionnaire tool input) and wait until the\n"
        "person answers, cancels or asks for a clarification. Prints the tool-result text."
    )
    parser.epilog = _ASK_EPILOG
    parser.add_argument("file", metavar="FILE|-", help="JSON tool input; - reads standard input")
    _common(parser)
    parser.add_argument(
        "--idempotency-key",
        default=None,
        metavar="KEY",
        help="repeat a KEY to get the same questionnaire back instead of a second one "
        "(default: a fresh uuid4, reused by this command's own retries)",
    )
    add_client_wait(parser)


def configure_resume(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Answer a QUESTIONNAIRE_NEEDS_CLARIFICATION result: send the clarification response\n"
        "for the exact questionnaire id and revision, then wait for the next outcome."
    )
    parser.epilog = _RESUME_EPILOG
    parser.add_argument("--id", required=True, dest="questionnaire_id", help="questionnaireId")
    parser.add_argument("--revision", required=True, type=int, help="revision from the latest result (>= 1)")
    parser.add_argument(
        "--response",
        required=True,
        help=f"concise clarification response (<= {MAX_CLARIFICATION} characters); - reads standard input",
    )
    _common(parser)


# Tests swap this to run the commands against an httpx.MockTransport.
ClientFactory = Callable[..., Any]


def _make_client(args: argparse.Namespace, **kw: Any) -> Any:
    from clients.agent.sdk import QBrokerClient

    return QBrokerClient(
        args.url,
        args.session,
        args.token,
        wait=args.wait,
        client_wait=getattr(args, "client_wait", None),
        timeout=args.timeout,
        retries=args.retries,
        **kw,
    )


def _read_tool_input(source: str, stdin: TextIO) -> dict[str, Any]:
    if source == "-":
        raw = stdin.read()
        where = "standard input"
    else:
        with open(source, encoding="utf-8") as handle:
            raw = handle.read()
        where = source
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not JSON: {exc}") from None
    if isinstance(value, list):
        return {"action": "start", "questions": value}
    if not isinstance(value, dict):
        raise ValueError(f"{where} must hold a JSON object (the tool input) or a list of questions")
    if "action" not in value and "questions" in value:
        return {"action": "start", **value}
    return value


def run_ask(args: argparse.Namespace) -> int:
    try:
        tool_input = _read_tool_input(args.file, sys.stdin)
    except (OSError, ValueError) as exc:
        return _fail("ask", "bad_input", str(exc))
    reattach = None
    if tool_input.get("action") == "start":
        # Chosen here, not in the SDK, so that a timeout can say how to get the same
        # questionnaire back: the same command with this key.
        key = args.idempotency_key or str(uuid.uuid4())
        args.idempotency_key = key
        reattach = f"to wait for it again, run the same command with --idempotency-key {key}"
        retry = (
            f"The broker may have started it: the same command with --idempotency-key {key}"
            " gets that questionnaire back, never a second one"
        )
    else:
        retry = None
    return _run(
        "ask",
        args,
        lambda client: client.call(tool_input, idempotency_key=args.idempotency_key),
        reattach,
        retry,
    )


def run_resume(args: argparse.Namespace) -> int:
    response = args.response
    if response == "-":
        response = sys.stdin.read().strip()
    return _run(
        "resume",
        args,
        lambda client: client.resume(args.questionnaire_id, args.revision, response),
    )


def _run(
    command: str,
    args: argparse.Namespace,
    call: Callable[[Any], Any],
    reattach: str | None = None,
    retry: str | None = None,
) -> int:
    """Run one SDK call; ``reattach`` tells, after a timeout, how to wait for the outcome
    again (default: the HTTP request that re-attaches); ``retry``, after the retries of a
    transient failure ran out, how to try again safely."""
    from clients.agent.sdk import QBrokerError, QBrokerTimeout, ServiceUnavailable, TransportError, dumps_result

    last: list[Any] = []

    def on_pending(pending: Any) -> None:
        if not args.quiet and pending not in last:
            last[:] = [pending]
            print(
                f"qbroker {command}: waiting for the person (questionnaireId="
                f"{pending.questionnaire_id} revision={pending.revision} step={pending.step})",
                file=sys.stderr,
                flush=True,
            )

    try:
        client = _make_client(args, on_pending=on_pending)
    except ValueError as exc:
        return _fail(command, "bad_arguments", str(exc))
    try:
        with client:
            result = call(client)
    except QBrokerTimeout as exc:
        if exc.pending is None:
            return _fail(command, exc.code, exc.message)
        qid = exc.pending.questionnaire_id
        if reattach is None:
            reattach = f"its outcome: GET {args.url.rstrip('/')}/v1/sessions/{args.session}/questionnaires/{qid}"
        return _fail(
            command,
            exc.code,
            f"questionnaire {qid} (revision {exc.pending.revision}) is still with the person after "
            f"{args.timeout:g}s; it goes on. {reattach[0].upper()}{reattach[1:]}",
        )
    except QBrokerError as exc:
        if retry is not None and isinstance(exc, (ServiceUnavailable, TransportError)):
            return _fail(command, exc.code, f"{exc.message}. {retry}")
        return _fail(command, exc.code, exc.message)
    except ValueError as exc:
        return _fail(command, "bad_arguments", str(exc))
    if args.json:
        print(dumps_result(result))
    else:
        print(result.text)
    sys.stdout.flush()
    return int(result.exit_code)


def _fail(command: str, code: str, message: str) -> int:
    print(f"qbroker {command}: error {code}: {message}", file=sys.stderr)
    return EXIT_ERROR
