"""The agent SDK against a scripted broker (httpx.MockTransport): no network, no broker."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from clients.agent.sdk import (
    AsyncQBrokerClient,
    Clarification,
    InvalidArguments,
    NotAwaitingClarification,
    Pending,
    ProtocolError,
    QBrokerClient,
    QBrokerError,
    QBrokerTimeout,
    QuestionnaireResult,
    ServiceUnavailable,
    StaleRevision,
    TransportError,
    UnauthorizedError,
    UnknownQuestionnaire,
)

URL = "http://broker.test"
SID = "sess-1"
QID = "3f2a6f2c-1d47-4c2b-9a0e-1f7c9d1a55b1"
QUESTIONS = [
    {
        "id": "deploy_target",
        "prompt": "Which environment?",
        "type": "single",
        "options": [{"id": "staging"}, {"id": "production"}],
        "allowOther": False,
    }
]


def tool_result(status: str = "completed", revision: int = 0, **extra: Any) -> dict[str, Any]:
    marker = {
        "completed": "QUESTIONNAIRE_COMPLETED",
        "needs_clarification": "QUESTIONNAIRE_NEEDS_CLARIFICATION",
        "cancelled": "QUESTIONNAIRE_CANCELLED",
        "unavailable": "QUESTIONNAIRE_UNAVAILABLE",
    }[status]
    details: dict[str, Any] = {
        "version": 1,
        "questionnaireId": QID,
        "revision": revision,
        "status": status,
        "currentQuestionIndex": 0,
        "questions": [{**QUESTIONS[0], "label": "deploy_target"}],
        "answers": [{"questionId": "deploy_target", "selectedOptionIds": ["staging"]}] if status == "completed" else [],
        "draftAnswer": None,
        "clarifications": [],
        **extra,
    }
    text = f"{marker} questionnaireId={QID} revision={revision}\nmore lines"
    return {"content": [{"type": "text", "text": text}], "details": details, "isError": False}


def pending(revision: int = 0, step: int = 0) -> dict[str, Any]:
    return {"status": "pending", "questionnaireId": QID, "revision": revision, "step": step}


def error(code: str, message: str = "questionnaire: nope") -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


ScriptedReply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script:
    """Replies in order; records every request it saw."""

    def __init__(self, *replies: ScriptedReply):
        self.replies: Iterator[ScriptedReply] = iter(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        try:
            reply = next(self.replies)
        except StopIteration:
            raise AssertionError(f"unexpected extra request {request.method} {request.url}") from None
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            return reply(request)
        return reply

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


def reply(status: int, body: Any = None, **kw: Any) -> httpx.Response:
    if isinstance(body, str):
        return httpx.Response(status, text=body, **kw)
    return httpx.Response(status, json=body, **kw)


def client(script: Script, **kw: Any) -> QBrokerClient:
    kw.setdefault("backoff", 0.0)
    kw.setdefault("poll_interval", 0.0)
    return QBrokerClient(URL, SID, "tok", transport=httpx.MockTransport(script), **kw)


# --- the happy paths --------------------------------------------------------------------


def test_start_posts_the_seed_tool_input_with_auth_wait_and_an_idempotency_key() -> None:
    script = Script(reply(200, tool_result()))
    with client(script, wait=12) as qb:
        result = qb.start(QUESTIONS)
    [request] = script.requests
    assert request.method == "POST"
    assert request.url.path == f"/v1/sessions/{SID}/questionnaire"
    assert request.url.params["wait"] == "12"
    assert request.headers["Authorization"] == "Bearer tok"
    assert uuid.UUID(request.headers["Idempotency-Key"]).version == 4
    assert script.bodies() == [{"action": "start", "questions": QUESTIONS}]
    assert result.status == "completed" and result.completed
    assert result.questionnaire_id == QID and result.revision == 0
    assert result.answers[0].question_id == "deploy_target"
    assert result.answer("deploy_target").selected_option_ids == ("staging",)  # type: ignore[union-attr]
    assert result.answer("missing") is None
    assert result.text.startswith(f"QUESTIONNAIRE_COMPLETED questionnaireId={QID} revision=0")
    assert result.exit_code == 0


def test_a_client_wait_goes_with_a_start_and_its_first_request_only() -> None:
    script = Script(reply(202, pending()), reply(200, tool_result()))
    with client(script, client_wait=900) as qb:
        qb.start(QUESTIONS)
    first, reattach = script.requests
    assert first.url.params["clientWait"] == "900"
    assert "clientWait" not in reattach.url.params


def test_a_start_s_own_client_wait_wins_over_the_client_s() -> None:
    script = Script(reply(200, tool_result()))
    with client(script, client_wait=900) as qb:
        qb.start(QUESTIONS, client_wait=12.5)
    assert script.requests[0].url.params["clientWait"] == "12.5"


def test_a_resume_never_carries_a_client_wait() -> None:
    script = Script(reply(200, tool_result()))
    with client(script, client_wait=900) as qb:
        qb.resume(QID, 1, "use staging")
    assert "clientWait" not in script.requests[0].url.params


def test_without_a_client_wait_none_is_sent() -> None:
    script = Script(reply(200, tool_result()))
    with client(script) as qb:
        qb.start(QUESTIONS)
    assert "clientWait" not in script.requests[0].url.params


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True])
def test_a_client_wait_that_is_no_number_of_seconds_is_refused_before_any_request(bad: float) -> None:
    with pytest.raises(ValueError, match="client_wait"):
        client(Script(), client_wait=bad)


async def test_the_async_client_sends_the_client_wait_too() -> None:
    script = Script(reply(200, tool_result()))
    async with AsyncQBrokerClient(URL, SID, "tok", transport=httpx.MockTransport(script), client_wait=60) as qb:
        await qb.start(QUESTIONS)
    assert script.requests[0].url.params["clientWait"] == "60"


def test_each_start_call_gets_its_own_idempotency_key_unless_one_is_given() -> None:
    script = Script(reply(200, tool_result()), reply(200, tool_result()), reply(200, tool_result()))
    with client(script) as qb:
        qb.start(QUESTIONS)
        qb.start(QUESTIONS)
        qb.start(QUESTIONS, idempotency_key="my-key")
    keys = [r.headers["Idempotency-Key"] for r in script.requests]
    assert keys[0] != keys[1]
    assert keys[2] == "my-key"


def test_resume_sends_exactly_the_three_resume_fields_and_no_idempotency_key() -> None:
    script = Script(reply(200, tool_result()))
    with client(script) as qb:
        qb.resume(QID, 2, "Staging has no release window.")
    assert script.bodies() == [
        {
            "action": "resume",
            "questionnaireId": QID,
            "revision": 2,
            "clarificationResponse": "Staging has no release window.",
        }
    ]
    assert "Idempotency-Key" not in script.requests[0].headers


def test_a_202_is_followed_by_get_until_the_outcome_and_reported_to_on_pending() -> None:
    seen: list[Pending] = []
    script = Script(
        reply(202, pending(0, 0)),
        reply(202, pending(0, 1)),
        reply(202, pending(0, 1)),
        reply(200, tool_result()),
    )
    with client(script, wait=5, on_pending=seen.append) as qb:
        result = qb.start(QUESTIONS)
    assert result.completed
    assert [r.method for r in script.requests] == ["POST", "GET", "GET", "GET"]
    for request in script.requests[1:]:
        assert request.url.path == f"/v1/sessions/{SID}/questionnaires/{QID}"
        assert request.url.params["wait"] == "5"
        assert request.headers["Authorization"] == "Bearer tok"
    assert seen == [Pending(QID, 0, 0), Pending(QID, 0, 1), Pending(QID, 0, 1)]  # every 202


def test_get_reattaches_and_abort_deletes() -> None:
    script = Script(
        reply(200, tool_result()),
        reply(200, tool_result("cancelled", cancellationReason="aborted")),
    )
    with client(script) as qb:
        assert qb.get(QID, wait=0).completed
        aborted = qb.abort(QID)
    assert [(r.method, r.url.path) for r in script.requests] == [
        ("GET", f"/v1/sessions/{SID}/questionnaires/{QID}"),
        ("DELETE", f"/v1/sessions/{SID}/questionnaires/{QID}"),
    ]
    assert script.requests[0].url.params["wait"] == "0"
    assert aborted.cancelled and aborted.cancellation_reason == "aborted"
    assert aborted.exit_code == 3


def test_the_overall_timeout_raises_with_the_pending_state_to_reattach_later() -> None:
    script = Script(reply(202, pending(1, 4)))
    with client(script) as qb, pytest.raises(QBrokerTimeout) as info:
        qb.start(QUESTIONS, timeout=0)
    assert info.value.code == "timeout"
    assert info.value.pending == Pending(QID, 1, 4)
    assert QID in info.value.message


def test_the_overall_timeout_also_cuts_the_first_requests_wait() -> None:
    # timeout=3 with wait=30: the POST must not ask the broker to hold it for 30 s.
    script = Script(reply(200, tool_result()), reply(200, tool_result()))
    with client(script, wait=30) as qb:
        qb.start(QUESTIONS, timeout=3)
        qb.get(QID, timeout=0.2)  # rounded up to whole seconds, as the follow-ups are
    assert [r.url.params["wait"] for r in script.requests] == ["3", "1"]


# --- retries ----------------------------------------------------------------------------


def test_transient_failures_are_retried_with_the_same_idempotency_key() -> None:
    script = Script(
        httpx.ConnectError("refused"),
        reply(503, error("store_unavailable", "redis is down")),
        httpx.ReadError("connection reset"),  # may have reached the broker: the key protects it
        reply(502, "<html>bad gateway</html>"),
        reply(504, "gateway timeout"),
        reply(200, tool_result()),
    )
    with client(script) as qb:
        result = qb.start(QUESTIONS)
    assert result.completed
    keys = {r.headers["Idempotency-Key"] for r in script.requests}
    assert len(script.requests) == 6 and len(keys) == 1
    assert all(body == {"action": "start", "questions": QUESTIONS} for body in script.bodies())


def test_retries_are_bounded_and_end_in_a_typed_error() -> None:
    script = Script(*(httpx.ConnectError("refused") for _ in range(3)))
    with client(script, retries=2) as qb, pytest.raises(TransportError) as info:
        qb.start(QUESTIONS)
    assert info.value.code == "transport_error" and info.value.status is None
    assert len(script.requests) == 3

    script = Script(*(reply(503, error("shutting_down", "bye")) for _ in range(2)))
    with client(script, retries=1) as qb, pytest.raises(ServiceUnavailable) as unavailable:
        qb.get(QID)
    assert (unavailable.value.code, unavailable.value.status) == ("shutting_down", 503)


def test_backoff_grows_exponentially_and_honours_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("clients.agent.clients.time.sleep", slept.append)
    script = Script(
        httpx.ConnectError("a"),
        httpx.ConnectError("b"),
        httpx.ConnectError("c"),
        reply(429, error("rate_limited", "slow down"), headers={"Retry-After": "3"}),
        reply(200, tool_result()),
    )
    qb = QBrokerClient(URL, SID, "tok", backoff=1.0, max_backoff=3.0, transport=httpx.MockTransport(script))
    qb._core.s.rng = lambda: 1.0  # no jitter: exactly backoff * 2**n, capped
    qb.start(QUESTIONS)
    assert slept == [1.0, 2.0, 3.0, 3.0]


def test_errors_that_are_not_transient_are_never_retried() -> None:
    script = Script(reply(400, error("invalid_arguments", 'questionnaire: question "x": "prompt" is required')))
    with client(script) as qb, pytest.raises(InvalidArguments):
        qb.start(QUESTIONS)
    assert len(script.requests) == 1


def test_a_resume_that_may_have_landed_before_a_retried_409_reattaches() -> None:
    script = Script(
        httpx.ReadError("reset after the broker resumed it"),
        reply(409, error("not_awaiting_clarification", "questionnaire: it is in_progress")),
        reply(202, pending(1, 3)),  # GET: resumed and back with the person
        reply(200, tool_result("completed", revision=1)),
    )
    with client(script) as qb:
        result = qb.resume(QID, 1, "because")
    assert result.completed and result.revision == 1
    assert [r.method for r in script.requests] == ["POST", "POST", "GET", "GET"]


def test_a_resume_refused_409_stands_when_the_questionnaire_still_waits_at_that_revision() -> None:
    clarification = {"revision": 1, "questionId": "deploy_target", "request": "what?"}
    script = Script(
        httpx.ReadError("reset"),
        reply(409, error("stale_revision", "questionnaire: the latest revision is 1")),
        reply(200, tool_result("needs_clarification", revision=1, clarificationRequest=clarification)),
    )
    with client(script) as qb, pytest.raises(StaleRevision):
        qb.resume(QID, 1, "because")


# --- error mapping ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_arguments", InvalidArguments),
        (401, "unauthorized", UnauthorizedError),
        (404, "unknown_questionnaire", UnknownQuestionnaire),
        (409, "stale_revision", StaleRevision),
        (409, "not_awaiting_clarification", NotAwaitingClarification),
        (409, "questionnaire_closed", QBrokerError),  # a code this SDK has no class for
    ],
)
def test_broker_refusals_raise_the_typed_error_of_their_wire_code(status: int, code: str, cls: type) -> None:
    message = f"questionnaire: refused with {code}"
    script = Script(reply(status, error(code, message)))
    with client(script) as qb, pytest.raises(QBrokerError) as info:
        qb.resume(QID, 3, "x")
    assert type(info.value) is cls
    assert (info.value.code, info.value.status, info.value.message) == (code, status, message)
    assert str(info.value) == f"{code}: {message}"


def test_a_response_that_is_not_the_documented_json_is_a_protocol_or_http_error() -> None:
    script = Script(reply(200, "<html>hello</html>"))
    with client(script) as qb, pytest.raises(ProtocolError):
        qb.get(QID)
    script = Script(reply(200, {"content": []}))
    with client(script) as qb, pytest.raises(ProtocolError):
        qb.get(QID)
    script = Script(reply(500, "Internal Server Error"))
    with client(script) as qb, pytest.raises(QBrokerError) as info:
        qb.get(QID)
    assert (info.value.code, info.value.status) == ("http_500", 500)


# --- results ----------------------------------------------------------------------------


def test_a_clarification_result_is_typed_and_frozen() -> None:
    request = {"revision": 2, "questionId": "deploy_target", "request": "What is a release window?"}
    body = tool_result(
        "needs_clarification",
        revision=2,
        clarificationRequest=request,
        clarifications=[
            {"revision": 1, "questionId": "deploy_target", "request": "a", "response": "b"},
            request,
        ],
    )
    result = QuestionnaireResult.from_tool_result(body)
    assert result.needs_clarification and result.exit_code == 2
    assert result.clarification_request == Clarification(2, "deploy_target", "What is a release window?")
    assert result.clarifications[0] == Clarification(1, "deploy_target", "a", "b")
    assert result.tool_result() == body
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "completed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.details["status"] = "completed"  # type: ignore[index]


def test_unavailable_and_other_answers_are_read() -> None:
    body = tool_result("unavailable", cancellationReason="ui_unavailable")
    result = QuestionnaireResult.from_tool_result(body)
    assert result.unavailable and result.cancellation_reason == "ui_unavailable" and result.exit_code == 4
    body = tool_result(answers=[{"questionId": "q", "selectedOptionIds": [], "other": "Mars"}])
    assert QuestionnaireResult.from_tool_result(body).answer("q").other == "Mars"  # type: ignore[union-attr]


def test_the_token_defaults_to_the_environment_and_arguments_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QBROKER_TOKEN", "from-env")
    script = Script(reply(200, tool_result()))
    with QBrokerClient(URL, SID, transport=httpx.MockTransport(script)) as qb:
        qb.get(QID)
    assert script.requests[0].headers["Authorization"] == "Bearer from-env"
    with pytest.raises(ValueError):
        QBrokerClient("broker.test", SID)
    with pytest.raises(ValueError):
        QBrokerClient(URL, SID, wait=301)
    with QBrokerClient(URL, SID) as qb, pytest.raises(TypeError):
        qb.start({"id": "not a list"})  # type: ignore[arg-type]


def test_session_and_questionnaire_ids_are_escaped_in_paths() -> None:
    script = Script(reply(200, tool_result()))
    with QBrokerClient(URL, "a:b.c", "t", transport=httpx.MockTransport(script)) as qb:
        qb.get("x/y")
    assert script.requests[0].url.raw_path.startswith(b"/v1/sessions/a%3Ab.c/questionnaires/x%2Fy")


# --- the async twin ---------------------------------------------------------------------


async def test_async_client_follows_202_and_retries_with_the_same_key() -> None:
    seen: list[Pending] = []

    async def on_pending(p: Pending) -> None:
        seen.append(p)

    script = Script(
        httpx.ConnectError("refused"),
        reply(202, pending()),
        reply(503, error("store_unavailable", "x")),
        reply(200, tool_result()),
    )
    async with AsyncQBrokerClient(
        URL,
        SID,
        "tok",
        backoff=0,
        poll_interval=0,
        on_pending=on_pending,
        transport=httpx.MockTransport(script),
    ) as qb:
        result = await qb.start(QUESTIONS, idempotency_key="k1")
    assert result.completed
    assert [r.method for r in script.requests] == ["POST", "POST", "GET", "GET"]
    assert [r.headers.get("Idempotency-Key") for r in script.requests[:2]] == ["k1", "k1"]
    assert seen == [Pending(QID, 0, 0)]


async def test_async_client_maps_errors() -> None:
    script = Script(reply(404, error("unknown_questionnaire", "questionnaire: no such id")))
    async with AsyncQBrokerClient(URL, SID, "tok", transport=httpx.MockTransport(script)) as qb:
        with pytest.raises(UnknownQuestionnaire) as info:
            await qb.resume(QID, 1, "x")
    assert info.value.status == 404
