"""The inbox's clients for tests: the websocket (``InboxClient``) and ``GET /v1/inbox``.

``InboxClient`` is a ``ScriptedClient`` on ``/v1/inbox/ws``: it says hello and waits for the
``inbox`` frame (where a session client waits for ``welcome``), and keeps the list as the
frames since say it (``items``), so a test can wait for the list it expects:

    async with InboxClient.connect_inbox(deployment.client_ws_url, token("alice:*", "client")) as inbox:
        await inbox.wait_for("inbox_item", where=lambda f: f["item"]["index"] == 1)
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import websockets
from websockets.typing import Subprotocol

from tests.helpers.clients import JSON, Connecting, Frame, ScriptedClient
from tests.helpers.waiting import scaled

INBOX_WS = "/v1/inbox/ws"


class InboxClient(ScriptedClient):
    """A person's inbox socket; ``welcome`` is its first ``inbox`` frame."""

    @classmethod
    def connect_inbox(
        cls, ws_base: str, token: str, *, subprotocol: str = JSON, timeout: float = 10.0
    ) -> Connecting[InboxClient]:
        return Connecting(cls._open_inbox(ws_base, token, subprotocol=subprotocol, timeout=timeout))

    @classmethod
    async def _open_inbox(cls, ws_base: str, token: str, *, subprotocol: str, timeout: float) -> InboxClient:
        ws = await asyncio.wait_for(
            websockets.connect(
                ws_base + INBOX_WS, subprotocols=[Subprotocol(subprotocol)], open_timeout=scaled(timeout), max_size=None
            ),
            scaled(timeout),
        )
        client = cls(ws, subprotocol, {})
        client.received.clear()
        await client.send({"type": "hello", "token": token, "client": {"kind": "bot", "name": "inbox-test"}})
        client.welcome = await client.wait_for("inbox", timeout=timeout)
        return client

    @property
    def items(self) -> dict[tuple[str, str], Frame]:
        """The list as the frames received so far make it, by (session id, questionnaire id)."""
        items: dict[tuple[str, str], Frame] = {}
        for frame in self.received:
            kind = frame.get("type")
            if kind == "inbox":
                items = {(i["sessionId"], i["questionnaireId"]): i for i in frame["items"]}
            elif kind == "inbox_item":
                item = frame["item"]
                items[(item["sessionId"], item["questionnaireId"])] = item
            elif kind == "inbox_removed":
                items.pop((frame["sessionId"], frame["questionnaireId"]), None)
        return items

    async def item(self, qid: str, timeout: float = 10.0, **expected: Any) -> Frame:
        """Wait for an ``inbox_item`` of questionnaire ``qid`` with the ``expected`` fields."""
        frame = await self.wait_for(
            "inbox_item",
            timeout=timeout,
            where=lambda f: f["item"]["questionnaireId"] == qid and all(f["item"][k] == v for k, v in expected.items()),
        )
        item: Frame = frame["item"]
        return item

    async def removed(self, qid: str, timeout: float = 10.0) -> Frame:
        return await self.wait_for("inbox_removed", timeout=timeout, where=lambda f: f["questionnaireId"] == qid)


async def get_inbox(base_url: str, token: str | None, **params: str | int) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.get(f"{base_url}/v1/inbox", headers=headers, params=params)


async def every_page(base_url: str, token: str, limit: int) -> list[Frame]:
    """The items of every page, following ``next`` until it is null (at most 100 pages)."""
    items: list[Frame] = []
    cursor: str | None = None
    for _ in range(100):
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = await get_inbox(base_url, token, **params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["items"]) <= limit
        items.extend(body["items"])
        cursor = body["next"]
        if cursor is None:
            return items
    raise AssertionError("more than 100 pages")


def inbox_error(response: httpx.Response, status: int, code: str) -> str:
    """Assert ``{"error": {"code", "message": "inbox: ..."}}`` with ``status``; the message."""
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and message.startswith("inbox: "), message
    return message


async def raw_inbox_socket(
    ws_base: str, *, subprotocol: str | None = JSON, origin: str | None = None, timeout: float = 10.0
) -> websockets.ClientConnection:
    """A bare inbox websocket, no hello sent: for handshake and close-code tests."""
    timeout = scaled(timeout)
    return await asyncio.wait_for(
        websockets.connect(
            ws_base + INBOX_WS,
            subprotocols=[Subprotocol(subprotocol)] if subprotocol else None,
            origin=origin,  # type: ignore[arg-type]
            open_timeout=timeout,
            max_size=None,
            ping_interval=None,
        ),
        timeout,
    )
