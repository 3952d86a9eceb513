"""Asking in the host's own form: MCP elicitation (form mode) through the multi round-trip
pattern of MCP 2026-07-28, for hosts that declare form elicitation.

A call that should ask in the host (``should_ask``: ``race`` always, ``fallback`` when no
qbroker client has the session open, ``off`` never) ends at once with an
``input_required`` result: the form (``core/host_form.py``) under ``inputRequests`` and the
broker's own ``requestState`` (``core/request_state.py``: signed with the broker secret,
bound to the session, the token's holder, the questionnaire, its revision and step). The
questionnaire is marked as asked in the host, so it waits for the person however long they
take, and every qbroker client and notification goes on as usual: the first answer wins.

The host repeats the call, to any broker, with the person's reply (``take_reply``):

- ``accept``: the form's answers are checked against the questionnaire's rules (a form that
  breaks one is asked again, the reason in its message, and nothing of it stored), then
  stored as a client's answers are, recorded as given in the host (a client of kind
  ``host``, the token's ``sub``). A filled clarification pauses at the first question the
  form left unanswered; the person's "Cancel this questionnaire" ends it ``user_cancelled``.
- ``decline`` and ``cancel``: the host withdraws. Headless hosts answer every form so with
  nobody behind them, so neither ends the questionnaire: it goes on with the clients.

Either way the call then waits for the outcome as any call does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from broker.core import host_form, request_state
from broker.core.actors import Actor, ClientInfo
from broker.core.errors import BrokerError
from broker.core.host_form import FormProblem
from broker.core.machine import Questionnaire
from broker.core.request_state import HostAsk, InvalidRequestState
from broker.remote_mcp.gate import Caller
from broker.service import Broker

log = logging.getLogger("qbroker.mcp")

# Who answered, as the record and the clients show it: a client of this kind, named after
# the host (its clientInfo.name) when it says.
HOST_CLIENT_KIND: Final = "host"
UNNAMED_HOST: Final = "MCP host"


def kept_note(questionnaire_id: str) -> str:
    """The store's name for a host form's answers kept past a clarification."""
    return "host-kept:" + questionnaire_id


@dataclass(frozen=True)
class Host:
    """What a call knows of its host: whether it can show a form, its name, and for an
    older-protocol host, the way to it on the call's own stream (``streams.py``; None: the
    multi round-trip pattern)."""

    forms: bool
    name: str = UNNAMED_HOST
    stream: Any = None


@dataclass(frozen=True)
class Taken:
    """What became of a host's reply: its questionnaire, and why it was not taken (None: it was)."""

    questionnaire_id: str
    problem: str | None = None


@dataclass(frozen=True)
class Reply:
    """A repeated call's ``requestState`` and ``inputResponses``."""

    request_state: str
    responses: Mapping[str, Any]


class Asking:
    """The broker's side of the host's forms: its key, the mode a caller asks for."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.key = request_state.key_from_secret(broker.config.secret_or_file())

    @property
    def lifetime(self) -> float:
        """How long a form holds: as long as the store keeps the questionnaire."""
        return self.broker.config.retention

    def mode(self, caller: Caller) -> str:
        return caller.in_host or self.broker.config.in_host

    async def should_ask(self, caller: Caller, host: Host | None) -> bool:
        if host is None or not host.forms:
            return False
        mode = self.mode(caller)
        if mode == "race":
            return True
        return mode == "fallback" and not await self.broker.session_open_in_a_client(caller.session_id)

    async def ask(self, caller: Caller, questionnaire_id: str, problem: str | None = None) -> dict[str, Any] | None:
        """The ``input_required`` result that puts the questionnaire into the host's form;
        None when it is no longer in progress (the call then waits for its outcome)."""
        state = await self.broker.ask_in_host(caller.session_id, questionnaire_id)
        if state.status != "in_progress":
            return None
        log.info(
            "asked in the host",
            extra={"session": caller.session_id, "questionnaire": state.id, "step": state.step},
        )
        return await self.input_required(caller, state, problem)

    async def input_required(self, caller: Caller, state: Questionnaire, problem: str | None = None) -> dict[str, Any]:
        ask = HostAsk(
            session_id=caller.session_id,
            sub=caller.sub,
            questionnaire_id=state.id,
            revision=state.revision,
            step=state.step,
            first=state.current_index,
            # As long as the store keeps the questionnaire: a person may take that long.
            expires_at=self.broker.clock() + self.lifetime,
        )
        kept = host_form.kept_answers_from_wire(await self.broker.store.noted(caller.session_id, kept_note(state.id)))
        request = {"method": "elicitation/create", "params": host_form.form(state, problem, kept)}
        return {
            "resultType": "input_required",
            "inputRequests": {host_form.INPUT_KEY: request},
            "requestState": request_state.seal(self.key, ask),
        }

    async def take_reply(self, caller: Caller, host: Host | None, reply: Reply) -> dict[str, Any] | str:
        """Apply the person's reply to the form; the questionnaire's id to wait for next, or
        the call's result at once (the form again, with why the reply was not taken)."""
        name = host.name if host else UNNAMED_HOST
        taken = await self.apply_reply(caller, name, reply.request_state, reply.responses.get(host_form.INPUT_KEY))
        if taken.problem is not None:
            asked = await self.ask(caller, taken.questionnaire_id, taken.problem)
            if asked is not None:
                return asked
        return taken.questionnaire_id

    async def apply_reply(self, caller: Caller, host_name: str, state: str, response: Any) -> Taken:
        """Apply ``response`` (an ``ElicitResult`` as JSON) to the form ``state`` (its
        ``requestState``) names: what became of it."""
        try:
            ask = request_state.unseal(
                self.key, state, session_id=caller.session_id, sub=caller.sub, now=self.broker.clock()
            )
        except InvalidRequestState as exc:
            log.info("requestState refused", extra={"session": caller.session_id, "reason": str(exc)})
            raise BrokerError(
                "invalid_request_state",
                "questionnaire: this call's requestState was not made by this service for this session and token,"
                " was altered, or has expired; nothing was stored. Call questionnaire again without it.",
            ) from None
        qid = ask.questionnaire_id
        action = response.get("action") if isinstance(response, Mapping) else None
        if action != "accept":
            # decline, cancel (or no response): the host withdraws; the clients go on.
            log.info("the host withdrew", extra={"session": caller.session_id, "questionnaire": qid, "action": action})
            await self.broker.leave_host(caller.session_id, qid)
            return Taken(qid)
        assert isinstance(response, Mapping)
        current = await self.broker.writer.load(caller.session_id, qid)
        try:
            form_reply = host_form.read_reply(current.questions[ask.first :], response.get("content"))
        except FormProblem as problem:
            log.info("host form refused", extra={"session": caller.session_id, "questionnaire": qid})
            return Taken(qid, problem.reason)
        by = Actor(caller.sub, "client", ClientInfo(HOST_CLIENT_KIND, host_name))
        after = await self.broker.answer_in_host(caller.session_id, qid, form_reply, by)
        kept = host_form.kept_answers(form_reply, after)
        if form_reply.clarification is not None and kept:
            # Answers after the question it paused at: the next form shows them filled in.
            text = host_form.kept_answers_to_wire(kept)
            await self.broker.store.note(caller.session_id, kept_note(qid), text, self.lifetime)
        log.info("host form answered", extra={"session": caller.session_id, "questionnaire": qid})
        return Taken(qid)
