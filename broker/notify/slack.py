"""The ``slack`` kind: a message through a Slack app's incoming webhook, in Block Kit.

A header (what happens), the waiting question (label in bold, its prompt; left out when the
route says ``include_prompt = false``), who asked, the session and how many questions, and an
"Answer" button that opens the link. ``text`` is the fallback a phone's notification shows.
Slack's limits are kept (150 characters in a header, 3,000 in a section or a button's URL),
and &, < and > are escaped as its mrkdwn asks, so a prompt cannot ping @channel or forge a link.
"""

from __future__ import annotations

from typing import Any, Final

import httpx
import orjson

from broker.notify.channel import Channel
from broker.notify.config import Route
from broker.notify.notification import Notification
from broker.notify.posting import post, reachable

HEADER_LIMIT: Final = 150
TEXT_LIMIT: Final = 3000


def escaped(text: str) -> str:
    """``text`` as Slack's mrkdwn shows it literally."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message(note: Notification) -> dict[str, Any]:
    """The incoming webhook's JSON body for ``note``."""
    headline = _cut(note.headline, HEADER_LIMIT)
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": headline}}]
    if note.question is not None:
        text = f"*{escaped(note.question.label)}*\n{escaped(note.question.prompt)}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, TEXT_LIMIT)}})
    blocks.append(
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Asked by*\n{escaped(note.agent)}"},
                {"type": "mrkdwn", "text": f"*Session*\n`{escaped(note.session_id)}`"},
                {"type": "mrkdwn", "text": f"*Questions*\n{note.questions}"},
            ],
        }
    )
    blocks.append(
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Answer"},
                    "url": note.link,
                    "style": "primary",
                    "action_id": "qbroker-answer",
                }
            ],
        }
    )
    fallback = f"{note.headline} (session {note.session_id})"
    return {"text": escaped(fallback), "blocks": blocks}


class SlackChannel(Channel):
    kind = "slack"

    def __init__(self, route: Route, http: httpx.AsyncClient) -> None:
        super().__init__(route)
        self.http = http

    async def deliver(self, note: Notification) -> None:
        body = orjson.dumps(message(note))
        await post(self.http, self.route.url, body, {"Content-Type": "application/json"})

    async def check(self) -> str | None:
        return await reachable(self.route.url, self.http.timeout.connect or 5.0)
