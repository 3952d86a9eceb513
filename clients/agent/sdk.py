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

Layout
------
This module is the SDK's public surface (``__all__``, re-exported by ``clients.agent``); the
code lives in one module per concept: ``errors`` (the error classes and the response ->
error mapping), ``results`` (the typed results), ``exchange`` (the sans-I/O generator and
its rules) and ``clients`` (the blocking and async drivers).
"""

from __future__ import annotations

from clients.agent.clients import AsyncQBrokerClient, QBrokerClient
from clients.agent.errors import (
    ForbiddenError,
    InvalidArguments,
    NotAwaitingClarification,
    ProtocolError,
    QBrokerError,
    QBrokerTimeout,
    RateLimited,
    ServiceUnavailable,
    StaleRevision,
    TransportError,
    UnauthorizedError,
    UnknownQuestionnaire,
)
from clients.agent.errors import error_from_response as error_from_response
from clients.agent.exchange import DEFAULT_POLL_INTERVAL as DEFAULT_POLL_INTERVAL
from clients.agent.exchange import DEFAULT_RETRIES as DEFAULT_RETRIES
from clients.agent.exchange import DEFAULT_WAIT as DEFAULT_WAIT
from clients.agent.exchange import MAX_WAIT as MAX_WAIT
from clients.agent.exchange import USER_AGENT as USER_AGENT
from clients.agent.exchange import PendingCallback as PendingCallback
from clients.agent.pending import Pending
from clients.agent.results import (
    EXIT_CODES,
    Answer,
    Clarification,
    QuestionnaireResult,
    Status,
)
from clients.agent.results import STATUSES as STATUSES
from clients.agent.results import _thaw as _thaw
from clients.agent.results import dumps_result as dumps_result

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
