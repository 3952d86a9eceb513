"""The MCP endpoint behind deploy/nginx.conf (a real nginx, round-robin) in front of two brokers
on one redis-server: the broker serving a tool call is killed (SIGKILL) or stopped (SIGTERM)
while the person is still answering; the host repeats the call, nginx sends it to the other
broker, and it re-attaches to the same questionnaire: the person answers once, the result
arrives, and no second questionnaire was ever started.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers.clients import person
from tests.helpers.mcp_sdk import details_of, mcp_client, text_of
from tests.helpers.nginx import nginx, nginx_binary
from tests.helpers.processes import BrokerProcess, broker, need, redis_server, token
from tests.helpers.samples import multi, new_sid, single, start_body
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.redis

QUICK = 30.0
ARGUMENTS = start_body(single("target"), multi("checks"))


def _serving(brokers: list[BrokerProcess], questionnaire_id: str) -> BrokerProcess:
    """The broker that started the questionnaire (exactly one did)."""
    started = [b for b in brokers if b.logged("questionnaire started", questionnaire=questionnaire_id)]
    assert len(started) == 1, [b.port for b in started]
    return started[0]


async def _one_call(url: str, sid: str, reports: list[str]) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(message or "")

    async with mcp_client(url, token(sid, "agent")) as client:
        return await client.call_tool("questionnaire", ARGUMENTS, progress_callback=on_progress)


async def _scenario(lb: str, brokers: list[BrokerProcess], how: signal.Signals) -> None:
    sid = new_sid("mcp-lb")
    url = f"http://{lb}/mcp"
    async with contextlib.AsyncExitStack() as stack:
        # The person has the session open on both brokers (one of them goes away).
        people = [await stack.enter_async_context(person(b.ws_url, sid)) for b in brokers]
        progress: list[str] = []
        first = asyncio.create_task(_one_call(url, sid, progress))
        question = await people[0].wait_for("question")
        qid = question["questionnaireId"]
        await eventually(lambda: progress, "a progress report through nginx")  # the call is waiting
        serving = _serving(brokers, qid)
        survivor = next(b for b in brokers if b is not serving)
        answering = people[brokers.index(survivor)]
        await answering.answer(question, ["production"])  # one answer given before the broker goes
        second = await answering.wait_for("question", where=lambda f: f["index"] == 1)

        if how == signal.SIGKILL:
            serving.kill()
            with pytest.raises(BaseException) as broken:  # the stream ends with no response
                await asyncio.wait_for(first, QUICK)
            assert _holds(broken.value, MCPError), broken.value
        else:
            stopping = asyncio.create_task(asyncio.to_thread(serving.stop, signal.SIGTERM))
            told = await asyncio.wait_for(first, QUICK)  # a tool error saying what to do, not a cut
            assert told.is_error is True
            assert f"Questionnaire {qid} is still with the user" in text_of(told)
            assert text_of(told).endswith("(error code: shutting_down)")
            assert await stopping in (0, -signal.SIGTERM)

        # The host repeats the call: nginx takes it to the survivor, which re-attaches.
        progress.clear()
        again = asyncio.create_task(_one_call(url, sid, progress))
        await eventually(lambda: survivor.logged("repeated start re-attached", questionnaire=qid), "the re-attach")
        await answering.answer(second, ["unit", "e2e"])
        result = await asyncio.wait_for(again, QUICK)

    assert result.is_error is False
    assert text_of(result).splitlines()[0] == f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=0"
    assert details_of(result) is not None
    assert details_of(result)["answers"] == [
        {"questionId": "target", "selectedOptionIds": ["production"]},
        {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
    ]
    assert all(f"questionnaireId={qid}" in message for message in progress)
    assert survivor.logged("questionnaire started") == 0  # never a second questionnaire


def _holds(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, kind):
        return True
    return isinstance(exc, BaseExceptionGroup) and any(_holds(inner, kind) for inner in exc.exceptions)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_call_whose_broker_goes_away_is_repeated_and_re_attaches_through_nginx(how: signal.Signals) -> None:
    need(nginx_binary() is not None, "nginx is not installed (apt-get install nginx-light)")
    with redis_server() as redis, contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(redis.url, mcp_progress_interval=0.3)) for _ in range(2)]
        lb = stack.enter_context(nginx([b.port for b in brokers]))
        asyncio.run(_scenario(lb, brokers, how))
