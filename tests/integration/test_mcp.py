"""``qbroker mcp`` driven by the official MCP SDK's own stdio client, against a live broker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from broker.core.schema import TOOL_INPUT_SCHEMA, trimmed_text_pattern
from tests.helpers.clients import ScriptedClient
from tests.helpers.mcp_sdk import MODES, details_of, text_of
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, token
from tests.helpers.samples import multi, new_sid, single
from tests.helpers.waiting import eventually, wait_until

EXAMPLES = Path(REPO_ROOT, "examples")
QUICK = 20.0


@pytest.fixture
def sid() -> str:
    return new_sid("mcp")


@asynccontextmanager
async def mcp_session(live: BrokerProcess, sid: str, *extra: str) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "qbroker.cli", "mcp", "--url", live.url, "--session", sid, "--token", token(sid, "agent"), *extra],
        env=env,
        cwd=str(REPO_ROOT),
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), QUICK)
            yield session


def person(live: BrokerProcess, sid: str) -> Any:
    return ScriptedClient.connect(live.ws_url, sid, token(sid, "client"))


def walk(schema: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from walk(value, f"{path}[{index}]")


async def tool_schema(session: ClientSession) -> tuple[Any, dict[str, Any]]:
    listed = await session.list_tools()
    assert [tool.name for tool in listed.tools] == ["questionnaire"]
    tool = listed.tools[0]
    return tool, tool.input_schema


async def test_the_one_tool_has_the_seed_schema_with_bounds_and_no_anyof(live: BrokerProcess, sid: str) -> None:
    async with mcp_session(live, sid) as session:
        tool, schema = await tool_schema(session)

    objects = [(path, node) for path, node in walk(schema) if node.get("type") == "object"]
    assert len(objects) == 3  # tool input, question, option
    for path, node in objects:
        assert node.get("additionalProperties") is False, path
    for path, node in walk(schema):
        assert not {"anyOf", "oneOf", "allOf", "$ref"} & node.keys(), path

    assert schema == TOOL_INPUT_SCHEMA  # the core's one schema, as the host reads it
    props = schema["properties"]
    assert schema["required"] == ["action"]
    assert props["action"] == {**props["action"], "type": "string", "enum": ["start", "resume"]}
    assert (props["questions"]["minItems"], props["questions"]["maxItems"]) == (1, 20)
    assert props["revision"]["type"] == "integer" and props["revision"]["minimum"] == 1
    assert props["clarificationResponse"]["pattern"] == trimmed_text_pattern(1000)
    assert props["questionnaireId"]["type"] == "string"
    question = props["questions"]["items"]["properties"]
    assert question["type"]["enum"] == ["single", "multi"]
    assert (question["options"]["minItems"], question["options"]["maxItems"]) == (1, 50)
    assert [question[key]["pattern"] for key in ("id", "label", "prompt")] == [
        trimmed_text_pattern(limit) for limit in (128, 200, 2000)
    ]
    assert question["minSelections"]["type"] == "integer"
    assert question["maxSelections"]["type"] == ["integer", "null"]
    assert question["allowOther"]["type"] == "boolean"
    option = question["options"]["items"]["properties"]
    assert [option[key]["pattern"] for key in ("id", "label", "description")] == [
        trimmed_text_pattern(limit) for limit in (128, 200, 500)
    ]

    description = tool.description
    for must in (
        "QUESTIONNAIRE_NEEDS_CLARIFICATION",
        '"resume"',
        "open-ended",
        "credentials",
        "ONE start call",
        "never guess",
        "exactly the questionnaireId and",
    ):
        assert must in description, must

    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    for example in sorted(EXAMPLES.glob("*.json")):
        assert not list(validator.iter_errors(json.loads(example.read_text()))), example.name
    assert list(validator.iter_errors({"action": "start", "questions": [], "extra": 1}))
    assert list(validator.iter_errors({"action": "ask"}))


@pytest.mark.floors  # at the dependency floors too: the MCP SDK's stdio server and client
async def test_start_waits_for_the_person_and_returns_the_text_and_details(live: BrokerProcess, sid: str) -> None:
    deploy = json.loads((EXAMPLES / "deploy.json").read_text())
    reports: list[tuple[float, str | None]] = []
    reported = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, message))
        reported.set()

    async with person(live, sid) as someone, mcp_session(live, sid, "--wait", "0.3") as session:
        call = asyncio.create_task(session.call_tool("questionnaire", deploy, progress_callback=on_progress))
        question = await someone.wait_for("question")
        # the server long-polls 0.3 s, gets a 202 and reports progress
        await asyncio.wait_for(reported.wait(), QUICK)
        await someone.answer_all({"deploy_target": ["staging"], "checks": ["unit", "lint"]}, first=question)
        result = await asyncio.wait_for(call, QUICK)

    assert result.is_error is False
    qid = question["questionnaireId"]
    assert text_of(result).splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert "checks: optionIds=[unit, lint]" in text_of(result)
    assert details_of(result)["status"] == "completed"
    assert details_of(result)["answers"][0] == {"questionId": "deploy_target", "selectedOptionIds": ["staging"]}
    assert reports and f"questionnaireId={qid}" in (reports[0][1] or "")


async def test_clarification_then_resume_through_the_tool(live: BrokerProcess, sid: str) -> None:
    deploy = json.loads((EXAMPLES / "deploy.json").read_text())
    async with person(live, sid) as someone, mcp_session(live, sid) as session:
        call = asyncio.create_task(session.call_tool("questionnaire", deploy))
        question = await someone.wait_for("question")
        await someone.clarify(question, "What is a release window?")
        await someone.wait_for("suspended")
        asked = await asyncio.wait_for(call, QUICK)
        assert asked.is_error is False
        qid = question["questionnaireId"]
        assert text_of(asked).startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1")
        assert details_of(asked)["clarificationRequest"]["request"] == "What is a release window?"

        resume = {
            "action": "resume",
            "questionnaireId": qid,
            "revision": 1,
            "clarificationResponse": "An agreed time slot for production deploys.",
        }
        call = asyncio.create_task(session.call_tool("questionnaire", resume))
        again = await someone.wait_for("question")
        assert again["question"]["id"] == "deploy_target"
        assert again["clarifications"][0]["response"] == resume["clarificationResponse"]
        await someone.answer_all({"deploy_target": ["production"]}, first=again)
        done = await asyncio.wait_for(call, QUICK)

        assert done.is_error is False
        assert text_of(done).startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1")

        stale = await session.call_tool("questionnaire", {**resume, "revision": 1})
        assert stale.is_error is True
        assert "questionnaire:" in text_of(stale) and "not_awaiting_clarification" in text_of(stale)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        (
            {
                "action": "start",
                "questions": [
                    {"id": "q", "prompt": "?", "type": "single", "options": [{"id": "a"}], "minSelections": 1}
                ],
            },
            "invalid_arguments",
        ),
        ({"action": "start", "questions": [], "questionnaireId": "x"}, "invalid_arguments"),
        (
            {"action": "resume", "questionnaireId": "no-such-id", "revision": 1, "clarificationResponse": "x"},
            "unknown_questionnaire",
        ),
    ],
)
async def test_broker_refusals_are_tool_errors_with_the_broker_message(
    live: BrokerProcess, sid: str, arguments: dict[str, Any], code: str
) -> None:
    async with mcp_session(live, sid) as session:
        result = await asyncio.wait_for(session.call_tool("questionnaire", arguments), QUICK)
    assert result.is_error is True
    assert text_of(result).startswith("questionnaire:")
    assert f"(error code: {code})" in text_of(result)


async def test_nobody_connected_is_an_unavailable_result_not_an_error(live: BrokerProcess, sid: str) -> None:
    single = json.loads((EXAMPLES / "single.json").read_text())
    async with mcp_session(live, sid) as session:
        result = await asyncio.wait_for(session.call_tool("questionnaire", single), QUICK)
    assert result.is_error is False
    assert text_of(result).startswith("QUESTIONNAIRE_UNAVAILABLE")
    assert details_of(result)["cancellationReason"] == "ui_unavailable"


async def test_client_wait_gives_the_person_longer_than_the_broker_s_wait_to_arrive(
    live: BrokerProcess, sid: str
) -> None:
    single = json.loads((EXAMPLES / "single.json").read_text())
    async with mcp_session(live, sid, "--client-wait", "60", "--wait", "0.5") as session:
        call = asyncio.create_task(session.call_tool("questionnaire", single))
        await asyncio.sleep(2.5)  # the person arrives after the broker's own 1 s wait (the scenario, not a sync)
        async with person(live, sid) as someone:
            await someone.answer_all({"license": ["mit"]})
            result = await asyncio.wait_for(call, QUICK)
    assert result.is_error is False
    assert text_of(result).startswith("QUESTIONNAIRE_COMPLETED")


def test_a_host_that_closes_our_stdout_mid_call_ends_the_server_quietly(live: BrokerProcess, sid: str) -> None:
    """The host quit while a call was with the person: no traceback, exit 0 once stdin ends."""

    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qbroker.cli",
            "mcp",
            "--url",
            live.url,
            "--session",
            sid,
            "--token",
            token(sid, "agent"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(REPO_ROOT),
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None

    def send(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        assert json.loads(server.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        arguments = json.loads((EXAMPLES / "single.json").read_text())
        unavailable = {"status": "unavailable", "reason": "ui_unavailable"}
        ended_before = live.metric("qbroker_questionnaire_outcomes_total", **unavailable)
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "questionnaire", "arguments": arguments},
            }
        )
        server.stdout.close()  # the host goes away; the answer (unavailable, after ~1 s) has nowhere to go
        # The call ends (unavailable: no client, client_wait=1 s) and its answer's write fails
        # on the closed pipe; nothing outside the server shows that write until its stdin ends,
        # so this waits until the broker has answered the call (its outcome counted, no agent
        # call waiting any more): the server writes the answer as soon as it reads it.
        wait_until(
            lambda: (
                live.metric("qbroker_questionnaire_outcomes_total", **unavailable) > ended_before
                and live.metric("qbroker_agent_calls_waiting") == 0
            ),
            timeout=QUICK,
            what="the broker to answer the call",
        )
        server.stdin.close()
        code = server.wait(QUICK)
        text = server.stderr.read().decode(errors="replace")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)
        server.stderr.close()
    assert code == 0, text
    assert "Traceback" not in text and "ExceptionGroup" not in text, text
    assert "qbroker mcp: the host closed the connection" in text


# --- in the host's own form (both protocol eras) ----------------------------------------


@asynccontextmanager
async def form_host(
    live: BrokerProcess, sid: str, mode: str, elicitation: Any, *extra: str, sub: str | None = None
) -> AsyncIterator[Client]:
    """``qbroker mcp`` under the SDK's own client, as a host that shows forms (``elicitation``)
    in the protocol era ``mode``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    agent = token(sid, "agent", sub=sub)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "qbroker.cli", "mcp", "--url", live.url, "--session", sid, "--token", agent, *extra],
        env=env,
        cwd=str(REPO_ROOT),
    )
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=elicitation) as client:
            yield client


FORM_ARGUMENTS = {"action": "start", "questions": [single("target", ("staging", "production")), multi("checks")]}


@pytest.mark.floors  # at the dependency floors too: the SDK's elicitation, through the stdio server
@pytest.mark.parametrize("mode", MODES)
async def test_a_host_that_shows_forms_gets_the_questionnaire_in_its_form(
    live: BrokerProcess, sid: str, mode: str
) -> None:
    forms: list[Any] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params)
        return types.ElicitResult(action="accept", content={"target": "production", "checks": ["e2e"]})

    async with form_host(live, sid, mode, answer, sub="desk") as host:
        result = await asyncio.wait_for(host.call_tool("questionnaire", FORM_ARGUMENTS), QUICK)
    assert len(forms) == 1 and "title" not in forms[0].requested_schema
    text = text_of(result)
    assert text.startswith("QUESTIONNAIRE_COMPLETED") and "target: optionIds=[production]" in text
    assert details_of(result)["answers"][1] == {"questionId": "checks", "selectedOptionIds": ["e2e"]}


@pytest.fixture(scope="module")
def waiting_broker() -> Iterator[BrokerProcess]:
    """A broker whose questionnaires wait long enough for a client to connect after a form."""
    with broker(client_wait=20) as process:
        yield process


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_form_leaves_it_to_a_client_that_connects_then(
    waiting_broker: BrokerProcess, sid: str, mode: str
) -> None:
    forms: list[Any] = []

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params)
        return types.ElicitResult(action="decline")

    async with form_host(waiting_broker, sid, mode, decline) as host:
        call = asyncio.create_task(host.call_tool("questionnaire", FORM_ARGUMENTS))
        await eventually(lambda: forms, "the form in the host")
        async with person(waiting_broker, sid) as someone:
            await someone.answer_all({"target": ["staging"], "checks": ["unit"]})
        result = await asyncio.wait_for(call, QUICK)
    assert len(forms) == 1 and "target: optionIds=[staging]" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_with_in_host_off_the_host_is_never_asked(waiting_broker: BrokerProcess, sid: str, mode: str) -> None:
    forms: list[Any] = []

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params)
        return types.ElicitResult(action="accept", content={"target": "production", "checks": ["e2e"]})

    async with form_host(waiting_broker, sid, mode, accept, "--in-host", "off") as host:
        call = asyncio.create_task(host.call_tool("questionnaire", FORM_ARGUMENTS))
        async with person(waiting_broker, sid) as someone:
            await someone.answer_all({"target": ["staging"], "checks": ["unit"]})
        result = await asyncio.wait_for(call, QUICK)
    assert not forms and "target: optionIds=[staging]" in text_of(result)
