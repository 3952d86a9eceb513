"""End-to-end: the real Claude Code (``claude -p``, pinned by tests/tools/claude-code's
lockfile), offline against a scripted Anthropic Messages API, with the broker's ``/mcp`` as
its MCP server (``--mcp-config``, the agent token as a header) and a scripted person on the
websocket.

The model's turns are scripted but read what Claude Code sends: the resume copies the id
and revision out of the tool result the model received, as a real model would. What the
model receives is asserted on the model's side of the wire (``tool_results()``): the
result's text (the marker line, ``optionIds=[...]``), never the ``details`` JSON.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.claude_code import TOOL, ClaudeHome, ClaudeRun, claude_binary
from tests.helpers.clients import Frame, ScriptedClient, person
from tests.helpers.fake_model import Message, ScriptedAnthropic, ToolCall, Turn, text_of
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.protocol import resume_for
from tests.helpers.samples import multi, new_sid, single, start_body

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
