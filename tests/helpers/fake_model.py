"""A scripted model behind an OpenAI-compatible chat-completions endpoint, for driving real
agent programs (Pi) in tests without a model.

``ScriptedModel(brain)`` listens on 127.0.0.1 (a thread of its own) and answers every
``POST /v1/chat/completions`` with a streamed completion (server-sent events, the chunks
OpenAI's streaming API sends, ending in ``data: [DONE]``). What to say is up to ``brain``:
it gets the request's ``messages`` and returns a ``Turn`` (some text, some tool calls, or
both). Every request is kept in ``requests``, so a test asserts on exactly what the agent
sent the model, tool results included (``tool_results()``).

A brain that raises, or a request that is not a chat completion, is answered with an HTTP
500 whose body names the error, and the error is kept in ``errors`` for the test to report.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One assistant message: ``text`` first, then ``tool_calls`` (in one streamed reply)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


Brain = Callable[[list[Message]], Turn]


def text_of(message: Message) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


@dataclass
class ScriptedModel:
    brain: Brain
    model_id: str = "scripted"
    requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    # --- what the agent sent ----------------------------------------------------------
    def tool_results(self) -> list[Message]:
        """Every distinct ``role: tool`` message the agent sent, in order (each request
        repeats the conversation, so each result is kept once, by its tool call id)."""
        seen: dict[str, Message] = {}
        for request in self.requests:
            for message in request.get("messages", []):
                if message.get("role") == "tool":
                    seen.setdefault(str(message.get("tool_call_id")), message)
        return list(seen.values())

    # --- the server -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ScriptedModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        raise ValueError(f"not a chat completion: POST {self.path}")
                    model.requests.append(body)
                    turn = model.brain(list(body["messages"]))
                except Exception as exc:  # the test reports it; the agent sees a 500
                    model.errors.append(f"{type(exc).__name__}: {exc}")
                    payload = json.dumps({"error": {"message": str(exc), "type": "scripted_model"}}).encode()
                    self.send_response(500)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for chunk in model._chunks(turn):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _chunks(self, turn: Turn) -> list[dict[str, Any]]:
        """The reply as OpenAI streams it: a role, text deltas, each tool call's name then its
        arguments in two pieces, a finish reason, and the usage."""
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "model": self.model_id}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "created": 0, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        chunks = [chunk({"role": "assistant", "content": ""})]
        if turn.text:
            middle = len(turn.text) // 2
            chunks += [chunk({"content": turn.text[:middle]}), chunk({"content": turn.text[middle:]})]
        for index, call in enumerate(turn.tool_calls):
            arguments = json.dumps(call.arguments)
            cut = len(arguments) // 2
            head = {"index": index, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function"}
            chunks.append(chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}))
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[:cut]}}]}))
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[cut:]}}]}))
        chunks.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        chunks.append({**base, "created": 0, "choices": [], "usage": usage})
        return chunks
