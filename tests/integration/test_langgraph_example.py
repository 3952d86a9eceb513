"""docs/agents.md's LangGraph example, run as written: its code block is executed, and the
graph it builds is driven by a scripted chat model against a live broker, with a scripted
person on the websocket. No model is needed for the graph itself.

The chat model reads what the graph hands it, as a real one would: it resumes with the id
and revision of the clarification it received.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from tests.helpers.clients import person
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, token
from tests.helpers.protocol import resume_for
from tests.helpers.samples import multi, new_sid, single

EXAMPLE_HEADING = "### LangGraph"
QUESTIONS = [single("deploy_target", ("staging", "production"), allowOther=False), multi("checks", minSelections=1)]
EXPLAINED = "The e2e suite runs against staging."

# At the dependency floors too: docs/agents.md says the example runs on langgraph's and
# langchain-core's oldest releases.
pytestmark = pytest.mark.floors


def example_code() -> str:
    """The first python block after the LangGraph heading in docs/agents.md."""
    doc = (REPO_ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    section = doc[doc.index(EXAMPLE_HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block under the LangGraph heading"
    return match.group(1)


class ScriptedChatModel(BaseChatModel):
    """Calls questionnaire with ``first``; on a clarification, resumes with what it was
    told; on anything else, says it is done."""

    first: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        assert [getattr(t, "name", None) for t in tools] == ["questionnaire"]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        last = messages[-1]
        reply = AIMessage(content="Done.")
        if not isinstance(last, ToolMessage):
            reply = AIMessage(content="", tool_calls=[{"name": "questionnaire", "args": self.first, "id": "call-1"}])
        else:
            resume = resume_for(str(last.content), EXPLAINED)
            if resume is not None:
                reply = AIMessage(
                    content=EXPLAINED, tool_calls=[{"name": "questionnaire", "args": resume, "id": "call-2"}]
                )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.fixture(scope="module")
def live_broker() -> Iterator[BrokerProcess]:
    with broker() as process:
        yield process


@pytest.fixture
async def example(
    live_broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[dict[str, Any], str]]:
    """The example's namespace (``tool``, ``build_graph``, ``qb``), configured as its
    comment says, for a fresh session."""
    sid = new_sid("lg")
    monkeypatch.setenv("QBROKER_URL", live_broker.url)
    monkeypatch.setenv("QBROKER_SESSION", sid)
    monkeypatch.setenv("QBROKER_TOKEN", token(sid, "agent"))
    namespace: dict[str, Any] = {"__name__": "langgraph_example"}
    exec(compile(example_code(), "docs/agents.md (LangGraph)", "exec"), namespace)
    yield namespace, sid
    await namespace["qb"].aclose()


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_the_example_graph_asks_resumes_and_reads_the_answers(
    example: tuple[dict[str, Any], str], live_broker: BrokerProcess
) -> None:
    namespace, sid = example
    graph = namespace["build_graph"](ScriptedChatModel(first={"action": "start", "questions": QUESTIONS}))
    async with person(live_broker.ws_url, sid) as someone:
        run = asyncio.create_task(graph.ainvoke({"messages": [("user", "Prepare the release and deploy it.")]}))
        first = await someone.wait_for("question", timeout=20)
        await someone.answer(first, ["production"])
        second = await someone.wait_for("question", where=lambda f: f["index"] == 1)
        await someone.clarify(second, "Against which environment do the e2e tests run?")
        again = await someone.wait_for("question", where=lambda f: f["revision"] == 1, timeout=20)
        assert again["clarifications"][0]["response"] == EXPLAINED
        await someone.answer(again, ["e2e", "unit"], other="Manual smoke test")
        closed = await someone.wait_for("closed")
        state = await asyncio.wait_for(run, 20)
    qid = closed["questionnaireId"]
    results = tool_messages(state)
    assert [m.status for m in results] == ["success", "success"]
    assert str(results[0].content).startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1")
    assert str(results[1].content).splitlines()[:4] == [
        f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1",
        "The user answered all 2 question(s). Answers, in question order:",
        "deploy_target: optionIds=[production]",
        'checks: optionIds=[unit, e2e] other="Manual smoke test"',
    ]
    assert state["messages"][-1].content == "Done."


async def test_a_refused_input_is_an_error_tool_message_the_model_reads(example: tuple[dict[str, Any], str]) -> None:
    namespace, _sid = example
    refused = {"action": "start", "questions": [single("deploy_target", minSelections=1)]}
    state = await namespace["build_graph"](ScriptedChatModel(first=refused)).ainvoke({"messages": [("user", "Go.")]})
    (result,) = tool_messages(state)
    assert result.status == "error"
    assert re.fullmatch(
        r'questionnaire: question "deploy_target": .*\(error code: invalid_arguments\)', str(result.content)
    )
