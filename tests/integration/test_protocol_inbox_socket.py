"""docs/protocol.md, "The inbox": the inbox websocket ``/v1/inbox/ws`` against real brokers.

On Redis the deployment has two brokers: the agents call the first, the inbox sockets
connect to the second, and the people answer on either, so every change reaches the inbox
across processes. Timing: a change must reach the inbox within a second.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import jwt
import pytest
import websockets

from tests.helpers.clients import MSGPACK, barrier, close_code, hello, person
from tests.helpers.inbox import InboxClient, get_inbox, raw_inbox_socket
from tests.helpers.processes import TEST_SECRET, token
from tests.helpers.protocol import Agent, Deployment
from tests.helpers.samples import multi, new_sid, single

WITHIN = 1.0  # seconds a change may take to reach an inbox socket


def tenant() -> str:
    return new_sid("tenant") + ":"


def inbox(deployment: Deployment, scope: str, **kwargs: Any) -> Any:
    return InboxClient.connect_inbox(deployment.client_ws_url, token(scope, "client"), **kwargs)


async def ask(deployment: Deployment, sid: str, *questions: dict[str, Any]) -> str:
    async with Agent(deployment.agent_url, sid) as agent:
        return str((await agent.start_pending(*(questions or (single(),))))["questionnaireId"])


# --- the list -------------------------------------------------------------------------------


async def test_the_first_frame_is_the_inbox_the_get_lists(deployment: Deployment) -> None:
    prefix = tenant()
    ids = {
        await ask(deployment, prefix + "a"),
        await ask(deployment, prefix + "b"),
        await ask(deployment, prefix + "b"),
    }
    await ask(deployment, tenant() + "a")
    async with inbox(deployment, prefix + "*") as watching:
        listed = (await get_inbox(deployment.client_url, token(prefix + "*", "client"))).json()["items"]
        assert watching.welcome == {"type": "inbox", "items": listed}
        assert {item["questionnaireId"] for item in listed} == ids


async def test_an_empty_inbox_is_an_empty_list(deployment: Deployment) -> None:
    async with inbox(deployment, tenant() + "*") as watching:
        assert watching.welcome == {"type": "inbox", "items": []}


async def test_every_connection_starts_with_the_whole_list(deployment: Deployment) -> None:
    prefix = tenant()
    qid = await ask(deployment, prefix + "a")
    for _ in range(2):  # a reconnect is a new connection: the list again
        async with inbox(deployment, prefix + "*") as watching:
            assert [item["questionnaireId"] for item in watching.welcome["items"]] == [qid]


async def test_msgpack_inbox_frames_carry_the_same_items(deployment: Deployment) -> None:
    prefix = tenant()
    await ask(deployment, prefix + "a")
    async with (
        inbox(deployment, prefix + "*") as json_inbox,
        inbox(deployment, prefix + "*", subprotocol=MSGPACK) as packed,
    ):
        assert packed.welcome == json_inbox.welcome


# --- changes --------------------------------------------------------------------------------


async def test_a_new_questionnaire_in_a_covered_session_arrives(deployment: Deployment) -> None:
    prefix = tenant()
    async with inbox(deployment, prefix + "*") as watching:
        began = time.monotonic()
        qid = await ask(deployment, prefix + "fresh")
        item = await watching.item(qid, timeout=10)
        assert time.monotonic() - began < WITHIN + 1.0  # (the start's own round trip included)
        assert (item["sessionId"], item["status"], item["index"], item["clients"]) == (
            prefix + "fresh",
            "in_progress",
            0,
            0,
        )


async def test_an_answer_moves_the_item_on_every_broker_within_a_second(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    qid = await ask(deployment, sid, single("first"), single("second", label="Second"))
    async with (
        inbox(deployment, prefix + "*") as watching,
        person(deployment.other_ws_url, sid) as p,  # (on Redis: another broker than the inbox's)
    ):
        question = await p.wait_for("question")
        await watching.item(qid, clients=1)
        began = time.monotonic()
        await p.answer(question, ["staging"])
        item = await watching.item(qid, index=1)
        assert time.monotonic() - began < WITHIN
        assert (item["label"], item["status"]) == ("Second", "in_progress")


async def test_a_clarification_request_and_the_resume_move_the_item(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    async with Agent(deployment.agent_url, sid) as agent, inbox(deployment, prefix + "*") as watching:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        async with person(deployment.other_ws_url, sid) as p:
            await p.clarify(await p.wait_for("question"), "which staging?")
            await watching.item(qid, status="needs_clarification")
            result = await agent.outcome(qid)
            await agent.resume(qid, result.resume_call()["revision"], "the EU one")  # type: ignore[index]
            await watching.item(qid, status="in_progress")


async def test_an_ended_questionnaire_is_removed_with_how_it_ended(deployment: Deployment) -> None:
    prefix = tenant()
    done = await ask(deployment, prefix + "a")
    cancelled = await ask(deployment, prefix + "b")
    aborted = await ask(deployment, prefix + "c")
    async with inbox(deployment, prefix + "*") as watching:
        async with person(deployment.other_ws_url, prefix + "a") as p:
            await p.answer(await p.wait_for("question"), ["staging"])
            assert await watching.removed(done) == {
                "type": "inbox_removed",
                "sessionId": prefix + "a",
                "questionnaireId": done,
                "status": "completed",
            }
        async with person(deployment.other_ws_url, prefix + "b") as p:
            await p.cancel(await p.wait_for("question"))
            removed = await watching.removed(cancelled)
            assert (removed["status"], removed["cancellationReason"]) == ("cancelled", "user_cancelled")
        async with Agent(deployment.agent_url, prefix + "c") as agent:
            await agent.delete(aborted)
        removed = await watching.removed(aborted)
        assert (removed["status"], removed["cancellationReason"]) == ("cancelled", "aborted")
        assert watching.items == {}


async def test_a_draft_sends_nothing_to_the_inbox(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    qid = await ask(deployment, sid, multi())
    async with inbox(deployment, prefix + "*") as watching, person(deployment.client_ws_url, sid) as p:
        question = await p.wait_for("question")
        await watching.item(qid, clients=1)
        mark = len(watching.received)
        await p.draft(question, ["unit"])
        await p.wait_for("question", where=lambda f: f["draft"] is not None)
        await p.answer(question, ["lint"])  # a change after the draft: had the draft sent one, it came first
        await watching.removed(qid)
        assert [f["type"] for f in watching.received[mark:]] == ["inbox_removed"]


async def test_who_is_connected_reaches_the_inbox(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    qid = await ask(deployment, sid)
    async with inbox(deployment, prefix + "*") as watching:
        async with person(deployment.other_ws_url, sid):
            await watching.item(qid, clients=1)
            async with person(deployment.client_ws_url, sid):
                await watching.item(qid, clients=2)
            await watching.item(qid, clients=1)
        await watching.item(qid, clients=0)


async def test_sessions_outside_the_scope_send_nothing(deployment: Deployment) -> None:
    prefix = tenant()
    async with inbox(deployment, prefix + "mine") as mine:  # one session's token
        other = await ask(deployment, prefix + "other")
        await ask(deployment, tenant() + "mine")
        own = await ask(deployment, prefix + "mine")
        await mine.item(own)  # after the others: had theirs come, they came first
        await barrier(mine)
        assert [f["item"]["questionnaireId"] for f in mine.received if f["type"] == "inbox_item"] == [own]
        assert other not in {qid for _, qid in mine.items}


async def test_a_session_that_empties_and_is_asked_again_comes_back(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "again"
    async with inbox(deployment, prefix + "*") as watching:
        first = await ask(deployment, sid)
        await watching.item(first)
        async with Agent(deployment.agent_url, sid) as agent:
            await agent.delete(first)
        await watching.removed(first)
        second = await ask(deployment, sid)
        await watching.item(second)
        assert list(watching.items) == [(sid, second)]


# --- the connection -------------------------------------------------------------------------


async def test_ping_pong_and_nothing_else(deployment: Deployment) -> None:
    async with inbox(deployment, tenant() + "*") as watching:
        assert await watching.ping() == {"type": "pong"}
        await watching.send({"type": "cancel", "questionnaireId": "q", "step": 0, "ref": 7})
        error = await watching.wait_for("error")
        assert (error["code"], error["ref"]) == ("bad_frame", 7)
        assert "ping frames only" in error["message"]
        await watching.send({"type": "hello", "token": token("x", "client")})
        assert "already" in (await watching.wait_for("error"))["message"]
        assert await watching.ping() == {"type": "pong"}


ONLY_PINGS = "the inbox socket takes ping frames only; answer on the session's socket /v1/sessions/{sid}/ws"


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "answer", "ref": "a1"},  # no questionnaireId: the type is what is wrong
        {"type": "answer", "questionnaireId": "q", "questionId": "x", "optionIds": ["y"], "step": 0, "ref": 3},
        {"type": "draft", "questionnaireId": "q", "step": 0, "other": "password=hunter2", "ref": 4},
        {"type": "clarify", "request": "token: Xy9-secret", "ref": 5},
        {"type": "no-such-frame", "ref": 6},
        {"type": "cancel"},
    ],
    ids=["bare-answer", "answer", "draft-with-a-secret", "clarify", "unknown", "no-ref"],
)
async def test_any_frame_but_ping_gets_one_error_naming_the_session_socket(
    deployment: Deployment, frame: dict[str, Any]
) -> None:
    async with inbox(deployment, tenant() + "*") as watching:
        await watching.send(frame)
        error = await watching.wait_for("error")
        assert error == {
            "type": "error",
            "code": "bad_frame",
            "message": ONLY_PINGS,
            **({"ref": frame["ref"]} if "ref" in frame else {}),
        }
        assert await watching.ping() == {"type": "pong"}  # (the socket stays open)


@pytest.mark.parametrize(
    ("first", "code"),
    [('{"type": "ping"}', 4400), ("not json", 4400), (hello("not-a-token"), 4401)],
    ids=["ping", "garbage", "bad token"],
)
async def test_a_bad_first_frame_closes_as_on_a_session_socket(deployment: Deployment, first: str, code: int) -> None:
    ws = await raw_inbox_socket(deployment.client_ws_url)
    await ws.send(first)
    assert await close_code(ws) == code


@pytest.mark.parametrize("role", ["agent", "admin"])
async def test_a_token_of_another_role_closes_4401(deployment: Deployment, role: str) -> None:
    ws = await raw_inbox_socket(deployment.client_ws_url)
    await ws.send(hello(token("*", role)))  # type: ignore[arg-type]
    assert await close_code(ws) == 4401


async def test_the_connection_closes_4401_when_its_token_expires(deployment: Deployment) -> None:
    expiring = jwt.encode({"sid": tenant() + "*", "role": "client", "exp": time.time() + 1.5}, TEST_SECRET, "HS256")
    ws = await raw_inbox_socket(deployment.client_ws_url)
    await ws.send(hello(expiring))
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "inbox"
    assert await close_code(ws, timeout=10) == 4401


async def test_no_hello_in_time_closes_4408(fast_deployment: Deployment) -> None:
    ws = await raw_inbox_socket(fast_deployment.client_ws_url)
    assert await close_code(ws, timeout=10) == 4408


async def test_a_foreign_origin_is_refused_and_the_broker_s_own_accepted(deployment: Deployment) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await raw_inbox_socket(deployment.client_ws_url, origin="https://evil.example")
    assert refused.value.response.status_code == 403
    ws = await raw_inbox_socket(deployment.client_ws_url, origin=deployment.client_url)
    await ws.send(hello(token(tenant() + "*", "client")))
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "inbox"
    await ws.close()


async def test_only_the_broker_s_subprotocols_are_accepted(deployment: Deployment) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await raw_inbox_socket(deployment.client_ws_url, subprotocol="chat.v2")
    assert refused.value.response.status_code == 403
    ws = await raw_inbox_socket(deployment.client_ws_url, subprotocol=None)  # none offered: JSON
    await ws.send(hello(token(tenant() + "*", "client")))
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "inbox"
    await ws.close()


async def test_the_rate_limit_closes_1008(fast_deployment: Deployment) -> None:
    async with InboxClient.connect_inbox(fast_deployment.client_ws_url, token(tenant() + "*", "client")) as watching:
        for _ in range(40):
            try:
                await watching.send({"type": "ping"})
            except websockets.ConnectionClosed:
                break
        assert await watching.expect_close() == 1008


async def test_an_inbox_whose_token_is_revoked_is_closed_4401_within_a_second(deployment: Deployment) -> None:
    prefix = tenant()
    doomed = token(prefix + "*", "client", 600, sub="carol")
    async with (
        InboxClient.connect_inbox(deployment.client_ws_url, doomed) as watching,
        inbox(deployment, prefix + "*") as other,
    ):
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                f"{deployment.agent_url}/v1/revocations",  # (on Redis: another broker than the inbox's)
                json={"jti": jwt.decode(doomed, options={"verify_signature": False})["jti"]},
                headers={"Authorization": f"Bearer {token('*', 'admin', 600)}"},
            )
        assert response.status_code == 200, response.text
        since = time.monotonic()
        assert await watching.expect_close(timeout=WITHIN * 3) == 4401
        assert time.monotonic() - since <= WITHIN
        assert await other.ping() == {"type": "pong"}  # another token's inbox stays
        assert (await get_inbox(deployment.client_url, doomed)).status_code == 401
