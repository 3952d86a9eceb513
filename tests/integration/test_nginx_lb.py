"""deploy/nginx.conf, run by a real nginx in front of three real brokers on one redis-server.

The config under test is deploy/nginx.conf itself with only what must change on a test
machine rewritten (tests/helpers/nginx.py): consecutive websocket connections land on three
different brokers (plain round-robin, no stickiness), and a questionnaire completes with the person
and the agent both going through nginx, including a long poll that re-attaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from tests.helpers.clients import ScriptedClient, raw_socket
from tests.helpers.nginx import nginx, nginx_binary
from tests.helpers.processes import BrokerProcess, broker, need, redis_server, token
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.redis

QUESTIONS = [
    {"id": "target", "prompt": "Deploy where?", "type": "single", "options": [{"id": "staging"}, {"id": "production"}]},
    {"id": "checks", "prompt": "Which checks?", "type": "multi", "options": [{"id": "unit"}, {"id": "e2e"}]},
]


def _broker_of(client_id: str, brokers: list[BrokerProcess]) -> int:
    """Which broker logged this client joining (exactly one must have)."""

    def joined() -> list[int]:
        return [
            n
            for n, process in enumerate(brokers)
            if any(
                line.get("msg") == "client joined" and line.get("client") == client_id
                for line in map(_json_or_empty, process.log().splitlines())
            )
        ]

    found = wait_until(joined, what=f"a broker to log client {client_id}")
    assert len(found) == 1, found
    return int(found[0])


def _json_or_empty(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def _through_nginx(lb: str, brokers: list[BrokerProcess]) -> None:
    sid = "through-nginx"
    ws_base, http_base = f"ws://{lb}", f"http://{lb}"
    async with contextlib.AsyncExitStack() as stack:
        people = [
            await stack.enter_async_context(ScriptedClient.connect(ws_base, sid, token(sid, "client"))) for _ in brokers
        ]
        # Round-robin, no stickiness: three consecutive connections, three brokers.
        landed = [await asyncio.to_thread(_broker_of, p.welcome["clientId"], brokers) for p in people]
        assert sorted(landed) == list(range(len(brokers))), landed
        for p in people:
            await p.wait_for("idle")

        agent = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=http_base, headers={"Authorization": f"Bearer {token(sid, 'agent')}"}, timeout=60
            )
        )
        path = f"/v1/sessions/{sid}/questionnaire"
        start = asyncio.create_task(agent.post(f"{path}?wait=30", json={"action": "start", "questions": QUESTIONS}))
        closed = await people[0].answer_all({"target": ["production"], "checks": ["unit", "e2e"]})
        assert closed["status"] == "completed"
        for other in people[1:]:  # every client, on every broker, saw it close
            await other.wait_for("closed")
        result = (await asyncio.wait_for(start, 40)).json()
        assert result["details"]["answers"] == [
            {"questionId": "target", "selectedOptionIds": ["production"]},
            {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
        ]

        # A long poll through nginx: start without waiting, re-attach with a wait, answer.
        pending = await agent.post(f"{path}?wait=0", json={"action": "start", "questions": QUESTIONS})
        assert pending.status_code == 202, pending.text
        qid = pending.json()["questionnaireId"]
        reattached = asyncio.create_task(agent.get(f"/v1/sessions/{sid}/questionnaires/{qid}?wait=60"))
        await people[1].answer_all({"target": ["staging"], "checks": ["e2e"]})
        response = await asyncio.wait_for(reattached, 60)
        assert response.status_code == 200, response.text
        assert response.json()["details"]["status"] == "completed"

        # The same-origin check still works behind nginx (it forwards Host with the port).
        browser = await raw_socket(ws_base, sid, origin=f"http://{lb}")
        try:
            await browser.send(
                json.dumps({"type": "hello", "token": token(sid, "client"), "client": {"kind": "web", "name": "page"}})
            )
            assert json.loads(await asyncio.wait_for(browser.recv(), 10))["type"] == "welcome"
        finally:
            await browser.close()


def test_a_questionnaire_completes_through_nginx_round_robin_over_three_brokers() -> None:
    need(nginx_binary() is not None, "nginx is not installed (apt-get install nginx-light)")
    with redis_server() as redis, contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(redis.url)) for _ in range(3)]
        lb = stack.enter_context(nginx([b.port for b in brokers]))
        assert httpx.get(f"http://{lb}/healthz", timeout=5).json() == {"status": "ok"}
        assert httpx.get(f"http://{lb}/metrics", timeout=5).status_code == 404  # not for the public
        assert httpx.get(f"{brokers[0].url}/metrics", timeout=5).status_code == 200  # for the scraper
        asyncio.run(_through_nginx(lb, brokers))
