"""The agent side of qbroker: a small Python SDK for the questionnaire tool over HTTP.

Two clients with the same methods, one blocking and one ``async``::

    from clients.agent.sdk import QBrokerClient

    with QBrokerClient("http://127.0.0.1:8700", session="demo", token=AGENT_TOKEN) as qb:
        result = qb.start([{"id": "target", "prompt": "Where to?", "type": "single",
                            "options": [{"id": "staging"}, {"id": "production"}]}])
        while result.needs_clarification:
            explanation = answer_the_person(result.clarification_request.request)
            result = qb.resume(result.questionnaire_id, result.revision, explanation)
        if result.completed:
            print(result.answer("target").selected_option_ids)

Theory of operation
-------------------
Every call is one *exchange*, written once as a generator (``_Exchange``) that yields the
I/O it needs (``_Send`` an HTTP request, ``_Sleep`` before a retry) and receives the outcome
(an ``httpx.Response`` or the transport exception). ``QBrokerClient`` drives it with
``httpx.Client``, ``AsyncQBrokerClient`` with ``httpx.AsyncClient``; the retry, re-attach
and error-mapping rules therefore cannot drift apart between the two.

* **Outcomes.** A ``200`` carries the tool result and becomes a ``QuestionnaireResult``.
  A ``202`` means the person is still answering: the exchange re-attaches with
  ``GET .../questionnaires/{id}?wait=`` until an outcome arrives or the overall ``timeout``
  runs out (then ``QBrokerTimeout``, which carries the ``Pending`` state to re-attach later
  with ``get``).
* **Retries.** Connection failures, read timeouts and ``429/502/503/504`` are retried with
  exponential backoff (``backoff * 2**n``, capped at ``max_backoff``, with jitter; ``429``
  honours ``Retry-After``), at most ``retries`` times per request. A ``start`` always sends
  an ``Idempotency-Key`` (a fresh uuid4 per call unless you pass one) and every retry
  repeats it, so the broker hands back the questionnaire it already created instead of
  a second one. A ``resume`` whose first attempt may have reached the broker and whose retry
  is then refused with ``409`` re-attaches with ``GET`` and returns the resumed
  questionnaire's state when it shows that the resume did happen.
* **Errors.** A broker refusal raises the ``QBrokerError`` subclass of its wire code
  (``InvalidArguments`` for ``invalid_arguments``, ``StaleRevision`` for ``stale_revision``,
  ...); ``.code`` is the wire code word for word and ``.status`` the HTTP status.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import random
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Final, Literal
from urllib.parse import quote

import httpx

__all__ = [
    "Answer",
    "AsyncQBrokerClient",
    "Clarification",
    "ForbiddenError",
    "InvalidArguments",
    "NotAwaitingClarification",
    "Pending",
    "ProtocolError",
    "QBrokerClient",
    "QBrokerError",
    "QBrokerTimeout",
    "QuestionnaireResult",
    "RateLimited",
    "ServiceUnavailable",
    "StaleRevision",
    "Status",
    "TransportError",
    "UnauthorizedError",
    "UnknownQuestionnaire",
    "EXIT_CODES",
]

Status = Literal["completed", "needs_clarification", "cancelled", "unavailable"]
STATUSES: Final[tuple[Status, ...]] = (
    "completed",
    "needs_clarification",
    "cancelled",
    "unavailable",
)

# Exit codes of `qbroker ask` / `qbroker resume` per outcome (1 is any error).
EXIT_CODES: Final[dict[str, int]] = {
    "completed": 0,
    "needs_clarification": 2,
    "cancelled": 3,
    "unavailable": 4,
}

DEFAULT_WAIT: Final = 30.0
# Retries of a transient failure per request: with the default backoff they span ~11-23 s,
# enough to ride out a Redis restart or failover behind the broker (503 store_unavailable).
DEFAULT_RETRIES: Final = 8
MAX_WAIT: Final = 300.0
USER_AGENT: Final = "qbroker-agent-sdk/0.1"
_TRANSIENT_STATUS: Final = frozenset({429, 502, 503, 504})
# A 202 that comes back faster than this (the caller asked for wait=0, say) is followed by a
# short pause (doubling up to 2 s) so that re-attaching never turns into a busy loop.
DEFAULT_POLL_INTERVAL: Final = 0.25


# --- errors -------------------------------------------------------------------------------


class QBrokerError(Exception):
    """Root of every SDK error. ``code`` is the wire error code; ``status`` the HTTP status.

    ``status`` is ``None`` when no HTTP response was involved (transport failures, timeouts).
    """

    default_code: str = "error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.status = status

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(code={self.code!r}, status={self.status!r}, message={self.message!r})"


class InvalidArguments(QBrokerError):
    """400: the tool input broke a rule (the message names the question/option and the rule)."""

    default_code = "invalid_arguments"


class UnauthorizedError(QBrokerError):
    """401: missing, malformed or expired token, or not an agent token."""

    default_code = "unauthorized"


class ForbiddenError(QBrokerError):
    """403: the token belongs to another session."""

    default_code = "forbidden"


class UnknownQuestionnaire(QBrokerError):
    """404: no such questionnaire in this session (or it expired)."""

    default_code = "unknown_questionnaire"


class StaleRevision(QBrokerError):
    """409: ``resume`` named an old revision; the message names the latest one."""

    default_code = "stale_revision"


class NotAwaitingClarification(QBrokerError):
    """409: ``resume`` on a questionnaire that is not waiting for a clarification."""

    default_code = "not_awaiting_clarification"


class RateLimited(QBrokerError):
    """429 after every retry."""

    default_code = "rate_limited"


class ServiceUnavailable(QBrokerError):
    """503 (``store_unavailable``, ``shutting_down``) or 502/504 after every retry."""

    default_code = "service_unavailable"


class TransportError(QBrokerError):
    """The broker could not be reached (connection refused, reset, timed out) after every retry."""

    default_code = "transport_error"


class ProtocolError(QBrokerError):
    """The broker answered something this SDK cannot read (not the documented JSON)."""

    default_code = "bad_response"


class QBrokerTimeout(QBrokerError):
    """The overall ``timeout`` ran out while the person was still answering.

    The questionnaire goes on; ``pending`` says which one, so ``get(pending.questionnaire_id)``
    re-attaches later.
    """

    default_code = "timeout"

    def __init__(self, message: str, *, pending: Pending | None = None) -> None:
        super().__init__(message)
        self.pending = pending


_ERRORS_BY_CODE: Final[dict[str, type[QBrokerError]]] = {
    "invalid_arguments": InvalidArguments,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "unknown_questionnaire": UnknownQuestionnaire,
    "stale_revision": StaleRevision,
    "not_awaiting_clarification": NotAwaitingClarification,
    "rate_limited": RateLimited,
    "store_unavailable": ServiceUnavailable,
    "shutting_down": ServiceUnavailable,
}
_CODES_BY_STATUS: Final[dict[int, str]] = {
    400: "invalid_arguments",
    401: "unauthorized",
    403: "forbidden",
    404: "unknown_questionnaire",
    429: "rate_limited",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "gateway_timeout",
}


def error_from_response(response: httpx.Response) -> QBrokerError:
    """The typed error for a non-2xx broker response (``{"error": {"code", "message"}}``)."""
    status = response.status_code
    code: str | None = None
    message: str | None = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        error = body["error"]
        code = error.get("code") if isinstance(error.get("code"), str) else None
        message = error.get("message") if isinstance(error.get("message"), str) else None
    if code is None:
        code = _CODES_BY_STATUS.get(status, f"http_{status}")
    if message is None:
        text = response.text.strip()
        message = f"HTTP {status} from the broker" + (f": {text[:200]}" if text else "")
    cls = _ERRORS_BY_CODE.get(code)
    if cls is None:
        cls = ServiceUnavailable if status in (502, 503, 504) else QBrokerError
    return cls(message, code=code, status=status)


# --- results ------------------------------------------------------------------------------


def _freeze(value: Any) -> Any:
    """Read-only deep copy of decoded JSON (dicts -> mappingproxy, lists -> tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """Plain JSON-ready copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Answer:
    """One answered question: option ids in declared order, plus the trimmed Other text."""

    question_id: str
    selected_option_ids: tuple[str, ...]
    other: str | None = None

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Answer:
        other = wire.get("other")
        return cls(
            question_id=str(wire["questionId"]),
            selected_option_ids=tuple(str(o) for o in wire.get("selectedOptionIds") or ()),
            other=other if isinstance(other, str) else None,
        )

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "questionId": self.question_id,
            "selectedOptionIds": list(self.selected_option_ids),
        }
        if self.other is not None:
            wire["other"] = self.other
        return wire


@dataclass(frozen=True, slots=True)
class Clarification:
    """A question the person asked the agent (and, once resumed, the agent's response)."""

    revision: int
    question_id: str
    request: str
    response: str | None = None

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Clarification:
        response = wire.get("response")
        return cls(
            revision=int(wire["revision"]),
            question_id=str(wire["questionId"]),
            request=str(wire["request"]),
            response=response if isinstance(response, str) else None,
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """A ``202``: the questionnaire is still with the person."""

    questionnaire_id: str
    revision: int
    step: int

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Pending:
        return cls(str(wire["questionnaireId"]), int(wire["revision"]), int(wire.get("step", 0)))


@dataclass(frozen=True, slots=True)
class QuestionnaireResult:
    """An outcome: the tool result the broker returned, read into typed fields.

    ``text`` is the tool-result text for a model (first line ``<MARKER> questionnaireId=..
    revision=..``); ``details`` the versioned details object (read-only);
    ``tool_result()`` rebuilds the whole ``{content, details, isError}`` JSON.
    """

    status: Status
    questionnaire_id: str
    revision: int
    answers: tuple[Answer, ...]
    text: str
    details: Mapping[str, Any] = field(repr=False)
    clarification_request: Clarification | None = None
    cancellation_reason: str | None = None
    clarifications: tuple[Clarification, ...] = ()
    content: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)

    @classmethod
    def from_tool_result(cls, body: Any) -> QuestionnaireResult:
        """Parse a ``200`` body; raises ``ProtocolError`` when it is not a tool result."""
        try:
            if not isinstance(body, Mapping):
                raise TypeError("not an object")
            details = body["details"]
            content = body.get("content") or []
            text = "\n".join(
                str(item.get("text", ""))
                for item in content
                if isinstance(item, Mapping) and item.get("type") == "text"
            )
            status = details["status"]
            if status not in STATUSES:
                raise ValueError(f"unknown status {status!r}")
            request = details.get("clarificationRequest")
            if isinstance(request, str):  # tolerate a bare request text
                request = {
                    "revision": details["revision"],
                    "questionId": _current_question_id(details),
                    "request": request,
                }
            reason = details.get("cancellationReason")
            return cls(
                status=status,
                questionnaire_id=str(details["questionnaireId"]),
                revision=int(details["revision"]),
                answers=tuple(Answer.from_wire(a) for a in details.get("answers") or ()),
                text=text,
                details=_freeze(details),
                clarification_request=Clarification.from_wire(request) if request else None,
                cancellation_reason=reason if isinstance(reason, str) else None,
                clarifications=tuple(Clarification.from_wire(c) for c in details.get("clarifications") or ()),
                content=tuple(_freeze(item) for item in content if isinstance(item, Mapping)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"the broker returned a malformed tool result ({exc})") from None

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def needs_clarification(self) -> bool:
        return self.status == "needs_clarification"

    @property
    def cancelled(self) -> bool:
        return self.status == "cancelled"

    @property
    def unavailable(self) -> bool:
        return self.status == "unavailable"

    @property
    def exit_code(self) -> int:
        """The ``qbroker ask`` exit code for this outcome (0, 2, 3 or 4)."""
        return EXIT_CODES[self.status]

    def answer(self, question_id: str) -> Answer | None:
        """The answer to ``question_id``, or ``None`` when it was not answered."""
        for answer in self.answers:
            if answer.question_id == question_id:
                return answer
        return None

    def tool_result(self) -> dict[str, Any]:
        """The tool result as the broker sent it: ``{content, details, isError}``."""
        content = [_thaw(c) for c in self.content] or [{"type": "text", "text": self.text}]
        return {"content": content, "details": _thaw(self.details), "isError": False}


def _current_question_id(details: Mapping[str, Any]) -> str:
    questions = details.get("questions") or []
    index = details.get("currentQuestionIndex")
    if isinstance(index, int) and 0 <= index < len(questions):
        return str(questions[index].get("id", ""))
    return ""


# --- the exchange (sans-I/O) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Send:
    method: str
    path: str
    params: Mapping[str, str]
    headers: Mapping[str, str]
    json: Any = None
    read_timeout: float = DEFAULT_WAIT


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class _Notify:
    """Tell the caller's ``on_pending`` that the person is still answering."""

    pending: Pending


_Action = _Send | _Sleep | _Notify
# on_pending may return an awaitable (the async client awaits it).
PendingCallback = Callable[[Pending], Any]
# What a driver sends back into the generator: the response, the transport error, or None.
_Outcome = httpx.Response | Exception | None
_Exchange = Generator[_Action, _Outcome, QuestionnaireResult]

# Transport errors worth retrying. ``ambiguous`` ones may have reached the broker.
_SAFE_RETRY: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_AMBIGUOUS_RETRY: Final = (
    httpx.ReadError,
    httpx.WriteError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.RemoteProtocolError,
)


@dataclass
class _Settings:
    session: str
    token: str | None
    wait: float
    timeout: float | None
    retries: int
    backoff: float
    max_backoff: float
    poll_interval: float = DEFAULT_POLL_INTERVAL
    clock: Callable[[], float] = time.monotonic
    rng: Callable[[], float] = random.random


class _Core:
    """Everything both clients share: request building and the exchange generators."""

    def __init__(self, settings: _Settings) -> None:
        self.s = settings

    # paths -------------------------------------------------------------------------
    @property
    def _session_path(self) -> str:
        return f"/v1/sessions/{quote(self.s.session, safe='')}"

    def _questionnaire_path(self, questionnaire_id: str) -> str:
        return f"{self._session_path}/questionnaires/{quote(questionnaire_id, safe='')}"

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.s.token:
            headers["Authorization"] = f"Bearer {self.s.token}"
        if extra:
            headers.update(extra)
        return headers

    # exchanges ---------------------------------------------------------------------
    def call(
        self,
        tool_input: Mapping[str, Any],
        *,
        idempotency_key: str | None,
        wait: float | None,
        timeout: float | None,
    ) -> _Exchange:
        """POST a tool input verbatim (the broker validates it), then follow to an outcome."""
        extra: dict[str, str] = {}
        if tool_input.get("action") == "start":
            extra["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        resume_of: tuple[str, int] | None = None
        if tool_input.get("action") == "resume":
            qid, rev = tool_input.get("questionnaireId"), tool_input.get("revision")
            if isinstance(qid, str) and isinstance(rev, int) and not isinstance(rev, bool):
                resume_of = (qid, rev)
        return self._exchange(
            "POST",
            f"{self._session_path}/questionnaire",
            body=dict(tool_input),
            headers=extra,
            wait=wait,
            timeout=timeout,
            resume_of=resume_of,
        )

    def get(self, questionnaire_id: str, *, wait: float | None, timeout: float | None) -> _Exchange:
        return self._exchange("GET", self._questionnaire_path(questionnaire_id), wait=wait, timeout=timeout)

    def abort(self, questionnaire_id: str, *, timeout: float | None) -> _Exchange:
        return self._exchange(
            "DELETE",
            self._questionnaire_path(questionnaire_id),
            wait=None,
            timeout=timeout,
            send_wait=False,
        )

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        wait: float | None,
        timeout: float | None,
        resume_of: tuple[str, int] | None = None,
        send_wait: bool = True,
    ) -> _Exchange:
        wait = self.s.wait if wait is None else wait
        if not 0 <= wait <= MAX_WAIT:
            raise ValueError(f"wait must be between 0 and {MAX_WAIT:g} seconds, got {wait!r}")
        timeout = self.s.timeout if timeout is None else timeout
        deadline = None if timeout is None else self.s.clock() + timeout
        started = self.s.clock()
        response, ambiguous = yield from self._send(
            method,
            path,
            body=body,
            headers=headers,
            wait=self._wait_within(wait, deadline) if send_wait else None,
            deadline=deadline,
        )
        if resume_of is not None and ambiguous and response.status_code == 409:
            # An earlier attempt may have resumed it already: look before reporting the 409.
            resumed = yield from self._resumed_after_all(resume_of, response, deadline)
            if resumed is not None:
                response = resumed
        polls = 0
        while True:
            if response.status_code == 200:
                return QuestionnaireResult.from_tool_result(_json(response))
            if response.status_code != 202:
                raise error_from_response(response)
            try:
                pending = Pending.from_wire(_json(response))
            except (KeyError, TypeError, ValueError) as exc:
                raise ProtocolError(f"the broker returned a malformed 202 ({exc})") from None
            yield _Notify(pending)
            now = self.s.clock()
            if deadline is not None and now >= deadline:
                raise QBrokerTimeout(
                    f"questionnaire {pending.questionnaire_id} is still with the person after "
                    f"{timeout:g}s; re-attach with get({pending.questionnaire_id!r})",
                    pending=pending,
                )
            elapsed = now - started
            if elapsed < self.s.poll_interval:
                pause = min(self.s.poll_interval * (2 ** min(polls, 4)), 2.0) - elapsed
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - now))
                if pause > 0:
                    yield _Sleep(pause)
            polls += 1
            started = self.s.clock()
            response, _ = yield from self._send(
                "GET",
                self._questionnaire_path(pending.questionnaire_id),
                wait=self._wait_within(wait, deadline),
                deadline=deadline,
            )

    def _wait_within(self, wait: float, deadline: float | None) -> float:
        """The long poll's ``wait``, cut to what is left before the overall deadline (the
        first request's too: ``timeout=3`` must not sit out a 30-second wait)."""
        if deadline is None:
            return wait
        # whole seconds: overshooting the deadline by < 1 s beats a busy loop
        return min(wait, float(math.ceil(max(0.0, deadline - self.s.clock()))))

    def _resumed_after_all(
        self, resume_of: tuple[str, int], refusal: httpx.Response, deadline: float | None
    ) -> Generator[_Action, _Outcome, httpx.Response | None]:
        qid, revision = resume_of
        look, _ = yield from self._send("GET", self._questionnaire_path(qid), wait=0, deadline=deadline)
        if look.status_code == 202:
            return look  # resumed and back with the person
        if look.status_code == 200:
            try:
                details = _json(look)["details"]
                resumed = details["status"] != "needs_clarification"
                if resumed or int(details["revision"]) > revision:
                    return look
            except (KeyError, TypeError, ValueError):
                return None
        return None  # the refusal stands

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        wait: float | None,
        deadline: float | None,
    ) -> Generator[_Action, _Outcome, tuple[httpx.Response, bool]]:
        """One request with retries. Returns the response and whether an earlier attempt
        may have reached the broker (``ambiguous``)."""
        params = {"wait": _format_wait(wait)} if wait is not None else {}
        request = _Send(
            method,
            path,
            params=params,
            headers=self._headers(headers),
            json=body,
            read_timeout=(wait or 0.0) + 15.0,
        )
        ambiguous = False
        attempt = 0
        while True:
            outcome = yield request
            delay: float | None = None
            if isinstance(outcome, httpx.Response):
                if outcome.status_code not in _TRANSIENT_STATUS or attempt >= self.s.retries:
                    return outcome, ambiguous
                if outcome.status_code in (502, 504):
                    ambiguous = True  # a proxy cannot tell whether the broker saw it
                delay = _retry_after(outcome)
                failure: Exception | QBrokerError = error_from_response(outcome)
            elif isinstance(outcome, _SAFE_RETRY + _AMBIGUOUS_RETRY):
                if attempt >= self.s.retries:
                    raise TransportError(
                        f"cannot reach the broker ({type(outcome).__name__}: {outcome}) after {attempt + 1} attempt(s)"
                    ) from outcome
                if isinstance(outcome, _AMBIGUOUS_RETRY):
                    ambiguous = True
                failure = outcome
            elif isinstance(outcome, httpx.HTTPError):
                raise TransportError(f"{type(outcome).__name__}: {outcome}") from outcome
            elif isinstance(outcome, BaseException):
                raise outcome
            else:  # pragma: no cover - a driver bug
                raise RuntimeError(f"unexpected driver outcome {outcome!r}")
            if delay is None:
                delay = min(self.s.max_backoff, self.s.backoff * (2**attempt))
                delay *= 0.5 + self.s.rng() / 2  # jitter: 50-100 % of the step
            if deadline is not None and self.s.clock() + delay > deadline:
                if isinstance(failure, QBrokerError):
                    raise failure
                raise TransportError(
                    f"cannot reach the broker before the timeout ({type(failure).__name__}: {failure})"
                ) from failure
            attempt += 1
            yield _Sleep(delay)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise ProtocolError(
            f"the broker answered HTTP {response.status_code} with a body that is not JSON",
            status=response.status_code,
        ) from None


def _format_wait(wait: float) -> str:
    return str(int(wait)) if float(wait).is_integer() else f"{wait:.3f}".rstrip("0")


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(0.0, min(float(raw), 60.0))
    except ValueError:
        return None


def _start_input(questions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(questions, Mapping | str | bytes):
        raise TypeError("questions must be a list of question objects")
    return {"action": "start", "questions": [dict(q) for q in questions]}


def _resume_input(questionnaire_id: str, revision: int, response: str) -> dict[str, Any]:
    return {
        "action": "resume",
        "questionnaireId": questionnaire_id,
        "revision": revision,
        "clarificationResponse": response,
    }


def _settings(
    session: str,
    token: str | None,
    wait: float,
    timeout: float | None,
    retries: int,
    backoff: float,
    max_backoff: float,
    poll_interval: float,
) -> _Settings:
    if not session:
        raise ValueError("session is required")
    if not 0 <= wait <= MAX_WAIT:
        raise ValueError(f"wait must be between 0 and {MAX_WAIT:g} seconds")
    if retries < 0:
        raise ValueError("retries must be >= 0")
    if token is None:
        token = os.environ.get("QBROKER_TOKEN") or None
    return _Settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval)


def _base_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"the broker URL must start with http:// or https://, got {url!r}")
    return url.rstrip("/")


def _timeout(action: _Send) -> httpx.Timeout:
    return httpx.Timeout(10.0, read=action.read_timeout)


# --- the blocking client --------------------------------------------------------------


class QBrokerClient:
    """Blocking client for one session.

    ``url``: the broker's base URL. ``token``: an agent token (default ``$QBROKER_TOKEN``).
    ``wait``: seconds each HTTP request long-polls for an outcome (0-300, default 30).
    ``timeout``: overall bound of one call, following 202s included (default: none; the
    broker itself ends a questionnaire nobody can answer as ``unavailable``).
    ``retries``/``backoff``/``max_backoff``: transient-failure retries per request.
    ``on_pending``: called with a ``Pending`` after every 202 (news and heartbeat alike);
    each method also takes its own ``on_pending``. ``poll_interval``: the least time between
    two re-attach requests when the broker answers 202 at once.
    ``transport``/``http_client``: bring your own httpx transport or client.
    """

    def __init__(
        self,
        url: str,
        session: str,
        token: str | None = None,
        *,
        wait: float = DEFAULT_WAIT,
        timeout: float | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
        on_pending: PendingCallback | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._core = _Core(_settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval))
        self.on_pending = on_pending
        self._owns_client = http_client is None
        self._http = http_client or httpx.Client(transport=transport)
        self._base = _base_url(url)

    @property
    def session(self) -> str:
        return self._core.s.session

    def start(
        self,
        questions: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        """Start a questionnaire and wait for its outcome."""
        return self.call(
            _start_input(questions),
            idempotency_key=idempotency_key,
            wait=wait,
            timeout=timeout,
            on_pending=on_pending,
        )

    def resume(
        self,
        questionnaire_id: str,
        revision: int,
        response: str,
        *,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        """Answer a clarification request (exact id and revision) and wait for the next outcome."""
        return self.call(
            _resume_input(questionnaire_id, revision, response),
            wait=wait,
            timeout=timeout,
            on_pending=on_pending,
        )

    def get(
        self,
        questionnaire_id: str,
        *,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        """Re-attach to a questionnaire and wait for its outcome (or return the one it has)."""
        exchange = self._core.get(questionnaire_id, wait=wait, timeout=timeout)
        return self._drive(exchange, on_pending)

    def abort(self, questionnaire_id: str, *, timeout: float | None = None) -> QuestionnaireResult:
        """End the questionnaire as the agent: outcome ``cancelled``/``aborted`` (or the
        outcome it already had)."""
        return self._drive(self._core.abort(questionnaire_id, timeout=timeout), None)

    def call(
        self,
        tool_input: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        """Send a raw tool input (``{"action": "start"|"resume", ...}``) as the seed defines it."""
        exchange = self._core.call(tool_input, idempotency_key=idempotency_key, wait=wait, timeout=timeout)
        return self._drive(exchange, on_pending)

    def _drive(self, exchange: _Exchange, on_pending: PendingCallback | None) -> QuestionnaireResult:
        notify = on_pending or self.on_pending
        outcome: _Outcome = None
        try:
            while True:
                action = exchange.send(outcome)
                outcome = None
                if isinstance(action, _Notify):
                    if notify is not None:
                        notify(action.pending)
                elif isinstance(action, _Sleep):
                    time.sleep(action.seconds)
                else:
                    try:
                        outcome = self._http.request(
                            action.method,
                            self._base + action.path,
                            params=action.params,
                            headers=action.headers,
                            json=action.json,
                            timeout=_timeout(action),
                        )
                    except httpx.HTTPError as exc:
                        outcome = exc
        except StopIteration as stop:
            result: QuestionnaireResult = stop.value
            return result
        finally:
            exchange.close()

    def close(self) -> None:
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> QBrokerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- the async client -----------------------------------------------------------------


class AsyncQBrokerClient:
    """``async`` twin of ``QBrokerClient`` (same arguments, same methods, awaitable).

    Runs on asyncio or trio (it sleeps with ``anyio``). ``on_pending`` may be a plain
    function or a coroutine function.
    """

    def __init__(
        self,
        url: str,
        session: str,
        token: str | None = None,
        *,
        wait: float = DEFAULT_WAIT,
        timeout: float | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
        on_pending: PendingCallback | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._core = _Core(_settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval))
        self.on_pending = on_pending
        self._owns_client = http_client is None
        self._http = http_client or httpx.AsyncClient(transport=transport)
        self._base = _base_url(url)

    @property
    def session(self) -> str:
        return self._core.s.session

    async def start(
        self,
        questions: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        return await self.call(
            _start_input(questions),
            idempotency_key=idempotency_key,
            wait=wait,
            timeout=timeout,
            on_pending=on_pending,
        )

    async def resume(
        self,
        questionnaire_id: str,
        revision: int,
        response: str,
        *,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        return await self.call(
            _resume_input(questionnaire_id, revision, response),
            wait=wait,
            timeout=timeout,
            on_pending=on_pending,
        )

    async def get(
        self,
        questionnaire_id: str,
        *,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        exchange = self._core.get(questionnaire_id, wait=wait, timeout=timeout)
        return await self._drive(exchange, on_pending)

    async def abort(self, questionnaire_id: str, *, timeout: float | None = None) -> QuestionnaireResult:
        return await self._drive(self._core.abort(questionnaire_id, timeout=timeout), None)

    async def call(
        self,
        tool_input: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        exchange = self._core.call(tool_input, idempotency_key=idempotency_key, wait=wait, timeout=timeout)
        return await self._drive(exchange, on_pending)

    async def _drive(self, exchange: _Exchange, on_pending: PendingCallback | None) -> QuestionnaireResult:
        import anyio

        notify = on_pending or self.on_pending
        outcome: _Outcome = None
        try:
            while True:
                action = exchange.send(outcome)
                outcome = None
                if isinstance(action, _Notify):
                    if notify is not None:
                        value = notify(action.pending)
                        if inspect.isawaitable(value):
                            await value
                elif isinstance(action, _Sleep):
                    await anyio.sleep(action.seconds)
                else:
                    try:
                        outcome = await self._http.request(
                            action.method,
                            self._base + action.path,
                            params=action.params,
                            headers=action.headers,
                            json=action.json,
                            timeout=_timeout(action),
                        )
                    except httpx.HTTPError as exc:
                        outcome = exc
        except StopIteration as stop:
            result: QuestionnaireResult = stop.value
            return result
        finally:
            exchange.close()

    async def aclose(self) -> None:
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncQBrokerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def dumps_result(result: QuestionnaireResult) -> str:
    """The whole tool result as pretty JSON (what ``qbroker ask --json`` prints)."""
    return json.dumps(result.tool_result(), indent=2, ensure_ascii=False)
