"""One ``questionnaire`` tool call on the MCP endpoint, run against this process's ``Broker``.

The call blocks until the questionnaire has an outcome, however long the person takes. It
waits in slices of ``QBROKER_MCP_PROGRESS_INTERVAL`` seconds (the agent API's long poll,
inside the process); after each slice that ends with the person still answering, a
progress notification goes out when the host asked for progress (its ``progressToken``).
Nothing of the call lives only here: the questionnaire is in the store, and a call that
breaks (this broker stopped or died) is repeated by the host on any broker:

- a start with the same arguments re-attaches to the questionnaire the first attempt made
  while that one is still open (``Broker.start_or_reattach``); a host that can send an
  explicit key puts it in the request's ``_meta`` (``IDEMPOTENCY_META_KEY``), with the agent
  API's ``Idempotency-Key`` meaning;
- a resume with the same arguments that was applied already waits for the outcome again
  (``Broker.resume_or_reattach``).

When this broker is stopping, a call still waiting ends at once with a tool error that says
so and what to do (call again with the same arguments); the questionnaire goes on. So does a
call that has waited the endpoint's ``?timeout`` (for hosts that give up after a fixed time).

For a host that can show the questionnaire in its own form (``in_host.py``), a start or a
resume may end at once with that form instead of waiting; the host's repeated call, with the
person's reply, is applied, then waits for the outcome as any call does.

A call whose token is revoked or expires while it waits ends with the tool error
``unauthorized`` ("token revoked", "token expired") within about a second: the token is
checked before each slice and watched during it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final, TypeVar

from broker.core import tool
from broker.core.errors import BrokerError, invalid
from broker.core.model import StartInput, parse_tool_input
from broker.http.agent_api import MAX_IDEMPOTENCY_KEY
from broker.remote_mcp.gate import Caller
from broker.remote_mcp.in_host import Asking, Host, Reply
from broker.remote_mcp.streams import StreamAsk
from broker.service import Broker
from broker.service.token_guard import while_token_holds
from broker.store.base import StoreUnavailable

log = logging.getLogger("qbroker.mcp")

# A tools/call request's ``_meta`` may carry the start's idempotency key (hosts that are
# programs can set it; a model cannot, and needs none: repeating the arguments is enough).
IDEMPOTENCY_META_KEY: Final = "qbroker/idempotencyKey"
# A store outage is ridden out as the agent SDK does (its default backoff, ~11-23 s in all).
STORE_RETRIES: Final = 8
STORE_BACKOFF: Final = 0.25
STORE_MAX_BACKOFF: Final = 5.0
# While an older host's form is out on the call's stream, how often the call looks for a
# reply that another broker could not take (its reason left in the store), to ask again.
FORM_CHECK_INTERVAL: Final = 1.0

T = TypeVar("T")
Progress = Callable[[float, str], Awaitable[None]]
Outcome = tuple[int, dict[str, Any]]


async def call_tool(
    broker: Broker,
    caller: Caller,
    name: str,
    arguments: Mapping[str, Any] | None,
    meta: Mapping[str, Any] | None,
    progress: Progress,
    asking: Asking | None = None,
    host: Host | None = None,
    reply: Reply | None = None,
) -> dict[str, Any]:
    """The MCP result of one call as JSON: the tool result, a tool error, or (``asking`` a
    ``host`` that shows forms) the ``input_required`` result that asks in the host's form.
    ``reply``: the host's repeated call, with the person's reply to that form."""
    if name != tool.TOOL_NAME:
        return tool.unknown_tool(name)
    loop = asyncio.get_running_loop()
    deadline = None if caller.timeout is None else loop.time() + caller.timeout
    on_stream: StreamAsk | None = None  # an older host's form, on this call's own stream
    try:
        if reply is not None and asking is not None:
            taken = await _riding_out_the_store(partial(asking.take_reply, caller, host, reply))
            if isinstance(taken, dict):
                return taken
            wait = partial(_wait, broker, caller, taken, _slice(broker, loop, deadline))
            status, body = await _riding_out_the_store(_while_token_holds(broker, caller, wait))
        else:
            in_host = asking is not None and await asking.should_ask(caller, host)
            first_wait = 0.0 if in_host else _slice(broker, loop, deadline)
            first = partial(_first, broker, caller, arguments or {}, meta, first_wait)
            status, body = await _riding_out_the_store(_while_token_holds(broker, caller, first))
            if status == 202 and in_host:
                assert asking is not None and host is not None
                if host.stream is not None:
                    on_stream = StreamAsk(asking, caller, host.stream)
                    await on_stream.start(body["questionnaireId"])
                else:
                    asked = await asking.ask(caller, body["questionnaireId"])
                    if asked is not None:
                        return asked
                    # (it moved on meanwhile: wait for it as usual)
        reports = 0
        reported_at = -float("inf")
        while status == 202:
            questionnaire_id = body["questionnaireId"]
            if broker.shutting_down.is_set():
                return _go_on(questionnaire_id, "this broker is shutting down", "shutting_down")
            if deadline is not None and loop.time() >= deadline:
                waited = f"the call has waited {caller.timeout:g}s (this endpoint's ?timeout)"
                return _go_on(questionnaire_id, waited, "timeout")
            if loop.time() - reported_at >= 0.9 * broker.config.mcp_progress_interval:  # (timers may fire early)
                reports += 1
                reported_at = loop.time()
                await progress(reports, tool.progress_message(questionnaire_id, body["revision"], body["step"]))
            slice_ = _slice(broker, loop, deadline)
            if on_stream is not None:
                await on_stream.again_if_refused(questionnaire_id)
                slice_ = min(slice_, FORM_CHECK_INTERVAL)  # (a refused reply is asked again soon)
            wait = partial(_wait, broker, caller, questionnaire_id, slice_)
            status, body = await _riding_out_the_store(_while_token_holds(broker, caller, wait))
    except BrokerError as exc:
        broker.metrics.errors.labels(exc.code).inc()
        return tool.error_result(exc.message, exc.code)
    except StoreUnavailable:
        broker.metrics.errors.labels("store_unavailable").inc()
        return tool.error_result(
            "questionnaire: the state store is unavailable; call again with the same arguments shortly",
            "store_unavailable",
        )
    finally:
        if on_stream is not None:
            await on_stream.stop()
    return tool.call_result(body)


def _slice(broker: Broker, loop: asyncio.AbstractEventLoop, deadline: float | None) -> float:
    """How long the next wait may be: one progress interval, or what is left of the timeout."""
    interval = broker.config.mcp_progress_interval
    return interval if deadline is None else max(0.0, min(interval, deadline - loop.time()))


async def _first(
    broker: Broker, caller: Caller, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None, wait: float
) -> Outcome:
    """The start or resume, waiting for its outcome up to ``wait`` seconds."""
    sid = caller.session_id
    tool_input = parse_tool_input(arguments)
    if isinstance(tool_input, StartInput):
        key = _explicit_key(meta)
        if key is not None:
            return await broker.start_questionnaire(sid, tool_input.questions, key, wait, asked_by=caller.sub)
        return await broker.start_or_reattach(sid, tool_input.questions, wait, asked_by=caller.sub)
    return await broker.resume_or_reattach(sid, tool_input, wait, sub=caller.sub)


async def _wait(broker: Broker, caller: Caller, questionnaire_id: str, wait: float) -> Outcome:
    """One more slice of waiting for the outcome."""
    return await broker.wait_for_outcome(caller.session_id, questionnaire_id, wait)


def _while_token_holds(
    broker: Broker, caller: Caller, attempt: Callable[[], Awaitable[Outcome]]
) -> Callable[[], Awaitable[Outcome]]:
    """``attempt``, ended with ``unauthorized`` as soon as the caller's token is revoked or
    expires (checked before each slice, and watched during it: broker/service/token_guard.py)."""

    def guarded() -> Awaitable[Outcome]:
        return while_token_holds(broker.tokens, caller.claims, broker.clock, attempt)

    return guarded


def _explicit_key(meta: Mapping[str, Any] | None) -> str | None:
    key = (meta or {}).get(IDEMPOTENCY_META_KEY)
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
        raise invalid(f"_meta {IDEMPOTENCY_META_KEY!r} must be a string of 1-{MAX_IDEMPOTENCY_KEY} characters")
    return key


async def _riding_out_the_store(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, again after a pause while the store is unavailable (Redis restarting or
    failing over); safe for a start and a resume, which re-attach when repeated."""
    for retry in range(STORE_RETRIES):
        try:
            return await attempt()
        except StoreUnavailable:
            log.info("mcp tool call: store unavailable, retrying", extra={"attempt": retry + 1})
            await asyncio.sleep(min(STORE_MAX_BACKOFF, STORE_BACKOFF * 2**retry))
    return await attempt()


def _go_on(questionnaire_id: str, why: str, code: str) -> dict[str, Any]:
    """The tool error of a call that stops waiting while the person is still answering."""
    return tool.error_result(
        f"questionnaire: {why}. Questionnaire {questionnaire_id} is still with the user and nothing is lost:"
        " call questionnaire again with exactly the same arguments to go on waiting for it (a repeated call"
        " re-attaches to it; it does not ask again).",
        code,
    )
