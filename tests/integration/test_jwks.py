"""Tokens from an identity provider (docs/operations.md, "Tokens from an identity provider"):
real brokers with QBROKER_JWKS_URL pointing at a JWKS served on 127.0.0.1 by a stand-in
provider (tests/helpers/jwks.py, RSA and EC keys made here), on memory and on Redis (two
processes: the agent on one, the person on the other)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.jwks import IdentityProvider, new_key
from tests.helpers.processes import REPO_ROOT, broker, broker_env, token
from tests.helpers.protocol import DEPLOYMENT_KINDS, Agent, Deployment, error, start_deployment, tool_result
from tests.helpers.samples import new_sid, single
from tests.helpers.waiting import eventually

REFETCH = 0.5  # QBROKER_JWKS_REFETCH_INTERVAL of the shared deployment


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider() as provider:
        yield provider


@pytest.fixture(scope="module", params=DEPLOYMENT_KINDS)
def deployment(request: pytest.FixtureRequest, idp: IdentityProvider) -> Iterator[Deployment]:
    idp.add_key("rsa")  # (a key to fetch at start-up)
    redis_url = request.getfixturevalue("protocol_redis_url") if request.param == "redis" else None
    with start_deployment(request.param, redis_url, **idp.settings(jwks_refetch_interval=REFETCH)) as started:
        yield started


def tenant() -> str:
    return new_sid("idp") + ":"


async def test_rs256_and_es256_tokens_from_the_provider_carry_a_questionnaire(
    deployment: Deployment, idp: IdentityProvider
) -> None:
    rsa_key, ec_key = idp.add_key("rsa"), idp.add_key("ec")
    prefix = tenant()
    sid = prefix + "deploy"
    agent_token = idp.sign(rsa_key, sid=prefix + "*", role="agent", sub="deploy-bot")
    client_token = idp.sign(ec_key, sid=prefix + "*", role="client", sub="alice")
    # Two new keys: each broker refetches the JWKS (both keys in it) for the first token
    # naming one, REFETCH after its last fetch at the latest.
    await until_accepted(deployment, sid, agent_token)
    async with (
        Agent(deployment.agent_url, sid, agent_token) as agent,
        person(deployment.client_ws_url, sid, client_token) as p,
    ):
        qid = (await agent.start_pending(single()))["questionnaireId"]
        await p.answer(await p.wait_for("question"), ["staging"])
        await p.wait_for("closed")
        assert (await agent.outcome(qid)).status == "completed"


async def until_accepted(deployment: Deployment, sid: str, agent_token: str) -> None:
    """Every broker of the deployment accepts ``agent_token`` (its key was just published:
    each refetches at most every REFETCH seconds)."""
    for url in deployment.agent_urls:
        async with Agent(url, sid, agent_token) as agent:

            async def accepted(agent: Agent = agent) -> bool:
                return (await agent.get("no-such-questionnaire")).status_code == 404

            await eventually(accepted, timeout=REFETCH * 10, interval=0.1, what=f"{url} to accept the token")


async def test_a_key_that_appears_later_is_used_after_a_refetch_and_a_withdrawn_one_is_not(
    deployment: Deployment, idp: IdentityProvider, sid: str
) -> None:
    old = idp.add_key("rsa")
    old_token = idp.sign(old, sid=sid, role="agent")
    await until_accepted(deployment, sid, old_token)
    rotated = new_key("ec")
    idp.publish(rotated)  # the provider rotates: the old key is gone, a new one is there
    new_token = idp.sign(rotated, sid=sid, role="agent")
    await until_accepted(deployment, sid, new_token)  # fetched again, for the new kid
    for url in deployment.agent_urls:
        async with Agent(url, sid, old_token) as agent:
            message = error(await agent.get("no-such-questionnaire"), 401, "unauthorized")
            assert "a key the identity provider does not publish" in message


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"iss": "https://evil.example.test/"}, "another issuer's"),
        ({"aud": "another-app"}, "for another audience"),
        ({"ttl": -10}, "token expired"),
        ({"ttl": None}, "no exp claim"),
    ],
)
async def test_a_token_for_another_issuer_or_audience_or_expired_is_refused(
    deployment: Deployment, idp: IdentityProvider, sid: str, claims: dict[str, object], says: str
) -> None:
    key = idp.add_key("rsa")
    await until_accepted(deployment, sid, idp.sign(key, sid=sid, role="agent"))
    claims = dict(claims)  # (the parameter is shared by both deployments' runs)
    ttl = claims.pop("ttl", 600)
    bad_agent = idp.sign(key, ttl=ttl, sid=sid, role="agent", **claims)  # type: ignore[arg-type]
    async with Agent(deployment.agent_url, sid, bad_agent) as agent:
        assert says in error(await agent.start(single()), 401, "unauthorized")
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(hello(idp.sign(key, ttl=ttl, sid=sid, role="client", **claims)))  # type: ignore[arg-type]
    assert await close_code(ws) == 4401


async def test_the_brokers_own_tokens_still_work_beside_the_providers(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent")) as agent:
        tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
    async with person(deployment.client_ws_url, sid, token(sid, "client")) as p:
        await p.wait_for("idle")


async def test_a_providers_admin_token_revokes_and_a_holders_provider_tokens_are_refused(
    deployment: Deployment, idp: IdentityProvider, sid: str
) -> None:
    key = idp.add_key("ec")
    holder = f"mallory-{uuid.uuid4().hex[:6]}"
    doomed = idp.sign(key, sid=sid, role="agent", sub=holder)
    await until_accepted(deployment, sid, doomed)
    admin = idp.sign(key, sid="*", role="admin", sub="ops")
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{deployment.agent_url}/v1/revocations", json={"sub": holder}, headers={"Authorization": f"Bearer {admin}"}
        )
    assert response.status_code == 200, response.text
    for url in deployment.agent_urls:
        async with Agent(url, sid, doomed) as agent:

            async def refused(agent: Agent = agent) -> bool:
                return (await agent.get("x")).status_code == 401

            await eventually(refused, timeout=3, what="the holder's token to be refused")


# --- the refetch's limit and a provider that is down -----------------------------------------


async def test_unknown_key_ids_refetch_the_jwks_at_most_once_a_minute(idp: IdentityProvider, sid: str) -> None:
    key = idp.add_key("rsa")
    with broker(None, port=None, **idp.settings()) as process:  # the default: at most once a minute
        fetched_at_start = idp.fetches
        async with Agent(process.url, sid, idp.sign(key, sid=sid, role="agent")) as agent:
            tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
        for n in range(20):
            made_up = idp.sign(new_key("ec", f"made-up-{n}"), sid=sid, role="agent")
            async with Agent(process.url, sid, made_up) as agent:
                assert "does not publish" in error(await agent.start(single()), 401, "unauthorized")
        assert idp.fetches == fetched_at_start  # fetched at start-up, under a minute ago: not again


async def test_a_broker_starts_while_the_provider_is_down_and_uses_it_once_it_is_back(sid: str) -> None:
    with IdentityProvider() as idp:
        key = idp.add_key("rsa")
        idp.down = True
        with broker(None, port=None, **idp.settings(jwks_refetch_interval=REFETCH)) as process:
            assert "fetching the JWKS failed" in process.log()
            async with Agent(process.url, sid, token(sid, "agent")) as agent:  # its own tokens work
                tool_result(await agent.delete((await agent.start_pending(single()))["questionnaireId"]))
            provider_token = idp.sign(key, sid=sid, role="agent")
            async with Agent(process.url, sid, provider_token) as agent:
                error(await agent.start(single()), 401, "unauthorized")
                idp.down = False

                async def accepted() -> bool:
                    return (await agent.get("no-such-questionnaire")).status_code == 404

                await eventually(accepted, timeout=REFETCH * 10, interval=0.1, what="the provider's keys")
            assert process.metric("qbroker_jwks_fetches_total", result="error") >= 1
            assert process.metric("qbroker_jwks_fetches_total", result="ok") >= 1


def test_a_jwks_url_without_issuer_and_audience_stops_serve_in_one_line() -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        env = broker_env(data_dir, jwks_url="https://idp.example.com/jwks.json")
        result = subprocess.run(
            [sys.executable, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1"],
            env=env,
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "qbroker: QBROKER_JWKS_URL needs QBROKER_JWT_ISSUER and QBROKER_JWT_AUDIENCE: without them a token the"
        " identity provider signed for any other application would be accepted\n"
    )
