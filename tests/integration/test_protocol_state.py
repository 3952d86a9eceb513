"""docs/protocol.md, "State" and "Actors": retention of terminal questionnaires, the ``{sid}``
hash tag on Redis keys, session ids, and nothing crossing sessions."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
import redis.asyncio as aioredis
import websockets

from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.processes import token
from tests.helpers.protocol import Agent, Deployment, tool_result
from tests.helpers.samples import new_sid, single
from tests.helpers.waiting import eventually

RETENTION_DEFAULT = 7 * 24 * 3600


async def test_terminal_questionnaires_expire_after_the_retention(deployment: Deployment, sid: str) -> None:
    with deployment.spawn(retention=2) as short:
        async with Agent(short.agent_url, sid) as agent, person(short.client_ws_url, sid) as p:
            qid = (await agent.start_pending(single()))["questionnaireId"]
            await p.answer(await p.wait_for("question"), ["staging"])
            await p.wait_for("closed")
            assert (await agent.outcome(qid)).status == "completed"  # kept for now

            async def expired() -> bool:  # the record must go once the retention has passed
                response = await agent.get(qid)
                if response.status_code == 404:
                    return True
                assert response.status_code == 200, response.text
                return False

            await eventually(
                expired, "a terminal questionnaire to go after its 2 s retention", timeout=15, interval=0.25
            )


async def test_redis_keys_carry_the_session_hash_tag_and_retention(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    if deployment.kind != "redis":
        pytest.skip("keys and TTLs are a Redis matter")
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["staging"])
        await p.wait_for("closed")
    await agent.outcome(qid)
    assert deployment.redis_url is not None
    client = aioredis.from_url(deployment.redis_url)
    try:
        keys = [k.decode() async for k in client.scan_iter(match=f"*{sid}*")]
        assert keys, "no key names the session"
        untagged = [k for k in keys if "{" + sid + "}" not in k]
        assert not untagged, f"keys without the {{sid}} hash tag: {untagged}"
        holding = [k for k in keys if qid in k]
        assert holding, f"no key names questionnaire {qid}: {keys}"
        for key in holding:
            ttl = await client.ttl(key)
            assert RETENTION_DEFAULT - 600 <= ttl <= RETENTION_DEFAULT, (key, ttl)
    finally:
        await client.aclose()


@pytest.mark.parametrize("bad", ["a" * 129, "bad$sid", "white space", "ümlaut"])
async def test_invalid_session_ids_are_refused(deployment: Deployment, bad: str) -> None:
    async with Agent(deployment.agent_url, bad, token("*", "agent")) as agent:
        response = await agent.start(single())
        assert response.status_code == 400, response.text
    try:
        ws = await raw_socket(deployment.client_ws_url, quote(bad, safe=""))
    except websockets.InvalidStatus as refused:
        assert refused.response.status_code == 403
        return
    await ws.send(hello(token(new_sid(), "client")))
    assert await close_code(ws) == 4403


async def test_longest_valid_session_id_works(deployment: Deployment) -> None:
    sid = "A-z.0:_" + "x" * 121
    assert len(sid) == 128
    async with Agent(deployment.agent_url, sid) as agent, person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["production"])
        await p.wait_for("closed")
        assert (await agent.outcome(qid)).status == "completed"


async def test_nothing_crosses_sessions(deployment: Deployment) -> None:
    one, two = new_sid(), new_sid()
    async with Agent(deployment.agent_url, one) as agent_one, Agent(deployment.agent_url, two) as agent_two:
        async with person(deployment.client_ws_url, one) as p1, person(deployment.other_ws_url, two) as p2:
            await p1.wait_for("idle")
            await p2.wait_for("idle")
            q1 = (await agent_one.start_pending(single()))["questionnaireId"]
            shown = await p1.wait_for("question")
            assert shown["questionnaireId"] == q1
            await p2.ping()
            assert not [f for f in p2.received if f["type"] == "question"], "session two saw session one's question"
            # A client of session two cannot act on session one's questionnaire.
            await p2.answer(shown, ["staging"])
            assert (await p2.wait_for("error"))["code"] == "stale_step"
            await p1.answer(shown, ["production"])
            await p1.wait_for("closed")
        result = tool_result(await agent_one.get(q1))
        assert result.details["answers"][0]["selectedOptionIds"] == ["production"]
        assert (await agent_two.get(q1)).status_code == 404


def test_the_browser_client_is_served_at_the_root(deployment: Deployment) -> None:
    response = httpx.get(deployment.client_url + "/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
