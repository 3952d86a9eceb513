"""``qbroker ask`` / ``resume`` exit codes and output against httpx.MockTransport (no broker)."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.tokens.claims import verify_token
from clients.agent import cli as agent_cli
from clients.agent.cli import LINK_TOKEN_TTL
from clients.agent.sdk import QBrokerClient
from clients.local_secret import generated_secret_file
from qbroker.cli import main
from tests.unit.test_agent_sdk import QID, error, pending, tool_result

ARGS = ["--url", "http://broker.test", "--session", "s", "--token", "t"]


def use_replies(monkeypatch: pytest.MonkeyPatch, *replies: httpx.Response) -> list[httpx.Request]:
    seen: list[httpx.Request] = []
    queue = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    def make_client(args: Any, **kw: Any) -> QBrokerClient:
        return QBrokerClient(
            args.url,
            args.session,
            args.token,
            wait=args.wait,
            timeout=args.timeout,
            retries=args.retries,
            backoff=0,
            poll_interval=0,
            transport=httpx.MockTransport(handler),
            **kw,
        )

    monkeypatch.setattr(agent_cli, "_make_client", make_client)
    return seen


@pytest.mark.parametrize(
    ("status", "code"),
    [("completed", 0), ("needs_clarification", 2), ("cancelled", 3), ("unavailable", 4)],
)
def test_ask_exit_code_says_what_happened(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: str, code: int
) -> None:
    extra: dict[str, Any] = {}
    if status == "needs_clarification":
        extra["clarificationRequest"] = {"revision": 1, "questionId": "deploy_target", "request": "?"}
    use_replies(monkeypatch, httpx.Response(200, json=tool_result(status, **extra)))
    monkeypatch.setattr("sys.stdin", io.StringIO('{"action": "start", "questions": []}'))
    assert main(["ask", "-", *ARGS]) == code
    out = capsys.readouterr().out
    assert out.startswith(f"QUESTIONNAIRE_{status.upper()} questionnaireId={QID}")
    resume = f"From a shell: qbroker resume --id {QID} --revision 0 --response 'YOUR ANSWER' --url http://broker.test --session s"
    assert (out.splitlines()[-1] == resume) == (status == "needs_clarification")


def test_ask_json_prints_the_whole_tool_result_and_bare_question_lists_become_a_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = use_replies(monkeypatch, httpx.Response(202, json=pending()), httpx.Response(200, json=tool_result()))
    monkeypatch.setattr("sys.stdin", io.StringIO('[{"id": "q"}]'))
    assert main(["ask", "-", "--json", *ARGS]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == tool_result()
    assert json.loads(seen[0].content) == {"action": "start", "questions": [{"id": "q"}]}
    assert f"waiting for the person (questionnaireId={QID} revision=0 step=0)" in captured.err


def test_resume_sends_the_resume_call_and_errors_name_the_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_replies(monkeypatch, httpx.Response(409, json=error("stale_revision", "questionnaire: latest is 3")))
    assert main(["resume", "--id", QID, "--revision", "2", "--response", "because", *ARGS]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    where, said = captured.err.strip().splitlines()
    assert where.startswith(
        "qbroker resume: waiting for the person in session s; they answer at http://broker.test/#session=s"
    )
    assert said == "qbroker resume: error stale_revision: questionnaire: latest is 3"


@pytest.mark.parametrize("secret_from", ["QBROKER_SECRET", "the data dir"])
def test_the_page_it_names_carries_a_client_token_when_this_shell_can_mint_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, secret_from: str
) -> None:
    secret = "a-local-broker-secret-" + "x" * 24
    monkeypatch.delenv("QBROKER_SECRET", raising=False)
    monkeypatch.setenv("QBROKER_DATA_DIR", str(tmp_path))
    if secret_from == "QBROKER_SECRET":
        monkeypatch.setenv("QBROKER_SECRET", secret)
    else:
        (tmp_path / "secret").write_text(secret + "\n")
        assert generated_secret_file() == tmp_path / "secret"
    use_replies(monkeypatch, httpx.Response(200, json=tool_result()))
    monkeypatch.setattr("sys.stdin", io.StringIO('[{"id": "q"}]'))
    assert main(["ask", "-", *ARGS]) == 0
    where = capsys.readouterr().err.splitlines()[0]
    link = re.search(r"they answer at (\S+) \(a client token for this session, valid 1 h\), or in `qbroker tui`", where)
    assert link is not None, where
    page, _, token = link[1].partition("&token=")
    assert page == "http://broker.test/#session=s"
    claims = verify_token(secret, token, role="client")  # a client's, never the agent's own
    assert claims.sid == "s" and claims.sub == "qbroker-ask-link"
    assert claims.exp is not None and claims.exp - time.time() <= LINK_TOKEN_TTL + 1  # exp: whole seconds


def test_without_the_secret_it_names_the_command_that_mints_the_client_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("QBROKER_SECRET", raising=False)
    monkeypatch.setenv("QBROKER_DATA_DIR", str(tmp_path))  # no secret file there
    use_replies(monkeypatch, httpx.Response(200, json=tool_result()))
    assert main(["resume", "--id", QID, "--revision", "2", "--response", "because", *ARGS]) == 0
    where = capsys.readouterr().err.splitlines()[0]
    assert where == (
        "qbroker resume: waiting for the person in session s; they answer at http://broker.test/#session=s with a"
        " client token (mint one with `qbroker token --session s --role client --ttl 1h` and add &token=<it> to the"
        " link), or in `qbroker tui`. Ctrl-C withdraws the questions."
    )
    assert not list(tmp_path.iterdir())  # read, never generated


def test_a_timeout_says_how_to_wait_for_the_same_questionnaire_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ask: the same command (it re-attaches to the same questionnaire), or with the key it was
    # given; resume: the GET that re-attaches. Never the SDK's get().
    seen = use_replies(monkeypatch, httpx.Response(202, json=pending(0, 1)))
    monkeypatch.setattr("sys.stdin", io.StringIO('[{"id": "q"}]'))
    assert main(["ask", "-", "--timeout", "0", *ARGS]) == 1
    err = capsys.readouterr().err
    assert seen[0].url.params["reattach"] == "true" and "Idempotency-Key" not in seen[0].headers
    assert f"error timeout: questionnaire {QID} (revision 0) is still with the person after 0s" in err
    assert "To wait for it again, run the same command\n" in err
    assert "get(" not in err

    seen = use_replies(monkeypatch, httpx.Response(202, json=pending(0, 1)))
    monkeypatch.setattr("sys.stdin", io.StringIO('[{"id": "q"}]'))
    assert main(["ask", "-", "--timeout", "0", "--idempotency-key", "k-7", *ARGS]) == 1
    assert seen[0].headers["Idempotency-Key"] == "k-7" and "reattach" not in seen[0].url.params
    assert "run the same command with --idempotency-key k-7" in capsys.readouterr().err

    use_replies(monkeypatch, httpx.Response(202, json=pending(1, 0)))
    assert main(["resume", "--id", QID, "--revision", "1", "--response", "r", "--timeout", "0", *ARGS]) == 1
    err = capsys.readouterr().err
    assert f"Its outcome: GET http://broker.test/v1/sessions/s/questionnaires/{QID}" in err


def test_an_ask_that_ran_out_of_retries_says_how_to_retry_without_a_second_questionnaire(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unavailable = error("store_unavailable", "questionnaire: the state store is unavailable; retry shortly")
    seen = use_replies(monkeypatch, *[httpx.Response(503, json=unavailable) for _ in range(3)])
    monkeypatch.setattr("sys.stdin", io.StringIO('[{"id": "q"}]'))
    assert main(["ask", "-", "--retries", "2", *ARGS]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert len(seen) == 3 and all(request.url.params["reattach"] == "true" for request in seen)
    assert err.startswith("qbroker ask: error store_unavailable: questionnaire: the state store is unavailable")
    assert "The broker may have started it: the same command gets that questionnaire back, never a second" in err


def test_the_default_retries_ride_out_a_redis_restart(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["ask", "--help"], ["mcp", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
        assert "the default 8 rides out ~10-20 s" in " ".join(capsys.readouterr().out.split())
    with QBrokerClient("http://broker.test", "s") as qb:
        assert qb._core.s.retries == 8  # (~11-23 s of backoff)


def test_usage_errors_exit_1_so_that_2_always_means_needs_clarification(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["resume", "--id", "x", *ARGS])
    assert info.value.code == 1
    assert "--revision" in capsys.readouterr().err


def test_help_lists_the_exit_codes_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("ask", "resume"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        text = capsys.readouterr().out
        assert "examples:" in text and "QUESTIONNAIRE_NEEDS_CLARIFICATION" in text
        assert "QBROKER_TOKEN" in text


def test_mcp_print_tool_prints_the_exact_tool_definition(capsys: pytest.CaptureFixture[str]) -> None:
    from clients.mcp.server import INPUT_SCHEMA, TOOL_DESCRIPTION

    assert main(["mcp", "--print-tool"]) == 0
    tool = json.loads(capsys.readouterr().out)
    assert tool == {"name": "questionnaire", "description": TOOL_DESCRIPTION, "inputSchema": INPUT_SCHEMA}
