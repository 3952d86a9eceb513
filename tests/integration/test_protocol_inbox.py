"""docs/protocol.md, "The inbox": ``GET /v1/inbox`` against real brokers (memory, and two on
Redis: the agents on one, the inbox read from the other)."""

from __future__ import annotations

import time
from typing import Any

import jwt

from tests.helpers.clients import person
from tests.helpers.inbox import every_page, get_inbox, inbox_error
from tests.helpers.processes import TEST_SECRET, token
from tests.helpers.protocol import Agent, Deployment
from tests.helpers.samples import multi, new_sid, single

ITEM_FIELDS = {
    "sessionId",
    "questionnaireId",
    "status",
    "label",
    "prompt",
    "index",
    "total",
    "createdAt",
    "updatedAt",
    "askedBy",
    "clients",
}


def tenant() -> str:
    """A fresh prefix that no other test's sessions start with."""
    return new_sid("tenant") + ":"


async def ask(deployment: Deployment, sid: str, *questions: dict[str, Any], sub: str | None = None) -> str:
    """Start a questionnaire nobody waits on (``wait=0``); its id."""
    async with Agent(deployment.agent_url, sid, token(sid, "agent", sub=sub)) as agent:
        return str((await agent.start_pending(*(questions or (single(),))))["questionnaireId"])


async def inbox_of(deployment: Deployment, tok: str, **params: str | int) -> dict[str, Any]:
    response = await get_inbox(deployment.client_url, tok, **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- what it lists ----------------------------------------------------------------------


async def test_the_inbox_lists_every_open_questionnaire_of_the_covered_sessions_and_no_other(
    deployment: Deployment,
) -> None:
    prefix, other = tenant(), tenant()
    build = await ask(deployment, prefix + "build", single("target", label="Target"), multi(), sub="deploy-bot")
    review = await ask(deployment, prefix + "review")
    queued = await ask(deployment, prefix + "review")  # second in its session: waits, and is listed
    await ask(deployment, other + "build")

    body = await inbox_of(deployment, token(prefix + "*", "client", sub="alice"))

    assert body["next"] is None
    assert {item["questionnaireId"] for item in body["items"]} == {build, review, queued}
    first = next(item for item in body["items"] if item["questionnaireId"] == build)
    assert set(first) == ITEM_FIELDS
    assert first["sessionId"] == prefix + "build"
    assert first["status"] == "in_progress"
    assert (first["label"], first["prompt"]) == ("Target", "Pick one for target?")
    assert (first["index"], first["total"]) == (0, 2)
    assert first["askedBy"] == "deploy-bot"
    assert first["clients"] == 0
    assert abs(first["createdAt"] - time.time()) < 60 and first["updatedAt"] == first["createdAt"]
    assert next(i for i in body["items"] if i["questionnaireId"] == review)["askedBy"] is None


async def test_an_item_moves_with_its_questionnaire_and_leaves_when_it_ends(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    pattern = token(prefix + "*", "client")
    qid = await ask(deployment, sid, single("first", label="First"), single("second", label="Second"))
    async with person(deployment.client_ws_url, sid) as p:
        await p.answer(await p.wait_for("question"), ["staging"])
        second = await p.wait_for("question", where=lambda f: f["index"] == 1)
        (item,) = (await inbox_of(deployment, pattern))["items"]
        assert (item["questionnaireId"], item["index"], item["label"], item["clients"]) == (qid, 1, "Second", 1)
        assert item["updatedAt"] > item["createdAt"]
        await p.answer(second, ["production"])
        await p.wait_for("closed")
    assert (await inbox_of(deployment, pattern))["items"] == []


async def test_a_draft_does_not_move_an_item(deployment: Deployment) -> None:
    prefix = tenant()
    sid = prefix + "build"
    await ask(deployment, sid, multi())
    async with person(deployment.client_ws_url, sid) as p:
        question = await p.wait_for("question")
        (before,) = (await inbox_of(deployment, token(prefix + "*", "client")))["items"]
        await p.draft(question, ["unit"])
        await p.wait_for("question", where=lambda f: f["draft"] is not None)
        (after,) = (await inbox_of(deployment, token(prefix + "*", "client")))["items"]
    assert after == before


async def test_pages_go_by_session_then_waiting_for_the_person_first(deployment: Deployment) -> None:
    prefix = tenant()
    first = await ask(deployment, prefix + "b")
    second = await ask(deployment, prefix + "c")
    third = await ask(deployment, prefix + "a")
    async with person(deployment.client_ws_url, prefix + "b") as p:  # the oldest asks the agent back
        await p.clarify(await p.wait_for("question"), "which staging?")
        await p.wait_for("suspended")

    items = (await inbox_of(deployment, token(prefix + "*", "client")))["items"]

    assert [item["questionnaireId"] for item in items] == [third, first, second]
    assert [item["status"] for item in items] == ["in_progress", "needs_clarification", "in_progress"]


# --- scopes -----------------------------------------------------------------------------


async def test_a_token_for_one_session_lists_that_session_only(deployment: Deployment) -> None:
    prefix = tenant()
    mine = await ask(deployment, prefix + "mine")
    await ask(deployment, prefix + "other")
    items = (await inbox_of(deployment, token(prefix + "mine", "client")))["items"]
    assert [item["questionnaireId"] for item in items] == [mine]


async def test_a_token_for_every_session_lists_them_all(deployment: Deployment) -> None:
    ids = {await ask(deployment, tenant() + "x"), await ask(deployment, new_sid())}
    listed = {item["questionnaireId"] for item in await every_page(deployment.client_url, token("*", "client"), 500)}
    assert ids <= listed


async def test_a_pattern_without_a_colon_covers_every_session_it_starts(deployment: Deployment) -> None:
    base = new_sid("team")
    ids = {await ask(deployment, base + "-a:build"), await ask(deployment, base + "-b"), await ask(deployment, base)}
    await ask(deployment, "x" + base)
    items = (await inbox_of(deployment, token(base + "*", "client")))["items"]
    assert {item["questionnaireId"] for item in items} == ids


# --- pages ------------------------------------------------------------------------------


async def test_pages_of_a_limit_cover_the_list_once_in_order(deployment: Deployment) -> None:
    prefix = tenant()
    for n in range(7):
        await ask(deployment, f"{prefix}{n % 3}")
    pattern = token(prefix + "*", "client")
    whole = (await inbox_of(deployment, pattern))["items"]
    assert len(whole) == 7

    paged = await every_page(deployment.client_url, pattern, 3)

    assert paged == whole
    first = await inbox_of(deployment, pattern, limit=3)
    assert len(first["items"]) == 3 and isinstance(first["next"], str)


async def test_the_default_page_is_a_hundred(deployment: Deployment) -> None:
    prefix = tenant()
    async with Agent(deployment.agent_url, prefix + "many", token(prefix + "many", "agent")) as agent:
        for _ in range(101):
            await agent.start_pending(single())
    body = await inbox_of(deployment, token(prefix + "*", "client"))
    assert len(body["items"]) == 100 and body["next"] is not None
    rest = await inbox_of(deployment, token(prefix + "*", "client"), cursor=body["next"])
    assert len(rest["items"]) == 1 and rest["next"] is None


async def test_a_bad_limit_cursor_or_parameter_is_refused(deployment: Deployment) -> None:
    tok = token(tenant() + "*", "client")
    for params, what in (
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"limt": 5}, "unknown query parameter"),
    ):
        response = await get_inbox(deployment.client_url, tok, **params)
        assert what in inbox_error(response, 400, "invalid_arguments"), params
    async with Agent(deployment.agent_url, "unused", None) as agent:  # a repeated parameter
        response = await agent.http.get(
            f"{deployment.client_url}/v1/inbox?limit=1&limit=2", headers={"Authorization": f"Bearer {tok}"}
        )
    assert "more than once" in inbox_error(response, 400, "invalid_arguments")


# --- who may ask ------------------------------------------------------------------------


async def test_the_inbox_needs_a_valid_client_token(deployment: Deployment) -> None:
    prefix = tenant()
    expired = jwt.encode({"sid": prefix + "*", "role": "client", "exp": time.time() - 5}, TEST_SECRET, "HS256")
    forged = jwt.encode({"sid": prefix + "*", "role": "client"}, "another secret of 32 bytes or more!", "HS256")
    for tok, what in (
        (None, "missing"),
        (token(prefix + "*", "agent"), "agent token"),
        (token("*", "admin"), "admin token"),
        (expired, "expired"),
        (forged, "invalid token"),
    ):
        response = await get_inbox(deployment.client_url, tok)
        message = inbox_error(response, 401, "unauthorized")
        assert message.startswith("inbox: ") and what in message, (tok, message)


async def test_only_get_and_head_are_served(deployment: Deployment) -> None:
    tok = token(tenant() + "*", "client")
    async with Agent(deployment.agent_url, "unused", None) as agent:
        url, headers = f"{deployment.client_url}/v1/inbox", {"Authorization": f"Bearer {tok}"}
        head = await agent.http.head(url, headers=headers)
        assert head.status_code == 200 and head.content == b""
        post = await agent.http.post(url, headers=headers)
    assert post.headers["allow"] == "GET, HEAD"
    assert inbox_error(post, 405, "method_not_allowed").startswith("inbox: POST")


async def test_the_answer_is_not_cached(deployment: Deployment) -> None:
    response = await get_inbox(deployment.client_url, token(tenant() + "*", "client"))
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-type"] == "application/json"
