"""docs/protocol.md, "Who answered": every change's events, the session's history, and
``answeredBy`` for the other clients. On both deployments: on Redis the agent talks to one
broker process and the clients to the other, and the record is read from either."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.helpers.clients import person
from tests.helpers.processes import token
from tests.helpers.protocol import Agent, Deployment, pending
from tests.helpers.samples import multi, new_sid, single

SECRETS = ("SECRET-OTHER-51ab", "SECRET-REQUEST-62bc", "SECRET-RESPONSE-73cd")


def alice(sid: str) -> str:
    return token(sid, "client", sub="alice")


def by_client(sub: str | None, kind: str, name: str) -> dict[str, Any]:
    return {"sub": sub, "role": "client", "client": {"kind": kind, "name": name}}


AGENT_BY = {"sub": "build-agent", "role": "agent", "client": None}


def error(response: httpx.Response, status: int, code: str) -> str:
    """Assert the API's error shape ``{"error": {"code", "message"}}`` with ``status``, the
    message starting with the endpoint's word."""
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    message: str = body["error"]["message"]
    word = "events" if response.url.path.endswith("/events") else "history"
    assert message.startswith(f"{word}: "), message
    return message


async def get(url: str, path: str, tok: str | None, **params: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {tok}"} if tok is not None else {}
    async with httpx.AsyncClient(timeout=30.0) as http:
        return await http.get(f"{url}{path}", params=params, headers=headers)


async def events(url: str, sid: str, qid: str, tok: str) -> list[dict[str, Any]]:
    response = await get(url, f"/v1/sessions/{sid}/questionnaires/{qid}/events", tok)
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["events"]
    listed: list[dict[str, Any]] = body["events"]
    return listed


async def history(url: str, sid: str, tok: str, **params: str) -> dict[str, Any]:
    response = await get(url, f"/v1/sessions/{sid}/questionnaires", tok, **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- events ---------------------------------------------------------------------------------


async def test_every_change_is_recorded_with_who_made_it_and_no_text(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent", sub="build-agent")) as agent:
        async with person(deployment.client_ws_url, sid, alice(sid), kind="tui", name="qbroker tui") as p:
            qid = (await agent.start_pending(single("first", allowOther=True), multi("checks")))["questionnaireId"]
            q = await p.wait_for("question")
            await p.answer(q, [], other=SECRETS[0])
            q = await p.wait_for("question", where=lambda f: f["index"] == 1)
            await p.clarify(q, SECRETS[1])
            suspended = await p.wait_for("suspended")
            resumed = pending(await agent.resume(qid, suspended["revision"], SECRETS[2]))
            assert resumed["questionnaireId"] == qid
            q = await p.wait_for("question", where=lambda f: f["step"] == 3)
            await p.answer(q, ["unit"])
            await p.wait_for("closed")

        for url, tok in ((deployment.agent_url, agent.token), (deployment.client_url, alice(sid))):
            recorded = await events(url, sid, qid, tok)
            tui = by_client("alice", "tui", "qbroker tui")
            assert [(e["type"], e["step"], e.get("questionId"), e["by"]) for e in recorded] == [
                ("started", 0, None, AGENT_BY),
                ("answered", 0, "first", tui),
                ("clarification_requested", 1, "checks", tui),
                ("resumed", 2, "checks", AGENT_BY),
                ("answered", 3, "checks", tui),
                ("completed", 3, None, tui),
            ]
            assert recorded[0]["questions"] == 2
            assert [e.get("revision") for e in recorded[2:4]] == [1, 1]
            times = [e["at"] for e in recorded]
            assert times == sorted(times)
            text = json.dumps(recorded)
            assert not any(secret in text for secret in SECRETS)
    assert not any(secret in deployment.logs() for secret in SECRETS)


async def test_an_abort_records_the_agent_and_a_cancel_the_person(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent", sub="build-agent")) as agent:
        async with person(deployment.client_ws_url, sid, alice(sid), kind="web", name="qbroker web") as p:
            aborted = (await agent.start_pending(single()))["questionnaireId"]
            await p.wait_for("question")
            assert (await agent.delete(aborted)).status_code == 200
            await p.wait_for("closed")
            cancelled = (await agent.start_pending(single()))["questionnaireId"]
            q = await p.wait_for("question", where=lambda f: f["questionnaireId"] == cancelled)
            await p.cancel(q)
            await p.wait_for("closed", where=lambda f: f["questionnaireId"] == cancelled)

        recorded = await events(deployment.agent_url, sid, aborted, agent.token)
        assert [(e["type"], e["by"]) for e in recorded] == [("started", AGENT_BY), ("aborted", AGENT_BY)]
        assert recorded[1]["questionId"] == "target"
        recorded = await events(deployment.agent_url, sid, cancelled, agent.token)
        web = by_client("alice", "web", "qbroker web")
        assert [(e["type"], e["by"]) for e in recorded] == [("started", AGENT_BY), ("cancelled", web)]


async def test_the_broker_s_own_outcome_is_recorded_by_nobody(fast_deployment: Deployment, sid: str) -> None:
    async with Agent(fast_deployment.agent_url, sid) as agent:
        qid = (await agent.start_pending(single()))["questionnaireId"]
        assert (await agent.outcome(qid)).status == "unavailable"
        recorded = await events(fast_deployment.client_url, sid, qid, token(sid, "client"))
    assert [(e["type"], e["by"]) for e in recorded] == [
        ("started", {"sub": None, "role": "agent", "client": None}),  # (a token that names nobody)
        ("unavailable", None),
    ]
    assert recorded[1]["reason"] == "ui_unavailable"


async def test_the_events_of_an_unknown_questionnaire_are_404(deployment: Deployment, sid: str) -> None:
    response = await get(deployment.agent_url, f"/v1/sessions/{sid}/questionnaires/nope/events", token(sid, "agent"))
    assert "nope" in error(response, 404, "unknown_questionnaire")


# --- history --------------------------------------------------------------------------------


async def test_the_history_lists_the_session_s_questionnaires_newest_first(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid, token(sid, "agent", sub="build-agent")) as agent:
        first = (await agent.start_pending(single()))["questionnaireId"]
        assert (await agent.delete(first)).status_code == 200
        second = (await agent.start_pending(single(), multi()))["questionnaireId"]
        async with Agent(deployment.agent_url, new_sid()) as stranger:
            await stranger.start_pending(single())  # another session's

        for url, tok in ((deployment.agent_url, agent.token), (deployment.client_url, token(sid, "client"))):
            listed = await history(url, sid, tok)
            assert listed["next"] is None
            assert [item["id"] for item in listed["items"]] == [second, first]
            newest, oldest = listed["items"]
            assert newest == {
                "id": second,
                "status": "in_progress",
                "reason": None,
                "createdAt": newest["createdAt"],
                "endedAt": None,
                "askedBy": "build-agent",
                "questions": 2,
            }
            assert oldest["status"] == "cancelled" and oldest["reason"] == "aborted"
            assert oldest["createdAt"] <= oldest["endedAt"] and oldest["questions"] == 1
            assert (await history(url, sid, tok, status="cancelled"))["items"] == [oldest]
            assert (await history(url, sid, tok, status="completed"))["items"] == []


async def test_the_history_pages_with_limit_and_before(deployment: Deployment, sid: str) -> None:
    async with Agent(deployment.agent_url, sid) as agent:
        ids = [(await agent.start_pending(single()))["questionnaireId"] for _ in range(5)]
        for qid in ids[:4]:
            assert (await agent.delete(qid)).status_code == 200

        seen: list[str] = []
        cursor: str | None = None
        for _ in range(5):
            page = await history(
                deployment.client_url, sid, agent.token, limit="2", **({"before": cursor} if cursor else {})
            )
            seen += [item["id"] for item in page["items"]]
            cursor = page["next"]
            if cursor is None:
                break
        assert seen == ids[::-1]

        cancelled = await history(deployment.client_url, sid, agent.token, status="cancelled", limit="3")
        assert [item["id"] for item in cancelled["items"]] == ids[3:0:-1]
        rest = await history(deployment.client_url, sid, agent.token, status="cancelled", before=cancelled["next"])
        assert [item["id"] for item in rest["items"]] == [ids[0]] and rest["next"] is None


async def test_the_history_of_a_session_without_questionnaires_is_empty(deployment: Deployment, sid: str) -> None:
    assert await history(deployment.agent_url, sid, token(sid, "agent")) == {"items": [], "next": None}


async def test_the_history_refuses_what_it_does_not_take(deployment: Deployment, sid: str) -> None:
    url, tok, path = deployment.agent_url, token(sid, "agent"), f"/v1/sessions/{sid}/questionnaires"
    error(await get(url, path, tok, status="done"), 400, "invalid_arguments")
    error(await get(url, path, tok, limit="0"), 400, "invalid_arguments")
    error(await get(url, path, tok, limit="201"), 400, "invalid_arguments")
    error(await get(url, path, tok, limit="ten"), 400, "invalid_arguments")
    error(await get(url, path, tok, before="-1"), 400, "invalid_arguments")
    for name in ("status", "limit", "before"):
        error(await get(url, path, tok, **{name: ""}), 400, "invalid_arguments")
    assert "'sort'" in error(await get(url, path, tok, sort="asc"), 400, "invalid_arguments")
    error(await get(url, f"{path}/q/events", tok, limit="1"), 400, "invalid_arguments")
    async with httpx.AsyncClient(timeout=30.0) as http:
        refused = await http.post(f"{url}{path}", headers={"Authorization": f"Bearer {tok}"})
    error(refused, 405, "method_not_allowed")
    assert refused.headers["allow"] == "GET, HEAD"


async def test_the_record_needs_a_token_of_the_session(deployment: Deployment, sid: str) -> None:
    url = deployment.agent_url
    for path in (f"/v1/sessions/{sid}/questionnaires", f"/v1/sessions/{sid}/questionnaires/q/events"):
        error(await get(url, path, None), 401, "unauthorized")
        error(await get(url, path, "not-a-token"), 401, "unauthorized")
        error(await get(url, path, token(new_sid(), "client")), 403, "forbidden")
        error(await get(url, path, token(new_sid(), "agent")), 403, "forbidden")
        error(await get(url, path, token("*", "admin")), 401, "unauthorized")
    assert (await get(url, f"/v1/sessions/{sid}/questionnaires", token("*", "agent"))).status_code == 200
    assert (await get(url, f"/v1/sessions/{sid}/questionnaires", token(sid[:4] + "*", "client"))).status_code == 200
    error(await get(url, "/v1/sessions/bad%20id/questionnaires", token("*", "agent")), 400, "invalid_arguments")


# --- answeredBy -----------------------------------------------------------------------------


async def test_the_other_clients_are_told_who_answered(deployment: Deployment, agent: Agent, sid: str) -> None:
    async with (
        person(deployment.client_ws_url, sid, alice(sid), kind="tui", name="qbroker tui") as answering,
        person(deployment.other_ws_url, sid, token(sid, "client", sub="bob"), kind="web", name="qbroker web") as other,
    ):
        qid = (await agent.start_pending(single("first"), single("second")))["questionnaireId"]
        first = await answering.wait_for("question")
        assert "answeredBy" not in first and "answeredBy" not in await other.wait_for("question")
        await answering.answer(first, ["staging"])
        moved_on = await other.wait_for("question", where=lambda f: f["index"] == 1)
        assert moved_on["answeredBy"] == by_client("alice", "tui", "qbroker tui")
        second = await answering.wait_for("question", where=lambda f: f["index"] == 1)
        await answering.answer(second, ["production"])
        closed = await other.wait_for("closed")
        assert closed == {
            "type": "closed",
            "questionnaireId": qid,
            "status": "completed",
            "answeredBy": by_client("alice", "tui", "qbroker tui"),
        }


async def test_a_client_that_joins_later_is_told_who_answered_the_question_before(
    deployment: Deployment, agent: Agent, sid: str
) -> None:
    async with person(deployment.client_ws_url, sid, alice(sid), kind="bot", name="helper") as answering:
        await agent.start_pending(single("first"), single("second"))
        await answering.answer(await answering.wait_for("question"), ["staging"])
        await answering.wait_for("question", where=lambda f: f["index"] == 1)
        async with person(deployment.other_ws_url, sid) as late:
            shown = await late.wait_for("question")
    assert shown["index"] == 1 and shown["answeredBy"] == by_client("alice", "bot", "helper")
