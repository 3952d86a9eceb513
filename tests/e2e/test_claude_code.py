"""End-to-end: the real Claude Code (``claude -p``, pinned by tests/tools/claude-code's
lockfile), offline against a scripted Anthropic Messages API, with the broker's ``/mcp`` as
its MCP server (``--mcp-config``, the agent token as a header), and the person on the
websocket (a scripted qbroker client) or in Claude Code's own form (MCP elicitation, answered
in print mode by an ``Elicitation`` command hook: ``tests/helpers/elicitation_hook.py``).

The model's turns are scripted but read what Claude Code sends: the resume copies the id
and revision out of the tool result the model received, as a real model would. What the
model receives is asserted on the model's side of the wire (``tool_results()``): the
result's text (the marker line, ``optionIds=[...]``), never the ``details`` JSON.

With ``QBROKER_WRITE_TRANSCRIPTS=1`` the run with a clarification in the host's form
rewrites the transcript in docs/agents.md ("Answering in the host").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.claude_code import TOOL, ClaudeHome, ClaudeRun, claude_binary
from tests.helpers.clients import Frame, ScriptedClient, person
from tests.helpers.docs import has_one_place, replace_block
from tests.helpers.fake_model import Message, ScriptedAnthropic, ToolCall, Turn, text_of
from tests.helpers.nginx import nginx, nginx_binary
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, need, redis_server, token
from tests.helpers.protocol import resume_for
from tests.helpers.samples import multi, new_sid, single, start_body
from tests.helpers.tamper_proxy import TamperingProxy
from tests.helpers.waiting import eventually

DOCS_AGENTS = REPO_ROOT / "docs" / "agents.md"
TRANSCRIPT_START, TRANSCRIPT_END = "<!-- claude-host-transcript:start -->", "<!-- claude-host-transcript:end -->"
PROMPT = "Ship the release: ask me where it goes and which checks must pass first."
START = start_body(single("target", ("staging", "production")), multi("checks", ("unit", "e2e", "lint")))
EXPLAINED = "The e2e suite runs against staging before every production deploy."
QUICK = 60.0


def tool_result_in(message: Message) -> dict[str, Any] | None:
    """The ``tool_result`` block of a user message, if it carries one."""
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return block
    return None


def release_manager(messages: list[Message]) -> Turn:
    """Start the questionnaire; on a clarification, explain and resume with the id and
    revision the result gave; on anything else, wrap up."""
    result = tool_result_in(messages[-1])
    if result is None:
        return Turn(text="I'll ask you both things at once.", tool_calls=(ToolCall(TOOL, START),))
    resume = resume_for(text_of(result), EXPLAINED)
    if resume is not None:
        return Turn(text=EXPLAINED, tool_calls=(ToolCall(TOOL, resume),))
    return Turn(text="Done.")


def assert_text_not_json(result: dict[str, Any]) -> str:
    """The tool result's text as the model got it; it is the text, not the details JSON."""
    assert result.get("is_error") in (None, False), result
    text = text_of(result)
    assert text.startswith("QUESTIONNAIRE_"), text
    with pytest.raises(ValueError):
        json.loads(text)
    assert '"status"' not in text and '"currentQuestionIndex"' not in text  # nothing of the details
    return text


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def binary() -> Path:
    return claude_binary()


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    with broker(client_wait=30) as process:
        yield process


@pytest.fixture
def model() -> Iterator[ScriptedAnthropic]:
    with ScriptedAnthropic(release_manager) as scripted:
        yield scripted


@pytest.fixture
def home(binary: Path, model: ScriptedAnthropic) -> Iterator[ClaudeHome]:
    with tempfile.TemporaryDirectory(prefix="qbroker-claude-") as folder:
        yield ClaudeHome(Path(folder), model, binary)


# --- tests ----------------------------------------------------------------------------


@asynccontextmanager
async def claude_asking(live: BrokerProcess, home: ClaudeHome) -> AsyncIterator[tuple[ScriptedClient, Asking]]:
    """Claude Code running on ``PROMPT`` against ``live``'s /mcp, and a person on the
    session's websocket; yields once the person has the first question."""
    sid = new_sid("cc")
    async with person(live.ws_url, sid) as p:
        run = asyncio.create_task(home.run(PROMPT, f"{live.url}/mcp", token(sid, "agent")))
        try:
            yield p, Asking(run, await p.wait_for("question", timeout=QUICK))
        finally:
            done = await run
            assert done.returncode == 0 and done.output["is_error"] is False, done.summary()
            assert not home.model.errors


@dataclass
class Asking:
    run: asyncio.Task[ClaudeRun]
    question: Frame


async def test_the_model_reads_the_result_text_with_the_answers_as_ids(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    async with claude_asking(live, home) as (p, asking):
        question = asking.question
        await p.answer_all({"target": ["production"], "checks": ["unit", "e2e"]}, first=question)
    # ENABLE_TOOL_SEARCH=false: the tool is in the model's own list, under Claude Code's name.
    assert TOOL in [t["name"] for t in model.requests[0]["tools"]]
    [result] = model.tool_results()
    text = assert_text_not_json(result)
    qid = question["questionnaireId"]
    assert text.splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert "target: optionIds=[production]" in text and "checks: optionIds=[unit, e2e]" in text


async def test_after_a_clarification_the_model_resumes_with_the_id_and_revision_the_text_gave(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    async with claude_asking(live, home) as (p, asking):
        qid = asking.question["questionnaireId"]
        await p.clarify(asking.question, "Do the e2e tests touch production?")
        again = await p.wait_for("question", where=lambda f: bool(f.get("clarifications")), timeout=QUICK)
        assert again["clarifications"][0]["response"] == EXPLAINED
        await p.answer_all({"target": ["staging"], "checks": ["lint"]}, first=again)
    asked, completed = model.tool_results()
    asked_text = assert_text_not_json(asked)
    assert asked_text.splitlines()[0] == f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1"
    assert '"Do the e2e tests touch production?"' in asked_text
    # The resume the model sent is exactly what the text told it.
    resumes = [c["input"] for r in model.requests for m in r["messages"] for c in _tool_uses(m)]
    assert {"action": "resume", "questionnaireId": qid, "revision": 1, "clarificationResponse": EXPLAINED} in resumes
    text = assert_text_not_json(completed)
    assert text.splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1"
    assert "target: optionIds=[staging]" in text and "checks: optionIds=[lint]" in text


def _tool_uses(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in (content if isinstance(content, list) else []) if b.get("type") == "tool_use"]


# --- answered in the host's own form (MCP 2026-07-28's multi round-trip pattern) -------------


def form_of(home: ClaudeHome, index: int = 0) -> dict[str, Any]:
    forms = home.forms()
    assert len(forms) > index, forms
    form: dict[str, Any] = forms[index]
    return form


async def events(live: BrokerProcess, sid: str, qid: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{live.url}/v1/sessions/{sid}/questionnaires/{qid}/events",
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


def qid_of(text: str) -> str:
    return text.split("questionnaireId=", 1)[1].split()[0]


def finished(run: ClaudeRun, home: ClaudeHome) -> None:
    assert run.returncode == 0 and run.output["is_error"] is False, run.summary()
    assert not home.model.errors


# Claude Code speaks MCP 2026-07-28 by default (the multi round-trip pattern); with
# MCP_PROTOCOL_NEGOTIATION=legacy, 2025-11-25 (a session, elicitation/create on the call's stream).
ERAS = {"2026-07-28": {}, "legacy": {"MCP_PROTOCOL_NEGOTIATION": "legacy"}}


@pytest.mark.parametrize("era", list(ERAS))
async def test_answered_in_the_host_the_model_reads_the_ids_and_the_other_text(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome, era: str
) -> None:
    sid = new_sid("cc")
    home.answer_forms(
        [{"action": "accept", "content": {"target": "production", "checks": ["e2e", "unit"], "checks__other": "smoke"}}]
    )
    run = await home.run(PROMPT, f"{live.url}/mcp", token(sid, "agent", sub="alice"), env=home.env(**ERAS[era]))
    finished(run, home)
    assert bool(live.logged("mcp session opened", session=sid)) == (era == "legacy")  # (the era it spoke)
    [result] = model.tool_results()
    text = assert_text_not_json(result)
    qid = qid_of(text)
    assert text.splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert "target: optionIds=[production]" in text and 'checks: optionIds=[unit, e2e] other="smoke"' in text
    form = form_of(home)
    assert form["mcp_server_name"] == "qbroker" and qid in form["message"]
    schema = form["requested_schema"]
    assert "title" not in schema and "required" not in schema
    assert list(schema["properties"]) == [
        "target",
        "target__other",
        "checks",
        "checks__other",
        "qbroker__ask_the_agent",
        "qbroker__cancel",
    ]
    # The record says who answered, and where: the token's holder, in the host.
    answered = [e for e in await events(live, sid, qid) if e["type"] == "answered"]
    host = {"sub": "alice", "role": "client", "client": {"kind": "host", "name": answered[0]["by"]["client"]["name"]}}
    assert [e["by"] for e in answered] == [host, host] and host["client"]["name"]  # type: ignore[index]


async def test_the_person_s_cancel_in_the_form_cancels_it(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    sid = new_sid("cc")
    home.answer_forms([{"action": "accept", "content": {"target": "staging", "qbroker__cancel": True}}])
    finished(await home.run(PROMPT, f"{live.url}/mcp", token(sid, "agent")), home)
    [result] = model.tool_results()
    text = assert_text_not_json(result)
    assert text.startswith("QUESTIONNAIRE_CANCELLED ")
    recorded = await events(live, sid, qid_of(text))
    assert [e["type"] for e in recorded] == ["started", "cancelled"]  # and no answer stored


@pytest.mark.parametrize("reply", ["decline", "dismissed"])
async def test_a_declined_or_dismissed_form_leaves_it_to_a_client_that_connects_then(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome, reply: str
) -> None:
    """Headless hosts answer forms by themselves (print mode without a hook: cancel), so
    neither answer ends the questionnaire: a qbroker client that connects then answers it."""
    sid = new_sid("cc")
    if reply == "decline":
        home.answer_forms([{"action": "decline"}])
    run = asyncio.create_task(home.run(PROMPT, f"{live.url}/mcp", token(sid, "agent")))
    await eventually(lambda: live.logged("the host withdrew", session=sid), "the host's withdrawal", timeout=QUICK)
    async with person(live.ws_url, sid) as p:
        question = await p.wait_for("question", timeout=QUICK)
        await p.answer_all({"target": ["staging"], "checks": ["lint"]}, first=question)
        done = await run
    finished(done, home)
    [result] = model.tool_results()
    text = assert_text_not_json(result)
    assert text.startswith("QUESTIONNAIRE_COMPLETED ")
    assert "target: optionIds=[staging]" in text and "checks: optionIds=[lint]" in text


async def test_a_clarification_in_the_form_then_the_resume_asks_the_rest_keeping_the_first_answers(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    sid = new_sid("cc")
    asked = "Do the e2e tests touch production?"
    home.answer_forms(
        [
            {"action": "accept", "content": {"target": "production", "qbroker__ask_the_agent": asked}},
            {"action": "accept", "content": {"checks": ["e2e"]}},
        ]
    )
    finished(await home.run(PROMPT, f"{live.url}/mcp", token(sid, "agent")), home)
    paused, completed = model.tool_results()
    paused_text = assert_text_not_json(paused)
    qid = qid_of(paused_text)
    assert paused_text.splitlines()[0] == f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1"
    assert f'"{asked}"' in paused_text
    resumes = [c["input"] for r in model.requests for m in r["messages"] for c in _tool_uses(m)]
    assert {"action": "resume", "questionnaireId": qid, "revision": 1, "clarificationResponse": EXPLAINED} in resumes
    # The second form asks only what is still open; the first form's answer stands.
    second = form_of(home, 1)["requested_schema"]["properties"]
    assert "target" not in second and "checks" in second
    text = assert_text_not_json(completed)
    assert text.splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1"
    assert "target: optionIds=[production]" in text and "checks: optionIds=[e2e]" in text
    transcript = render_transcript(home, model, f"{live.url}/mcp")
    assert f"questionnaireId={qid}" in transcript
    if os.environ.get("QBROKER_WRITE_TRANSCRIPTS") == "1":
        replace_block(DOCS_AGENTS, TRANSCRIPT_START, TRANSCRIPT_END, transcript)


def render_transcript(home: ClaudeHome, model: ScriptedAnthropic, url: str) -> str:
    """The run as a reader follows it: the command, each tool call the model made, each form
    the host showed and what the person filled in, each result the model read."""
    config = home.mcp_config(url, "$QBROKER_TOKEN")
    lines = [f"$ claude -p {json.dumps(PROMPT)} --mcp-config '{config}' --allowedTools {TOOL}"]
    forms, replies = home.forms(), json.loads((home.hook_folder / "replies.json").read_text())
    uses = [c for m in model.requests[-1]["messages"] for c in _tool_uses(m)]
    results = model.tool_results()
    for index, use in enumerate(uses):
        lines += [f"# the model calls {use['name']} with:", json.dumps(use["input"])]
        if index < len(forms):
            form = forms[index]
            lines += ["# Claude Code shows the form (in print mode, to its Elicitation hook):", form["message"]]
            for key, prop in form["requested_schema"]["properties"].items():
                single_choice = [c["const"] for c in prop.get("oneOf", [])]
                many = [c["const"] for c in prop.get("items", {}).get("anyOf", [])]
                shown = f" one of {single_choice}" if single_choice else f" any of {many}" if many else ""
                lines.append(f"  {key} ({prop['type']}{shown}): {prop['title']}")
            lines += [f"# the person submits it ({replies[index]['action']}):", json.dumps(replies[index]["content"])]
        if index < len(results):
            lines += ["# the model reads:", text_of(results[index])]
    return "\n".join(lines) + "\n"


def test_docs_agents_md_has_a_place_for_the_host_transcript() -> None:
    assert has_one_place(DOCS_AGENTS, TRANSCRIPT_START, TRANSCRIPT_END)


async def test_in_race_mode_a_client_s_earlier_answer_wins_and_the_form_s_later_one_changes_nothing(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    sid = new_sid("cc")
    late = {"target": "staging", "checks": ["lint"]}
    home.answer_forms([{"action": "accept", "content": late, "waitFor": "go"}])
    async with person(live.ws_url, sid) as p:
        run = asyncio.create_task(home.run(PROMPT, f"{live.url}/mcp?inHost=race", token(sid, "agent")))
        question = await p.wait_for("question", timeout=QUICK)
        await eventually(lambda: home.forms(), "the form in the host", timeout=QUICK)  # asked there too
        closed = await p.answer_all({"target": ["production"], "checks": ["unit"]}, first=question)
        assert closed["type"] == "closed"
        home.go("go")  # the person submits the form only now
        done = await run
    finished(done, home)
    [result] = model.tool_results()
    text = assert_text_not_json(result)
    assert "target: optionIds=[production]" in text and "checks: optionIds=[unit]" in text
    recorded = await events(live, sid, question["questionnaireId"])
    assert all(e["by"]["client"]["kind"] != "host" for e in recorded if e["type"] == "answered")


async def test_a_request_state_altered_by_one_byte_is_refused_and_nothing_is_stored(
    live: BrokerProcess, model: ScriptedAnthropic, home: ClaudeHome
) -> None:
    sid = new_sid("cc")
    home.answer_forms([{"action": "accept", "content": {"target": "production", "checks": ["unit"]}}])
    with TamperingProxy(live.port) as proxy:
        finished(await home.run(PROMPT, f"{proxy.origin}/mcp", token(sid, "agent")), home)
    assert len(proxy.altered) == 1
    [result] = model.tool_results()
    text = text_of(result)
    assert result.get("is_error") is True, result
    assert "requestState" in text and "(error code: invalid_request_state)" in text
    assert live.logged("requestState refused", session=sid)
    # Nothing of the form was stored: the questionnaire still waits at its first question.
    async with person(live.ws_url, sid) as p:
        question = await p.wait_for("question", timeout=QUICK)
        assert question["index"] == 0


@pytest.mark.redis
def test_behind_nginx_the_repeated_call_is_served_by_the_other_broker(binary: Path) -> None:
    """Two brokers on Redis behind deploy/nginx.conf: the broker that put the questionnaire
    into the form is gone when the person submits it; the host's repeated call reaches the
    other broker, which takes the broker-signed requestState and the answers."""
    need(nginx_binary() is not None, "nginx is not installed (apt-get install nginx-light)")
    with redis_server() as redis, contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(redis.url, client_wait=30)) for _ in range(2)]
        lb = stack.enter_context(nginx([b.port for b in brokers]))
        model = stack.enter_context(ScriptedAnthropic(release_manager))
        home = ClaudeHome(
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qbroker-claude-"))), model, binary
        )
        asyncio.run(_through_nginx(lb, brokers, home))


async def _through_nginx(lb: str, brokers: list[BrokerProcess], home: ClaudeHome) -> None:
    sid = new_sid("cc-lb")
    home.answer_forms([{"action": "accept", "content": {"target": "production", "checks": ["unit"]}, "waitFor": "go"}])
    run = asyncio.create_task(home.run(PROMPT, f"http://{lb}/mcp", token(sid, "agent")))
    asking = await eventually(
        lambda: next((b for b in brokers if b.logged("asked in the host", session=sid)), None),
        "the form",
        timeout=QUICK,
    )
    # The broker logs the form before its reply reaches the host: kill it only once the host
    # shows the form, or the kill cuts that reply (nginx repeats no POST it has sent).
    await eventually(lambda: home.forms(), "the form in the host", timeout=QUICK)
    survivor = next(b for b in brokers if b is not asking)
    asking.kill()
    home.go("go")
    done = await run
    finished(done, home)
    [result] = home.model.tool_results()
    text = assert_text_not_json(result)
    assert text.startswith("QUESTIONNAIRE_COMPLETED ") and "target: optionIds=[production]" in text
    assert survivor.logged("host form answered", session=sid) == 1
