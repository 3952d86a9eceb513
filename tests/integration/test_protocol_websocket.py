"""docs/protocol.md, "Client protocol": subprotocols, hello, welcome, frame shapes, ping/pong,
``error`` frames with ``ref``, and the close codes for protocol violations and shutdown."""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import msgpack
import pytest
import websockets

from tests.helpers.clients import JSON, MSGPACK, barrier, close_code, hello, person, raw_socket
from tests.helpers.processes import token
from tests.helpers.protocol import Agent, Deployment
from tests.helpers.samples import multi, single

# At the dependency floors too: the websocket transport extends uvicorn's protocol class and reads
# websockets' protocol state, on both stores.
pytestmark = pytest.mark.floors


@pytest.mark.parametrize("subprotocol", [JSON, MSGPACK])
async def test_a_whole_questionnaire_over_each_subprotocol(
    deployment: Deployment, agent: Agent, sid: str, subprotocol: str
) -> None:
    async with person(deployment.client_ws_url, sid, subprotocol=subprotocol) as p:
        assert p.ws.subprotocol == subprotocol
        assert p.welcome["type"] == "welcome"
        assert p.welcome["sessionId"] == sid
        assert p.welcome["protocol"] == 1
        assert isinstance(p.welcome["clientId"], str) and p.welcome["clientId"]
        assert await p.wait_for() == {"type": "idle"}
        qid = (
            await agent.start_pending(
                single("target", label="Target"), multi("checks", label="Checks", maxSelections=2)
            )
        )["questionnaireId"]
        q = await p.wait_for("question")
        assert q["questionnaireId"] == qid
        assert q["revision"] == 0 and q["step"] == 0 and q["index"] == 0 and q["total"] == 2
        assert q["question"]["id"] == "target" and q["question"]["type"] == "single"
        assert q["draft"] is None
        assert q["clarifications"] == []
        assert q["progress"] == [
            {"questionId": "target", "label": "Target", "state": "current"},
            {"questionId": "checks", "label": "Checks", "state": "pending"},
        ]
        await p.answer(q, ["staging"])
        q = await p.wait_for("question")
        assert q["step"] == 1 and q["index"] == 1
        assert q["question"]["minSelections"] == 0 and q["question"]["maxSelections"] == 2
        assert [s["state"] for s in q["progress"]] == ["answered", "current"]
        await p.answer(q, ["e2e"], other="smoke")
        closed = await p.wait_for("closed")
        assert closed["questionnaireId"] == qid and closed["status"] == "completed"
        assert await p.wait_for() == {"type": "idle"}
    result = await agent.outcome(qid)
    assert result.details["answers"][1] == {"questionId": "checks", "selectedOptionIds": ["e2e"], "other": "smoke"}


async def test_msgpack_frames_are_binary_and_json_frames_text(deployment: Deployment, sid: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid, subprotocol=MSGPACK)
    assert ws.subprotocol == MSGPACK
    await ws.send(
        msgpack.packb({"type": "hello", "token": token(sid, "client"), "client": {"kind": "bot", "name": "m"}})
    )
    data = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(data, bytes)
    assert msgpack.unpackb(data)["type"] == "welcome"
    await ws.close()
    ws = await raw_socket(deployment.client_ws_url, sid, subprotocol=JSON)
    assert ws.subprotocol == JSON
    await ws.send(hello(token(sid, "client")))
    data = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(data, str)
    assert json.loads(data)["type"] == "welcome"
    await ws.close()


async def test_welcome_then_the_current_question(deployment: Deployment, agent: Agent, sid: str) -> None:
    qid = (await agent.start_pending(single()))["questionnaireId"]
    async with person(deployment.client_ws_url, sid) as p:
        q = await p.wait_for()
        assert q["type"] == "question" and q["questionnaireId"] == qid
        assert [f["type"] for f in p.received] == ["welcome", "question"]


@pytest.mark.parametrize(
    "first",
    [
        json.dumps({"type": "ping"}),
        json.dumps({"type": "answer", "questionnaireId": "x", "step": 0, "questionId": "q", "selectedOptionIds": []}),
        "this is not json",
        json.dumps(["hello"]),
    ],
    ids=["ping", "answer", "garbage", "list"],
)
async def test_first_frame_not_a_hello_closes_4400(deployment: Deployment, sid: str, first: str) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(first)
    assert await close_code(ws) == 4400


@pytest.mark.parametrize(
    ("hello_frame", "reason"),
    [
        (
            {"type": "hello", "token": "t", "client": {"kind": "robot"}},
            "hello client 'kind' must be one of tui, web, bot",
        ),
        ({"type": "hello", "token": "t", "extra": 1}, "hello frame has unknown key(s): extra"),
        ({"type": "ping"}, "the first frame must be a hello"),
    ],
    ids=["bad-kind", "unknown-key", "not-a-hello"],
)
async def test_a_malformed_hello_closes_4400_saying_what_is_wrong(
    deployment: Deployment, sid: str, hello_frame: dict[str, Any], reason: str
) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(json.dumps(hello_frame))
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4400, reason)


async def test_a_hello_with_a_long_unknown_key_gets_a_reason_cut_to_fit_a_close_frame(
    deployment: Deployment, sid: str
) -> None:
    ws = await raw_socket(deployment.client_ws_url, sid)
    await ws.send(json.dumps({"type": "hello", "token": "t", "é" * 200: 1}))
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400
    reason = closed.value.rcvd.reason
    assert reason.startswith("hello frame has unknown key(s): éé") and reason.endswith("...")
    assert len(reason.encode()) <= 123


async def test_ping_pong(deployment: Deployment, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        assert await p.ping() == {"type": "pong"}
        await p.send({"type": "ping", "ref": "r-1"})
        pong = await p.wait_for("pong")
        assert pong["type"] == "pong"


BAD_FRAMES = {
    "unknown type": ({"type": "dance", "ref": 7}, 7),
    "unknown key": ({"type": "ping", "ref": "r-unknown", "extra": True}, "r-unknown"),
    "answer missing step": (
        {"type": "answer", "ref": "r-step", "questionnaireId": "x", "questionId": "q", "selectedOptionIds": []},
        "r-step",
    ),
    "answer with unknown key": (
        {
            "type": "answer",
            "ref": 99,
            "questionnaireId": "x",
            "step": 0,
            "questionId": "q",
            "selectedOptionIds": [],
            "comment": "hi",
        },
        99,
    ),
    "selectedOptionIds not a list": (
        {"type": "draft", "ref": "r-ids", "questionnaireId": "x", "step": 0, "selectedOptionIds": "a"},
        "r-ids",
    ),
    "second hello": (
        {"type": "hello", "ref": "r-hello", "token": "t", "client": {"kind": "bot", "name": "x"}},
        "r-hello",
    ),
    "no type": ({"ref": "r-notype"}, "r-notype"),
}


@pytest.mark.parametrize("frame,ref", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
async def test_bad_frame_error_echoes_ref_and_keeps_the_connection(
    deployment: Deployment, agent: Agent, sid: str, frame: dict[str, object], ref: object
) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        q = await p.wait_for("question")
        await p.send(frame)
        err = await p.wait_for("error")
        assert err["code"] == "bad_frame", err
        assert err["ref"] == ref, err
        assert isinstance(err["message"], str)
        await p.ping()  # still open
        await p.answer(q, ["staging"])  # and nothing changed
        await p.wait_for("closed")
    assert (await agent.outcome(qid)).status == "completed"


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", "42"], ids=["malformed", "list", "number"])
async def test_undecodable_frame_after_hello_is_bad_frame(deployment: Deployment, sid: str, raw: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.ws.send(raw)
        err = await p.wait_for("error")
        assert err["code"] == "bad_frame"
        await p.ping()


async def test_error_without_ref_has_no_ref(deployment: Deployment, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await p.send({"type": "dance"})
        err = await p.wait_for("error")
        assert err["code"] == "bad_frame" and "ref" not in err


async def test_command_errors_echo_ref(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with person(deployment.client_ws_url, sid) as p:
        await agent.start_pending(single())
        q = await p.wait_for("question")
        await p.answer(q, ["nope"], ref="r-unknown-option")
        err = await p.wait_for("error")
        assert err == {**err, "code": "unknown_option", "ref": "r-unknown-option"}
        await p.send({"type": "cancel", "questionnaireId": q["questionnaireId"], "step": q["step"] + 5, "ref": 5})
        err = await p.wait_for("error")
        assert err["code"] == "stale_step" and err["ref"] == 5


async def test_broker_shutdown_closes_clients_with_1012(deployment: Deployment, sid: str) -> None:
    with deployment.spawn() as spawned:
        target = spawned.processes[-1]
        async with person(target.ws_url, sid) as p:
            await p.wait_for("idle")
            await barrier(p)
            assert target.process is not None
            target.process.send_signal(signal.SIGTERM)
            assert await p.expect_close(timeout=15) == 1012
