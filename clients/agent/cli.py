"""``qbroker ask`` and ``qbroker resume``: the agent side of qbroker from a shell.

Both print the tool-result text (or, with ``--json``, the whole tool result) and exit with a
code that says what happened, so shell scripts and agents that can only run commands can
branch on it:

    0  completed            2  needs_clarification    3  cancelled    4  unavailable
    1  error (the broker refused, could not be reached, or the input file is unreadable)

Usage errors also exit 1 here (argparse's default is 2), so 2 always means "the person asked
a question: answer it and run ``qbroker resume``".

Both say at once, on stderr, that they wait for the person and where (the session and the
page). Ctrl-C withdraws the questionnaire as the agent would (``cancelled``/``aborted``: the
person's page says so) and exits 130; with ``--detach`` it only stops waiting, and the
questionnaire stays open for the person. A start without ``--idempotency-key`` re-attaches
to an identical start still open in the session (the broker's ``reattach=true``), so the
same command run again while the first still waits asks once.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

from broker.core.model import MAX_CLARIFICATION
from clients.cli_args import add_client_wait, add_retries, add_url_and_session

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # the shell's own code for a command ended by Ctrl-C (128 + SIGINT)
LINK_TOKEN_TTL = 3600  # the client token in the link it prints: as the broker's notification links

_EXIT_HELP = """\
exit status:
  0  QUESTIONNAIRE_COMPLETED            the person answered every question
  2  QUESTIONNAIRE_NEEDS_CLARIFICATION  the person asked something: answer, then `qbroker resume`
  3  QUESTIONNAIRE_CANCELLED            the person cancelled (or the agent aborted)
  4  QUESTIONNAIRE_UNAVAILABLE          nobody could be asked (no client connected in time)
  1  error                              refused by the broker, unreachable, or bad input;
                                        the message on stderr names the error code
130  interrupted (Ctrl-C)               the questionnaire was withdrawn (cancelled, aborted),
                                        or with --detach left open for the person
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

Run again while the first run still waits (another shell, after --detach or a lost
terminal), the same command re-attaches to the same questionnaire instead of asking twice.

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
        "--detach",
        action="store_true",
        help="on Ctrl-C only stop waiting: the questionnaire stays open for the person (default: Ctrl-C"
        " withdraws it, as the agent: cancelled, aborted)",
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
        help="repeat a KEY to get the same questionnaire back, even after it ended, instead of a second one"
        " (default: none; the same command re-attaches to its questionnaire while that one is open)",
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
    key = args.idempotency_key
    reattach = retry = None
    if tool_input.get("action") == "start":
        again = f"the same command with --idempotency-key {key}" if key else "the same command"
        reattach = f"to wait for it again, run {again}"
        retry = f"The broker may have started it: {again} gets that questionnaire back, never a second one"

    def call(client: Any, **kw: Any) -> Any:
        return client.call(tool_input, idempotency_key=key, reattach=key is None, **kw)

    # Ctrl-C before the broker's first answer: the same start again finds the questionnaire
    # (the key, or the re-attach), to withdraw it.
    find = call if tool_input.get("action") == "start" else None
    return _run("ask", args, call, reattach, retry, find=find)


def run_resume(args: argparse.Namespace) -> int:
    response = args.response
    if response == "-":
        response = sys.stdin.read().strip()
    return _run(
        "resume",
        args,
        lambda client, **kw: client.resume(args.questionnaire_id, args.revision, response, **kw),
        known_id=args.questionnaire_id,
    )


Call = Callable[..., Any]


class _Found(Exception):
    """Stops a call at the broker's first answer: the questionnaire it names."""

    def __init__(self, pending: Any) -> None:
        super().__init__(pending.questionnaire_id)
        self.pending = pending


def _run(
    command: str,
    args: argparse.Namespace,
    call: Call,
    reattach: str | None = None,
    retry: str | None = None,
    *,
    find: Call | None = None,
    known_id: str | None = None,
) -> int:
    """Run one SDK call (``call(client, **kw)``); ``reattach`` tells, after a timeout, how
    to wait for the outcome again (default: the HTTP request that re-attaches); ``retry``,
    after the retries of a transient failure ran out, how to try again safely. After Ctrl-C
    the questionnaire is ``known_id``, the last one the broker named, or the one ``find``
    (the same call again) names."""
    from clients.agent.sdk import QBrokerError, QBrokerTimeout, ServiceUnavailable, TransportError, dumps_result

    if not (args.token or os.environ.get("QBROKER_TOKEN")):
        return _fail(
            command,
            "unauthorized",
            f"no agent token: give --token TOKEN or set QBROKER_TOKEN (mint one with `qbroker token --session"
            f" {shlex.quote(args.session)} --role agent`)",
        )
    last: list[Any] = []

    def on_pending(pending: Any) -> None:
        news = pending not in last
        last[:] = [pending]  # before the line: a Ctrl-C right after it must know the id
        if news and not args.quiet:
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
    if not args.quiet:
        _say_where(command, args)
    try:
        with client:
            try:
                result = call(client)
            except KeyboardInterrupt:
                qid = known_id or (last[0].questionnaire_id if last else None)
                return _interrupted(command, args, client, qid, find)
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
        if result.status == "needs_clarification":
            print(_resume_command(args, result))
    sys.stdout.flush()
    return int(result.exit_code)


def _page(args: argparse.Namespace) -> str:
    """Where the person answers: the broker's page (QBROKER_PUBLIC_URL when this shell has
    it, as the broker's own links do), opened on the session."""
    from urllib.parse import quote

    base = (os.environ.get("QBROKER_PUBLIC_URL") or args.url or "").rstrip("/")
    return f"{base}/#session={quote(args.session, safe=':')}"


def _where_they_answer(command: str, args: argparse.Namespace) -> str:
    """The page with a client token for the session when this shell has the broker's secret
    (a link the broker's notifications would send: one session, one hour), else the page
    and the command that mints that token: a link without one only says "link incomplete".
    Never the agent's own token: it would let whoever opens the link act as the agent."""
    from broker.tokens.claims import mint_token
    from clients.local_secret import local_secret

    secret = local_secret()
    if secret:
        try:
            token = mint_token(secret, args.session, "client", ttl=LINK_TOKEN_TTL, sub=f"qbroker-{command}-link")
        except ValueError:  # a session id the broker will refuse too; the call says so
            token = None
        if token is not None:
            return f"{_page(args)}&token={token} (a client token for this session, valid {LINK_TOKEN_TTL // 3600} h)"
    mint = f"qbroker token --session {shlex.quote(args.session)} --role client --ttl 1h"
    return f"{_page(args)} with a client token (mint one with `{mint}` and add &token=<it> to the link)"


def _say_where(command: str, args: argparse.Namespace) -> None:
    """At once, before the first long poll: nothing on screen for 30 s reads as a hang."""
    on_interrupt = "stops waiting, the questions stay open" if args.detach else "withdraws the questions"
    print(
        f"qbroker {command}: waiting for the person in session {args.session}; they answer at"
        f" {_where_they_answer(command, args)}, or in `qbroker tui`. Ctrl-C {on_interrupt}.",
        file=sys.stderr,
        flush=True,
    )


def _interrupted(command: str, args: argparse.Namespace, client: Any, qid: str | None, find: Call | None) -> int:
    """Ctrl-C: withdraw the questionnaire as the agent (unless ``--detach``), and say so."""
    from clients.agent.sdk import QBrokerError

    where = f"questionnaire {qid}" if qid else "the questionnaire"
    if args.detach:
        print(
            f"qbroker {command}: stopped waiting; {where} stays open for the person in session {args.session}."
            " Run the same command again to wait for it.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    try:
        if qid is None and find is not None:

            def stop(pending: Any) -> None:
                raise _Found(pending)

            try:
                ended = find(client, wait=0, on_pending=stop)
            except _Found as found:
                qid = found.pending.questionnaire_id
            else:  # it had an outcome already: nothing left to withdraw
                print(
                    f"qbroker {command}: interrupted; questionnaire {ended.questionnaire_id} had ended"
                    f" ({ended.status}).",
                    file=sys.stderr,
                )
                return EXIT_INTERRUPTED
        if qid is None:
            print(f"qbroker {command}: interrupted before the broker named the questionnaire.", file=sys.stderr)
            return EXIT_INTERRUPTED
        result = client.abort(qid)
    except QBrokerError as exc:
        print(
            f"qbroker {command}: interrupted, but {where} could not be withdrawn ({exc.code}: {exc.message});"
            " it may still be open for the person.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    how = "withdrawn (cancelled, aborted): the person's page says the agent withdrew its questions"
    if result.cancellation_reason != "aborted":
        how = f"had already ended ({result.status})"
    print(f"qbroker {command}: interrupted; questionnaire {qid} {how}.", file=sys.stderr)
    return EXIT_INTERRUPTED


def _resume_command(args: argparse.Namespace, result: Any) -> str:
    """The shell command that answers the person's question (the text above gives the tool call)."""
    words = ["qbroker", "resume", "--id", result.questionnaire_id, "--revision", str(result.revision)]
    words += ["--response", "YOUR ANSWER", "--url", args.url, "--session", args.session]
    return "From a shell: " + " ".join(shlex.quote(word) for word in words)


def _fail(command: str, code: str, message: str) -> int:
    print(f"qbroker {command}: error {code}: {message}", file=sys.stderr)
    return EXIT_ERROR
