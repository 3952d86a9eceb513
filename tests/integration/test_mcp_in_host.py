"""The broker's /mcp asking in the host's own form, driven by the official Python SDK's client
with an elicitation callback (MCP 2026-07-28's multi round-trip pattern: the SDK answers
``input_required`` through the callback and repeats the call with the requestState).

When it asks (``QBROKER_IN_HOST`` / ``?inHost=``), what the form's replies mean, and the
broker's own requestState: altered, foreign or expired, it is refused and nothing is stored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import httpx2
import mcp_types as types
import pytest

from broker.core.host_form import INPUT_KEY
from broker.core.request_state import HostAsk, key_from_secret, seal
from tests.helpers.clients import person
from tests.helpers.mcp_sdk import MODES, details_of, mcp_client, text_of
from tests.helpers.processes import TEST_SECRET, BrokerProcess, broker, redis_server, token
from tests.helpers.samples import multi, new_sid, single, start_body
from tests.helpers.tamper_proxy import one_byte_off

QUICK = 30.0
ARGUMENTS = start_body(single("target", ("staging", "production")), multi("checks", ("unit", "e2e"), minSelections=1))
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    with broker(client_wait=20) as process:
        yield process


@pytest.fixture(scope="module")
def off() -> Iterator[BrokerProcess]:
    with broker(client_wait=20, in_host="off") as process:
        yield process


class Person:
    """An elicitation callback: the scripted person in the host, one reply per form."""

    def __init__(self, *replies: types.ElicitResult) -> None:
        self.replies = list(replies)
        self.forms: list[types.ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.forms.append(params)
        return self.replies.pop(0) if self.replies else types.ElicitResult(action="cancel")


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


async def events(live: BrokerProcess, sid: str, qid: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{live.url}/v1/sessions/{sid}/questionnaires/{qid}/events",
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        )
    found: list[dict[str, Any]] = response.json()["events"]
    return found


@pytest.mark.floors  # at the dependency floors too: the SDK's elicitation callback, both eras
@pytest.mark.parametrize("mode", MODES)
async def test_answered_in_the_form_stored_as_a_client_s_answers_by_the_token_s_holder(
    live: BrokerProcess, mode: str
) -> None:
    sid = new_sid("host")
    someone = Person(accept(target="production", checks=["e2e"], checks__other="smoke"))
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent", sub="ci-bot"), mode=mode, elicitation=someone) as c:
        result = await asyncio.wait_for(c.call_tool("questionnaire", ARGUMENTS), QUICK)
    assert result.is_error is False
    text = text_of(result)
    assert 'checks: optionIds=[e2e] other="smoke"' in text and "target: optionIds=[production]" in text
    details = details_of(result)
    [form] = someone.forms
    assert details["questionnaireId"] in form.message
    assert "title" not in form.requested_schema
    answered = [e["by"] for e in await events(live, sid, details["questionnaireId"]) if e["type"] == "answered"]
    host = {"sub": "ci-bot", "role": "client", "client": {"kind": "host", "name": answered[0]["client"]["name"]}}
    assert answered == [host, host]


@pytest.mark.floors
@pytest.mark.parametrize("mode", MODES)
async def test_a_form_that_breaks_a_rule_is_asked_again_with_the_reason_and_nothing_of_it_stored(
    live: BrokerProcess, mode: str
) -> None:
    sid = new_sid("host")
    someone = Person(
        accept(target="production", target__other="canary", checks=["unit"]),  # single: an option or Other
        accept(target__other="canary", checks=["unit"]),
    )
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=mode, elicitation=someone) as c:
        result = await asyncio.wait_for(c.call_tool("questionnaire", ARGUMENTS), QUICK)
    first, second = someone.forms
    assert not first.message.startswith("Your answer could not be used")
    assert second.message.startswith('Your answer could not be used: "target": single question "target" takes one')
    assert 'target: optionIds=[] other="canary"' in text_of(result)
    recorded = await events(live, sid, details_of(result)["questionnaireId"])
    assert [e["type"] for e in recorded] == ["started", "answered", "answered", "completed"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_dismissed_form_never_ends_it_a_client_answers(
    live: BrokerProcess, action: Literal["decline", "cancel"], mode: str
) -> None:
    sid = new_sid("host")
    someone = Person(types.ElicitResult(action=action))
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=mode, elicitation=someone) as c:
        call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
        while not someone.forms:
            await asyncio.sleep(0.05)
        async with person(live.ws_url, sid) as p:
            await p.answer_all({"target": ["staging"], "checks": ["unit"]})
        result = await asyncio.wait_for(call, QUICK)
    assert text_of(result).startswith("QUESTIONNAIRE_COMPLETED") and "target: optionIds=[staging]" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_fallback_asks_only_when_no_client_has_the_session_open_race_asks_anyway(
    live: BrokerProcess, mode: str
) -> None:
    sid = new_sid("host")
    someone = Person(accept(target="production", checks=["unit"]))
    async with person(live.ws_url, sid) as p:
        async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=mode, elicitation=someone) as c:
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            await p.answer_all({"target": ["staging"], "checks": ["e2e"]})  # a client has it open
            result = await asyncio.wait_for(call, QUICK)
        assert not someone.forms and "target: optionIds=[staging]" in text_of(result)
        async with mcp_client(f"{live.url}/mcp?inHost=race", token(sid, "agent"), mode=mode, elicitation=someone) as c:
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            question = await p.wait_for("question", timeout=QUICK)
            result = await asyncio.wait_for(call, QUICK)  # the form answered first, the client saw it too
        assert len(someone.forms) == 1 and "target: optionIds=[production]" in text_of(result)
        closed = await p.wait_for("closed", timeout=QUICK)
        assert closed["questionnaireId"] == question["questionnaireId"]
        assert closed["answeredBy"]["client"]["kind"] == "host"  # every open client sees where


@pytest.mark.parametrize("mode", MODES)
async def test_off_never_asks_in_the_host(off: BrokerProcess, live: BrokerProcess, mode: str) -> None:
    for deployment, url in ((off, "/mcp"), (live, "/mcp?inHost=off")):
        sid = new_sid("host")
        someone = Person(accept(target="production", checks=["unit"]))
        async with mcp_client(f"{deployment.url}{url}", token(sid, "agent"), mode=mode, elicitation=someone) as c:
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            await asyncio.sleep(0.5)  # nobody has the session open when the call starts
            async with person(deployment.ws_url, sid) as p:
                await p.answer_all({"target": ["staging"], "checks": ["e2e"]})
            result = await asyncio.wait_for(call, QUICK)
        assert not someone.forms, url
        assert "target: optionIds=[staging]" in text_of(result)


async def test_an_older_host_s_session_is_signed_and_one_altered_is_not_found(live: BrokerProcess) -> None:
    """Only a host that shows forms gets a session (any broker serves it); its id is the
    broker's signature, so an altered one, or another session's, is refused."""
    sid = new_sid("host")
    agent = {"Authorization": f"Bearer {token(sid, 'agent')}", "Accept": "application/json, text/event-stream"}

    def initialize(capabilities: dict[str, Any]) -> dict[str, Any]:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "h", "version": "1"},
        }
        return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}

    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(f"{live.url}/mcp", json=initialize({"elicitation": {}}), headers=agent)
        session = opened.headers["mcp-session-id"]
        assert opened.status_code == 200 and session.startswith("qbs1.")
        plain = await http.post(f"{live.url}/mcp", json=initialize({}), headers=agent)
        assert plain.status_code == 200 and "mcp-session-id" not in plain.headers  # stateless, as before
        listed = await http.post(f"{live.url}/mcp", json=listing, headers={**agent, "Mcp-Session-Id": session})
        assert listed.status_code == 200 and '"questionnaire"' in listed.text
        for other in (one_byte_off(session), session.replace("qbs1.", "qbs1.x")):
            refused = await http.post(f"{live.url}/mcp", json=listing, headers={**agent, "Mcp-Session-Id": other})
            assert refused.status_code == 404
        foreign = {**agent, "Authorization": f"Bearer {token(new_sid('host'), 'agent')}", "Mcp-Session-Id": session}
        assert (await http.post(f"{live.url}/mcp", json=listing, headers=foreign)).status_code == 404
        assert (await http.get(f"{live.url}/mcp", headers={**agent, "Mcp-Session-Id": session})).status_code == 405


@pytest.mark.parametrize("how", ["one byte", "another session", "another holder", "expired", "another secret"])
async def test_an_altered_foreign_or_expired_request_state_is_refused_and_nothing_stored(
    live: BrokerProcess, how: str
) -> None:
    sid = new_sid("host")
    async with mcp_client(
        f"{live.url}/mcp", token(sid, "agent", sub="alice"), mode=MODERN, elicitation=Person()
    ) as client:
        asked = await client.session.call_tool("questionnaire", ARGUMENTS, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        state = asked.request_state
        assert state is not None and asked.input_requests is not None
        form = asked.input_requests[INPUT_KEY].params
        assert isinstance(form, types.ElicitRequestFormParams)
        qid = form.message.split("questionnaire ", 1)[1].split(")")[0]
        key = key_from_secret(TEST_SECRET)
        forged = {
            "one byte": lambda: one_byte_off(state),
            "another session": lambda: seal(key, HostAsk("other", "alice", qid, 0, 0, 0, 1e12)),
            "another holder": lambda: seal(key, HostAsk(sid, "mallory", qid, 0, 0, 0, 1e12)),
            "expired": lambda: seal(key, HostAsk(sid, "alice", qid, 0, 0, 0, 1.0)),
            "another secret": lambda: seal(key_from_secret("not ours"), HostAsk(sid, "alice", qid, 0, 0, 0, 1e12)),
        }[how]()
        refused = await client.session.call_tool(
            "questionnaire",
            ARGUMENTS,
            input_responses={INPUT_KEY: accept(target="production", checks=["unit"])},
            request_state=forged,
            allow_input_required=True,
        )
    assert isinstance(refused, types.CallToolResult) and refused.is_error is True
    assert text_of(refused).endswith("(error code: invalid_request_state)") and "nothing was stored" in text_of(refused)
    async with person(live.ws_url, sid) as p:
        question = await p.wait_for("question", timeout=QUICK)
        assert question["questionnaireId"] == qid and question["index"] == 0  # nothing stored


class RepliesElsewhere(httpx2.AsyncBaseTransport):
    """Sends every JSON-RPC response the client POSTs (its answer to a form) to another
    broker than the one it talks to: what a load balancer may do, with no affinity."""

    def __init__(self, other_port: int) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.other_port = other_port
        self.rerouted = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            body = await request.aread()
            message = json.loads(body) if body else None
            if isinstance(message, dict) and "method" not in message and "result" in message:
                self.rerouted += 1
                request.url = request.url.copy_with(port=self.other_port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.redis
def test_an_older_host_s_reply_reaching_another_broker_is_applied_there_and_the_call_returns() -> None:
    """Two brokers on Redis: the older host's call waits on one; its answer to the form is
    POSTed to the other, which applies it (or, for a reply that breaks a rule, leaves the
    reason for the first to ask again); the waiting call returns the outcome."""
    with redis_server() as redis, broker(redis.url, client_wait=20) as holding, broker(redis.url) as other:
        asyncio.run(_reply_elsewhere(holding, other))


async def _reply_elsewhere(holding: BrokerProcess, other: BrokerProcess) -> None:
    sid = new_sid("host-lb")
    someone = Person(
        accept(target="production", target__other="x", checks=["unit"]),  # breaks a rule: asked again
        accept(target="production", checks=["e2e"]),
    )
    route = RepliesElsewhere(other.port)
    async with mcp_client(
        f"{holding.url}/mcp", token(sid, "agent", sub="alice"), mode="legacy", elicitation=someone, transport=route
    ) as c:
        result = await asyncio.wait_for(c.call_tool("questionnaire", ARGUMENTS), QUICK)
    assert route.rerouted == 2 and len(someone.forms) == 2
    assert someone.forms[1].message.startswith("Your answer could not be used")
    assert "target: optionIds=[production]" in text_of(result) and "checks: optionIds=[e2e]" in text_of(result)
    assert holding.logged("asked in the host", session=sid) == 2
    assert other.logged("host form refused", session=sid) == 1 and other.logged("host form answered", session=sid) == 1
    assert not holding.logged("host form answered", session=sid)


async def test_an_older_host_s_form_is_withdrawn_when_a_client_answers_first(live: BrokerProcess) -> None:
    """On the call's own stream the broker can take its form back: when the outcome comes
    from a qbroker client, the pending elicitation/create is cancelled (the 2026-07-28
    pattern has no such message: there the form stays until the person closes it)."""
    sid = new_sid("host")
    shown, withdrawn = asyncio.Event(), asyncio.Event()

    async def slow_person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        try:
            await asyncio.sleep(QUICK)
        except asyncio.CancelledError:
            withdrawn.set()
            raise
        return types.ElicitResult(action="cancel")

    async with mcp_client(
        f"{live.url}/mcp?inHost=race", token(sid, "agent"), mode="legacy", elicitation=slow_person
    ) as c:
        call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
        await asyncio.wait_for(shown.wait(), QUICK)
        async with person(live.ws_url, sid) as p:
            await p.answer_all({"target": ["staging"], "checks": ["unit"]})
        result = await asyncio.wait_for(call, QUICK)
        await asyncio.wait_for(withdrawn.wait(), QUICK)
    assert "target: optionIds=[staging]" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_question_to_the_agent_in_the_form_keeps_its_answers_for_the_next_form(
    live: BrokerProcess, mode: str
) -> None:
    sid = new_sid("host")
    three = start_body(single("target", ("staging", "production")), multi("checks"), single("confirm", ("yes", "no")))
    someone = Person(
        accept(target="production", confirm="no", qbroker__ask_the_agent="Which checks are slow?"),
        accept(checks=["unit"], confirm="no"),
    )
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=mode, elicitation=someone) as c:
        asked = await asyncio.wait_for(c.call_tool("questionnaire", three), QUICK)
        text = text_of(asked)
        assert text.startswith("QUESTIONNAIRE_NEEDS_CLARIFICATION") and "target: optionIds=[production]" in text
        qid = details_of(asked)["questionnaireId"]
        resume = {"action": "resume", "questionnaireId": qid, "revision": 1, "clarificationResponse": "e2e is slow."}
        done = await asyncio.wait_for(c.call_tool("questionnaire", resume), QUICK)
    second = someone.forms[1].requested_schema["properties"]
    assert "target" not in second and second["confirm"]["default"] == "no"  # kept, shown filled in
    assert "default" not in second["checks"]
    assert "checks: optionIds=[unit]" in text_of(done) and "confirm: optionIds=[no]" in text_of(done)
