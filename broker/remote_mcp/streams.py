"""MCP sessions for older-protocol hosts that show forms (the ``initialize`` handshake,
2025-11-25 and before), so that the broker can send them ``elicitation/create`` on a tool
call's own stream.

The endpoint is otherwise stateless, and so is this: the session is the host's, not a
broker's. Its ``Mcp-Session-Id`` is signed with the broker secret and says whose it is and
what the host's ``initialize`` declared (``core/request_state.StreamSession``), so any broker
serves any of its requests, each on a transport of its own, with a channel back to the host
on that request's stream:

- ``initialize`` from a host that declares form elicitation (and whose URL does not say
  ``?inHost=off``) opens such a session; every other host stays stateless, as before;
- a request (a ``tools/call``, ...) in the session is served on any broker: a call that asks
  in the host sends the form on its own stream and waits for the outcome as any call does;
- the host's reply to a form (a JSON-RPC response, POSTed in the session) may reach any
  broker: it is not handed to the MCP SDK but applied there, to the store, from the form
  the asking broker left in the store (``form_note``), and the broker holding the call
  learns the outcome from the store's notices, as it learns a client's answer. A reply that
  breaks a rule leaves its reason in the store for the asking call, which asks again;
- a standalone ``GET`` stream is not offered (405) and ``DELETE`` has nothing to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import DEFAULT_NEGOTIATED_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from broker.core import host_form, request_state
from broker.core.errors import BrokerError
from broker.core.request_state import InvalidRequestState, StreamSession
from broker.http.kit import respond
from broker.remote_mcp.gate import Caller
from broker.remote_mcp.in_host import Asking

log = logging.getLogger("qbroker.mcp")

SESSION_HEADER: Final = "mcp-session-id"
# What a session's request may ask of the host: forms.
FORM_CAPABILITIES: Final[dict[str, Any]] = {"elicitation": {"form": {}}}

SendForm = Callable[[dict[str, Any]], Awaitable[Any]]


def form_note(session_token: str) -> str:
    """The store's name for the form a session's host was last shown (its requestState)."""
    return "mcp-form:" + hashlib.sha256(session_token.encode()).hexdigest()[:32]


def problem_note(session_token: str) -> str:
    """The store's name for why the host's last reply in a session was not taken."""
    return "mcp-form-problem:" + hashlib.sha256(session_token.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Stream:
    """A tool call's way to its older-protocol host: the session, and how to send it a form."""

    session_token: str
    send_form: SendForm


def opening(caller: Caller, asking: Asking, headers: dict[str, str], body: bytes) -> StreamSession | None:
    """The session an ``initialize`` opens: for a host that declares form elicitation and
    speaks the handshake era, when this URL may ask in the host; else None (stateless)."""
    if asking.mode(caller) == "off" or headers.get(SESSION_HEADER) is not None:
        return None
    message = _json(body)
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    capabilities = params.get("capabilities")
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict) or ("form" not in elicitation and "url" in elicitation):
        return None
    version = params.get("protocolVersion")
    if version not in HANDSHAKE_PROTOCOL_VERSIONS:
        version = DEFAULT_NEGOTIATED_VERSION
    info = params.get("clientInfo")
    name = info.get("name") if isinstance(info, dict) else None
    return StreamSession(caller.session_id, caller.sub, str(version), str(name or "MCP host")[:100])


def is_reply(body: bytes) -> dict[str, Any] | None:
    """A JSON-RPC response (the host's answer to our request), else None."""
    message = _json(body)
    answers = isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)
    return message if answers else None


class Streams:
    """The older-protocol sessions of this process's endpoint."""

    def __init__(self, server: Server[Any], asking: Asking, security: TransportSecuritySettings) -> None:
        self.server = server
        self.asking = asking
        self.security = security

    def seal(self, session: StreamSession) -> str:
        return request_state.seal_session(self.asking.key, session)

    async def handle(self, scope: Scope, receive: Receive, send: Send, caller: Caller, token: str, body: bytes) -> None:
        """A request in a session (its ``Mcp-Session-Id`` is ``token``)."""
        try:
            session = request_state.open_session(self.asking.key, token, session_id=caller.session_id, sub=caller.sub)
        except InvalidRequestState as exc:
            log.info("mcp session refused", extra={"session": caller.session_id, "reason": str(exc)})
            await _jsonrpc_error(send, 404, "Session not found")
            return
        method = scope["method"]
        if method == "DELETE":
            await respond(send, 200, b"", [])
            return
        if method != "POST":
            await respond(send, 405, b"", [(b"allow", b"POST, DELETE")])
            return
        reply = is_reply(body)
        if reply is not None:
            await self.take_reply(caller, session, token, reply)
            await respond(send, 202, b"", [])
            return
        await self.serve(scope, receive, send, token, session)

    async def serve(self, scope: Scope, receive: Receive, send: Send, token: str, session: StreamSession) -> None:
        """One request of the session on a transport of its own, with a channel back to the
        host on the request's stream (the MCP SDK's stateless path, plus that channel)."""
        transport = StreamableHTTPServerTransport(
            mcp_session_id=token, is_json_response_enabled=False, event_store=None, security_settings=self.security
        )

        async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream,
                    write_stream,
                    inline_methods=frozenset({"initialize"}),
                    transport_builder=lambda _: TransportContext(kind="streamable-http", can_send_request=True),
                )
                connection = Connection.from_envelope(
                    session.protocol_version, {"name": session.host_name, "version": "0"}, FORM_CAPABILITIES
                )
                await serve_connection(self.server, dispatcher, connection=connection, lifespan_state={})

        async with anyio.create_task_group() as group:
            await group.start(run)
            try:
                await transport.handle_request(scope, receive, send)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    async def take_reply(self, caller: Caller, session: StreamSession, token: str, reply: dict[str, Any]) -> None:
        """The host's answer to a form, on whichever broker it reached: applied to the store."""
        store = self.asking.broker.store
        state = await store.noted(caller.session_id, form_note(token))
        if state is None:
            log.info("host reply with no form out", extra={"session": caller.session_id})
            return
        result = reply.get("result") if isinstance(reply.get("result"), dict) else {"action": "cancel"}
        try:
            taken = await self.asking.apply_reply(caller, session.host_name, state, result)
        except BrokerError as exc:
            log.info("host reply not applied", extra={"session": caller.session_id, "code": exc.code})
            await store.note(caller.session_id, form_note(token), None, 0)
            return
        if taken.problem is not None:
            # The asking call, wherever it is, asks again with the reason.
            await store.note(caller.session_id, problem_note(token), taken.problem, self.asking.lifetime)
            return
        await store.note(caller.session_id, form_note(token), None, 0)


class StreamAsk:
    """A call's form on its own stream: sent, and sent again when a reply was not taken."""

    def __init__(self, asking: Asking, caller: Caller, stream: Stream) -> None:
        self.asking = asking
        self.caller = caller
        self.stream = stream
        self.task: asyncio.Task[Any] | None = None

    async def start(self, questionnaire_id: str, problem: str | None = None) -> bool:
        """Put the questionnaire into the host's form; False when it is no longer in progress."""
        broker = self.asking.broker
        state = await broker.ask_in_host(self.caller.session_id, questionnaire_id)
        if state.status != "in_progress":
            return False
        asked = await self.asking.input_required(self.caller, state, problem)
        await broker.store.note(
            self.caller.session_id, form_note(self.stream.session_token), asked["requestState"], self.asking.lifetime
        )
        await self.stop()
        form = asked["inputRequests"][host_form.INPUT_KEY]["params"]
        self.task = asyncio.create_task(self._send(form))
        log.info("asked in the host", extra={"session": self.caller.session_id, "questionnaire": state.id})
        return True

    async def _send(self, form: dict[str, Any]) -> None:
        try:
            await self.stream.send_form(form)  # (its answer is taken where it arrives: Streams.take_reply)
        except Exception as exc:  # the host refused the request, or the stream closed
            log.info("host form not shown", extra={"session": self.caller.session_id, "error": type(exc).__name__})

    async def again_if_refused(self, questionnaire_id: str) -> None:
        """Ask again when the host's reply broke a rule (its reason left in the store)."""
        store = self.asking.broker.store
        name = problem_note(self.stream.session_token)
        problem = await store.noted(self.caller.session_id, name)
        if problem is not None:
            await store.note(self.caller.session_id, name, None, 0)
            await self.start(questionnaire_id, problem)

    async def stop(self) -> None:
        """Withdraw the form: cancelling its request tells the host (``notifications/cancelled``
        on the call's stream, before the call's result closes it)."""
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


async def _jsonrpc_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    await respond(send, status, body, [])
