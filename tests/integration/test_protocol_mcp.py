"""docs/protocol.md, "The MCP endpoint": the questionnaire tool at /mcp, driven by the official
MCP Python SDK's own Streamable HTTP client in both protocol eras (the initialize handshake
and the per-request 2026-07-28 revision), against real brokers on both stores (on Redis the
agent's broker is not the person's).

What a host sees is what ``qbroker mcp`` (stdio) shows: the same tool, results and tool
errors; and a repeated call re-attaches to the questionnaire its first attempt started.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from broker.core import tool
from broker.core.schema import TOOL_INPUT_SCHEMA
from tests.helpers.clients import person
from tests.helpers.mcp_sdk import MODES, details_of, mcp_client, text_of
from tests.helpers.processes import REPO_ROOT, token
from tests.helpers.protocol import Deployment
from tests.helpers.samples import multi, resume_body, single, start_body
from tests.helpers.waiting import eventually

QUICK = 20.0
SETTINGS: dict[str, object] = {"mcp_progress_interval": 0.3, "client_wait": 1}


@pytest.fixture(scope="module")
def mcp_deployment(deployment: Deployment) -> Iterator[Deployment]:
    """The deployment's kind, with progress reported every 0.3 s and a 1 s client wait."""
    with deployment.spawn(**SETTINGS) as fresh:
        yield fresh


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def host(d: Deployment, sid: str, mode: str = "legacy") -> AsyncIterator[Client]:
    async with mcp_client(f"{d.agent_url}/mcp", token(sid, "agent", sub="agent-7"), mode=mode) as client:
        yield client


def someone(d: Deployment, sid: str) -> Any:
    return person(d.client_ws_url, sid)


def logged(d: Deployment, message: str, questionnaire_id: str) -> int:
    """How many times the deployment's brokers logged ``message`` for this questionnaire."""
    count = 0
    for line in d.logs().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("msg") == message and entry.get("questionnaire") == questionnaire_id:
            count += 1
    return count


async def re_attached(d: Deployment, questionnaire_id: str, times: int = 1) -> None:
    """Wait until a repeated start has re-attached to the questionnaire (``times`` in all)."""
    await eventually(
        lambda: logged(d, "repeated start re-attached", questionnaire_id) >= times,
        "the repeated call to re-attach",
        interval=0.1,
    )


class Progress:
    """A progress callback that records what it was told."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        self.arrived.set()


async def test_the_endpoint_lists_the_one_tool_of_the_core(mcp_deployment: Deployment, sid: str, mode: str) -> None:
    async with host(mcp_deployment, sid, mode) as client:
        listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["questionnaire"]
    listing = listed.tools[0].model_dump(by_alias=True, exclude_none=True)
    assert listing == tool.tool_listing()
    assert listing["inputSchema"] == TOOL_INPUT_SCHEMA


async def test_the_remote_tool_is_the_stdio_servers_tool(mcp_deployment: Deployment, sid: str) -> None:
    """One definition: ``qbroker mcp`` over stdio lists exactly what /mcp lists."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    args = ["-m", "qbroker.cli", "mcp", "--url", mcp_deployment.agent_url, "--session", sid]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(REPO_ROOT))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), QUICK)
            stdio = (await session.list_tools()).tools
    async with host(mcp_deployment, sid) as client:
        remote = (await client.list_tools()).tools
    assert [t.model_dump() for t in remote] == [t.model_dump() for t in stdio]


async def test_a_call_waits_for_the_person_reports_progress_and_returns_text_and_details(
    mcp_deployment: Deployment, sid: str, mode: str
) -> None:
    progress = Progress()
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid, mode) as client:
        body = start_body(single("target"), multi("checks"))
        call = asyncio.create_task(client.call_tool("questionnaire", body, progress_callback=progress))
        question = await p.wait_for("question")
        qid = question["questionnaireId"]
        await asyncio.wait_for(progress.arrived.wait(), QUICK)  # the person takes their time
        await p.answer_all(
            {"target": ["production"], "checks": {"selected": ["unit"], "other": "smoke"}}, first=question
        )
        result = await asyncio.wait_for(call, QUICK)

    assert result.is_error is False
    text = text_of(result)
    assert text.splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert 'checks: optionIds=[unit] other="smoke"' in text
    details = details_of(result)
    assert details is not None and details["status"] == "completed"
    assert details["answers"] == [
        {"questionId": "target", "selectedOptionIds": ["production"]},
        {"questionId": "checks", "selectedOptionIds": ["unit"], "other": "smoke"},
    ]
    assert progress.messages[0] == tool.progress_message(qid, 0, 0)


async def test_clarification_then_resume_through_the_endpoint(mcp_deployment: Deployment, sid: str, mode: str) -> None:
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid, mode) as client:
        call = asyncio.create_task(client.call_tool("questionnaire", start_body(single("target"), single("when"))))
        question = await p.wait_for("question")
        await p.answer(question, ["staging"])
        second = await p.wait_for("question", where=lambda f: f["index"] == 1)
        await p.clarify(second, "What does 'when' mean?")
        asked = await asyncio.wait_for(call, QUICK)
        qid = question["questionnaireId"]
        assert asked.is_error is False
        assert text_of(asked).startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1")
        assert details_of(asked) is not None
        assert details_of(asked)["clarificationRequest"]["request"] == "What does 'when' mean?"

        resume = resume_body(qid, 1, "The deploy window.")
        call = asyncio.create_task(client.call_tool("questionnaire", resume))
        again = await p.wait_for("question", where=lambda f: f["index"] == 1)
        assert again["clarifications"][0]["response"] == "The deploy window."
        await p.answer_all({"when": ["production"]}, first=again)
        done = await asyncio.wait_for(call, QUICK)
        assert done.is_error is False
        assert text_of(done).startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1")

        # The same resume once more (a host's retry) reads the outcome; another one is refused.
        repeat = await asyncio.wait_for(client.call_tool("questionnaire", resume), QUICK)
        assert repeat.is_error is False and text_of(repeat) == text_of(done)
        other = await client.call_tool("questionnaire", resume_body(qid, 1, "Something else."))
        assert other.is_error is True
        assert text_of(other).endswith("(error code: not_awaiting_clarification)")


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        (start_body(single(minSelections=1)), "invalid_arguments"),
        ({"action": "start", "questions": [], "questionnaireId": "x"}, "invalid_arguments"),
        ({"action": "ask"}, "invalid_arguments"),
        (resume_body("no-such-id", 1, "x"), "unknown_questionnaire"),
    ],
)
async def test_a_refused_input_is_a_tool_error_with_the_brokers_message(
    mcp_deployment: Deployment, sid: str, arguments: dict[str, Any], code: str
) -> None:
    async with host(mcp_deployment, sid) as client:
        result = await asyncio.wait_for(client.call_tool("questionnaire", arguments), QUICK)
    assert result.is_error is True
    assert text_of(result).startswith("questionnaire:")
    assert text_of(result).endswith(f"\n(error code: {code})")
    assert details_of(result) is None


async def test_another_tool_name_is_a_tool_error(mcp_deployment: Deployment, sid: str) -> None:
    async with host(mcp_deployment, sid) as client:
        result = await client.call_tool("ask", start_body())
    assert result.is_error is True and text_of(result) == tool.unknown_tool("ask")["content"][0]["text"]


async def test_nobody_connected_is_an_unavailable_result_not_an_error(mcp_deployment: Deployment, sid: str) -> None:
    async with host(mcp_deployment, sid) as client:
        result = await asyncio.wait_for(client.call_tool("questionnaire", start_body()), QUICK)
    assert result.is_error is False
    assert text_of(result).startswith("QUESTIONNAIRE_UNAVAILABLE")
    assert details_of(result) is not None and details_of(result)["cancellationReason"] == "ui_unavailable"


async def test_a_repeated_call_re_attaches_while_open_and_asks_again_once_ended(
    mcp_deployment: Deployment, sid: str
) -> None:
    body = start_body(single("target"))
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid) as client:
        first = asyncio.create_task(client.call_tool("questionnaire", body))
        question = await p.wait_for("question")
        # Same arguments, another key order and padding: a retry of the same call.
        retry = {"questions": [{**single("target"), "prompt": f" {single('target')['prompt']} "}], "action": "start"}
        second = asyncio.create_task(client.call_tool("questionnaire", retry))
        await re_attached(mcp_deployment, question["questionnaireId"])
        await p.answer(question, ["staging"])
        one, two = await asyncio.wait_for(asyncio.gather(first, second), QUICK)
        assert text_of(one) == text_of(two)
        assert text_of(one).startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={question['questionnaireId']}")

        # Ended: the same start asks again, a new questionnaire.
        third = asyncio.create_task(client.call_tool("questionnaire", body))
        again = await p.wait_for("question")
        assert again["questionnaireId"] != question["questionnaireId"]
        await p.answer(again, ["production"])
        assert "target: optionIds=[production]" in text_of(await asyncio.wait_for(third, QUICK))


async def test_an_explicit_idempotency_key_in_meta_re_attaches_even_after_the_outcome(
    mcp_deployment: Deployment, sid: str
) -> None:
    meta = {"qbroker/idempotencyKey": "deploy-42"}
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid) as client:
        call = asyncio.create_task(client.call_tool("questionnaire", start_body(), meta=meta))  # type: ignore[arg-type]
        question = await p.wait_for("question")
        await p.answer(question, ["staging"])
        done = await asyncio.wait_for(call, QUICK)
        again = await client.call_tool("questionnaire", start_body(), meta=meta)  # type: ignore[arg-type]
        assert text_of(again) == text_of(done)
        reused = await client.call_tool("questionnaire", start_body(single("other")), meta=meta)  # type: ignore[arg-type]
        assert reused.is_error is True and "Idempotency-Key was already used" in text_of(reused)
        bad = await client.call_tool("questionnaire", start_body(), meta={"qbroker/idempotencyKey": ""})  # type: ignore[arg-type]
        assert bad.is_error is True and text_of(bad).endswith("(error code: invalid_arguments)")


async def test_the_urls_timeout_ends_a_call_that_a_repeat_then_continues(mcp_deployment: Deployment, sid: str) -> None:
    url = f"{mcp_deployment.agent_url}/mcp?timeout=1"
    async with someone(mcp_deployment, sid) as p, mcp_client(url, token(sid, "agent")) as client:
        cut = await asyncio.wait_for(client.call_tool("questionnaire", start_body()), QUICK)
        question = await p.wait_for("question")
        qid = question["questionnaireId"]
        assert cut.is_error is True
        assert f"Questionnaire {qid} is still with the user" in text_of(cut)
        assert text_of(cut).endswith("(error code: timeout)")
        repeat = asyncio.create_task(client.call_tool("questionnaire", start_body()))
        await re_attached(mcp_deployment, qid)
        await p.answer(question, ["production"])
        result = await asyncio.wait_for(repeat, QUICK)
    assert text_of(result).startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={qid}")


async def test_no_answer_or_clarification_text_reaches_the_logs(mcp_deployment: Deployment, sid: str) -> None:
    secrets = ("SECRET-MCP-OTHER-41d2", "SECRET-MCP-REQUEST-8e1f", "SECRET-MCP-RESPONSE-2c7b")
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid) as client:
        call = asyncio.create_task(client.call_tool("questionnaire", start_body(single("a"), single("b"))))
        question = await p.wait_for("question")
        await p.answer(question, [], other=secrets[0])
        second = await p.wait_for("question", where=lambda f: f["index"] == 1)
        await p.clarify(second, secrets[1])
        asked = await asyncio.wait_for(call, QUICK)
        qid = question["questionnaireId"]
        call = asyncio.create_task(client.call_tool("questionnaire", resume_body(qid, 1, secrets[2])))
        again = await p.wait_for("question", where=lambda f: f["index"] == 1)
        await p.answer(again, ["production"])
        done = await asyncio.wait_for(call, QUICK)
    assert secrets[1] in text_of(asked) and secrets[0] in json.dumps(details_of(done))
    logs = mcp_deployment.logs()
    assert qid in logs  # the logs are there, at debug
    for secret in secrets:
        assert secret not in logs


async def test_the_record_names_the_hosts_agent_as_who_asked_and_resumed(mcp_deployment: Deployment, sid: str) -> None:
    async with someone(mcp_deployment, sid) as p, host(mcp_deployment, sid) as client:
        call = asyncio.create_task(client.call_tool("questionnaire", start_body(single("target"))))
        question = await p.wait_for("question")
        await p.clarify(question, "Which target?")
        await asyncio.wait_for(call, QUICK)
        qid = question["questionnaireId"]
        call = asyncio.create_task(client.call_tool("questionnaire", resume_body(qid, 1, "The usual one.")))
        again = await p.wait_for("question", where=lambda f: f["step"] == 2)
        await p.answer(again, ["staging"])
        await asyncio.wait_for(call, QUICK)
    async with httpx.AsyncClient(timeout=QUICK) as http:
        response = await http.get(
            f"{mcp_deployment.agent_url}/v1/sessions/{sid}/questionnaires/{qid}/events",
            headers={"Authorization": f"Bearer {token(sid, 'client')}"},
        )
    assert response.status_code == 200, response.text
    agent = {"sub": "agent-7", "role": "agent", "client": None}
    assert [(e["type"], e["by"]["role"]) for e in response.json()["events"]] == [
        ("started", "agent"),
        ("clarification_requested", "client"),
        ("resumed", "agent"),
        ("answered", "client"),
        ("completed", "client"),
    ]
    assert [e["by"] for e in response.json()["events"] if e["type"] in ("started", "resumed")] == [agent, agent]
