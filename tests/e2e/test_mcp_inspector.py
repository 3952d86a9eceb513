"""The broker's MCP endpoint driven by a client this project did not write: the MCP Inspector's
CLI (``@modelcontextprotocol/inspector``, pinned, installed from npm by tests/helpers/npm.py),
run as a person at a terminal runs it, against a real broker on Redis with a scripted person
answering in another client.

Each of: list the tools; start and complete; clarification and resume (the resume written
as ``--tool-arg key=value`` pairs); a refused input as a tool error; a wrong token; the
per-request protocol revision; the path for a service-wide token. With
QBROKER_MCP_TRANSCRIPT=<file>, the clarification run is written out as the transcript in
docs/agents.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.core import tool
from tests.helpers.clients import person
from tests.helpers.inspector import EXIT_AUTH, EXIT_OK, EXIT_TOOL_ERROR, Inspector, installed_inspector
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, redis_server, token
from tests.helpers.samples import new_sid, single, start_body

QUICK = 60.0
DEPLOY = json.loads((REPO_ROOT / "examples" / "deploy.json").read_text())


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    with redis_server() as redis, broker(redis.url, client_wait=2, mcp_progress_interval=0.5) as process:
        yield process


@pytest.fixture
def inspector(tmp_path: Path) -> Inspector:
    return installed_inspector(tmp_path)


def first_text(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


async def test_the_inspector_lists_the_one_tool(live: BrokerProcess, inspector: Inspector) -> None:
    sid = new_sid("insp")
    run = await inspector.tools_list(f"{live.url}/mcp", token(sid, "agent"))
    assert run.returncode == EXIT_OK, run.stderr
    assert run.output["result"]["tools"] == [tool.tool_listing()]


async def test_the_inspector_starts_and_the_person_completes(live: BrokerProcess, inspector: Inspector) -> None:
    sid = new_sid("insp")
    async with person(live.ws_url, sid) as p:
        call = asyncio.create_task(inspector.tools_call(f"{live.url}/mcp", token(sid, "agent"), DEPLOY))
        question = await p.wait_for("question", timeout=QUICK)
        await p.answer_all({"deploy_target": ["production"], "checks": ["unit", "e2e"]}, first=question)
        run = await asyncio.wait_for(call, QUICK)
    assert run.returncode == EXIT_OK, run.stderr
    result = run.output["result"]
    qid = question["questionnaireId"]
    assert result["isError"] is False
    assert first_text(result).splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert result["_meta"][tool.DETAILS_META_KEY]["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["production"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
    ]


async def test_the_inspector_gets_a_clarification_request_and_resumes(
    live: BrokerProcess, inspector: Inspector
) -> None:
    sid = new_sid("insp")
    url, agent = f"{live.url}/mcp", token(sid, "agent")
    notes = inspector.transcript
    notes.aliases[json.dumps(DEPLOY)] = '"$(cat examples/deploy.json)"'
    notes.note(f"qbroker serve is running with Redis; the person has session {sid} open in the browser")
    listed = await inspector.tools_list(url, agent, record=True)
    assert listed.returncode == EXIT_OK, listed.stderr
    async with person(live.ws_url, sid) as p:
        notes.note("the agent asks; the call waits until the person acts")
        asks = "...meanwhile the person, at the first question, asks: What is a release window?"
        call = asyncio.create_task(inspector.tools_call(url, agent, DEPLOY, record=True, during=asks))
        question = await p.wait_for("question", timeout=QUICK)
        qid = question["questionnaireId"]
        await p.clarify(question, "What is a release window?")
        asked = await asyncio.wait_for(call, QUICK)
        assert asked.returncode == EXIT_OK, asked.stderr
        text = first_text(asked.output["result"])
        assert text.startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1")

        notes.note("the agent explains in its reply, then resumes with the id and revision from the result")
        resume = asyncio.create_task(
            inspector.run(
                url,
                agent,
                "--method",
                "tools/call",
                "--tool-name",
                "questionnaire",
                "--tool-arg",
                "action=resume",
                f"questionnaireId={qid}",
                "revision=1",
                "clarificationResponse=An agreed time slot for production deploys.",
                record=True,
                during="...meanwhile the person reads the answer, picks production, then unit tests",
            )
        )
        again = await p.wait_for("question", timeout=QUICK)
        assert again["clarifications"][0]["response"] == "An agreed time slot for production deploys."
        await p.answer_all({"deploy_target": ["production"], "checks": ["unit"]}, first=again)
        done = await asyncio.wait_for(resume, QUICK)
    assert done.returncode == EXIT_OK, done.stderr
    result = done.output["result"]
    assert first_text(result).startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1")
    assert (
        result["_meta"][tool.DETAILS_META_KEY]["clarifications"][0]["response"]
        == "An agreed time slot for production deploys."
    )
    notes.write()


async def test_a_refused_input_is_a_tool_error_in_the_inspector(live: BrokerProcess, inspector: Inspector) -> None:
    sid = new_sid("insp")
    bad = start_body(single(minSelections=1))
    run = await inspector.tools_call(f"{live.url}/mcp", token(sid, "agent"), bad)
    assert run.returncode == EXIT_TOOL_ERROR, run.stderr
    result = run.output["result"]
    assert result["isError"] is True
    assert first_text(result).startswith("questionnaire:")
    assert first_text(result).endswith("(error code: invalid_arguments)")
    assert run.error["error"]["code"] == "tool_is_error"


@pytest.mark.parametrize("wrong", ["not-a-token", "client"])
async def test_a_wrong_token_is_refused_with_401(live: BrokerProcess, inspector: Inspector, wrong: str) -> None:
    sid = new_sid("insp")
    presented = token(sid, "client") if wrong == "client" else wrong
    # --stored-auth-only: on a 401 the CLI would otherwise offer an interactive OAuth login.
    run = await inspector.tools_list(f"{live.url}/mcp", presented, "--stored-auth-only")
    assert run.returncode == EXIT_AUTH, (run.stdout, run.stderr)
    error = run.error["error"]
    assert error["code"] == "auth_required"
    assert '"code":"unauthorized"' in error["message"] and "questionnaire:" in error["message"]


async def test_the_inspector_on_the_per_request_revision(live: BrokerProcess, inspector: Inspector) -> None:
    sid = new_sid("insp")
    run = await inspector.tools_call(
        f"{live.url}/mcp", token(sid, "agent"), start_body(), "--protocol-era", "modern"
    )  # nobody has the session open: unavailable, after the 2 s client wait
    assert run.returncode == EXIT_OK, run.stderr
    assert first_text(run.output["result"]).startswith("QUESTIONNAIRE_UNAVAILABLE")


async def test_the_inspector_with_a_service_wide_token_names_the_session(
    live: BrokerProcess, inspector: Inspector
) -> None:
    sid = new_sid("insp")
    service_wide = token("*", "agent")
    async with person(live.ws_url, sid) as p:
        url = f"{live.url}/v1/sessions/{sid}/mcp"
        call = asyncio.create_task(inspector.tools_call(url, service_wide, start_body(single("target"))))
        question = await p.wait_for("question", timeout=QUICK)
        await p.answer(question, ["staging"])
        run = await asyncio.wait_for(call, QUICK)
    assert run.returncode == EXIT_OK, run.stderr
    assert "target: optionIds=[staging]" in first_text(run.output["result"])
    refused = await inspector.tools_list(f"{live.url}/mcp", service_wide, "--stored-auth-only")
    assert refused.returncode != EXIT_OK
    assert "/v1/sessions/{sid}/mcp" in refused.stderr
