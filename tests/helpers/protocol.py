"""The black-box docs/protocol.md suite's deployments and agent (tests/integration/test_protocol_*.py).

A ``Deployment`` is a set of real ``qbroker serve`` processes: one on the memory store, or
two sharing one real redis-server. Tests talk to ``agent_url`` over HTTP and connect their
websocket clients to ``client_ws_url`` (another process when there are two), so every rule
is also checked across processes. Nothing here reads broker internals: only the wire.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.typing import Subprotocol

from tests.helpers.clients import JSON, hello
from tests.helpers.processes import BrokerProcess, broker, redis_server, token
from tests.helpers.samples import new_sid, resume_body, single, start_body
from tests.helpers.waiting import scaled

MARKER_STATUS = {
    "QUESTIONNAIRE_COMPLETED": "completed",
    "QUESTIONNAIRE_NEEDS_CLARIFICATION": "needs_clarification",
    "QUESTIONNAIRE_CANCELLED": "cancelled",
    "QUESTIONNAIRE_UNAVAILABLE": "unavailable",
}
FIRST_LINE = re.compile(r"(QUESTIONNAIRE_[A-Z_]+) questionnaireId=(\S+) revision=(\d+)")


# Every protocol test runs on both: one process on the memory store, and two on one redis.
DEPLOYMENT_KINDS = [
    pytest.param("memory", id="memory"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


# --- deployments ----------------------------------------------------------------------


@dataclass
class Deployment:
    kind: str  # "memory" | "redis"
    processes: list[BrokerProcess]
    redis_url: str | None = None
    settings: dict[str, object] = field(default_factory=dict)

    @property
    def agent_url(self) -> str:
        return self.processes[0].url

    @property
    def client_ws_url(self) -> str:
        """Where clients connect: another process than the agent's when there are two."""
        return self.processes[-1].ws_url

    @property
    def client_url(self) -> str:
        return self.processes[-1].url

    @property
    def other_ws_url(self) -> str:
        """A second place for clients: the agent's process (the same one on memory)."""
        return self.processes[0].ws_url

    @property
    def agent_urls(self) -> list[str]:
        return [p.url for p in self.processes]

    def logs(self) -> str:
        return "\n".join(p.log() for p in self.processes)

    @contextmanager
    def spawn(self, **settings: object) -> Iterator[Deployment]:
        """A fresh deployment of the same kind (same redis-server for redis)."""
        with start_deployment(self.kind, self.redis_url, **settings) as fresh:
            yield fresh


@contextmanager
def start_deployment(kind: str, redis_url: str | None, **settings: object) -> Iterator[Deployment]:
    count = 1 if kind == "memory" else 2
    with ExitStack() as stack:
        # port=None: each process on a free port of its own (settings are QBROKER_* values only)
        processes = [stack.enter_context(broker(redis_url, port=None, **settings)) for _ in range(count)]
        yield Deployment(kind, processes, redis_url, dict(settings))


# --- the agent side -------------------------------------------------------------------


class Agent:
    """The agent's HTTP calls for one session (a thin httpx.AsyncClient wrapper)."""

    def __init__(self, base_url: str, sid: str, tok: str | None = None) -> None:
        self.base_url = base_url
        self.sid = sid
        self.token = tok if tok is not None else token(sid, "agent")
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(60.0))

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra or {})
        return headers

    def _wait(self, wait: float | str | None) -> dict[str, str]:
        return {} if wait is None else {"wait": str(wait)}

    async def post(
        self,
        body: Any,
        wait: float | str | None = 0,
        *,
        key: str | None = None,
        base_url: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> httpx.Response:
        extra = dict(headers or {})
        if key is not None:
            extra["Idempotency-Key"] = key
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, (str, bytes)) else {"json": body}
        if isinstance(body, (str, bytes)):
            extra.setdefault("Content-Type", "application/json")
        return await self.http.post(
            f"{base_url or self.base_url}/v1/sessions/{self.sid}/questionnaire",
            params=self._wait(wait),
            headers=self.headers(extra),
            timeout=timeout,
            **kwargs,
        )

    async def start(
        self, *questions: dict[str, Any], wait: float | str | None = 0, key: str | None = None
    ) -> httpx.Response:
        return await self.post(start_body(*questions), wait, key=key)

    async def start_pending(self, *questions: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        return pending(await self.start(*questions, wait=0, key=key))

    async def resume(
        self, qid: str, revision: int, response: str, wait: float | str | None = 0, base_url: str | None = None
    ) -> httpx.Response:
        return await self.post(resume_body(qid, revision, response), wait, base_url=base_url)

    async def get(self, qid: str, wait: float | str | None = 0, timeout: float = 60.0) -> httpx.Response:
        return await self.http.get(
            f"{self.base_url}/v1/sessions/{self.sid}/questionnaires/{qid}",
            params=self._wait(wait),
            headers=self.headers(),
            timeout=timeout,
        )

    async def delete(self, qid: str) -> httpx.Response:
        return await self.http.delete(
            f"{self.base_url}/v1/sessions/{self.sid}/questionnaires/{qid}", headers=self.headers()
        )

    async def outcome(self, qid: str, wait: float = 15) -> ToolResult:
        return tool_result(await self.get(qid, wait=wait))


@dataclass
class ToolResult:
    marker: str
    questionnaire_id: str
    revision: int
    text: str
    details: dict[str, Any]
    body: dict[str, Any]

    @property
    def status(self) -> str:
        return str(self.details["status"])

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def resume_call(self) -> dict[str, Any] | None:
        """The JSON resume call the text tells the model to make, if it spells one out."""
        for match in re.finditer(r"\{.*\}", self.text):
            try:
                value = json.loads(match.group(0))
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("action") == "resume":
                return value
        return None


def resume_for(text: str, response: str) -> dict[str, Any] | None:
    """What a model sends after a tool-result ``text``: the resume of the questionnaire it
    names, with ``response``, when it is QUESTIONNAIRE_NEEDS_CLARIFICATION; else None.
    (Scripted models in tests that drive agent programs.)"""
    head = FIRST_LINE.match(text)
    if head is None or MARKER_STATUS.get(head[1]) != "needs_clarification":
        return None
    return resume_body(head[2], int(head[3]), response)


def tool_result(response: httpx.Response) -> ToolResult:
    """Assert a 200 tool result of docs/protocol.md's shape; return its parts."""
    assert response.status_code == 200, f"expected 200, got {response.status_code}: {response.text}"
    body = response.json()
    assert set(body) == {"content", "details", "isError"}, body
    assert body["isError"] is False
    content = body["content"]
    assert isinstance(content, list) and len(content) == 1, content
    assert content[0]["type"] == "text" and isinstance(content[0]["text"], str), content
    text = content[0]["text"]
    first = text.splitlines()[0]
    match = FIRST_LINE.fullmatch(first)
    assert match, f"first line {first!r} is not '<MARKER> questionnaireId=<id> revision=<n>'"
    marker, qid, revision = match.group(1), match.group(2), int(match.group(3))
    assert marker in MARKER_STATUS, marker
    details = body["details"]
    assert details["version"] == 1
    assert details["questionnaireId"] == qid
    assert details["revision"] == revision
    assert details["status"] == MARKER_STATUS[marker], (marker, details["status"])
    for key in ("currentQuestionIndex", "questions", "answers", "draftAnswer", "clarifications"):
        assert key in details, f"details lacks {key}: {sorted(details)}"
    if details["status"] in ("cancelled", "unavailable"):
        assert details["cancellationReason"] in ("user_cancelled", "aborted", "ui_unavailable", "ui_error")
    else:
        assert "cancellationReason" not in details, f"cancellationReason on a {details['status']} result"
    if details["status"] == "needs_clarification":
        assert details.get("clarificationRequest"), details
    else:
        assert "clarificationRequest" not in details, f"clarificationRequest on a {details['status']} result"
    return ToolResult(marker, qid, revision, text, details, body)


def pending(response: httpx.Response) -> dict[str, Any]:
    """Assert a 202 of exactly ``{status, questionnaireId, revision, step}``."""
    assert response.status_code == 202, f"expected 202, got {response.status_code}: {response.text}"
    body: dict[str, Any] = response.json()
    assert set(body) == {"status", "questionnaireId", "revision", "step"}, body
    assert body["status"] == "pending"
    assert isinstance(body["questionnaireId"], str) and body["questionnaireId"]
    assert isinstance(body["revision"], int) and isinstance(body["step"], int)
    return body


def error(response: httpx.Response, status: int, code: str) -> str:
    """Assert ``{"error":{"code","message":"questionnaire: ..."}}`` with ``status``; return the message."""
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and message.startswith("questionnaire:"), message
    return message


# --- default timers, measured in the background ----------------------------------------


class DefaultProbes:
    """Measures the protocol's default timers on a deployment started with no timer settings.

    ``wait`` defaults to 30 s, ``hello`` is due within 10 s, ``QBROKER_CLIENT_WAIT`` is 5 s and
    ``QBROKER_RECONNECT_GRACE`` 30 s. Measuring them takes 30 s of wall time, so each runs in
    its own thread from the moment the deployment is up (see ``BackgroundProbes``), and the
    tests in test_protocol_timeout_defaults.py only collect the measurements.
    """

    NAMES = ("wait_default", "hello_timeout", "client_wait", "reconnect_grace")

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.results: dict[str, dict[str, Any]] = {name: {} for name in self.NAMES}
        self.threads = {
            name: threading.Thread(target=self._guarded, args=(name,), name=f"probe-{name}", daemon=True)
            for name in self.NAMES
        }

    def start(self) -> DefaultProbes:
        for thread in self.threads.values():
            thread.start()
        return self

    def _guarded(self, name: str) -> None:
        try:
            getattr(self, f"_{name}")(self.results[name])
        except Exception as exc:  # noqa: BLE001 - reported by the test that reads the result
            self.results[name]["error"] = repr(exc)

    # each probe -----------------------------------------------------------------------

    @contextmanager
    def _client(self, sid: str) -> Iterator[Any]:
        from websockets.sync.client import connect

        with connect(
            f"{self.deployment.client_ws_url}/v1/sessions/{sid}/ws",
            subprotocols=[Subprotocol(JSON)],
            open_timeout=10,
        ) as ws:
            ws.send(hello(token(sid, "client")))
            welcome = json.loads(ws.recv(timeout=10))
            assert welcome["type"] == "welcome", welcome
            yield ws

    def _post(self, sid: str, wait: float | None) -> httpx.Response:
        return httpx.post(
            f"{self.deployment.agent_url}/v1/sessions/{sid}/questionnaire",
            params={} if wait is None else {"wait": str(wait)},
            json=start_body(single()),
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
            timeout=90,
        )

    def _wait_default(self, result: dict[str, Any]) -> None:
        sid = new_sid("probe-wait")
        with self._client(sid):
            started = time.monotonic()
            response = self._post(sid, None)
            result.update(status=response.status_code, elapsed=time.monotonic() - started, body=response.json())

    def _hello_timeout(self, result: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import connect

        sid = new_sid("probe-hello")
        with connect(
            f"{self.deployment.client_ws_url}/v1/sessions/{sid}/ws",
            subprotocols=[Subprotocol(JSON)],
            open_timeout=10,
        ) as ws:
            started = time.monotonic()
            try:
                ws.recv(timeout=30)
            except ConnectionClosed as exc:
                result.update(code=exc.rcvd.code if exc.rcvd else None, elapsed=time.monotonic() - started)
            except TimeoutError:
                result.update(code=None, elapsed=time.monotonic() - started)

    def _client_wait(self, result: dict[str, Any]) -> None:
        sid = new_sid("probe-client-wait")
        started = time.monotonic()
        response = self._post(sid, 20)
        result.update(status=response.status_code, elapsed=time.monotonic() - started, body=response.json())

    def _reconnect_grace(self, result: dict[str, Any]) -> None:
        sid = new_sid("probe-grace")
        with self._client(sid) as ws:
            qid = self._post(sid, 0).json()["questionnaireId"]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # bounded: until the question is shown
                frame = json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
                if frame["type"] == "question":
                    break
        gone = time.monotonic()
        response = httpx.get(
            f"{self.deployment.agent_url}/v1/sessions/{sid}/questionnaires/{qid}",
            params={"wait": "60"},
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
            timeout=90,
        )
        result.update(status=response.status_code, elapsed=time.monotonic() - gone, body=response.json())

    def result(self, name: str, timeout: float = 60) -> dict[str, Any]:
        thread = self.threads[name]
        timeout = scaled(timeout)
        thread.join(timeout)
        assert not thread.is_alive(), f"the {name} probe is still running after {timeout}s"
        return self.results[name]


class BackgroundProbes:
    """A dedicated default-settings deployment of one kind, started in a thread at the start
    of the test session, running ``DefaultProbes`` while the rest of the suite runs."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stack = ExitStack()
        self.probes: DefaultProbes | None = None
        self.error: str | None = None
        self.thread = threading.Thread(target=self._setup, name=f"probes-{kind}", daemon=True)

    def start(self) -> BackgroundProbes:
        self.thread.start()
        return self

    def _setup(self) -> None:
        try:
            redis_url = None
            if self.kind == "redis":
                if shutil.which("redis-server") is None:
                    raise RuntimeError("redis-server is not installed")
                redis_url = self.stack.enter_context(redis_server()).url
            deployment = self.stack.enter_context(start_deployment(self.kind, redis_url))
            self.probes = DefaultProbes(deployment).start()
        except BaseException as exc:  # noqa: BLE001 - pytest.skip inside need() is a BaseException
            self.error = repr(exc)

    def result(self, name: str, timeout: float = 75) -> dict[str, Any]:
        self.thread.join(scaled(30))
        assert self.error is None, f"the {self.kind} deployment for the default-timer probes failed: {self.error}"
        assert self.probes is not None, f"the {self.kind} deployment for the probes did not start in time"
        return self.probes.result(name, timeout)

    def close(self) -> None:
        self.thread.join(scaled(30))
        if self.probes is not None:
            for thread in self.probes.threads.values():
                thread.join(scaled(45))
        self.stack.close()
