"""docs/protocol.md, "The MCP endpoint": what every request to /mcp passes first. Refused as the
agent API refuses (same statuses, same JSON error body), on both stores; plus the Origin rule
the MCP transport asks for, and the path for tokens that cover more than one session.

Raw HTTP (httpx) for the statuses and bodies, and the official SDK's client where a host's
view matters (it must fail, and its request must have been answered 401).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers.clients import person
from tests.helpers.mcp_sdk import MODES, details_of, mcp_client, text_of
from tests.helpers.processes import token
from tests.helpers.protocol import Deployment
from tests.helpers.samples import new_sid, start_body

QUICK = 20.0
ALLOWED_ORIGIN = "https://app.example.test"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def gated(deployment: Deployment) -> Iterator[Deployment]:
    with deployment.spawn(allowed_origins=f"{ALLOWED_ORIGIN}/", client_wait=1) as fresh:
        yield fresh


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=QUICK) as client:
        yield client


def bearer(tok: str) -> dict[str, str]:
    return {**ACCEPT, "Authorization": f"Bearer {tok}"}


async def post(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], body: Any = INITIALIZE, **extra: Any
) -> httpx.Response:
    return await http.post(url, json=body, headers=headers, **extra)


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    return str(error["message"])


async def test_a_valid_agent_token_is_served(gated: Deployment, http: httpx.AsyncClient, sid: str) -> None:
    response = await post(http, f"{gated.agent_url}/mcp", bearer(token(sid, "agent")))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert '"serverInfo":{"name":"qbroker"' in response.text


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_no_token_is_401_whatever_the_method(gated: Deployment, http: httpx.AsyncClient, method: str) -> None:
    response = await http.request(method, f"{gated.agent_url}/mcp", headers=ACCEPT, json=INITIALIZE)
    message = refused(response, 401, "unauthorized")
    assert message == "questionnaire: missing 'Authorization: Bearer <agent token>'"
    assert response.headers["www-authenticate"] == 'Bearer realm="qbroker"'


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda sid: "not-a-token", "invalid token"),
        (lambda sid: token(sid, "client"), "cannot be used"),
        (lambda sid: token(sid, "agent", ttl=-1), "expired"),
    ],
    ids=["garbage", "client-token", "expired"],
)
async def test_a_bad_token_is_401_as_the_agent_api_says(
    gated: Deployment, http: httpx.AsyncClient, sid: str, make: Any, says: str
) -> None:
    tok = make(sid)
    mcp = await post(http, f"{gated.agent_url}/mcp", bearer(tok))
    agent_api = await http.post(
        f"{gated.agent_url}/v1/sessions/{sid}/questionnaire?wait=0",
        json=start_body(),
        headers={"Authorization": f"Bearer {tok}"},
    )
    assert says in refused(mcp, 401, "unauthorized")
    assert mcp.json() == agent_api.json() and agent_api.status_code == 401


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_with_a_wrong_token_fails_on_a_401(gated: Deployment, sid: str, mode: str) -> None:
    statuses: list[int] = []
    with pytest.raises(BaseException) as failure:  # (an ExceptionGroup from the SDK's task groups)
        async with mcp_client(f"{gated.agent_url}/mcp", token(sid, "client"), mode=mode, statuses=statuses) as client:
            await client.list_tools()
    assert _holds(failure.value, MCPError), failure.value
    assert statuses and set(statuses) == {401}


def _holds(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, kind):
        return True
    return isinstance(exc, BaseExceptionGroup) and any(_holds(inner, kind) for inner in exc.exceptions)


async def test_a_token_for_more_than_one_session_names_it_in_the_path(
    gated: Deployment, http: httpx.AsyncClient, sid: str
) -> None:
    service_wide = token("*", "agent")
    message = refused(await post(http, f"{gated.agent_url}/mcp", bearer(service_wide)), 403, "forbidden")
    assert "/v1/sessions/{sid}/mcp" in message
    pattern = token("team:*", "agent")
    refused(await post(http, f"{gated.agent_url}/mcp", bearer(pattern)), 403, "forbidden")

    # The path names the session: the * token asks there, a person on it answers.
    async with (
        person(gated.client_ws_url, sid) as p,
        mcp_client(f"{gated.agent_url}/v1/sessions/{sid}/mcp", service_wide) as client,
    ):
        call = asyncio.create_task(client.call_tool("questionnaire", start_body()))
        question = await p.wait_for("question")
        await p.answer(question, ["staging"])
        result = await asyncio.wait_for(call, QUICK)
    assert text_of(result).startswith("QUESTIONNAIRE_COMPLETED")
    assert details_of(result) is not None and details_of(result)["questionnaireId"] == question["questionnaireId"]


async def test_the_path_session_must_be_covered_and_well_formed(gated: Deployment, http: httpx.AsyncClient) -> None:
    team = f"team:{new_sid()}"
    pattern = token("team:*", "agent")
    ok = await post(http, f"{gated.agent_url}/v1/sessions/{team}/mcp", bearer(pattern))
    assert ok.status_code == 200, ok.text
    other = new_sid()
    message = refused(await post(http, f"{gated.agent_url}/v1/sessions/{other}/mcp", bearer(pattern)), 403, "forbidden")
    assert message == f"questionnaire: this token is not valid for session {other}"
    exact = token(team, "agent")
    refused(await post(http, f"{gated.agent_url}/v1/sessions/{other}/mcp", bearer(exact)), 403, "forbidden")
    bad = await post(http, f"{gated.agent_url}/v1/sessions/a%20b/mcp", bearer(token("*", "agent")))
    assert "session id must be" in refused(bad, 400, "invalid_arguments")


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://evil.example", 403),
        ("http://127.0.0.1:1", 403),  # the broker's host, another port: another origin
        (ALLOWED_ORIGIN, 200),
        ("HTTPS://APP.EXAMPLE.TEST", 200),
        ("null", 403),
    ],
)
async def test_a_browser_origin_must_be_the_brokers_own_or_allowed(
    gated: Deployment, http: httpx.AsyncClient, sid: str, origin: str, status: int
) -> None:
    response = await post(http, f"{gated.agent_url}/mcp", {**bearer(token(sid, "agent")), "Origin": origin})
    if status == 403:
        assert "Origin" in refused(response, 403, "forbidden")
    else:
        assert response.status_code == status, response.text


async def test_the_brokers_own_origin_is_allowed_and_no_origin_is_not_a_browser(
    gated: Deployment, http: httpx.AsyncClient, sid: str
) -> None:
    own = gated.agent_url  # http://127.0.0.1:PORT, the Host the request is sent to
    response = await post(http, f"{own}/mcp", {**bearer(token(sid, "agent")), "Origin": own})
    assert response.status_code == 200, response.text
    response = await post(http, f"{own}/mcp", bearer(token(sid, "agent")))
    assert response.status_code == 200, response.text


async def test_a_foreign_origin_is_refused_before_the_token_is_read(gated: Deployment, http: httpx.AsyncClient) -> None:
    response = await post(http, f"{gated.agent_url}/mcp", {**ACCEPT, "Origin": "https://evil.example"})
    refused(response, 403, "forbidden")


async def test_a_body_over_16_mib_is_413(gated: Deployment, http: httpx.AsyncClient, sid: str) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"' + b"a" * (16 * 1024 * 1024) + b'"}}'
    headers = bearer(token(sid, "agent"))
    declared = await http.post(f"{gated.agent_url}/mcp", content=big, headers=headers)
    assert "16 MiB" in refused(declared, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(big), 1 << 20):
            yield big[start : start + (1 << 20)]

    streamed = await http.post(f"{gated.agent_url}/mcp", content=chunks(), headers=headers)
    refused(streamed, 413, "payload_too_large")
    # Just under the limit is read whole and handed to the MCP transport.
    fits = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"' + b"a" * (15 * 1024 * 1024) + b'"}}'
    served = await http.post(f"{gated.agent_url}/mcp", content=fits, headers=headers)
    assert served.status_code == 200 and '"name":"questionnaire"' in served.text


async def test_the_body_limit_is_not_read_before_the_token(gated: Deployment, http: httpx.AsyncClient) -> None:
    big = b"x" * (17 * 1024 * 1024)
    response = await http.post(f"{gated.agent_url}/mcp", content=big, headers=ACCEPT)
    refused(response, 401, "unauthorized")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("wait=5", "unknown query parameter"),
        ("timeout=0", "timeout must be"),
        ("timeout=soon", "timeout must be"),
        ("timeout=1&timeout=2", "more than once"),
        ("inHost=always", "inHost must be one of fallback, race, off"),
        ("inHost=race&inHost=off", "more than once"),
    ],
)
async def test_the_only_queries_are_a_timeout_in_seconds_and_in_host(
    gated: Deployment, http: httpx.AsyncClient, sid: str, query: str, says: str
) -> None:
    response = await post(http, f"{gated.agent_url}/mcp?{query}", bearer(token(sid, "agent")))
    assert says in refused(response, 400, "invalid_arguments")
    for good in ("timeout=600", "inHost=race", "inHost=off&timeout=60", "inHost=fallback"):
        ok = await post(http, f"{gated.agent_url}/mcp?{good}", bearer(token(sid, "agent")))
        assert ok.status_code == 200, good


async def test_the_endpoint_is_stateless_no_mcp_session(gated: Deployment, http: httpx.AsyncClient, sid: str) -> None:
    """No Mcp-Session-Id: any broker serves the next request (a load balancer needs no stickiness)."""
    response = await post(http, f"{gated.agent_url}/mcp", bearer(token(sid, "agent")))
    assert "mcp-session-id" not in response.headers
    listed = await post(
        http,
        f"{gated.processes[-1].url}/mcp",
        {**bearer(token(sid, "agent")), "MCP-Protocol-Version": "2025-06-18"},
        LIST,
    )
    assert listed.status_code == 200 and '"name":"questionnaire"' in listed.text


async def test_a_get_is_405_with_a_valid_token(gated: Deployment, http: httpx.AsyncClient, sid: str) -> None:
    """A GET would open a stream that never carries anything, as many as a token likes."""
    response = await asyncio.wait_for(
        http.get(f"{gated.agent_url}/mcp", headers={**ACCEPT, **bearer(token(sid, "agent"))}), 5
    )
    refused(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "POST, DELETE"
