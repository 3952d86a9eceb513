"""docs/protocol.md, "Tokens": scopes (a session id, a prefix pattern ``alice:*``, ``*``), the
``admin`` role (operator endpoints only), and the ``sub`` claim, against real brokers."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.processes import TEST_SECRET, token
from tests.helpers.protocol import Agent, Deployment, error, tool_result
from tests.helpers.samples import new_sid, single

# At the dependency floors too: the broker's tokens as PyJWT's oldest release reads them.
pytestmark = pytest.mark.floors


def forged(claims: dict[str, Any]) -> str:
    return jwt.encode(claims, TEST_SECRET, algorithm="HS256")


def tenant() -> str:
    """A fresh prefix that no other test's sessions start with."""
    return new_sid("tenant") + ":"


# --- patterns ---------------------------------------------------------------------------


async def test_a_client_token_with_a_pattern_connects_to_every_covered_session(deployment: Deployment) -> None:
    prefix = tenant()
    pattern = token(prefix + "*", "client", sub="alice")
    for sid in (prefix + "build", prefix + "review", prefix):
        async with person(deployment.client_ws_url, sid, pattern) as p:
            assert p.welcome["sessionId"] == sid
            await p.wait_for("idle")


async def test_a_client_token_with_a_pattern_is_refused_4403_outside_it(deployment: Deployment) -> None:
    prefix = tenant()
    for sid in (prefix[:-1], "x" + prefix + "build", new_sid()):
        ws = await raw_socket(deployment.client_ws_url, sid)
        await ws.send(hello(token(prefix + "*", "client")))
        assert await close_code(ws) == 4403, sid


async def test_a_person_with_a_pattern_token_answers_in_a_covered_session(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "deploy"
    async with (
        Agent(deployment.agent_url, sid, token(prefix + "*", "agent", sub="deploy-bot")) as agent,
        person(deployment.client_ws_url, sid, token(prefix + "*", "client", sub="alice")) as p,
    ):
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["staging"])
        await p.wait_for("closed")
        assert (await agent.outcome(qid)).status == "completed"


async def test_an_agent_token_with_a_pattern_calls_the_api_for_covered_sessions_only(deployment: Deployment) -> None:
    prefix = tenant()
    pattern = token(prefix + "*", "agent")
    for sid in (prefix + "a", prefix + "b"):
        async with Agent(deployment.agent_url, sid, pattern) as agent:
            qid = (await agent.start_pending(single()))["questionnaireId"]
            tool_result(await agent.delete(qid))
    outside = new_sid()
    async with Agent(deployment.agent_url, outside) as owner:
        qid = (await owner.start_pending(single()))["questionnaireId"]
        async with Agent(deployment.agent_url, outside, pattern) as intruder:
            error(await intruder.start(single()), 403, "forbidden")
            error(await intruder.get(qid), 403, "forbidden")
            error(await intruder.delete(qid), 403, "forbidden")
        tool_result(await owner.delete(qid))


async def test_a_client_token_for_every_session_connects_to_any_session(deployment: Deployment) -> None:
    """``*`` on a client token means every session: the operator's."""
    wide = token("*", "client", sub="operator")
    for sid in (new_sid(), new_sid()):
        async with person(deployment.client_ws_url, sid, wide) as p:
            await p.wait_for("idle")


@pytest.mark.parametrize("sid_claim", ["al*ce", "**", "*alice", "", "a b*"])
async def test_a_signed_token_whose_sid_is_no_scope_is_refused(
    deployment: Deployment, sid: str, sid_claim: str
) -> None:
    async with Agent(deployment.agent_url, sid, forged({"sid": sid_claim, "role": "agent"})) as agent:
        message = error(await agent.start(single()), 401, "unauthorized")
    assert "invalid token claims" in message
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(forged({"sid": sid_claim, "role": "client"})))
    assert await close_code(ws) == 4401


# --- the admin role ---------------------------------------------------------------------


async def test_an_admin_token_is_refused_401_on_the_agent_api(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid) as owner:
        qid = (await owner.start_pending(single()))["questionnaireId"]
        async with Agent(deployment.agent_url, sid, token("*", "admin", sub="ops")) as admin:
            assert "an admin token cannot be used by an agent" in error(
                await admin.start(single()), 401, "unauthorized"
            )
            error(await admin.get(qid), 401, "unauthorized")
            error(await admin.delete(qid), 401, "unauthorized")
        tool_result(await owner.delete(qid))


async def test_an_admin_token_is_refused_4401_on_the_client_websocket(deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(token("*", "admin")))
    assert await close_code(ws) == 4401


@pytest.mark.parametrize("sid_claim", ["s-1", "ops:*"])
async def test_an_admin_token_for_less_than_every_session_is_refused(
    deployment: Deployment, sid: str, sid_claim: str
) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(forged({"sid": sid_claim, "role": "admin"})))
    assert await close_code(ws) == 4401


# --- sub ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["x" * 129, "", "ali\u0000ce"])
async def test_a_token_whose_sub_breaks_the_rule_is_refused(deployment: Deployment, sid: str, sub: str) -> None:
    async with Agent(deployment.agent_url, sid, forged({"sid": sid, "role": "agent", "sub": sub})) as agent:
        assert "sub must" in error(await agent.start(single()), 401, "unauthorized")
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(forged({"sid": sid, "role": "client", "sub": sub})))
    assert await close_code(ws) == 4401


async def test_a_token_with_a_sub_of_128_characters_is_accepted(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent", sub="é" * 128)) as agent:
        tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
    async with person(deployment.client_ws_url, sid, token(sid, "client", sub="x" * 128)) as p:
        await p.wait_for("idle")
