"""``GET /v1/inbox`` in process on the memory store: with an operator's ``*`` over 5,000
sessions, a page reads the sessions it shows and a bounded look-ahead (broker/service/
inbox_pages.py), not every session, and the pages together still show every item once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.app import BrokerApp, create_app
from broker.core import machine
from broker.runtime.config import Config
from broker.service.inbox_pages import LOOK_AHEAD
from broker.store.base import SessionInbox
from broker.tokens.claims import mint_token
from tests.helpers.machine import parse_start
from tests.helpers.samples import single

SECRET = "unit-test-secret-0123456789abcdef"
SESSIONS = 5000


@pytest.fixture
async def app() -> AsyncIterator[BrokerApp]:
    app = create_app(Config(secret=SECRET, client_wait=600))
    await app.broker.start()
    try:
        yield app
    finally:
        await app.broker.stop()


async def get_page(app: BrokerApp, query: str) -> dict[str, Any]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/inbox",
        "query_string": query.encode(),
        "headers": [
            (b"host", b"127.0.0.1:8700"),
            (b"authorization", f"Bearer {mint_token(SECRET, '*', 'client')}".encode()),
        ],
    }
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    body: dict[str, Any] = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    return body


async def test_a_page_of_a_broad_scope_reads_only_its_sessions_and_a_few_more(
    app: BrokerApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = app.broker.store
    now = app.broker.clock()
    questions = parse_start(single()).questions
    for number in range(SESSIONS):
        await store.create(machine.start(f"q{number}", f"tenant{number % 50}:s{number:04d}", questions, now))
    reads: list[int] = []
    original = store.session_inboxes

    async def counted(session_ids: list[str], at: float) -> list[SessionInbox]:
        reads.append(len(session_ids))
        return await original(session_ids, at)

    monkeypatch.setattr(store, "session_inboxes", counted)

    first = await get_page(app, "limit=100")

    assert len(first["items"]) == 100 and first["next"] is not None
    assert sum(reads) <= 100 + 1 + LOOK_AHEAD, f"{sum(reads)} sessions read for a page of 100"

    reads.clear()
    seen = [item["questionnaireId"] for item in first["items"]]
    cursor = first["next"]
    pages = 1
    while cursor is not None:
        page = await get_page(app, f"limit=500&cursor={cursor}")
        seen += [item["questionnaireId"] for item in page["items"]]
        cursor, pages = page["next"], pages + 1
        await asyncio.sleep(0)
    assert sorted(seen) == sorted(f"q{n}" for n in range(SESSIONS)) and len(seen) == SESSIONS
    assert max(reads) <= 256 and sum(reads) <= SESSIONS + pages * (1 + LOOK_AHEAD), (pages, sum(reads))
