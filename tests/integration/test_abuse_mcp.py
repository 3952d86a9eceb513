"""Bad input on the MCP endpoint (``/mcp`` and ``/v1/sessions/{sid}/mcp``): Hypothesis posts
it JSON-RPC of every shape. The OpenAPI document names the endpoint but cannot describe its
messages (they are the MCP specification's), so schemathesis leaves it to this fuzzer.

Each request is one of: a message of the protocol (``initialize``, ``tools/list``,
``tools/call`` of the questionnaire tool with fuzzed arguments, ``ping``, notifications,
responses) with fields dropped, retyped or added; a batch; any JSON value; bytes that are not
JSON; and each with fuzzed headers (``Accept``, ``Content-Type``, ``MCP-Protocol-Version``,
``Mcp-Session-Id``, a token of another session, or none). Every request must be answered with
a status of the transport or the gate (never a 5xx), and a JSON-RPC answer must be one (a
call of the tool that starts a questionnaire ends at once: nobody is connected, and the
broker's client wait is 0, so it is ``unavailable``). Afterwards the broker is healthy, a host's plain call still works, and the
broker logged no line at error level.

``QBROKER_FUZZ_EXAMPLES`` (requests; 2,000 here by default) raises the run: the
10,000-request run is ``QBROKER_FUZZ_EXAMPLES=10000 python -m pytest
tests/integration/test_abuse_mcp.py``.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.tool import TOOL_NAME
from tests.helpers.processes import BrokerProcess, broker, token

FUZZ_EXAMPLES = int(os.environ.get("QBROKER_FUZZ_EXAMPLES", "2000"))
REQUESTS_PER_EXAMPLE = 10
# What the gate (the agent API's refusals) and the MCP transport answer.
STATUSES = {200, 202, 400, 401, 403, 404, 405, 406, 409, 413, 415, 422}

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10,
)
_texts = st.text(max_size=20) | st.sampled_from(["", " ", "x" * 300, "\u0000", "\u202e"])
_ids = st.integers(min_value=-(2**53), max_value=2**53) | st.text(max_size=12) | _values

_option = st.fixed_dictionaries({"id": st.sampled_from(["a", "b", ""]) | _texts}, optional={"label": _texts})
_question = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["q", "target"]) | _texts,
        "prompt": st.just("Which one?") | _texts,
        "type": st.sampled_from(["single", "multi", "text"]) | _values,
        "options": st.lists(_option, max_size=3) | _values,
    },
    optional={
        "label": _texts,
        "allowOther": st.booleans() | _values,
        "minSelections": _values,
        "maxSelections": _values,
    },
)
_valid_question = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["q", "target", "checks"]),
        "prompt": st.sampled_from(["Which one?", "Deploy where?"]),
        "type": st.sampled_from(["single", "multi"]),
        "options": st.just([{"id": "a"}, {"id": "b"}]),
    },
    optional={"allowOther": st.booleans()},
)
_valid_start = st.fixed_dictionaries(
    {"action": st.just("start"), "questions": st.lists(_valid_question, min_size=1, max_size=1)}
)
_fuzzed_arguments = st.one_of(
    st.fixed_dictionaries({"action": st.just("start"), "questions": st.lists(_question, min_size=1, max_size=2)}),
    st.fixed_dictionaries(
        {"action": st.just("resume")},
        optional={"questionnaireId": _texts, "revision": _values, "clarificationResponse": _texts},
    ),
    st.dictionaries(st.sampled_from(["action", "questions", "questionnaireId", "revision", "x"]), _values, max_size=4),
    _values,
)
# Half the calls start a questionnaire as a host would: the other half fuzz the arguments.
_arguments = st.booleans().flatmap(lambda plain: _valid_start if plain else _fuzzed_arguments)
# Mostly the tool's own name: a call must reach the tool to fuzz its arguments.
_tool_names = st.integers(0, 7).flatmap(
    lambda n: _texts if n == 7 else st.just("other") if n == 6 else st.just(TOOL_NAME)
)
_MODERN = {  # the per-request revision's envelope
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
_meta = st.sampled_from([{}, {}, {"progressToken": 7}, _MODERN]) | st.dictionaries(
    st.sampled_from(["progressToken", *_MODERN, "idempotencyKey", "x"]), _values, max_size=3
)
_params = {
    "initialize": st.fixed_dictionaries(
        {
            "protocolVersion": st.sampled_from(["2025-06-18", "2025-03-26", "2024-11-05", "2026-07-28"]) | _texts,
            "capabilities": st.sampled_from([{}, {"elicitation": {}}, {"elicitation": {"form": {}}}]) | _values,
            "clientInfo": st.fixed_dictionaries({"name": _texts, "version": _texts}) | _values,
        }
    ),
    "tools/call": st.fixed_dictionaries(
        {"name": _tool_names, "arguments": _arguments},
        optional={"_meta": _meta},
    ),
    "tools/list": st.fixed_dictionaries({}, optional={"cursor": _texts, "_meta": _meta}),
    "ping": st.just({}),
    "notifications/initialized": st.just({}),
    "notifications/cancelled": st.fixed_dictionaries({"requestId": _ids}, optional={"reason": _texts}),
    "resources/list": st.just({}),
    "prompts/get": st.fixed_dictionaries({"name": _texts}),
    "completion/complete": _values,
}


def _message(method: str, params: Any, request_id: Any, notification: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification and not method.startswith("notifications/"):
        message["id"] = request_id
    return message


# (the method and its params drawn together)
_plausible = st.sampled_from(sorted(_params) + ["tools/call"] * 4).flatmap(
    lambda method: st.builds(_message, st.just(method), _params[method], _ids, st.sampled_from([False] * 9 + [True]))
)


def _mutate(message: dict[str, Any], key: str, value: Any, drop: bool) -> dict[str, Any]:
    out = dict(message)
    if drop:
        out.pop(key, None)
    else:
        out[key] = value
    return out


_mutated = st.builds(
    _mutate,
    _plausible,
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
    _values,
    st.booleans(),
)
_responses = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": _ids}, optional={"result": _values, "error": _values}
)
_bodies = st.one_of(
    _plausible,
    _plausible,
    _plausible,
    _plausible,
    _mutated,
    _responses,
    st.lists(_plausible | _mutated, min_size=0, max_size=3),  # a batch
    _values,
)


def _headers() -> st.SearchStrategy[dict[str, str]]:
    plain = st.sampled_from(
        [{}, {}, {}, {"MCP-Protocol-Version": "2025-06-18"}, {"MCP-Protocol-Version": "2026-07-28"}]
    )
    return plain | st.fixed_dictionaries(
        {},
        optional={
            "Accept": st.sampled_from(["application/json", "text/event-stream", "*/*", "text/html", ""]),
            "Content-Type": st.sampled_from(
                ["text/plain", "application/json; charset=latin-1", "", "multipart/form-data"]
            ),
            "MCP-Protocol-Version": st.sampled_from(["2025-06-18", "2026-07-28", "1999-01-01", "", "x" * 100]),
            "Mcp-Session-Id": st.sampled_from(["", "nope", "qbs1.e30.AAAA", "x" * 300]),
            "Origin": st.sampled_from(["https://evil.example", "null", "http://127.0.0.1"]),
        },
    )


_shots = st.tuples(
    st.sampled_from(["json"] * 37 + ["raw"] * 2 + ["big"]),
    _bodies,
    st.binary(max_size=80) | st.text(max_size=80).map(str.encode),
    _headers(),
    st.sampled_from(["own"] * 12 + ["path"] * 4 + ["other", "none", "client", "expired"]),
)


@pytest.fixture(scope="module")
def mcp_fuzz_broker() -> Iterator[BrokerProcess]:
    # client_wait=0: a call that starts a questionnaire nobody can answer ends at once.
    with broker(client_wait=0, max_client_wait=0, log_level="info") as process:
        yield process


def _jsonrpc_answers(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of a 200: its JSON body, or the data of its server-sent events."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    assert kind.startswith("text/event-stream"), (kind, response.text[:300])
    # (SSE lines end at CR, LF or CRLF only: str.splitlines would also cut at a U+2028 in a prompt)
    lines = re.split(r"\r\n|\r|\n", response.text)
    return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]


@pytest.mark.heavy
def test_fuzzed_mcp_requests_never_crash_and_are_each_answered(mcp_fuzz_broker: BrokerProcess) -> None:
    sid = f"mcp-fuzz-{uuid.uuid4().hex[:8]}"
    tokens = {
        "own": token(sid, "agent", sub="fuzzer"),
        "path": token(sid, "agent"),
        "other": token(sid + "-other", "agent"),
        "client": token(sid, "client"),
        "expired": token(sid, "agent", ttl=-5),
    }
    statuses: Counter[str] = Counter()
    sent = [0]

    def send_one(http: httpx.Client, shot: tuple[str, Any, bytes, dict[str, str], str]) -> None:
        kind, body, raw, extra, who = shot
        url = f"{mcp_fuzz_broker.url}/mcp" if who != "path" else f"{mcp_fuzz_broker.url}/v1/sessions/{sid}/mcp"
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **extra}
        if who != "none":
            headers["Authorization"] = f"Bearer {tokens[who]}"
        if kind == "json":
            content = json.dumps(body).encode()
        elif kind == "raw":
            content = raw
        else:  # over the body limit
            content = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"x" * (17 << 20) + b'"}}'
        sent[0] += 1
        response = http.post(url, content=content, headers=headers)
        status = response.status_code
        statuses[str(status)] += 1
        assert status < 500 and status in STATUSES, (status, response.text[:500], content[:300], headers)
        if kind == "big":  # (refused for its size, unless refused before it is read: Origin, token)
            assert status in (413, 401, 403), status
        if status == 200:
            for answer in _jsonrpc_answers(response):
                assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", answer
                assert ("result" in answer) != ("error" in answer) or answer.get("method"), answer
                if "error" in answer:
                    statuses[f"rpc-error {answer['error'].get('code')}"] += 1
                elif isinstance(answer.get("result"), dict) and "content" in answer["result"]:
                    statuses["tool-result" + (" (error)" if answer["result"].get("isError") else "")] += 1

    @settings(
        max_examples=-(-FUZZ_EXAMPLES // REQUESTS_PER_EXAMPLE),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(shots=st.lists(_shots, min_size=REQUESTS_PER_EXAMPLE, max_size=REQUESTS_PER_EXAMPLE))
    def send(shots: list[tuple[str, Any, bytes, dict[str, str], str]]) -> None:
        for shot in shots:
            send_one(http, shot)

    with httpx.Client(timeout=30) as http:
        send()
        # A host's plain call still works.
        listed = http.post(
            f"{mcp_fuzz_broker.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
                "Authorization": f"Bearer {tokens['own']}",
            },
        )
    print(f"fuzzed {sent[0]} MCP requests: {dict(statuses.most_common())}")
    assert listed.status_code == 200, listed.text
    assert TOOL_NAME in listed.text
    assert sent[0] >= FUZZ_EXAMPLES
    if FUZZ_EXAMPLES >= 1000:  # (a short run for debugging need not reach everything)
        assert statuses["200"] > 0 and statuses["401"] > 0 and statuses["413"] > 0, statuses
        assert statuses["tool-result"] > 0 and statuses["tool-result (error)"] > 0, statuses

    assert httpx.get(f"{mcp_fuzz_broker.url}/readyz", timeout=5).status_code == 200
    log = mcp_fuzz_broker.log()
    errors = [line for line in log.splitlines() if '"level": "error"' in line or "Traceback" in line]
    assert errors == [], errors[:5]
