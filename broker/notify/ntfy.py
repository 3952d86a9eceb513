"""The ``ntfy`` kind: a POST to an ntfy topic URL (ntfy.sh or self-hosted), for phone pushes.

The body is the message (the waiting question's label and prompt, or only the count and
the session when the route leaves the prompt out); the headers carry the rest: ``Title``,
``Click`` (the link: tapping the notification opens the session), ``Priority`` (the route's,
1-5, default 4 "high") and ``Tags`` (the route's, default ``question``, plus the trigger).
A title that is not ASCII is sent RFC 2047-encoded, which ntfy decodes (HTTP headers carry
no UTF-8). ``token``: an ntfy access token, sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

import base64
from typing import Final

import httpx

from broker.notify.channel import Channel
from broker.notify.config import Route
from broker.notify.notification import Notification
from broker.notify.posting import post, reachable

DEFAULT_PRIORITY: Final = 4
DEFAULT_TAGS: Final = ("question",)


def header_text(text: str) -> str:
    """``text`` fit for an HTTP header: as it is when ASCII, else an RFC 2047 encoded word."""
    text = " ".join(text.split())  # no line breaks in a header
    if text.isascii():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="


def body(note: Notification) -> str:
    where = f"{note.questions} question{'s' if note.questions != 1 else ''} in session {note.session_id}"
    if note.question is None:
        return where
    return f"{note.question.label}\n{note.question.prompt}\n\n{where}"


def headers(route: Route, note: Notification) -> dict[str, str]:
    tags = [*route.options.get("tags", DEFAULT_TAGS), note.trigger]
    sent = {
        "Title": header_text(note.headline),
        "Click": note.link,
        "Priority": str(route.options.get("priority", DEFAULT_PRIORITY)),
        "Tags": ",".join(tags),
        "Content-Type": "text/plain; charset=utf-8",
    }
    if "token" in route.options:
        sent["Authorization"] = f"Bearer {route.options['token']}"
    return sent


class NtfyChannel(Channel):
    kind = "ntfy"

    def __init__(self, route: Route, http: httpx.AsyncClient) -> None:
        super().__init__(route)
        self.http = http

    async def deliver(self, note: Notification) -> None:
        await post(self.http, self.route.url, body(note).encode(), headers(self.route, note))

    async def check(self) -> str | None:
        return await reachable(self.route.url, self.http.timeout.connect or 5.0)
