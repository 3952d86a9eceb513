"""docs/protocol.md, "Auth": HS256 tokens with sid/role/exp, for agents (HTTP) and clients
(hello frame); ``qbroker token``; ``qbroker serve`` with no secret."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import jwt
import pytest
import websockets
from websockets.typing import Subprotocol

from tests.helpers.clients import JSON, close_code, hello, person, raw_socket
from tests.helpers.processes import REPO_ROOT, TEST_SECRET, BrokerProcess, broker_env, free_port, token
from tests.helpers.protocol import Agent, Deployment, error, pending, tool_result
from tests.helpers.samples import new_sid, single, start_body


def forged(claims: dict[str, Any], secret: str = TEST_SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, secret, algorithm=algorithm)


def bad_agent_tokens(sid: str) -> dict[str, str | None]:
    return {
        "missing": None,
        "garbage": "not-a-jwt",
        "wrong secret": forged({"sid": sid, "role": "agent"}, secret="another-secret-0123456789abcdef!"),
        "expired": token(sid, "agent", ttl=-30),
        "client role": token(sid, "client"),
        "no role": forged({"sid": sid}),
        "unknown role": forged({"sid": sid, "role": "admin"}),
        "alg none": jwt.encode({"sid": sid, "role": "agent"}, None, algorithm="none"),  # type: ignore[arg-type]
    }


BAD_TOKEN_KINDS = list(bad_agent_tokens("x"))


@pytest.mark.parametrize("kind", BAD_TOKEN_KINDS)
async def test_agent_calls_without_a_valid_agent_token_are_401(deployment: Deployment, sid: str, kind: str) -> None:
    async with Agent(deployment.agent_url, sid) as owner:
        qid = (await owner.start_pending(single()))["questionnaireId"]
        async with Agent(deployment.agent_url, sid, bad_agent_tokens(sid)[kind] or "") as agent:
            error(await agent.start(single()), 401, "unauthorized")
            error(await agent.resume(qid, 1, "hi"), 401, "unauthorized")
            error(await agent.get(qid), 401, "unauthorized")
            error(await agent.delete(qid), 401, "unauthorized")
        pending(await owner.get(qid))  # nothing changed
        tool_result(await owner.delete(qid))


async def test_non_bearer_authorization_is_401(deployment: Deployment, sid: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{deployment.agent_url}/v1/sessions/{sid}/questionnaire",
            json=start_body(),
            headers={"Authorization": f"Basic {token(sid, 'agent')}"},
        )
    error(response, 401, "unauthorized")


async def test_agent_token_for_another_session_is_403(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid) as owner:
        qid = (await owner.start_pending(single()))["questionnaireId"]
        async with Agent(deployment.agent_url, sid, token(new_sid(), "agent")) as intruder:
            error(await intruder.start(single()), 403, "forbidden")
            error(await intruder.resume(qid, 1, "hi"), 403, "forbidden")
            error(await intruder.get(qid), 403, "forbidden")
            error(await intruder.delete(qid), 403, "forbidden")
        pending(await owner.get(qid))
        tool_result(await owner.delete(qid))


async def test_token_with_an_exp_in_the_future_is_accepted(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent", ttl=600)) as agent:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        tool_result(await agent.delete(qid))
    async with person(deployment.client_ws_url, sid, token(sid, "client", ttl=600)) as p:
        await p.wait_for("idle")


# --- websocket hello ------------------------------------------------------------------


def bad_client_tokens(sid: str) -> dict[str, str]:
    return {
        "garbage": "not-a-jwt",
        "empty": "",
        "wrong secret": forged({"sid": sid, "role": "client"}, secret="another-secret-0123456789abcdef!"),
        "expired": token(sid, "client", ttl=-30),
        "agent role": token(sid, "agent"),
        "service-wide agent": token("*", "agent"),
        "no sid": forged({"role": "client"}),
    }


@pytest.mark.parametrize("kind", list(bad_client_tokens("x")))
async def test_hello_with_a_bad_token_closes_4401(deployment: Deployment, sid: str, kind: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(bad_client_tokens(sid)[kind]))
    assert await close_code(ws) == 4401


async def test_hello_with_a_token_for_another_session_closes_4403(deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(token(new_sid(), "client")))
    assert await close_code(ws) == 4403


async def test_client_token_for_every_session_is_accepted(deployment: Deployment, sid: str) -> None:
    """``*`` on a client token means every session (the operator's; docs/protocol.md, "Tokens")."""
    async with person(deployment.client_ws_url, sid, forged({"sid": "*", "role": "client"})) as p:
        await p.wait_for("idle")


# --- qbroker token ----------------------------------------------------------------------


def qbroker(*args: str, env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qbroker.cli", *args],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def test_qbroker_token_mints_usable_tokens(deployment: Deployment, sid: str) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)
        agent_run = qbroker("token", "--session", sid, "--role", "agent", env=env)
        client_run = qbroker("token", "--session", sid, "--role", "client", "--ttl", "600", env=env)
        wide_run = qbroker("token", "--session", "*", "--role", "agent", "--ttl", "never", env=env)
    for run in (agent_run, client_run, wide_run):
        assert run.returncode == 0, run.stderr
    agent_token, client_token, wide_token = (r.stdout.strip() for r in (agent_run, client_run, wide_run))
    claims = jwt.decode(client_token, TEST_SECRET, algorithms=["HS256"])
    assert claims["sid"] == sid and claims["role"] == "client"
    assert 590 <= claims["exp"] - time.time() <= 610
    thirty_days = 30 * 24 * 3600  # the default lifetime
    assert abs(jwt.decode(agent_token, TEST_SECRET, algorithms=["HS256"])["exp"] - time.time() - thirty_days) < 60
    assert "exp" not in jwt.decode(wide_token, TEST_SECRET, algorithms=["HS256"])
    async with (
        person(deployment.client_ws_url, sid, client_token) as p,
        Agent(deployment.agent_url, sid, agent_token) as agent,
    ):
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["staging"])
        await p.wait_for("closed")
        assert (await agent.outcome(qid)).status == "completed"
    async with Agent(deployment.agent_url, new_sid(), wide_token) as agent:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        tool_result(await agent.delete(qid))


# --- qbroker serve with no secret ---------------------------------------------------------


JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")


async def test_serve_without_a_secret_generates_one_and_prints_tokens() -> None:
    with tempfile.TemporaryDirectory(prefix="qbroker-nosecret-") as data_dir:
        env = broker_env(data_dir)
        del env["QBROKER_SECRET"]
        process = BrokerProcess(free_port(), env, data_dir).start()
        try:
            banner = process.log()
            secret_file = [p for p in os.listdir(data_dir) if not p.endswith(".log")]
            assert secret_file, f"no secret file in the data dir: {os.listdir(data_dir)}"
            modes = {name: stat.S_IMODE(os.stat(os.path.join(data_dir, name)).st_mode) for name in secret_file}
            assert any(mode == 0o600 for mode in modes.values()), modes
            url = re.search(rf"{re.escape(process.url)}/#session=([A-Za-z0-9._:-]+)&token=({JWT.pattern})", banner)
            assert url, f"no browser URL with session and token in:\n{banner}"
            sid, client_token = url.group(1), url.group(2)
            roles = {jwt.decode(t, options={"verify_signature": False})["role"]: t for t in JWT.findall(banner)}
            assert "agent" in roles, f"no agent token printed:\n{banner}"
            agent_token = roles["agent"]
            assert jwt.decode(agent_token, options={"verify_signature": False})["sid"] in (sid, "*")
            async with person(process.ws_url, sid, client_token) as p, Agent(process.url, sid, agent_token) as agent:
                qid = (await agent.start_pending(single()))["questionnaireId"]
                await p.answer(await p.wait_for("question"), ["staging"])
                await p.wait_for("closed")
                assert (await agent.outcome(qid)).status == "completed"
            # The test secret is not the one in use.
            async with Agent(process.url, sid, token(sid, "agent")) as stranger:
                error(await stranger.start(single()), 401, "unauthorized")
        finally:
            process.stop()
        # A restart on the same data dir keeps the secret: earlier tokens still work.
        again = BrokerProcess(free_port(), env, data_dir).start()
        try:
            async with Agent(again.url, sid, agent_token) as agent:
                tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
        finally:
            again.stop()


async def test_a_token_in_the_url_does_not_authenticate(deployment: Deployment, sid: str) -> None:
    """Clients send the token in their hello, never in the URL."""
    ws = await websockets.connect(
        f"{deployment.client_ws_url}/v1/sessions/{sid}/ws?token={token(sid, 'client')}",
        subprotocols=[Subprotocol(JSON)],
        open_timeout=10,
    )
    await ws.send(json.dumps({"type": "hello", "token": "", "client": {"kind": "bot", "name": "url"}}))
    assert await close_code(ws) == 4401


@pytest.mark.parametrize("token_field", [{}, {"token": None}, {"token": 5}], ids=["absent", "null", "a number"])
async def test_hello_without_a_usable_token_closes_4401(
    deployment: Deployment, sid: str, token_field: dict[str, object]
) -> None:
    """A token problem (4401), like an empty one, not a malformed frame (4400)."""
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(json.dumps({"type": "hello", **token_field, "client": {"kind": "bot", "name": "n"}}))
    assert await close_code(ws) == 4401


@pytest.mark.parametrize("command", ["serve", "token"])
def test_cli_help(command: str) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        run = qbroker(command, "--help", env=broker_env(data_dir))
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout.lower()
