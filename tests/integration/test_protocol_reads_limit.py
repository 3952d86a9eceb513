"""The reads are rate-limited per token (QBROKER_READS_PER_MINUTE, QBROKER_READS_BURST):
``GET /v1/inbox`` and the record (history, events) answer 429 ``rate_limited`` with
``Retry-After`` past a token's burst, while another token goes on; and an inbox covering
more sessions than one round of reads (broker/service/inbox_pages.py: READ_AT_ONCE) lists them all."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from broker.service.inbox_pages import READ_AT_ONCE
from tests.helpers.inbox import every_page, get_inbox, inbox_error
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.protocol import Agent
from tests.helpers.samples import new_sid, single

BURST = 5


@pytest.fixture(scope="module")
def limited() -> Iterator[BrokerProcess]:
    with broker(reads_per_minute=6, reads_burst=BURST) as process:
        yield process


async def test_the_inbox_is_limited_per_token(limited: BrokerProcess) -> None:
    tenant = new_sid("reads") + ":"
    flooding, other = token(tenant + "*", "client"), token(tenant + "*", "client")
    for _ in range(BURST):
        assert (await get_inbox(limited.url, flooding)).status_code == 200
    refused = await get_inbox(limited.url, flooding)
    assert "too many requests with this token" in inbox_error(refused, 429, "rate_limited")
    assert int(refused.headers["retry-after"]) >= 1
    assert (await get_inbox(limited.url, other)).status_code == 200  # another token goes on


async def test_the_record_is_limited_per_token(limited: BrokerProcess) -> None:
    sid = new_sid("reads")
    reader = token(sid, "agent")
    async with Agent(limited.url, sid) as agent:
        await agent.start(single(), wait=0)
    async with httpx.AsyncClient(base_url=limited.url, headers={"Authorization": f"Bearer {reader}"}) as http:
        statuses = [(await http.get(f"/v1/sessions/{sid}/questionnaires")).status_code for _ in range(BURST)]
        refused = await http.get(f"/v1/sessions/{sid}/questionnaires")
    assert statuses[:BURST] == [200] * BURST and refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited" and "retry-after" in refused.headers


async def test_an_inbox_wider_than_one_round_of_reads_lists_every_session() -> None:
    count = READ_AT_ONCE + 20
    with broker(client_wait=600) as process:
        tenant = new_sid("wide") + ":"
        for number in range(count):
            async with Agent(process.url, f"{tenant}{number}") as agent:
                await agent.start_pending(single())
        items = await every_page(process.url, token(tenant + "*", "client"), 500)  # (a page of two rounds)
    assert len({item["sessionId"] for item in items}) == count
