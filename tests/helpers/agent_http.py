"""The agent's side of the synchronous end-to-end tests (the browser's, the terminal's): the
questionnaire calls over HTTP with an agent token, each asserting the status it expects.

``ask`` starts a questionnaire without waiting and returns its id; ``outcome`` long-polls for
its tool result and returns the ``details``. ``Agent`` holds one session's base URL and id for
tests that make many calls. (The protocol suite's asynchronous agent is
``tests.helpers.protocol.Agent``.)
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers.processes import token
from tests.helpers.samples import resume_body
from tests.helpers.waiting import scaled

CALL_TIMEOUT = 10.0  # seconds one call may take beyond the ``wait`` it asks for (scaled)


def _headers(sid: str, sub: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(sid, 'agent', sub=sub)}"}


def ask(base_url: str, sid: str, *questions: dict[str, Any], sub: str | None = None) -> str:
    """An agent (its token held by ``sub`` when given) asks in ``sid`` without waiting: the id."""
    response = httpx.post(
        f"{base_url}/v1/sessions/{sid}/questionnaire",
        params={"wait": 0},
        json={"action": "start", "questions": list(questions)},
        headers=_headers(sid, sub),
        timeout=scaled(CALL_TIMEOUT),
    )
    assert response.status_code == 202, response.text
    return str(response.json()["questionnaireId"])


def outcome(base_url: str, sid: str, qid: str, wait: float = 15) -> dict[str, Any]:
    """The questionnaire's tool result once it has one (waiting up to ``wait`` s): its details."""
    response = httpx.get(
        f"{base_url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": wait},
        headers=_headers(sid),
        timeout=wait + scaled(CALL_TIMEOUT),
    )
    assert response.status_code == 200, response.text
    details: dict[str, Any] = response.json()["details"]
    return details


def pending(base_url: str, sid: str, qid: str) -> bool:
    """True while the questionnaire is still with the person (a look without waiting)."""
    response = httpx.get(
        f"{base_url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": 0},
        headers=_headers(sid),
        timeout=scaled(CALL_TIMEOUT),
    )
    assert response.status_code in (200, 202), response.text
    return response.status_code == 202


def resume(base_url: str, sid: str, qid: str, revision: int, text: str) -> None:
    """The agent answers the person's clarification request with ``text``, without waiting."""
    response = httpx.post(
        f"{base_url}/v1/sessions/{sid}/questionnaire",
        params={"wait": 0},
        json=resume_body(qid, revision, text),
        headers=_headers(sid),
        timeout=scaled(CALL_TIMEOUT),
    )
    assert response.status_code == 202, response.text


def abort(base_url: str, sid: str, qid: str) -> None:
    response = httpx.delete(
        f"{base_url}/v1/sessions/{sid}/questionnaires/{qid}", headers=_headers(sid), timeout=scaled(CALL_TIMEOUT)
    )
    assert response.status_code == 200, response.text


class Agent:
    """The agent of one session: the calls above with its base URL and session id bound."""

    def __init__(self, base_url: str, sid: str) -> None:
        self.base_url = base_url
        self.sid = sid

    def start(self, *questions: dict[str, Any]) -> str:
        return ask(self.base_url, self.sid, *questions)

    def outcome(self, qid: str, wait: float = 10) -> dict[str, Any]:
        return outcome(self.base_url, self.sid, qid, wait)

    def pending(self, qid: str) -> bool:
        return pending(self.base_url, self.sid, qid)

    def resume(self, qid: str, revision: int, text: str) -> None:
        resume(self.base_url, self.sid, qid, revision, text)

    def abort(self, qid: str) -> None:
        abort(self.base_url, self.sid, qid)
