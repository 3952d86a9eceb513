"""End-to-end: the Codex CLI (the real ``codex`` from npm, at tests/tools/codex's lockfile)
with the broker as its MCP server (the broker's endpoint, or ``qbroker mcp``), a scripted
model behind a Responses API, and live brokers.

The model's turns are scripted, but read what Codex sends: the resume copies the id and
revision out of the tool result the model received, as a real model would. What the model
receives is asserted on the model's side of the wire (``ScriptedResponses.tool_results``).

- ``codex exec``: a person on the websocket answers (after a clarification, resumed), and the
  model reads the result's text, the marker line and ``optionIds=[...]``, not JSON. And
  ``codex exec`` answers every MCP form ``decline`` by itself: the questionnaire goes on, and
  a qbroker client that connects then answers it.
- ``codex app-server`` (JSON-RPC over stdio, a driver standing in for its UI), against two
  brokers on one Redis behind deploy/nginx.conf: a person on the websocket answers, in both
  MCP protocol eras Codex speaks; the driver answers the broker's form in the host
  (``mcpServer/elicitation/request``), the repeated call served by the other broker; a
  dismissed form leaves the questionnaire to a client; a client that answers first wins
  over the open form.

The form tests run Codex in both MCP eras it speaks (2025-06-18, its default: the form on
the call's own stream; ``--enable mcp_2026_07_28``: the multi round-trip pattern), against
the broker's endpoint and through ``qbroker mcp``, which Codex may run instead.

docs/agents.md's Codex section shows the configuration these tests use (held equal here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.mcp.server import tool_json
from tests.helpers.clients import person
from tests.helpers.codex import (
    NAMESPACE,
    AppServer,
    CodexHome,
    McpServer,
    codex_modules,
    config_toml,
    over_http,
    over_stdio,
    tool_output,
)
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
MCP_2026 = ("--enable", "mcp_2026_07_28")
ERAS = [pytest.param((), id="2025-06-18"), pytest.param(MCP_2026, id="2026-07-28")]


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
    """The Codex section's config.toml is the tests': the ``[mcp_servers.qbroker]`` table
    (the endpoint with the token as a header or from a variable; ``qbroker mcp``, there as the
    installed command rather than this tree's) and the ``[features]`` table that turns on
    MCP 2026-07-28."""
    doc = DOCS_AGENTS.read_text(encoding="utf-8")
    section = doc[doc.index("### Codex") :]
    section = section[: section.index("\n### ", 1)]
    shown = [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", section, re.S)]
    assert shown, "no toml block in docs/agents.md's Codex section"

    def config(server: McpServer, features: tuple[str, ...] = ()) -> dict[str, Any]:
        return tomllib.loads(config_toml("http://model", server, features))

    def table(server: McpServer) -> dict[str, Any]:
        return {"mcp_servers": config(server)["mcp_servers"]}

    url = "https://qbroker.example.com"
    stdio = table(over_stdio(url, "demo", "t"))
    stdio["mcp_servers"]["qbroker"] |= {"command": "qbroker", "args": ["mcp"]}
    del stdio["mcp_servers"]["qbroker"]["env"]["PYTHONPATH"]
    for tested in (
        table(over_http(f"{url}/mcp", "<agent token>")),
        table(over_http(f"{url}/mcp", "<agent token>", token_from="env")),
        stdio,
        {"features": config(over_http(url, "t"), ("mcp_2026_07_28",))["features"]},
    ):
        assert tested in shown, f"docs/agents.md's Codex section does not show {tested}"


# --- codex exec -----------------------------------------------------------------------


async def test_codex_exec_the_model_reads_the_result_text_through_a_clarification(
    modules: Path, live_broker: BrokerProcess, tmp_path: Path
) -> None:
    sid = new_sid("codex")
    with ScriptedResponses(release_manager) as model:
        home = CodexHome(
            tmp_path, model, over_http(f"{live_broker.url}/mcp", token(sid, "agent"), token_from="env"), modules
        )
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


@pytest.mark.parametrize(
    "features", [pytest.param((), id="2025-06-18"), pytest.param(("mcp_2026_07_28",), id="2026-07-28")]
)
async def test_codex_exec_declines_every_form_and_a_client_that_connects_then_answers(
    features: tuple[str, ...], modules: Path, live_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Nobody has the session open, so the broker asks in the host (in either era: MCP
    2026-07-28 turned on in Codex's config.toml, or not); ``codex exec`` has nobody to show a
    form to and declines it at once. The questionnaire goes on: a client that connects later
    gets it and answers, and the model reads that client's answers."""
    sid = new_sid("codex")
    with ScriptedResponses(release_manager) as model:
        server = over_http(f"{live_broker.url}/mcp", token(sid, "agent"))
        home = CodexHome(tmp_path, model, server, modules, features=features)
        run = asyncio.create_task(home.exec(PROMPT))

        def declined() -> int:
            return live_broker.logged("the host withdrew", session=sid, action="decline")

        await eventually(declined, "Codex's decline of the form", timeout=60)
        assert live_broker.logged("asked in the host", session=sid) == 1
        # (the era it spoke: an older host opens an MCP session)
        assert bool(live_broker.logged("mcp session opened", session=sid)) == (features == ())
        async with person(live_broker.ws_url, sid) as someone:
            closed = await someone.answer_all({"deploy_target": ["staging"], "checks": ["lint"]}, timeout=30)
        done = await run
    assert done.returncode == 0, done.summary()
    assert closed["status"] == "completed"
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert received[0].splitlines()[2:4] == ["deploy_target: optionIds=[staging]", "checks: optionIds=[lint]"]


# --- codex app-server -----------------------------------------------------------------


ELICITATION = "mcpServer/elicitation/request"  # the app server asks its driver to show an MCP form


async def driven(
    home: CodexHome,
    app_servers: list[AppServer],
    form: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None,
    era: tuple[str, ...] = MCP_2026,
) -> tuple[AppServer, str]:
    """``codex app-server`` speaking ``era``, ``form`` answering its forms (none: a form is
    answered with an error); a thread whose MCP server is up."""
    server = await home.app_server(*era)
    app_servers.append(server)
    if form is not None:
        server.handlers[ELICITATION] = form
    thread = await server.start_thread()
    await server.mcp_ready(thread)
    return server, thread


def reaching(way: str, lb: str, sid: str) -> McpServer:
    """The broker behind nginx at ``lb``: its endpoint, or ``qbroker mcp`` bridging to it."""
    if way == "http":
        return over_http(f"http://{lb}/mcp", token(sid, "agent"))
    return over_stdio(f"http://{lb}", sid, token(sid, "agent"))


# Every way Codex reaches the brokers, in each era. On the endpoint, an older host's form goes
# on the call's own stream, which the asking broker holds to the end (it is not killed then);
# a 2026-07-28 host repeats the call, and `qbroker mcp` repeats it for Codex, on any broker.
FORM_WAYS = [
    pytest.param("http", (), False, id="endpoint-2025-06-18"),
    pytest.param("http", MCP_2026, True, id="endpoint-2026-07-28"),
    pytest.param("stdio", (), True, id="qbroker-mcp-2025-06-18"),
    pytest.param("stdio", MCP_2026, True, id="qbroker-mcp-2026-07-28"),
]


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
        home = CodexHome(tmp_path, model, over_http(f"http://{lb}/mcp", token(sid, "agent")), modules)
        server, thread = await driven(home, app_servers, None, era)
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


def option_ids(schema: dict[str, Any]) -> list[str]:
    """The option ids of a form property: a single's ``oneOf`` or a multi's ``items.anyOf``."""
    choices = schema.get("oneOf") or schema.get("items", {}).get("anyOf", [])
    return [str(choice["const"]) for choice in choices]


def free_text_property(form: dict[str, Any], label: str) -> str:
    """The key of the optional string property whose title names ``label`` (the Other answer)."""
    keys = [
        key
        for key, schema in form["properties"].items()
        if schema.get("type") == "string" and "oneOf" not in schema and label in str(schema.get("title", ""))
    ]
    assert len(keys) == 1, (label, form["properties"])
    return str(keys[0])


@pytest.mark.redis
@pytest.mark.parametrize(("way", "era", "kill_the_asker"), FORM_WAYS)
async def test_codex_app_server_a_driver_answers_the_form_through_two_brokers(
    way: str,
    era: tuple[str, ...],
    kill_the_asker: bool,
    modules: Path,
    tmp_path: Path,
    two_brokers: tuple[str, list[BrokerProcess]],
    app_servers: list[AppServer],
) -> None:
    """Nobody has the session open: the broker asks in the host and Codex hands the form to
    its driver, which answers it (the exact ids and an Other text). Where the call is repeated
    with the answer, the broker that asked is killed while the form is open, and the repeated
    call (Codex's, or ``qbroker mcp``'s for it) is served through nginx by the other broker."""
    lb, brokers = two_brokers
    sid = new_sid("codex")
    forms: list[dict[str, Any]] = []
    survivors = list(brokers)

    async def person_in_codex(params: dict[str, Any]) -> dict[str, Any]:
        forms.append(params)
        if kill_the_asker:
            asking = next(b for b in brokers if b.logged("asked in the host", session=sid))
            survivors.remove(asking)
            await asyncio.to_thread(asking.kill)
        other = free_text_property(params["requestedSchema"], "Pre-flight checks")
        content = {"deploy_target": "production", "checks": ["unit", "e2e"], other: "Manual smoke test"}
        return {"action": "accept", "content": content}

    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, reaching(way, lb, sid), modules)
        server, thread = await driven(home, app_servers, person_in_codex, era)
        turn = await server.run_turn(thread, PROMPT)
    assert turn["status"] == "completed", (server.summary(), model.errors)
    assert model.errors == []

    # One form, in the host, for the questionnaire's questions (docs/protocol.md's shape).
    assert len(forms) == 1, forms
    form = forms[0]
    assert (form["serverName"], form["mode"]) == ("qbroker", "form")
    schema = form["requestedSchema"]
    assert "title" not in schema  # Codex refuses a form with one
    target, checks = schema["properties"]["deploy_target"], schema["properties"]["checks"]
    assert (target["title"], target["description"]) == ("Target", START["questions"][0]["prompt"])
    assert option_ids(target) == ["staging", "production"]
    assert (checks["type"], checks["minItems"], checks["maxItems"]) == ("array", 1, 3)
    assert option_ids(checks) == ["unit", "e2e", "lint"]

    # What the model read: the completed marker, the exact ids and the Other text.
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert re.match(r"QUESTIONNAIRE_COMPLETED questionnaireId=\S+ revision=0\n", received[0]), received[0]
    assert received[0].splitlines()[2:4] == [
        "deploy_target: optionIds=[production]",
        'checks: optionIds=[unit, e2e] other="Manual smoke test"',
    ]
    calls = server.completed("mcpToolCall")
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("qbroker", "questionnaire", "completed")]
    assert sum(b.logged("host form answered", session=sid) for b in survivors) == 1
    # The era Codex spoke to the endpoint: an older host opens an MCP session there.
    opened = sum(b.logged("mcp session opened", session=sid) for b in survivors)
    assert bool(opened) == (way == "http" and era == ()), opened


@pytest.mark.redis
@pytest.mark.parametrize("era", ERAS)
async def test_codex_app_server_a_dismissed_form_leaves_the_questionnaire_to_a_client(
    era: tuple[str, ...],
    modules: Path,
    tmp_path: Path,
    two_brokers: tuple[str, list[BrokerProcess]],
    app_servers: list[AppServer],
) -> None:
    """The driver dismisses the form (``cancel``): the host withdraws, the questionnaire goes
    on, and a qbroker client that connects then answers it."""
    lb, brokers = two_brokers
    sid = new_sid("codex")

    async def dismissed(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "cancel"}

    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, over_http(f"http://{lb}/mcp", token(sid, "agent")), modules)
        server, thread = await driven(home, app_servers, dismissed, era)
        turn = asyncio.create_task(server.run_turn(thread, PROMPT))

        def withdrew() -> int:
            return sum(b.logged("the host withdrew", session=sid, action="cancel") for b in brokers)

        await eventually(withdrew, "the host's withdrawal", timeout=60)
        async with person(brokers[0].ws_url, sid) as someone:
            closed = await someone.answer_all({"deploy_target": ["staging"], "checks": ["lint"]}, timeout=30)
        ended = await turn
    assert ended["status"] == "completed", server.summary()
    assert closed["status"] == "completed"
    assert [r["method"] for r in server.server_requests] == [ELICITATION]
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert received[0].splitlines()[2:4] == ["deploy_target: optionIds=[staging]", "checks: optionIds=[lint]"]


@pytest.mark.parametrize("era", ERAS)
async def test_codex_app_server_a_client_answers_first_while_the_form_is_open(
    era: tuple[str, ...], modules: Path, live_broker: BrokerProcess, tmp_path: Path, app_servers: list[AppServer]
) -> None:
    """The form is out and the person answers in a qbroker client instead: the model reads
    that client's answers. In 2025-06-18 the broker takes its form back and Codex tells its
    driver so (``serverRequest/resolved``); in 2026-07-28 nothing can take it back, the call
    waits for the form, and what the driver submits then changes nothing."""
    sid = new_sid("codex")
    shown, submit = asyncio.Event(), asyncio.Event()

    async def person_late(params: dict[str, Any]) -> dict[str, Any]:
        shown.set()
        await submit.wait()
        return {"action": "accept", "content": {"deploy_target": "production", "checks": ["unit"]}}

    with ScriptedResponses(release_manager) as model:
        home = CodexHome(tmp_path, model, over_http(f"{live_broker.url}/mcp", token(sid, "agent")), modules)
        server, thread = await driven(home, app_servers, person_late, era)
        turn = asyncio.create_task(server.run_turn(thread, PROMPT))
        await asyncio.wait_for(shown.wait(), 60)
        async with person(live_broker.ws_url, sid) as someone:
            closed = await someone.answer_all({"deploy_target": ["staging"], "checks": ["lint"]}, timeout=30)
        [form] = server.server_requests
        if era == ():
            await server.wait_for(
                "serverRequest/resolved", lambda p: p["requestId"] == form["id"], what="the form withdrawn"
            )
            ended = await asyncio.wait_for(turn, 60)  # the driver never submitted
            submit.set()
        else:
            assert not turn.done()  # the call waits for the form
            submit.set()
            ended = await asyncio.wait_for(turn, 60)
    assert ended["status"] == "completed", server.summary()
    assert closed["status"] == "completed"
    received = [tool_output(item) for item in model.tool_results()]
    assert len(received) == 1, received
    assert received[0].splitlines()[2:4] == ["deploy_target: optionIds=[staging]", "checks: optionIds=[lint]"]
    async with Agent(live_broker.url, sid) as agent:
        record = await agent.outcome(closed["questionnaireId"], wait=0)
    assert record.text == received[0]  # the form's late answer changed nothing
