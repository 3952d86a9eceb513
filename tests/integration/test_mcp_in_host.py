"""The broker's /mcp asking in the host's own form, driven by the official Python SDK's client
with an elicitation callback (MCP 2026-07-28's multi round-trip pattern: the SDK answers
``input_required`` through the callback and repeats the call with the requestState).

When it asks (``QBROKER_IN_HOST`` / ``?inHost=``), what the form's replies mean, and the
broker's own requestState: altered, foreign or expired, it is refused and nothing is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import mcp_types as types
import pytest

from broker.core.host_form import INPUT_KEY
from broker.core.request_state import HostAsk, key_from_secret, seal
from tests.helpers.clients import person
from tests.helpers.mcp_sdk import details_of, mcp_client, text_of
from tests.helpers.processes import TEST_SECRET, BrokerProcess, broker, token
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


async def test_answered_in_the_form_stored_as_a_client_s_answers_by_the_token_s_holder(live: BrokerProcess) -> None:
    sid = new_sid("host")
    someone = Person(accept(target="production", checks=["e2e"], checks__other="smoke"))
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent", sub="ci-bot"), mode=MODERN, elicitation=someone) as c:
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


async def test_a_form_that_breaks_a_rule_is_asked_again_with_the_reason_and_nothing_of_it_stored(
    live: BrokerProcess,
) -> None:
    sid = new_sid("host")
    someone = Person(
        accept(target="production", target__other="canary", checks=["unit"]),  # single: an option or Other
        accept(target__other="canary", checks=["unit"]),
    )
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=MODERN, elicitation=someone) as c:
        result = await asyncio.wait_for(c.call_tool("questionnaire", ARGUMENTS), QUICK)
    first, second = someone.forms
    assert not first.message.startswith("Your answer could not be used")
    assert second.message.startswith('Your answer could not be used: "target": single question "target" takes one')
    assert 'target: optionIds=[] other="canary"' in text_of(result)
    recorded = await events(live, sid, details_of(result)["questionnaireId"])
    assert [e["type"] for e in recorded] == ["started", "answered", "answered", "completed"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_dismissed_form_never_ends_it_a_client_answers(
    live: BrokerProcess, action: Literal["decline", "cancel"]
) -> None:
    sid = new_sid("host")
    someone = Person(types.ElicitResult(action=action))
    async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=MODERN, elicitation=someone) as c:
        call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
        while not someone.forms:
            await asyncio.sleep(0.05)
        async with person(live.ws_url, sid) as p:
            await p.answer_all({"target": ["staging"], "checks": ["unit"]})
        result = await asyncio.wait_for(call, QUICK)
    assert text_of(result).startswith("QUESTIONNAIRE_COMPLETED") and "target: optionIds=[staging]" in text_of(result)


async def test_fallback_asks_only_when_no_client_has_the_session_open_race_asks_anyway(live: BrokerProcess) -> None:
    sid = new_sid("host")
    someone = Person(accept(target="production", checks=["unit"]))
    async with person(live.ws_url, sid) as p:
        async with mcp_client(f"{live.url}/mcp", token(sid, "agent"), mode=MODERN, elicitation=someone) as c:
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            await p.answer_all({"target": ["staging"], "checks": ["e2e"]})  # a client has it open
            result = await asyncio.wait_for(call, QUICK)
        assert not someone.forms and "target: optionIds=[staging]" in text_of(result)
        async with mcp_client(
            f"{live.url}/mcp?inHost=race", token(sid, "agent"), mode=MODERN, elicitation=someone
        ) as c:
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            question = await p.wait_for("question", timeout=QUICK)
            result = await asyncio.wait_for(call, QUICK)  # the form answered first, the client saw it too
        assert len(someone.forms) == 1 and "target: optionIds=[production]" in text_of(result)
        closed = await p.wait_for("closed", timeout=QUICK)
        assert closed["questionnaireId"] == question["questionnaireId"]
        assert closed["answeredBy"]["client"]["kind"] == "host"  # every open client sees where


async def test_off_never_asks_in_the_host_nor_does_an_older_protocol_host(
    off: BrokerProcess, live: BrokerProcess
) -> None:
    for deployment, url, mode in ((off, "/mcp", MODERN), (live, "/mcp?inHost=off", MODERN), (live, "/mcp", "legacy")):
        sid = new_sid("host")
        someone = Person(accept(target="production", checks=["unit"]))
        async with (
            mcp_client(f"{deployment.url}{url}", token(sid, "agent"), mode=mode, elicitation=someone) as c,
            person(deployment.ws_url, sid) as p,
        ):
            call = asyncio.create_task(c.call_tool("questionnaire", ARGUMENTS))
            await p.answer_all({"target": ["staging"], "checks": ["e2e"]})
            result = await asyncio.wait_for(call, QUICK)
        assert not someone.forms, (url, mode)
        assert "target: optionIds=[staging]" in text_of(result)


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
