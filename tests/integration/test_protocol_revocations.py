"""docs/protocol.md, "Revocations": ``POST /v1/revocations`` (admin tokens) and what it does
on every broker of a deployment: revoked tokens are refused within a second, open sockets
using them are closed 4401; and ``qbroker token revoke``. On redis the revocation is made
on one process and checked on the other."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest

from broker.core.revocations import LONGEST_LIFETIME
from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.mcp_sdk import mcp_client, text_of
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker_env, free_port, token
from tests.helpers.protocol import Agent, Deployment, error, tool_result
from tests.helpers.samples import new_sid, single, start_body
from tests.helpers.waiting import eventually

WITHIN = 1.0  # seconds: every broker honours a revocation within this


def jti_of(tok: str) -> str:
    return str(jwt.decode(tok, options={"verify_signature": False})["jti"])


def admin() -> str:
    return token("*", "admin", 600, sub="ops")


async def revoke(url: str, body: Any, tok: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {} if tok == "" else {"Authorization": f"Bearer {tok or admin()}"}
    async with httpx.AsyncClient(timeout=30) as http:
        if isinstance(body, (bytes, str)):
            return await http.post(f"{url}/v1/revocations", content=body, headers=headers, **kwargs)
        return await http.post(f"{url}/v1/revocations", json=body, headers=headers, **kwargs)


def refusal(response: httpx.Response, status: int, code: str) -> str:
    """``{"error": {"code", "message": "revocations: ..."}}`` with ``status``; the message."""
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    message: str = body["error"]["message"]
    assert message.startswith("revocations: "), message
    return message


async def agent_refused_within(url: str, sid: str, tok: str, since: float) -> None:
    """The agent API on ``url`` refuses ``tok`` as revoked, at the latest WITHIN s after ``since``."""
    async with Agent(url, sid, tok) as agent:

        async def refused() -> bool:
            response = await agent.get("no-such-questionnaire")
            return response.status_code == 401 and "token revoked" in response.json()["error"]["message"]

        await eventually(refused, timeout=WITHIN * 3, interval=0.02, what="the revoked token to be refused")
    took = time.monotonic() - since
    assert took <= WITHIN, f"the revocation took {took:.2f}s to reach {url}"


# --- revoking ---------------------------------------------------------------------------


async def test_a_revoked_jti_is_refused_on_every_broker_within_a_second(deployment: Deployment, sid: str) -> None:
    doomed, spared = token(sid, "agent", 600), token(sid, "agent", 600)
    for url in deployment.agent_urls:  # in use (and cached) everywhere first
        async with Agent(url, sid, doomed) as agent:
            tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
    response = await revoke(deployment.agent_url, {"jti": jti_of(doomed)})
    since = time.monotonic()
    assert response.status_code == 200, response.text
    for url in reversed(deployment.agent_urls):  # the other process first
        await agent_refused_within(url, sid, doomed, since)
        async with Agent(url, sid, spared) as agent:
            tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))


async def test_the_answer_names_the_revocation_and_how_long_it_is_kept(deployment: Deployment) -> None:
    before = time.time()
    response = await revoke(deployment.agent_url, {"jti": "a" * 32})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"jti", "revokedAt", "keptUntil"} and body["jti"] == "a" * 32
    assert before - 1 <= body["revokedAt"] <= time.time() + 1
    assert abs(body["keptUntil"] - (body["revokedAt"] + LONGEST_LIFETIME)) < 1
    exp = int(time.time()) + 3600
    body = (await revoke(deployment.agent_url, {"sub": "someone", "exp": exp})).json()
    assert set(body) == {"sub", "revokedAt", "keptUntil"} and (body["sub"], body["keptUntil"]) == ("someone", exp)


async def test_revoking_a_holder_refuses_its_earlier_tokens_only(deployment: Deployment) -> None:
    prefix = new_sid("holder") + ":"
    holder = f"alice-{prefix}"
    sid = prefix + "build"
    agent_token = token(prefix + "*", "agent", 600, sub=holder)
    client_token = token(prefix + "*", "client", 600, sub=holder)
    others = token(prefix + "*", "agent", 600, sub="bob")
    assert (await revoke(deployment.agent_url, {"sub": holder})).status_code == 200
    since = time.monotonic()
    await agent_refused_within(deployment.agent_urls[-1], sid, agent_token, since)
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(client_token))
    assert await close_code(ws) == 4401
    async with Agent(deployment.agent_urls[-1], sid, others) as bob:
        tool_result(await bob.delete((await bob.start_pending(single()))["questionnaireId"]))
    fresh = token(prefix + "*", "client", 600, sub=holder)  # issued after the revocation
    async with person(deployment.client_ws_url, sid, fresh) as p:
        await p.wait_for("idle")


async def test_an_open_socket_whose_token_is_revoked_is_closed_4401_within_a_second(
    deployment: Deployment, sid: str
) -> None:
    doomed = token(sid, "client", 600, sub="carol")
    async with (
        person(deployment.client_ws_url, sid, doomed) as p,
        person(deployment.client_ws_url, sid, token(sid, "client", 600)) as other,
    ):
        await p.wait_for("idle")
        await other.wait_for("idle")
        assert (await revoke(deployment.agent_url, {"jti": jti_of(doomed)})).status_code == 200
        since = time.monotonic()
        assert await p.expect_close(timeout=WITHIN * 3) == 4401
        took = time.monotonic() - since
        assert took <= WITHIN, f"the socket was closed {took:.2f}s after the revocation"
        assert (await other.ping())["type"] == "pong"  # the other token's socket stays


async def test_a_hello_with_a_revoked_token_closes_4401(deployment: Deployment, sid: str) -> None:
    doomed = token(sid, "client", 600)
    assert (await revoke(deployment.agent_url, {"jti": jti_of(doomed)})).status_code == 200
    ws = await raw_socket(deployment.other_ws_url, sid)  # (the broker that took it: applied at once)
    await ws.send(hello(doomed))
    assert await close_code(ws) == 4401


async def test_a_revocation_survives_a_restart_of_the_broker(deployment: Deployment, sid: str) -> None:
    """A broker revokes, stops, and starts again on the same data dir (and, on redis, the
    same Redis): the revoked token stays refused. (The memory store keeps its revocations
    in the data dir; Redis keeps them itself, for a broker started later too.)"""
    doomed, spared = token(sid, "agent", 600), token(sid, "agent", 600)
    with tempfile.TemporaryDirectory(prefix="qbroker-restart-") as data_dir:
        env = broker_env(data_dir, deployment.redis_url)
        first = BrokerProcess(free_port(), env, data_dir).start()
        try:
            assert (await revoke(first.url, {"jti": jti_of(doomed)})).status_code == 200
        finally:
            first.stop()
        again = BrokerProcess(free_port(), env, data_dir).start()
        try:
            async with Agent(again.url, sid, doomed) as agent:
                assert "token revoked" in error(await agent.start(single()), 401, "unauthorized")
            async with Agent(again.url, sid, spared) as agent:
                tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
        finally:
            again.stop()


# --- who may revoke ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("none", 401, "unauthorized"),
        ("garbage", 401, "unauthorized"),
        ("expired admin", 401, "unauthorized"),
        ("wrong secret", 401, "unauthorized"),
        ("agent", 403, "forbidden"),
        ("client", 403, "forbidden"),
        ("service-wide agent", 403, "forbidden"),
    ],
)
async def test_only_a_valid_admin_token_may_revoke(deployment: Deployment, kind: str, status: int, code: str) -> None:
    tokens = {
        "none": "",
        "garbage": "not-a-jwt",
        "expired admin": token("*", "admin", -30),
        "wrong secret": jwt.encode({"sid": "*", "role": "admin"}, "another-secret-0123456789abcdef!"),
        "agent": token("s-1", "agent"),
        "client": token("s-1", "client"),
        "service-wide agent": token("*", "agent"),
    }
    victim = token("s-1", "agent", 600)
    refusal(await revoke(deployment.agent_url, {"jti": jti_of(victim)}, tokens[kind]), status, code)
    async with Agent(deployment.agent_urls[-1], "s-1", victim) as agent:  # nothing was revoked
        tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))


async def test_a_revoked_admin_token_can_revoke_no_more(deployment: Deployment) -> None:
    own = admin()
    assert (await revoke(deployment.agent_url, {"jti": jti_of(own)}, own)).status_code == 200
    assert "token revoked" in refusal(await revoke(deployment.agent_url, {"jti": "x"}, own), 401, "unauthorized")


# --- what a revocation must say ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "it is not JSON"),
        (b"[]", "it is not an object"),
        ({}, "give exactly one of jti and sub"),
        ({"jti": "a", "sub": "b"}, "give exactly one of jti and sub"),
        ({"exp": 5}, "give exactly one of jti and sub"),
        ({"jti": "a", "reason": "lost laptop"}, "unknown key(s) 'reason'"),
        ({"jti": 5}, "jti must be 1-256 characters"),
        ({"jti": ""}, "jti must be 1-256 characters"),
        ({"jti": "x" * 257}, "jti must be 1-256 characters"),
        ({"sub": "x" * 129}, "sub must be 1-128 characters"),
        ({"sub": None}, "sub must be 1-128 characters"),
        ({"sub": "a\nb"}, "sub must not contain control characters"),
        ({"jti": "a", "exp": "tomorrow"}, "exp must be a number of Unix seconds"),
        ({"jti": "a", "exp": True}, "exp must be a number of Unix seconds"),
        ({"jti": "a", "exp": -1}, "exp must be a number of Unix seconds"),
        ({"jti": "a", "exp": None}, "exp must be a number of Unix seconds"),
    ],
)
async def test_a_body_of_neither_shape_is_refused_400(deployment: Deployment, body: Any, says: str) -> None:
    assert says in refusal(await revoke(deployment.agent_url, body), 400, "invalid_arguments")


@pytest.mark.parametrize("exp", [1000, 0, "now"])
async def test_an_exp_not_in_the_future_is_refused_400_and_the_token_keeps_being_checked(
    deployment: Deployment, sid: str, exp: int | str
) -> None:
    doomed = token(sid, "agent", 600)
    when = int(time.time()) - 1 if exp == "now" else exp
    message = refusal(
        await revoke(deployment.agent_url, {"jti": jti_of(doomed), "exp": when}), 400, "invalid_arguments"
    )
    assert f"exp {when} is not in the future" in message, message
    async with Agent(deployment.agent_url, sid, doomed) as agent:  # nothing was revoked
        tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))


async def test_another_method_is_405_naming_post(deployment: Deployment) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for method in ("GET", "PUT", "DELETE"):
            response = await http.request(method, f"{deployment.agent_url}/v1/revocations")
            refusal(response, 405, "method_not_allowed")
            assert response.headers["allow"] == "POST"


async def test_a_body_over_4_kib_is_refused_413(deployment: Deployment) -> None:
    refusal(await revoke(deployment.agent_url, {"sub": "a", "pad": "x" * 5000}), 413, "payload_too_large")


# --- qbroker token revoke -----------------------------------------------------------------


def qbroker(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qbroker.cli", *args],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_token_revoke_mints_its_admin_token_from_the_secret(deployment: Deployment, sid: str) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)  # QBROKER_SECRET set, no QBROKER_TOKEN
        minted = qbroker("token", "--session", sid, "--role", "agent", "--json", env=env)
        assert minted.returncode == 0, minted.stderr
        doomed = json.loads(minted.stdout)
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--jti", doomed["jti"], env=env)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert json.loads(run.stdout)["jti"] == doomed["jti"]
    async with Agent(deployment.agent_url, sid, doomed["token"]) as agent:
        assert "token revoked" in error(await agent.start(single()), 401, "unauthorized")


async def test_token_revoke_takes_the_url_from_qbroker_url_and_the_api_root_too(
    deployment: Deployment, sid: str
) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)
        for url in (deployment.agent_url, f"{deployment.agent_url}/v1", f"{deployment.agent_url}/v1/"):
            env["QBROKER_URL"] = url
            jti = jti_of(token(sid, "agent"))
            run = qbroker("token", "revoke", "--jti", jti, env=env)
            assert run.returncode == 0 and json.loads(run.stdout)["jti"] == jti, (url, run.stderr)
        del env["QBROKER_URL"]
        jti = jti_of(token(sid, "agent"))
        run = qbroker("token", "revoke", "--url", f"{deployment.agent_url}/v1", "--jti", jti, env=env)
        assert run.returncode == 0 and json.loads(run.stdout)["jti"] == jti, run.stderr


async def test_token_revoke_defaults_to_the_broker_on_its_own_host(deployment: Deployment, sid: str) -> None:
    """No --url and no QBROKER_URL: the broker this host's QBROKER_HOST/QBROKER_PORT name."""
    port = urlsplit(deployment.agent_url).port
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)
        env.pop("QBROKER_URL", None)
        env["QBROKER_HOST"], env["QBROKER_PORT"] = "0.0.0.0", str(port)  # a wildcard: reached on 127.0.0.1
        jti = jti_of(token(sid, "agent"))
        run = qbroker("token", "revoke", "--jti", jti, env=env)
        assert run.returncode == 0 and json.loads(run.stdout)["jti"] == jti, run.stderr
        env["QBROKER_HOST"], env["QBROKER_PORT"] = "127.0.0.1", str(free_port())  # nobody listens there
        run = qbroker("token", "revoke", "--jti", jti, env=env)
    assert run.returncode == 1 and run.stdout == ""
    assert f"cannot reach http://127.0.0.1:{env['QBROKER_PORT']}/v1/revocations" in run.stderr, run.stderr


def test_token_revoke_help_names_qbroker_url_under_a_usage_of_its_own() -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        run = qbroker("token", "revoke", "--help", env=broker_env(data_dir))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: qbroker token revoke [--url URL] (--jti ID | --sub NAME) [--exp UNIX]")
    assert run.stdout.split("\n\n")[0].count("usage:") == 1 and "revoke\n" not in run.stdout  # not the parent's
    assert "$QBROKER_URL" in " ".join(run.stdout.split())


async def test_a_revocation_by_a_minted_admin_token_is_logged_with_who_revoked(
    deployment: Deployment, sid: str
) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)
        first, second = jti_of(token(sid, "agent")), jti_of(token(sid, "agent"))
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--jti", first, env=env)
        assert run.returncode == 0, run.stderr
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--jti", second, "--by", "ops-alice", env=env)
        assert run.returncode == 0, run.stderr
    broker = deployment.processes[0]

    def by(jti: str) -> object:
        lines = [json.loads(line) for line in broker.log().splitlines() if line.startswith("{") and jti in line]
        return next((line.get("by") for line in lines if line.get("msg") == "token revoked"), "not logged")

    await eventually(lambda: by(second) != "not logged", timeout=5, what="the revocation's log line")
    revoker = by(first)
    assert isinstance(revoker, str) and revoker.startswith("qbroker-cli") and "@" in revoker, revoker
    assert by(second) == "ops-alice"


async def test_token_revoke_with_a_past_exp_exits_1_with_one_line(deployment: Deployment, sid: str) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        jti = jti_of(token(sid, "agent"))
        run = qbroker(
            "token", "revoke", "--url", deployment.agent_url, "--jti", jti, "--exp", "1000", env=broker_env(data_dir)
        )
    assert run.returncode == 1 and run.stdout == "", run.stdout
    assert run.stderr.startswith("qbroker token revoke: invalid_arguments: revocations: exp 1000 is not in the future")
    assert run.stderr.count("\n") == 1, run.stderr


async def test_token_revoke_uses_an_admin_token_from_qbroker_token(deployment: Deployment, sid: str) -> None:
    victim = token(sid, "client", 600, sub="dave")
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir)
        del env["QBROKER_SECRET"]  # no secret here: the admin token must come from QBROKER_TOKEN
        env["QBROKER_TOKEN"] = admin()
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--sub", "dave", env=env)
        assert run.returncode == 0, run.stderr
        ws = await raw_socket(deployment.other_ws_url, sid)
        await ws.send(hello(victim))
        assert await close_code(ws) == 4401
        env["QBROKER_TOKEN"] = token(sid, "agent")  # not an admin's, and no secret to mint one
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--jti", "x", env=env)
        assert run.returncode == 1 and run.stdout == ""
        assert run.stderr == (
            "qbroker token revoke: forbidden: revocations: only an admin token may revoke tokens, not agent tokens\n"
        )
        del env["QBROKER_TOKEN"]
        run = qbroker("token", "revoke", "--url", deployment.agent_url, "--jti", "x", env=env)
        assert run.returncode == 1 and run.stderr.startswith("qbroker token revoke: no admin token:")


# --- a waiting MCP tool call ------------------------------------------------------------


async def test_a_waiting_mcp_call_whose_token_is_revoked_ends_within_a_second(deployment: Deployment, sid: str) -> None:
    """The call waits for the person in slices of QBROKER_MCP_PROGRESS_INTERVAL (10 s): it
    must not wait out its slice, let alone get the answers, once its token is revoked."""
    doomed = token(sid, "agent", 600)
    async with person(deployment.client_ws_url, sid) as p, mcp_client(f"{deployment.agent_url}/mcp", doomed) as host:
        call = asyncio.create_task(host.call_tool("questionnaire", start_body()))
        await p.wait_for("question")
        assert (await revoke(deployment.agent_urls[-1], {"jti": jti_of(doomed)})).status_code == 200
        since = time.monotonic()
        result = await asyncio.wait_for(call, 15)
        took = time.monotonic() - since
    assert result.is_error is True and "token revoked" in text_of(result), text_of(result)
    assert took <= WITHIN + 0.5, f"the call ended {took:.2f}s after the revocation"


async def test_a_waiting_mcp_call_ends_when_its_token_expires(deployment: Deployment, sid: str) -> None:
    short = token(sid, "agent", 3)
    async with person(deployment.client_ws_url, sid) as p, mcp_client(f"{deployment.agent_url}/mcp", short) as host:
        call = asyncio.create_task(host.call_tool("questionnaire", start_body()))
        await p.wait_for("question")
        result = await asyncio.wait_for(call, 8)  # (well before the 10 s slice ends)
    assert result.is_error is True and "token expired" in text_of(result), text_of(result)


async def test_a_long_poll_whose_token_is_revoked_ends_401_within_a_second(deployment: Deployment, sid: str) -> None:
    doomed = token(sid, "agent", 600)
    async with person(deployment.client_ws_url, sid) as p, Agent(deployment.agent_url, sid, doomed) as agent:
        qid = str((await agent.start_pending(single()))["questionnaireId"])
        await p.wait_for("question")
        poll = asyncio.create_task(agent.get(qid, wait=30))
        await asyncio.sleep(0.3)  # (the poll is waiting)
        assert (await revoke(deployment.agent_urls[-1], {"jti": jti_of(doomed)})).status_code == 200
        since = time.monotonic()
        response = await asyncio.wait_for(poll, 10)
        took = time.monotonic() - since
    assert "token revoked" in error(response, 401, "unauthorized")
    assert took <= WITHIN + 0.5, f"the long poll ended {took:.2f}s after the revocation"
