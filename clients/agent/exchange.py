"""The exchange: every SDK call written once, as a generator that does no I/O (sans-I/O).

``_Core`` builds the requests and runs the rules (re-attach after ``202``, retries with
backoff, the ``Idempotency-Key`` of a start, the look after an ambiguous resume, the overall
timeout). It yields the I/O it needs (``_Send``, ``_Sleep``, ``_Notify``) and receives the
outcome; the blocking and the async client (``clients.py``) only perform those actions, so
the rules cannot drift apart between the two.
"""

from __future__ import annotations

import math
import os
import random
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx

from clients.agent.errors import ProtocolError, QBrokerError, QBrokerTimeout, TransportError, error_from_response
from clients.agent.pending import Pending
from clients.agent.results import QuestionnaireResult

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
    client_wait: float | None = None  # a start's ?clientWait= (None: the broker's)
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
        client_wait: float | None = None,
        reattach: bool = False,
    ) -> _Exchange:
        """POST a tool input verbatim (the broker validates it), then follow to an outcome.
        ``client_wait`` (a start's only): how long it waits for a first client. ``reattach``
        (a start's only, with no ``idempotency_key``): the broker's ``reattach=true`` makes
        its retries safe instead of a key."""
        extra: dict[str, str] = {}
        params: dict[str, str] = {}
        if tool_input.get("action") == "start":
            if reattach and idempotency_key is None:
                params["reattach"] = "true"
            else:
                extra["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
            client_wait = self.s.client_wait if client_wait is None else client_wait
            if client_wait is not None:
                _check_client_wait(client_wait)
                params["clientWait"] = _format_wait(client_wait)
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
            params=params,
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
        params: Mapping[str, str] | None = None,
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
            params=params,
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
        params: Mapping[str, str] | None = None,
        wait: float | None,
        deadline: float | None,
    ) -> Generator[_Action, _Outcome, tuple[httpx.Response, bool]]:
        """One request with retries. Returns the response and whether an earlier attempt
        may have reached the broker (``ambiguous``)."""
        query = {"wait": _format_wait(wait)} if wait is not None else {}
        if params:
            query.update(params)
        request = _Send(
            method,
            path,
            params=query,
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


def _check_client_wait(client_wait: float) -> None:
    if not (isinstance(client_wait, int | float) and not isinstance(client_wait, bool)) or not (
        0 <= client_wait < math.inf
    ):
        raise ValueError(f"client_wait must be a number of seconds, 0 or more, got {client_wait!r}")


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
    client_wait: float | None = None,
) -> _Settings:
    if not session:
        raise ValueError("session is required")
    if not 0 <= wait <= MAX_WAIT:
        raise ValueError(f"wait must be between 0 and {MAX_WAIT:g} seconds")
    if retries < 0:
        raise ValueError("retries must be >= 0")
    if token is None:
        token = os.environ.get("QBROKER_TOKEN") or None
    if client_wait is not None:
        _check_client_wait(client_wait)
    return _Settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval, client_wait)
