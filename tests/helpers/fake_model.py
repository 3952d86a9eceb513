"""Scripted models behind real model APIs, for driving real agent programs (Pi, Claude Code,
Codex) in tests without a model.

A scripted model listens on 127.0.0.1 (a thread of its own) and answers every model request
with a streamed reply (server-sent events, as the real API streams). What to say is up to
``brain``: it gets the conversation's ``messages`` and returns a ``Turn`` (some text, some
tool calls, or both). Every request is kept in ``requests``, so a test asserts on exactly
what the agent sent the model, tool results included (``tool_results()``).

- ``ScriptedModel``: OpenAI's chat completions (``POST /v1/chat/completions``, what Pi's
  ``openai-completions`` provider speaks);
- ``ScriptedAnthropic``: Anthropic's Messages API (``POST /v1/messages``, what Claude Code
  speaks with ``ANTHROPIC_BASE_URL``);
- ``ScriptedResponses``: OpenAI's Responses API (``POST /v1/responses``, what Codex speaks),
  whose conversation is the request's ``input`` items.

A brain that raises, or a request to a path the model does not serve, is answered with an
HTTP 500 whose body names the error, and the error is kept in ``errors`` for the test to
report.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from tests.helpers.threaded_http import ServedInAThread

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None  # the Responses API's tool namespace (Codex puts an MCP server's tools in one)


@dataclass(frozen=True)
class Turn:
    """One assistant message: ``text`` first, then ``tool_calls`` (in one streamed reply)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


Brain = Callable[[list[Message]], Turn]


def text_of(message: Message) -> str:
    """A message's text, whether its content (a Responses tool output's ``output``) is a
    string or a list of parts."""
    content = message.get("content", message.get("output"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def halves(text: str) -> tuple[str, str]:
    """``text`` in two pieces, as a stream delivers it."""
    middle = len(text) // 2
    return text[:middle], text[middle:]


@dataclass
class _ScriptedServer(ServedInAThread):
    """What every scripted model shares: the HTTP server, the requests kept, the errors."""

    brain: Brain
    model_id: str = "scripted"
    requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    THREAD_NAME: ClassVar[str] = "scripted-model"
    # The path the model's streamed replies are posted to (the API's).
    PATH: ClassVar[str] = ""

    def events(self, turn: Turn) -> Iterator[bytes]:
        """The reply as the API streams it: server-sent events, ready to write."""
        raise NotImplementedError

    def conversation(self, body: dict[str, Any]) -> list[Message]:
        """What the brain gets of a model request: its ``messages``."""
        return list(body["messages"])

    def other(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON answer to a request for another path; the base serves none."""
        raise ValueError(f"not a model request: POST {path}")

    # --- the server -------------------------------------------------------------------
    def handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                    if path != model.PATH:
                        self._json(200, model.other(path, body))
                        return
                    model.requests.append(body)
                    turn = model.brain(model.conversation(body))
                except Exception as exc:  # the test reports it; the agent sees a 500
                    model.errors.append(f"{type(exc).__name__}: {exc}")
                    self._json(500, {"error": {"message": str(exc), "type": "scripted_model"}})
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for event in model.events(turn):
                    self.wfile.write(event)
                self.wfile.flush()
                self.close_connection = True

            def _json(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


@dataclass
class ScriptedModel(_ScriptedServer):
    """OpenAI's streaming chat completions."""

    PATH: ClassVar[str] = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def tool_results(self) -> list[Message]:
        """Every distinct ``role: tool`` message the agent sent, in order (each request
        repeats the conversation, so each result is kept once, by its tool call id)."""
        seen: dict[str, Message] = {}
        for request in self.requests:
            for message in request.get("messages", []):
                if message.get("role") == "tool":
                    seen.setdefault(str(message.get("tool_call_id")), message)
        return list(seen.values())

    def events(self, turn: Turn) -> Iterator[bytes]:
        """A role, text deltas, each tool call's name then its arguments in two pieces, a
        finish reason, the usage, then ``[DONE]``."""
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "model": self.model_id}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "created": 0, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        chunks = [chunk({"role": "assistant", "content": ""})]
        if turn.text:
            chunks += [chunk({"content": piece}) for piece in halves(turn.text)]
        for index, call in enumerate(turn.tool_calls):
            head = {"index": index, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function"}
            chunks.append(chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}))
            for piece in halves(json.dumps(call.arguments)):
                chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        chunks.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        chunks.append({**base, "created": 0, "choices": [], "usage": usage})
        for data in chunks:
            yield b"data: " + json.dumps(data).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"


@dataclass
class ScriptedAnthropic(_ScriptedServer):
    """Anthropic's streaming Messages API; its ``origin`` is the ``ANTHROPIC_BASE_URL``.

    A turn streams as ``message_start``, one content block per text and per tool call
    (``content_block_start``, deltas: ``text_delta`` or the input as ``input_json_delta`` in
    two pieces, ``content_block_stop``), ``message_delta`` with the stop reason, and
    ``message_stop``. A token count (``/v1/messages/count_tokens``) is answered with a
    small number."""

    PATH: ClassVar[str] = "/v1/messages"

    def tool_results(self) -> list[Message]:
        """Every distinct ``tool_result`` block the agent sent, in order (each request
        repeats the conversation, so each result is kept once, by its ``tool_use_id``)."""
        seen: dict[str, Message] = {}
        for request in self.requests:
            for message in request.get("messages", []):
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        seen.setdefault(str(block.get("tool_use_id")), block)
        return list(seen.values())

    def other(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/v1/messages/count_tokens":
            return {"input_tokens": 10}
        return super().other(path, body)

    def events(self, turn: Turn) -> Iterator[bytes]:
        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        usage = {"input_tokens": 10, "output_tokens": 1}
        message: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": self.model_id,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield event("message_start", {"message": message})
        index = 0
        if turn.text:
            yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
            for piece in halves(turn.text):
                yield event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}})
            yield event("content_block_stop", {"index": index})
            index += 1
        for call in turn.tool_calls:
            block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": call.name, "input": {}}
            yield event("content_block_start", {"index": index, "content_block": block})
            for piece in halves(json.dumps(call.arguments)):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
            index += 1
        stop = "tool_use" if turn.tool_calls else "end_turn"
        yield event(
            "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}
        )
        yield event("message_stop", {})


@dataclass
class ScriptedResponses(_ScriptedServer):
    """OpenAI's streaming Responses API. The brain gets the request's ``input`` items, the
    whole conversation as the agent keeps it: ``{"type": "message", "role": "user", ...}``,
    the model's own ``function_call`` items and the agent's ``function_call_output`` items.

    A turn streams as ``response.created``, then per output item (a message for the text, a
    ``function_call`` per tool call) ``response.output_item.added``, its deltas
    (``response.output_text.delta``; ``response.function_call_arguments.delta``, the
    arguments in two pieces), their ``.done``, ``response.output_item.done``; and last
    ``response.completed`` with the whole output and the usage."""

    PATH: ClassVar[str] = "/v1/responses"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def conversation(self, body: dict[str, Any]) -> list[Message]:
        items = body["input"]
        return [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else list(items)

    def tool_results(self) -> list[Message]:
        """Every distinct ``function_call_output`` item the agent sent, in order (each request
        repeats the conversation, so each is kept once, by its ``call_id``)."""
        seen: dict[str, Message] = {}
        for request in self.requests:
            for item in self.conversation(request):
                if item.get("type") == "function_call_output":
                    seen.setdefault(str(item.get("call_id")), item)
        return list(seen.values())

    def events(self, turn: Turn) -> Iterator[bytes]:
        head = {"id": f"resp_{uuid.uuid4().hex[:12]}", "object": "response", "created_at": 0, "model": self.model_id}
        number = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal number
            number += 1
            data = {"type": kind, "sequence_number": number - 1, **fields}
            return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

        yield event("response.created", response={**head, "status": "in_progress", "output": []})
        output: list[dict[str, Any]] = []
        if turn.text:
            message = {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant"}
            at = {"item_id": message["id"], "output_index": 0, "content_index": 0}
            part = {"type": "output_text", "text": turn.text, "annotations": []}
            started = {**message, "status": "in_progress", "content": []}
            yield event("response.output_item.added", output_index=0, item=started)
            yield event("response.content_part.added", **at, part={**part, "text": ""})
            for piece in halves(turn.text):
                yield event("response.output_text.delta", **at, delta=piece)
            yield event("response.output_text.done", **at, text=turn.text)
            yield event("response.content_part.done", **at, part=part)
            output.append({**message, "status": "completed", "content": [part]})
            yield event("response.output_item.done", output_index=0, item=output[-1])
        for call in turn.tool_calls:
            arguments = json.dumps(call.arguments)
            item = {"id": f"fc_{uuid.uuid4().hex[:12]}", "type": "function_call", "name": call.name}
            item |= {"call_id": f"call_{uuid.uuid4().hex[:12]}"}
            if call.namespace is not None:
                item["namespace"] = call.namespace
            at = {"item_id": item["id"], "output_index": len(output)}
            yield event("response.output_item.added", output_index=len(output), item={**item, "arguments": ""})
            for piece in halves(arguments):
                yield event("response.function_call_arguments.delta", **at, delta=piece)
            yield event("response.function_call_arguments.done", **at, arguments=arguments)
            output.append({**item, "status": "completed", "arguments": arguments})
            yield event("response.output_item.done", output_index=len(output) - 1, item=output[-1])
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }
        yield event("response.completed", response={**head, "status": "completed", "output": output, "usage": usage})
