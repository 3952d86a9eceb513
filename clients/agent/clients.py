"""The two drivers of the exchange: ``QBrokerClient`` performs its actions with
``httpx.Client`` and ``time.sleep``, ``AsyncQBrokerClient`` with ``httpx.AsyncClient`` and
``anyio.sleep``. Same arguments, same methods; every rule lives in ``exchange.py``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from clients.agent.exchange import (
    DEFAULT_POLL_INTERVAL,
    DEFAULT_RETRIES,
    DEFAULT_WAIT,
    PendingCallback,
    _Core,
    _Exchange,
    _Notify,
    _Outcome,
    _resume_input,
    _Send,
    _settings,
    _Sleep,
    _start_input,
)
from clients.agent.results import QuestionnaireResult


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
    ``client_wait``: how long a questionnaire this client starts waits for the person's
    first client before it ends ``unavailable`` (the broker's ``?clientWait=``; default: the
    broker's own, 5 s or, where notifications may bring the person, 15 minutes); ``start``
    and ``call`` take one of their own too.
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
        client_wait: float | None = None,
        timeout: float | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
        on_pending: PendingCallback | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._core = _Core(
            _settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval, client_wait)
        )
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
        client_wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        """Start a questionnaire and wait for its outcome."""
        return self.call(
            _start_input(questions),
            idempotency_key=idempotency_key,
            wait=wait,
            client_wait=client_wait,
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
        client_wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
        reattach: bool = False,
    ) -> QuestionnaireResult:
        """Send a raw tool input (``{"action": "start"|"resume", ...}``) as the seed defines it.
        ``reattach``: a start with no key re-attaches to an identical one still open (the
        broker's ``reattach=true``), so that running the same program again asks once."""
        exchange = self._core.call(
            tool_input,
            idempotency_key=idempotency_key,
            wait=wait,
            client_wait=client_wait,
            timeout=timeout,
            reattach=reattach,
        )
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
        client_wait: float | None = None,
        timeout: float | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
        on_pending: PendingCallback | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._core = _Core(
            _settings(session, token, wait, timeout, retries, backoff, max_backoff, poll_interval, client_wait)
        )
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
        client_wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
    ) -> QuestionnaireResult:
        return await self.call(
            _start_input(questions),
            idempotency_key=idempotency_key,
            wait=wait,
            client_wait=client_wait,
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
        client_wait: float | None = None,
        timeout: float | None = None,
        on_pending: PendingCallback | None = None,
        reattach: bool = False,
    ) -> QuestionnaireResult:
        exchange = self._core.call(
            tool_input,
            idempotency_key=idempotency_key,
            wait=wait,
            client_wait=client_wait,
            timeout=timeout,
            reattach=reattach,
        )
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
