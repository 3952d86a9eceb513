"""End-to-end: the Codex CLI (the real ``codex`` from npm, at tests/tools/codex's lockfile)
with the broker's MCP endpoint as its MCP server, a scripted model behind a Responses API,
and live brokers.

The model's turns are scripted, but read what Codex sends: the resume copies the id and
revision out of the tool result the model received, as a real model would. What the model
receives is asserted on the model's side of the wire (``ScriptedResponses.tool_results``).

- ``codex exec``: a person on the websocket answers (after a clarification, resumed), and the
  model reads the result's text, the marker line and ``optionIds=[...]``, not JSON. And
  ``codex exec`` answers every MCP form ``decline`` by itself: the questionnaire goes on, and
  a qbroker client that connects then answers it.
- ``codex app-server`` (JSON-RPC over stdio, a driver standing in for its UI), in both MCP
  protocol eras Codex speaks, against two brokers on one Redis behind deploy/nginx.conf: a
  person on the websocket answers; and the driver answers the broker's form in the host
  (``mcpServer/elicitation/request``).

docs/agents.md's Codex section shows the configuration these tests use (held equal here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.mcp.server import tool_json
from tests.helpers.clients import person
from tests.helpers.codex import NAMESPACE, AppServer, CodexHome, codex_modules, config_toml, tool_output
from tests.helpers.fake_model import Message, ScriptedResponses, ToolCall, Turn
from tests.helpers.nginx import nginx
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, redis_server, token
from tests.helpers.protocol import Agent, resume_for
from tests.helpers.samples import new_sid
from tests.helpers.waiting import eventually

DOCS_AGENTS = REPO_ROOT / "docs" / "agents.md"
PROMPT = "Ship the release: ask me where it goes and which checks must pass first."
START: dict[str, Any] = json.loads((REPO_ROOT / "examples" / "deploy.json").read_text())
ASKED = "Do the e2e tests run against production or staging?"
EXPLAINED = "The e2e suite runs against staging before every production deploy; it never touches production."
ERAS = [pytest.param((), id="2025-06-18"), pytest.param(("--enable", "mcp_2026_07_28"), id="2026-07-28")]


def release_manager(items: list[Message]) -> Turn:
    """The scripted model: start the questionnaire; on a clarification, explain and resume
    with the id and revision it was given; on anything else, wrap up."""
    last = items[-1]
    if last.get("type") == "message" and last.get("role") == "user":
        return Turn(text="I'll ask you both things at once.", tool_calls=(ToolCall("questionnaire", START, NAMESPACE),))
    if last.get("type") == "function_call_output":
        resume = resume_for(tool_output(last), EXPLAINED)
        if resume is not None:
            return Turn(text=EXPLAINED, tool_calls=(ToolCall("questionnaire", resume, NAMESPACE),))
    return Turn(text="Understood.")


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def modules() -> Path:
    return codex_modules()


@pytest.fixture(scope="module")
def live_broker() -> Iterator[BrokerProcess]:
    # A questionnaire nobody has open yet waits for a client (the decline test connects one late).
    with broker(client_wait=60) as process:
        yield process


@pytest.fixture
def two_brokers() -> Iterator[tuple[str, list[BrokerProcess]]]:
    """Two brokers on one redis-server behind deploy/nginx.conf: nginx's address, the brokers."""
    with redis_server() as redis, contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(redis.url, client_wait=60)) for _ in range(2)]
        yield stack.enter_context(nginx([b.port for b in brokers])), brokers


@pytest.fixture
async def app_servers() -> AsyncIterator[list[AppServer]]:
    """Every app server a test starts, ended in teardown."""
    started: list[AppServer] = []
    yield started
    for server in started:
        await server.close()


# --- the configuration ----------------------------------------------------------------


def test_docs_agents_md_shows_the_configuration_the_tests_use() -> None:
    """The Codex section's config.toml is the tests' ``[mcp_servers.qbroker]`` table."""
    doc = DOCS_AGENTS.read_text(encoding="utf-8")
    section = doc[doc.index("### Codex") :]
    section = section[: section.index("\n### ", 1)]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.S)
    assert blocks, "no toml block in docs/agents.md's Codex section"
    shown = [tomllib.loads(block)["mcp_servers"]["qbroker"] for block in blocks if "[mcp_servers.qbroker]" in block]
    url = "https://qbroker.example.com/mcp"
    for token_from in ("header", "env"):
        tested = tomllib.loads(config_toml("http://model", url, "<agent token>", token_from))["mcp_servers"]
        assert tested["qbroker"] in shown, f"docs/agents.md does not show {tested['qbroker']}"


# --- codex exec -----------------------------------------------------------------------


async def test_codex_exec_the_model_reads_the_result_text_through_a_clarification(
    modules: Path, live_broker: BrokerProcess, tmp_path: Path
) -> None:
    sid = new_sid("codex")
    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, f"{live_broker.url}/mcp", token(sid, "agent"), modules, token_from="env")
        async with person(live_broker.ws_url, sid) as someone:
            run = asyncio.create_task(home.exec(PROMPT))
            first = await someone.wait_for("question", timeout=60)  # codex's start-up included
            await someone.answer(first, ["production"])
            second = await someone.wait_for("question", where=lambda f: f["index"] == 1)
            await someone.clarify(second, ASKED, draft={"selectedOptionIds": ["unit"]})
            again = await someone.wait_for("question", where=lambda f: f["revision"] == 1, timeout=60)
            assert again["clarifications"][0]["response"] == EXPLAINED
            await someone.answer(again, ["e2e", "unit"], other="Manual smoke test")
            closed = await someone.wait_for("closed")
            assert closed["status"] == "completed"
        done = await run
    assert model.errors == []
    assert done.returncode == 0, done.summary()
    qid = closed["questionnaireId"]

    # The broker's one tool, offered under Codex's namespace for the server, as the broker defines it.
    offered = [t for t in model.requests[0]["tools"] if t.get("type") == "namespace" and t["name"] == NAMESPACE]
    assert [t["name"] for t in offered[0]["tools"]] == ["questionnaire"]
    defined, tool = tool_json(), offered[0]["tools"][0]
    assert tool["description"] == defined["description"]
    assert set(tool["parameters"]["properties"]) == set(defined["inputSchema"]["properties"])  # Codex trims keywords

    # What the model read: the broker's text, unchanged; never the JSON details.
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 2, received
    assert received[0].startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1\n"), received[0]
    assert f'"{ASKED}"' in received[0]
    async with Agent(live_broker.url, sid) as agent:
        final = await agent.outcome(qid, wait=0)
    assert received[1] == final.text
    assert received[1].splitlines()[:4] == [
        f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1",
        "The user answered all 2 question(s). Answers, in question order:",
        "deploy_target: optionIds=[production]",
        'checks: optionIds=[unit, e2e] other="Manual smoke test"',
    ]
    calls = done.items("mcp_tool_call")
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("qbroker", "questionnaire", "completed")] * 2
    assert calls[1]["arguments"] == {
        "action": "resume",
        "questionnaireId": qid,
        "revision": 1,
        "clarificationResponse": EXPLAINED,
    }


async def test_codex_exec_declines_every_form_and_a_client_that_connects_then_answers(
    modules: Path, live_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Nobody has the session open, so the broker asks in the host; ``codex exec`` has nobody
    to show a form to and declines it at once. The questionnaire goes on: a client that
    connects later gets it and answers, and the model reads that client's answers."""
    sid = new_sid("codex")
    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, f"{live_broker.url}/mcp", token(sid, "agent"), modules)
        run = asyncio.create_task(home.exec(PROMPT))

        await eventually(lambda: live_broker.logged("questionnaire started", session=sid), "the start", timeout=60)
        async with person(live_broker.ws_url, sid) as someone:
            closed = await someone.answer_all({"deploy_target": ["staging"], "checks": ["lint"]}, timeout=30)
        done = await run
    assert done.returncode == 0, done.summary()
    assert closed["status"] == "completed"
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert received[0].splitlines()[2:4] == ["deploy_target: optionIds=[staging]", "checks: optionIds=[lint]"]


# --- codex app-server -----------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.parametrize("era", ERAS)
async def test_codex_app_server_a_client_answers_through_two_brokers(
    era: tuple[str, ...],
    modules: Path,
    tmp_path: Path,
    two_brokers: tuple[str, list[BrokerProcess]],
    app_servers: list[AppServer],
) -> None:
    """The person has the session open on one broker; nginx spreads Codex's MCP requests
    over both. With a client open, the driver is never handed a form."""
    lb, brokers = two_brokers
    sid = new_sid("codex")
    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, f"http://{lb}/mcp", token(sid, "agent"), modules)
        server = await home.app_server(*era)
        app_servers.append(server)
        thread = await server.start_thread()
        async with person(brokers[1].ws_url, sid) as someone:
            turn = asyncio.create_task(server.run_turn(thread, PROMPT))
            closed = await someone.answer_all({"deploy_target": ["production"], "checks": ["unit", "e2e"]}, timeout=60)
            ended = await turn
    assert ended["status"] == "completed", server.summary()
    assert model.errors == [] and server.server_requests == []
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert (
        received[0].splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={closed['questionnaireId']} revision=0"
    )
    assert received[0].splitlines()[2:4] == ["deploy_target: optionIds=[production]", "checks: optionIds=[unit, e2e]"]
    calls = server.completed("mcpToolCall")
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("qbroker", "questionnaire", "completed")]
