"""broker/http/agent_api.py as plain ASGI, in process: what a live broker cannot easily be made to do
(crash, lose its agent mid-body, stream a body with no length) and the parsing helpers that
stand in for Starlette's, checked against Starlette's own."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.routing import compile_path
from starlette.types import Message

from broker.app import BrokerApp, create_app
from broker.http import agent_api, kit
from broker.http.routes import ROUTES, openapi_document
from broker.http.routing import not_found_message
from broker.runtime.config import Config
from broker.tokens.claims import mint_token

SECRET = "unit-test-secret-0123456789abcdef"
SID = "unit"
START = json.dumps(
    {"action": "start", "questions": [{"id": "q", "prompt": "?", "type": "single", "options": [{"id": "a"}]}]}
).encode()


@pytest.fixture
async def app() -> AsyncIterator[BrokerApp]:
    app = create_app(Config(secret=SECRET, client_wait=60))
    await app.broker.start()
    try:
        yield app
    finally:
        await app.broker.stop()


def _scope(method: str, path: str, query: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    auth = [
        (b"host", b"127.0.0.1:8700"),  # every HTTP/1.1 request has one; the broker refuses unknown names
        (b"authorization", f"Bearer {mint_token(SECRET, SID, 'agent')}".encode()),
    ]
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": auth + (headers or []),
    }


async def _call(app: BrokerApp, scope: Any, messages: list[dict[str, Any]]) -> list[Message]:
    """Run one request; ``messages`` are what ``receive`` hands out (taken off the list)."""
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def _body(message: bytes) -> dict[str, Any]:
    return {"type": "http.request", "body": message, "more_body": False}


async def test_a_crash_is_a_json_500_and_logged(app: BrokerApp, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(session_id: str, questionnaire_id: str, wait: float) -> tuple[int, dict[str, Any]]:
        raise ZeroDivisionError("a bug")

    app.broker.wait_for_outcome = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="qbroker.http"):
        sent = await _call(app, _scope("GET", f"/v1/sessions/{SID}/questionnaires/q1"), [])
    start, body = sent
    assert start["status"] == 500
    assert (b"content-type", b"application/json") in start["headers"]
    error = json.loads(body["body"])["error"]
    assert error["code"] == "internal_error" and error["message"].startswith("questionnaire:")
    assert any(record.exc_info and record.exc_info[0] is ZeroDivisionError for record in caplog.records)


async def test_an_agent_gone_before_its_body_arrived_gets_no_answer(app: BrokerApp) -> None:
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"wait=0")
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": START[:10], "more_body": True},
        {"type": "http.disconnect"},
    ]
    assert await _call(app, scope, messages) == []


async def test_a_body_in_chunks_is_joined(app: BrokerApp) -> None:
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"wait=0")
    chunks = [START[i : i + 7] for i in range(0, len(START), 7)]
    messages = [{"type": "http.request", "body": c, "more_body": True} for c in chunks] + [_body(b"")]
    start, body = await _call(app, scope, messages)
    assert start["status"] == 202, body
    assert json.loads(body["body"])["status"] == "pending"


async def test_a_streamed_body_over_the_limit_is_413_without_reading_it_all(app: BrokerApp) -> None:
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"wait=0")
    chunk = {"type": "http.request", "body": b" " * (agent_api.MAX_BODY_BYTES // 2 + 1), "more_body": True}
    messages = [chunk, chunk, chunk, chunk, _body(b"{}")]
    start, body = await _call(app, scope, messages)
    assert start["status"] == 413
    assert json.loads(body["body"])["error"]["code"] == "payload_too_large"
    assert len(messages) == 3, "the call stopped reading once past the limit (after two halves and a byte)"


async def test_an_input_at_every_limit_is_taken_even_with_every_character_escaped(app: BrokerApp) -> None:
    """The limits count characters: 20 questions of 50 options, every text at its limit and
    every character an emoji that json.dumps escapes to 12 bytes, is a valid call of ~10.5 MB."""
    from broker.core import model

    def text(limit: int, tag: str) -> str:
        return tag + "😀" * (limit - len(tag))

    questions = [
        {
            "id": text(model.MAX_ID, f"q{q}"),
            "label": text(model.MAX_LABEL, ""),
            "prompt": text(model.MAX_PROMPT, ""),
            "type": "single",
            "options": [
                {
                    "id": text(model.MAX_ID, f"o{o}"),
                    "label": text(model.MAX_LABEL, ""),
                    "description": text(model.MAX_DESCRIPTION, ""),
                }
                for o in range(model.MAX_OPTIONS)
            ],
        }
        for q in range(model.MAX_QUESTIONS)
    ]
    body = json.dumps({"action": "start", "questions": questions}).encode()  # ensure_ascii: \ud83d\ude00
    assert 10_000_000 < len(body) <= agent_api.MAX_BODY_BYTES
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"wait=0")
    start, reply = await _call(app, scope, [_body(body)])
    assert start["status"] == 202, reply["body"][:300]


async def test_a_declared_length_over_the_limit_is_413_before_the_body(app: BrokerApp) -> None:
    headers = [(b"content-length", str(agent_api.MAX_BODY_BYTES + 1).encode())]
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"", headers)
    start, body = await _call(app, scope, [])
    assert start["status"] == 413


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_questionnaire_id_ending_in_a_newline_is_an_unknown_questionnaire(app: BrokerApp, method: str) -> None:
    """Schemathesis found DELETE .../questionnaires/x%0A answered by the web client's static
    files (a plain-text 405) when the agent API left such a path to them."""
    sent = await _call(app, _scope(method, f"/v1/sessions/{SID}/questionnaires/x\n"), [])
    assert sent[0]["status"] == 404
    assert json.loads(sent[1]["body"])["error"]["code"] == "unknown_questionnaire"


async def test_other_paths_go_to_the_starlette_app(app: BrokerApp) -> None:
    sent = await _call(app, _scope("GET", "/healthz"), [])
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == {"status": "ok"}


# --- the helpers that stand in for Starlette's ---------------------------------------------

_segments = st.sampled_from(
    ["", "v1", "sessions", "questionnaire", "questionnaires", "events", "mcp", "inbox", "s1", "q.1", "a b", "\n"]
)


def _starlette_match(template: str, path: str) -> tuple[str, ...] | None:
    found = compile_path(template)[0].match(path)
    return tuple(found.groupdict().values()) if found else None


@given(segments=st.lists(_segments, max_size=6), prefix=st.booleans(), slash=st.booleans())
def test_every_route_takes_the_paths_starlette_would_route_to_it(
    segments: list[str], prefix: bool, slash: bool
) -> None:
    path = ("/v1/sessions/" if prefix else "/") + "/".join(segments) + ("/" if slash else "")
    for route in ROUTES:
        # A route that takes a trailing slash takes the path without it as Starlette would.
        plain = path[:-1] if route.slash and path.endswith("/") and len(path) > 1 else path
        assert route.match(path.split("/")) == _starlette_match(route.path, plain), (route.path, path)


def _route(path: str) -> tuple[str, tuple[str, ...]] | None:
    parts = path.split("/")
    return next(((route.path, found) for route in ROUTES if (found := route.match(parts)) is not None), None)


def test_a_route_names_the_session_and_the_questionnaire() -> None:
    assert _route("/v1/sessions/s1/questionnaire") == ("/v1/sessions/{sid}/questionnaire", ("s1",))
    assert _route("/v1/sessions/s1/questionnaires/q1") == ("/v1/sessions/{sid}/questionnaires/{qid}", ("s1", "q1"))
    assert _route("/v1/sessions/s1/questionnaires/q1/events")[1] == ("s1", "q1")  # type: ignore[index]
    assert _route("/mcp/") == ("/mcp", ())
    assert _route("/v1/sessions//questionnaire") is None and _route("/v1/sessions/s1/nothing") is None


def test_the_404_lists_every_route_and_the_openapi_document_every_http_route() -> None:
    message = not_found_message(ROUTES, "GET", "/v1/nothing")
    assert message.startswith("no such endpoint: GET /v1/nothing; ")
    assert all(f"{route.methods} {route.path} (" in message for route in ROUTES)
    assert not_found_message(ROUTES, "GET", "/v1/questionnaire").startswith("questionnaire: no such endpoint")
    document = openapi_document()
    http_paths = {route.path for route in ROUTES if route.endpoint is not None}
    assert set(document["paths"]) == http_paths
    for route in ROUTES:
        if route.endpoint is not None:
            methods = set(route.methods.lower().split("/"))
            assert methods <= set(document["paths"][route.path]), route.path
    # An area documents only paths the table routes: no operation without an endpoint.
    for area in {route.doc for route in ROUTES if route.doc is not None}:
        assert set(area.operations()) <= http_paths


@given(query=st.text(alphabet="wait=&%+;2F0x5é ", max_size=16))
def test_the_query_is_read_as_starlette_reads_it(query: str) -> None:
    raw = query.encode()
    assert kit.parse_query(raw) == parse_qsl(raw.decode("latin-1"), keep_blank_values=True)


def test_the_usual_query_is_one_pair() -> None:
    assert kit.parse_query(b"wait=30") == [("wait", "30")]
    assert kit.parse_query(b"") == []
    assert re.fullmatch(kit._NUMBER, "30")


async def test_a_start_keeps_the_sub_of_the_agent_token_as_who_asked(app: BrokerApp) -> None:
    scope = _scope("POST", f"/v1/sessions/{SID}/questionnaire", b"wait=0")
    scope["headers"][1] = (b"authorization", f"Bearer {mint_token(SECRET, SID, 'agent', sub='build-agent')}".encode())
    start, body = await _call(app, scope, [_body(START)])
    assert start["status"] == 202, body
    questionnaire_id = json.loads(body["body"])["questionnaireId"]
    stored = await app.broker.store.load(SID, questionnaire_id)
    assert stored is not None and stored.asked_by == "build-agent"
