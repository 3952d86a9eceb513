"""Hostile and broken clients against a live broker: fuzzed frames, a fuzzed HTTP API,
hijacking, expired tokens, too many connections, oversized frames and floods.

- ``test_fuzzed_client_frames_*``: Hypothesis generates client frames (valid-looking and
  garbage, JSON text and msgpack binary, as first frames and mid-session) and sends each
  over a real websocket. Every frame must be answered (an ``error`` frame, a state frame or
  a pong) or end the connection with a documented close code; the broker must stay up and
  healthy, and another session must still complete a questionnaire afterwards. At least
  10,000 frames per run; ``QBROKER_FUZZ_EXAMPLES`` raises that for a longer run.
- ``test_http_api_conforms_to_its_openapi_document``: schemathesis drives every endpoint of
  the OpenAPI document the broker serves (but ``/mcp``: test_abuse_mcp.py): no 5xx, every
  response as documented, schema-violating requests refused, and no line logged at error
  level (``QBROKER_SCHEMATHESIS_EXAMPLES`` per operation).
- The rest: one rule each, with a bystander client in the same and in another session
  that must keep working while the abuser is cut off.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httpx
import msgpack
import pytest
import schemathesis
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect
from websockets.typing import Subprotocol

from broker.http.routes import openapi_document
from tests.helpers.clients import MSGPACK, ScriptedClient, close_code
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.samples import new_sid
from tests.helpers.waiting import eventually

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase, OpenApiSchema

# The websockets library draws its ping payloads from the global `random` module; when
# another test's background websocket (the default-timer probes) pings while hypothesis
# draws a frame, hypothesis sees the global state move and warns about `random` in a
# strategy. Our strategies never touch `random`, so that warning is noise here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)

JSON_PROTOCOL = "qbroker.v1.json"
FUZZ_EXAMPLES = int(os.environ.get("QBROKER_FUZZ_EXAMPLES", "10000"))  # frames, not Hypothesis examples
FRAMES_PER_EXAMPLE = 10
SCHEMATHESIS_EXAMPLES = int(os.environ.get("QBROKER_SCHEMATHESIS_EXAMPLES", "150"))

# What the broker may send (docs/protocol.md) and the codes its error frames may carry.
SERVER_FRAMES = {"welcome", "question", "suspended", "closed", "idle", "error", "pong"}
ERROR_CODES = {
    "bad_frame",
    "invalid_answer",
    "unknown_option",
    "other_not_allowed",
    "below_min_selections",
    "above_max_selections",
    "text_too_long",
    "stale_step",
    "conflict",
}
FIRST_FRAME_CLOSES = {4400, 4401, 4403, 1009}  # a bad first frame
SESSION_CLOSES = {1009}  # mid-session (the fuzz broker's rate limit is out of reach)

QUESTIONS = [
    {
        "id": "pick",
        "prompt": "Pick one",
        "type": "single",
        "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
    },
    {
        "id": "some",
        "prompt": "Pick some",
        "type": "multi",
        "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
        "minSelections": 1,
        "maxSelections": 2,
        "allowOther": False,
    },
]


def start_body() -> dict[str, Any]:
    return {"action": "start", "questions": QUESTIONS}


def agent_headers(sid: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(sid, 'agent')}"}


def healthy(process: BrokerProcess) -> None:
    assert process.process is not None and process.process.poll() is None, process.log()
    assert httpx.get(f"{process.url}/healthz", timeout=5).status_code == 200
    assert httpx.get(f"{process.url}/readyz", timeout=5).status_code == 200
    log = process.log()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-5000:]
    assert '"level": "error"' not in log, [line for line in log.splitlines() if '"level": "error"' in line][:5]


async def complete_one_questionnaire(process: BrokerProcess, sid: str, subprotocol: str = JSON_PROTOCOL) -> float:
    """A person in ``sid`` answers a whole questionnaire; returns how long it took."""
    began = time.monotonic()
    async with (
        httpx.AsyncClient(base_url=process.url, headers=agent_headers(sid), timeout=30) as http,
        ScriptedClient.connect(process.ws_url, sid, token(sid, "client"), subprotocol=subprotocol) as person,
    ):
        await person.wait_for("idle", "question")
        call = asyncio.create_task(http.post(f"/v1/sessions/{sid}/questionnaire?wait=20", json=start_body()))
        closed = await person.answer_all({"pick": ["b"], "some": ["c", "a"]})
        assert closed["status"] == "completed"
        response = await asyncio.wait_for(call, 20)
    assert response.status_code == 200, response.text
    assert response.json()["details"]["answers"] == [
        {"questionId": "pick", "selectedOptionIds": ["b"]},
        {"questionId": "some", "selectedOptionIds": ["a", "c"]},
    ]
    return time.monotonic() - began


# --- fuzzed client frames -------------------------------------------------------------------


class Slot:
    """Stands for a live value (the shown questionnaire's id, step, ...) until the frame is sent."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


QID, STEP, NEXT_STEP, QUESTION_ID, TOKEN, OTHER_TOKEN = (
    Slot(n) for n in ("qid", "step", "step+1", "questionId", "token", "token-of-another-session")
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
)
any_value = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
texts = st.text(max_size=24) | st.sampled_from(["", "   ", "a", "x" * 2001, "\u0000", "\ud7ff\U0001f600"])
option_ids = st.lists(st.sampled_from(["a", "b", "c", "zz", "", " a"]) | st.text(max_size=4), max_size=6)
selection = st.fixed_dictionaries(
    {}, optional={"selectedOptionIds": option_ids | any_value, "other": texts | any_value}
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "questionnaireId": st.just(QID) | texts | any_value,
    "step": st.sampled_from([STEP, STEP, NEXT_STEP, 0, -1]) | st.integers() | any_value,
    "questionId": st.sampled_from([QUESTION_ID, QUESTION_ID, "pick", "some"]) | texts,
    "selectedOptionIds": option_ids | any_value,
    "other": texts | any_value,
    "request": texts | any_value,
    "draft": selection | any_value,
    "ref": st.integers(min_value=-(2**63), max_value=2**63) | st.text(max_size=130) | any_value,
    "token": st.sampled_from([TOKEN, OTHER_TOKEN, "", "not-a-jwt"]) | any_value,
    "client": st.fixed_dictionaries(
        {}, optional={"kind": st.sampled_from(["bot", "web", "tui", "x"]) | any_value, "name": texts | any_value}
    )
    | any_value,
}
frame_types = (
    st.sampled_from(["answer", "answer", "draft", "draft", "clarify", "cancel", "ping", "hello"]) | texts | any_value
)
refs = st.integers(min_value=-(2**63), max_value=2**63) | st.text(max_size=8)
# Frames shaped like the real thing, aimed at the questionnaire being shown ...
plausible = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("answer"),
            "questionnaireId": st.just(QID),
            "step": st.sampled_from([STEP, STEP, NEXT_STEP, 0]),
            "questionId": st.sampled_from([QUESTION_ID, QUESTION_ID, "pick", "some", "nope"]),
            "selectedOptionIds": option_ids,
        },
        optional={"other": texts, "ref": refs},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("draft"),
            "questionnaireId": st.just(QID),
            "step": st.sampled_from([STEP, STEP, NEXT_STEP]),
            "selectedOptionIds": option_ids,
        },
        optional={"other": texts, "ref": refs},
    ),
    st.fixed_dictionaries(
        {"type": st.just("clarify"), "questionnaireId": st.just(QID), "step": st.just(STEP), "request": texts},
        optional={"draft": selection, "ref": refs},
    ),
    st.fixed_dictionaries(
        {"type": st.just("cancel"), "questionnaireId": st.just(QID), "step": st.sampled_from([STEP, NEXT_STEP])},
        optional={"ref": refs},
    ),
    st.fixed_dictionaries({"type": st.just("ping")}, optional={"ref": refs}),
    st.fixed_dictionaries(
        {"type": st.just("hello"), "token": st.sampled_from([TOKEN, OTHER_TOKEN, "not-a-jwt"])},
        optional={"client": FIELDS["client"], "ref": refs},
    ),
)


def _mutate(frame: dict[str, Any], key: str, value: Any, drop: bool) -> dict[str, Any]:
    out = dict(frame)
    if drop:
        out.pop(key, None)
    else:
        out[key] = value
    return out


# ... the same with one field dropped, retyped or added ...
mutated = st.builds(_mutate, plausible, st.sampled_from(sorted(FIELDS) + ["type", "unknown"]), any_value, st.booleans())
# ... and maps of anything.
structured = st.one_of(
    plausible,
    mutated,
    st.fixed_dictionaries({"type": frame_types}, optional={**FIELDS, "extra": any_value}),
    st.dictionaries(st.sampled_from(sorted(FIELDS) + ["type", "x"]), any_value, max_size=6),
    any_value,
)


@dataclass(frozen=True)
class Shot:
    """One fuzzed frame and how it travels."""

    codec: str  # "json" | "msgpack": the lane (session + connection) it goes to
    kind: str  # "structured" | "garbage" | "crossed" | "big"
    payload: Any  # a value to encode, or raw text/bytes for garbage
    first: bool  # sent as the first frame of a new connection instead of mid-session


def _shots() -> st.SearchStrategy[Shot]:
    codec = st.sampled_from(["json", "msgpack"])
    first = st.sampled_from([False] * 24 + [True])  # 4% test the hello phase
    structured_shot = st.builds(Shot, codec, st.just("structured"), structured, first)
    garbage = st.builds(
        Shot,
        st.just("json"),
        st.just("garbage"),
        st.text(max_size=60) | st.sampled_from(["{", "[]", "null", '"x"', "1e999", '{"type":"ping"', "[" * 3000]),
        first,
    ) | st.builds(
        Shot,
        st.just("msgpack"),
        st.just("garbage"),
        st.binary(max_size=60) | st.sampled_from([b"\x80", b"\xc1", b"\x91" * 3000, b"\x81\x01\xa1x", b"\xd4\x01\x00"]),
        first,
    )
    crossed = st.builds(Shot, codec, st.just("crossed"), structured, first)  # text on msgpack, bytes on json
    big = st.builds(Shot, codec, st.just("big"), st.integers(64 * 1024 + 1, 80 * 1024), first)
    # 75% structured, 16% garbage, 7% crossed codecs, 2% over 64 KiB.
    kinds = st.sampled_from(["structured"] * 75 + ["garbage"] * 16 + ["crossed"] * 7 + ["big"] * 2)
    branches = {"structured": structured_shot, "garbage": garbage, "crossed": crossed, "big": big}
    return kinds.flatmap(lambda kind: branches[kind])


@dataclass
class Lane:
    """One session and one long-lived connection speaking one codec, plus what it was shown."""

    process: BrokerProcess
    codec: str
    sid: str = field(default_factory=lambda: f"fuzz-{uuid.uuid4().hex[:12]}")
    conn: SyncConnection | None = None
    qid: str | None = None
    step: int = 0
    question_id: str | None = None
    suspended_revision: int | None = None
    idle: bool = True
    sentinel: int = 0

    @property
    def subprotocol(self) -> str:
        return JSON_PROTOCOL if self.codec == "json" else MSGPACK

    def encode(self, value: Any) -> str | bytes:
        if self.codec == "json":
            return json.dumps(value)
        return cast(bytes, msgpack.packb(value, use_bin_type=True))

    def decode(self, data: str | bytes) -> dict[str, Any]:
        if self.codec == "json":
            assert isinstance(data, str), f"binary frame on the json subprotocol: {data!r}"
            value = json.loads(data)
        else:
            assert isinstance(data, bytes), f"text frame on the msgpack subprotocol: {data!r}"
            value = msgpack.unpackb(data, raw=False)
        assert isinstance(value, dict) and value.get("type") in SERVER_FRAMES, value
        return value

    def open(self) -> SyncConnection:
        return sync_connect(
            f"{self.process.ws_url}/v1/sessions/{self.sid}/ws",
            subprotocols=[Subprotocol(self.subprotocol)],
            open_timeout=10,
            close_timeout=2,
            max_size=None,
            legacy=True,  # a plain connection object, opened now (we manage its life)
        )

    def connection(self) -> SyncConnection:
        if self.conn is None:
            conn = self.open()
            conn.send(self.encode({"type": "hello", "token": token(self.sid, "client"), "client": {"kind": "bot"}}))
            welcome = self.decode(conn.recv(timeout=10))
            assert welcome["type"] == "welcome", welcome
            self.conn = conn
            self.observe(self.decode(conn.recv(timeout=10)))
        return self.conn

    def resolve(self, value: Any) -> Any:
        if isinstance(value, Slot):
            return {
                QID: self.qid or "none",
                STEP: self.step,
                NEXT_STEP: self.step + 1,
                QUESTION_ID: self.question_id or "pick",
                TOKEN: token(self.sid, "client"),
                OTHER_TOKEN: token(self.sid + "-other", "client"),
            }[value]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def observe(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "error":
            assert frame.get("code") in ERROR_CODES, frame
            assert isinstance(frame.get("message"), str), frame
        elif kind == "question":
            self.qid, self.step, self.idle = frame["questionnaireId"], frame["step"], False
            self.question_id, self.suspended_revision = frame["question"]["id"], None
        elif kind == "suspended":
            self.qid, self.step, self.idle = frame["questionnaireId"], frame["step"], False
            self.suspended_revision = frame["revision"]
        elif kind == "idle":
            self.idle, self.qid, self.suspended_revision = True, None, None

    def exchange(self, data: str | bytes) -> list[dict[str, Any]] | int:
        """Send ``data``, then a sentinel frame; the frames in between, or the close code."""
        conn = self.connection()
        self.sentinel += 1
        ref = f"sentinel-{self.sentinel}"
        try:
            conn.send(data)
            # Refused for its unknown key, and the refusal echoes the ref: it marks the end.
            conn.send(self.encode({"type": "ping", "ref": ref, "sentinel": True}))
            frames: list[dict[str, Any]] = []
            deadline = time.monotonic() + 10
            while True:
                frame = self.decode(conn.recv(timeout=max(0.01, deadline - time.monotonic())))
                if frame["type"] == "error" and frame.get("ref") == ref:
                    return frames
                self.observe(frame)
                frames.append(frame)
        except websockets.ConnectionClosed as exc:
            self.conn = None
            return exc.rcvd.code if exc.rcvd is not None else 1006
        except TimeoutError:
            raise AssertionError(f"no answer within 10 s to {data[:200]!r}") from None

    def first_frame(self, data: str | bytes) -> str | int:
        """``data`` as the first frame of a fresh connection: 'welcome', or the close code."""
        conn = self.open()
        try:
            conn.send(data)
            deadline = time.monotonic() + 10
            while True:
                frame = self.decode(conn.recv(timeout=max(0.01, deadline - time.monotonic())))
                if frame["type"] == "welcome":
                    return "welcome"
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else 1006
        except TimeoutError:
            raise AssertionError(f"first frame {data[:200]!r} got neither a welcome nor a close") from None
        finally:
            conn.close()

    def agent_turn(self, http: httpx.Client) -> None:
        """Keep something to answer: a new questionnaire when idle, a resume when suspended."""
        path = f"{self.process.url}/v1/sessions/{self.sid}"
        if self.idle:
            response = http.post(f"{path}/questionnaire?wait=0", json=start_body(), headers=agent_headers(self.sid))
            assert response.status_code in (200, 202), response.text
        elif self.suspended_revision is not None and self.qid is not None:
            body = {
                "action": "resume",
                "questionnaireId": self.qid,
                "revision": self.suspended_revision,
                "clarificationResponse": "Because.",
            }
            response = http.post(f"{path}/questionnaire?wait=0", json=body, headers=agent_headers(self.sid))
            assert response.status_code in (200, 202, 409), response.text
        else:
            return
        self.exchange(self.encode({"type": "ping"}))  # take in the new state

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _encode_shot(lane: Lane, shot: Shot) -> str | bytes:
    if shot.kind == "garbage":
        return shot.payload  # type: ignore[no-any-return]
    if shot.kind == "big":
        filler = "x" * shot.payload
        return json.dumps({"type": "ping", "ref": filler}) if lane.codec == "json" else msgpack.packb({"type": filler})
    value = lane.resolve(shot.payload)
    try:
        data = lane.encode(value)
    except (OverflowError, TypeError, ValueError):  # an int msgpack cannot carry, say: send it as JSON text
        data = json.dumps(value)
    if shot.kind == "crossed":
        return data.encode() if isinstance(data, str) else data.decode("latin-1")
    return data


@dataclass
class FuzzTally:
    frames: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[BrokerProcess]:
    # No rate limit in reach: every frame must get through to the parser and the service.
    with broker(rate_limit=1_000_000, rate_burst=1_000_000, log_level="info") as process:
        yield process


@pytest.mark.heavy
def test_fuzzed_client_frames_never_crash_and_are_each_answered(fuzz_broker: BrokerProcess) -> None:
    lanes = {codec: Lane(fuzz_broker, codec) for codec in ("json", "msgpack")}
    tally = FuzzTally()

    # Ten frames per example: Hypothesis spends far less time per frame that way.
    @settings(
        max_examples=-(-FUZZ_EXAMPLES // FRAMES_PER_EXAMPLE),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(shots=st.lists(_shots(), min_size=FRAMES_PER_EXAMPLE, max_size=FRAMES_PER_EXAMPLE))
    def send(shots: list[Shot]) -> None:
        for shot in shots:
            send_one(shot)

    def send_one(shot: Shot) -> None:
        lane = lanes[shot.codec]
        data = _encode_shot(lane, shot)
        tally.frames += 1
        if shot.first:
            outcome = lane.first_frame(data)
            assert outcome == "welcome" or outcome in FIRST_FRAME_CLOSES, (outcome, data[:300])
            tally.outcomes[f"first:{outcome}"] += 1
            return
        answer = lane.exchange(data)
        if isinstance(answer, int):
            assert answer in SESSION_CLOSES, (answer, data[:300])
            assert shot.kind == "big", f"closed {answer} for a {len(data)}-byte frame {data[:300]!r}"
            tally.outcomes[f"close:{answer}"] += 1
            return
        assert shot.kind != "big", f"a {len(data)}-byte frame was not refused with 1009"
        # Every frame gets an answer: an error, a pong or the state it changed.
        assert answer, f"no answer to {data[:300]!r}"
        if shot.kind in ("garbage", "crossed") and not any(f["type"] != "error" for f in answer):
            assert any(f["code"] == "bad_frame" for f in answer), answer
        for frame in answer:
            tally.outcomes[frame["type"] if frame["type"] != "error" else f"error:{frame['code']}"] += 1
        if tally.frames % 50 == 0 or lane.idle or lane.suspended_revision is not None:
            lane.agent_turn(http)

    with httpx.Client(timeout=30) as http:
        for lane in lanes.values():
            lane.agent_turn(http)
        try:
            send()
        finally:
            for lane in lanes.values():
                lane.close()

    assert tally.frames >= FUZZ_EXAMPLES
    if FUZZ_EXAMPLES >= 1000:  # (a tiny run for debugging need not hit everything)
        # The fuzzing reached past the parser: commands were judged against real questionnaires.
        assert tally.outcomes["error:bad_frame"] > 0 and tally.outcomes["close:1009"] > 0, tally.outcomes
        assert tally.outcomes["error:stale_step"] > 0 and tally.outcomes["question"] > 0, tally.outcomes
        assert sum(n for k, n in tally.outcomes.items() if k.startswith("first:")) > 0, tally.outcomes
    print(f"fuzzed {tally.frames} frames: {dict(tally.outcomes.most_common())}")

    healthy(fuzz_broker)
    # Other sessions were never touched: one completes a questionnaire, in each codec.
    asyncio.run(complete_one_questionnaire(fuzz_broker, f"after-fuzz-{uuid.uuid4().hex[:8]}"))
    asyncio.run(complete_one_questionnaire(fuzz_broker, f"after-fuzz-{uuid.uuid4().hex[:8]}", MSGPACK))
    healthy(fuzz_broker)


# --- the HTTP API against its OpenAPI document ------------------------------------------------


# The MCP endpoint's answers are the MCP SDK's (JSON-RPC, server-sent streams that stay open),
# not this document's: test_mcp.py and the MCP Inspector hold it to its protocol, and
# test_abuse_mcp.py fuzzes it with JSON-RPC of every shape.
@pytest.fixture(scope="module")
def openapi_schema() -> OpenApiSchema:
    return schemathesis.openapi.from_dict(
        openapi_document(),
        # A service-wide agent token and an admin token, through the document's own security
        # schemes: schemathesis then also knows which requests it sends without one on purpose.
        config=schemathesis.Config.from_dict(
            {
                "auth": {
                    "openapi": {
                        "agentToken": {"bearer": token("*", "agent")},
                        "adminToken": {"bearer": token("*", "admin")},
                        "clientToken": {"bearer": token("*", "client")},
                    }
                }
            }
        ),
    )


# Loaded from the fixture when the test runs: schemathesis builds each operation's cases
# (its coverage phase) when the schema is parametrized, ~19 s of CPU that every xdist worker
# paid at collection, even the three that never run this test.
SCHEMA = schemathesis.pytest.from_fixture("openapi_schema").exclude(path_regex="/mcp$")

API_STATUSES: Counter[str] = Counter()


@pytest.fixture(scope="module")
def api_broker() -> Iterator[BrokerProcess]:
    # client_wait=0: a start nobody is there to answer ends at once (unavailable), so no
    # generated call holds on for its whole ``wait``; max_client_wait=0 keeps a generated
    # ?clientWait= from asking for longer (any wait above 0 is a 400, as documented). No
    # read limit in reach: the inbox's and the record's generated calls reach their handlers.
    with broker(
        client_wait=0, max_client_wait=0, reads_per_minute=1_000_000, reads_burst=1_000_000, log_level="warning"
    ) as process:
        yield process


def test_the_broker_serves_its_openapi_document(api_broker: BrokerProcess) -> None:
    response = httpx.get(f"{api_broker.url}/openapi.json", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == json.loads(json.dumps(openapi_document()))
    assert response.json()["openapi"].startswith("3.")


# The run and the check that it reached past the front door are one xdist group: the check
# reads what the run tallied in this process.
@SCHEMA.parametrize()
@settings(max_examples=SCHEMATHESIS_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@pytest.mark.xdist_group("openapi")
def test_http_api_conforms_to_its_openapi_document(case: OpenApiCase, api_broker: BrokerProcess) -> None:
    # Every check but positive_data_acceptance: JSON Schema cannot say "ids unique after
    # trimming" or "minSelections <= maxSelections", so some schema-valid bodies are 400s
    # by design (broker/http/openapi.py says so in its descriptions).
    response = case.call_and_validate(base_url=api_broker.url, excluded_checks=[positive_data_acceptance], timeout=30)
    API_STATUSES[f"{case.method} {response.status_code}"] += 1


@pytest.mark.xdist_group("openapi")
def test_the_schemathesis_run_reached_past_the_front_door(api_broker: BrokerProcess) -> None:
    if not API_STATUSES:
        pytest.skip("runs after test_http_api_conforms_to_its_openapi_document in the same session")
    # Not only 400/401s: questionnaires were started (and ended: nobody was connected).
    assert API_STATUSES["POST 200"] > 0, API_STATUSES
    assert API_STATUSES["GET 404"] > 0 and API_STATUSES["DELETE 404"] > 0, API_STATUSES
    print(f"schemathesis: {sum(API_STATUSES.values())} cases: {dict(API_STATUSES.most_common())}")
    assert not any(key.endswith(tuple(f" {n}" for n in range(500, 600))) for key in API_STATUSES), API_STATUSES
    healthy(api_broker)  # (no line at error level either)


def test_hostile_http_bodies_and_queries_are_4xx(api_broker: BrokerProcess) -> None:
    sid = "hostile-http"
    url = f"{api_broker.url}/v1/sessions/{sid}/questionnaire"
    headers = {**agent_headers(sid), "Content-Type": "application/json"}
    with httpx.Client(timeout=30) as http:
        for body in ("[" * 100_000, '{"action": "start", "questions": ' + "[" * 900 + "]" * 900 + "}"):
            response = http.post(url, content=body, headers=headers)
            assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_arguments"
        response = http.post(url, content=b"{" + b" " * (17 * 1024 * 1024) + b"}", headers=headers)
        assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
        response = http.post(f"{url}?wiat=5", json=start_body(), headers=headers)
        assert response.status_code == 400 and "wiat" in response.json()["error"]["message"]
        for query in ("wait=1&wait=2", "wait=%205", "wait=1_0", "wait=%2B5", "wait=%D9%A3", "wait=1e400"):
            response = http.post(f"{url}?{query}", json=start_body(), headers=headers)
            assert response.status_code == 400, (query, response.text)
        response = http.put(url, json=start_body(), headers=headers)
        assert response.status_code == 405 and response.headers["allow"] == "POST"
    healthy(api_broker)


# --- hijacking, tokens, connection limits, oversized and flooding clients -------------------------

MAX_PER_SESSION = 3


@pytest.fixture(scope="module")
def limits_broker() -> Iterator[BrokerProcess]:
    with broker(max_connections_per_session=MAX_PER_SESSION, rate_limit=20, rate_burst=40) as process:
        yield process


async def hello_socket(process: BrokerProcess, sid: str, tok: str) -> websockets.ClientConnection:
    ws = await websockets.connect(f"{process.ws_url}/v1/sessions/{sid}/ws", subprotocols=[Subprotocol(JSON_PROTOCOL)])
    await ws.send(json.dumps({"type": "hello", "token": tok, "client": {"kind": "bot", "name": "abuser"}}))
    return ws


async def rtt(client: ScriptedClient) -> float:
    began = time.monotonic()
    await client.ping()
    return time.monotonic() - began


async def test_foreign_origin_is_refused_before_the_upgrade(limits_broker: BrokerProcess) -> None:
    sid = new_sid("origin")
    async with ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client")) as bystander:
        for origin in ("https://evil.example", "null", "http://127.0.0.1:1", f"http://localhost:{limits_broker.port}"):
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(f"{limits_broker.ws_url}/v1/sessions/{sid}/ws", origin=origin)  # type: ignore[arg-type]
            assert refused.value.response.status_code == 403
        # The page from the broker's own origin gets in; the person already there never noticed.
        ws = await websockets.connect(
            f"{limits_broker.ws_url}/v1/sessions/{sid}/ws",
            origin=limits_broker.url,  # type: ignore[arg-type]
            subprotocols=[Subprotocol(JSON_PROTOCOL)],
        )
        await ws.send(json.dumps({"type": "hello", "token": token(sid, "client"), "client": {"kind": "web"}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "welcome"
        await ws.close()
        assert await bystander.ping() == {"type": "pong"}
    # The log says why, and names the origin (what an operator needs to fix the setting).
    refusals = [line for line in limits_broker.log().splitlines() if "websocket handshake refused" in line]
    assert any('"reason": "origin not allowed"' in line and "https://evil.example" in line for line in refusals)


async def test_expired_token_is_refused_4401(limits_broker: BrokerProcess) -> None:
    sid = new_sid("expired")
    ws = await hello_socket(limits_broker, sid, token(sid, "client", ttl=-5))
    assert await close_code(ws) == 4401


async def test_open_connection_is_closed_4401_when_its_token_expires(limits_broker: BrokerProcess) -> None:
    sid = new_sid("expiring")
    async with (
        ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client")) as bystander,
        ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client", ttl=2)) as short_lived,
    ):
        exp = int(time.time() + 2)  # the token's exp, to the second
        assert await short_lived.ping() == {"type": "pong"}
        assert await short_lived.expect_close(timeout=10) == 4401
        assert time.time() >= exp - 0.05, "closed before the token expired"
        assert time.time() < exp + 3, "closed long after the token expired"
        assert await bystander.ping() == {"type": "pong"}


async def test_per_session_connection_limit_is_1013_and_per_session(limits_broker: BrokerProcess) -> None:
    sid, other = new_sid("crowded"), new_sid("quiet")
    clients = [
        await ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client"), name=f"tab {i}")
        for i in range(MAX_PER_SESSION)
    ]
    try:
        one_too_many = await hello_socket(limits_broker, sid, token(sid, "client"))
        assert await close_code(one_too_many) == 1013
        # Other sessions do not share the budget.
        async with ScriptedClient.connect(limits_broker.ws_url, other, token(other, "client")) as elsewhere:
            assert await elsewhere.ping() == {"type": "pong"}
        # The ones inside keep working; when one leaves, a newcomer gets its place.
        assert [await c.ping() for c in clients] == [{"type": "pong"}] * MAX_PER_SESSION
        await clients.pop().close()

        async def newcomer() -> ScriptedClient | None:
            try:
                return await ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client"))
            except AssertionError:  # refused (1013) while the server still counts the one that left
                return None

        clients.append(await eventually(newcomer, "a place to free up after a client left", interval=0.05))
        assert await clients[-1].ping() == {"type": "pong"}
    finally:
        for client in clients:
            await client.close()


async def test_oversized_frames_close_1009_without_hurting_others(limits_broker: BrokerProcess) -> None:
    sid, other = new_sid("oversized"), new_sid("bystander")
    async with (
        ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client")) as neighbour,
        ScriptedClient.connect(limits_broker.ws_url, other, token(other, "client"), subprotocol=MSGPACK) as elsewhere,
    ):
        for codec in (JSON_PROTOCOL, MSGPACK):
            async with ScriptedClient.connect(
                limits_broker.ws_url, sid, token(sid, "client"), subprotocol=codec
            ) as abuser:
                await abuser.send({"type": "ping", "ref": "x" * (1024 * 1024)})
                assert await abuser.expect_close() == 1009
        assert await neighbour.ping() == {"type": "pong"}
        assert await elsewhere.ping() == {"type": "pong"}
        await complete_one_questionnaire(limits_broker, sid)
    healthy(limits_broker)


async def test_a_flooding_client_is_cut_off_1008_while_others_keep_their_latency(limits_broker: BrokerProcess) -> None:
    sid, other = new_sid("flood"), new_sid("calm")
    async with (
        ScriptedClient.connect(limits_broker.ws_url, sid, token(sid, "client")) as neighbour,
        ScriptedClient.connect(limits_broker.ws_url, other, token(other, "client")) as elsewhere,
    ):
        calm = [await rtt(neighbour), await rtt(elsewhere)]
        abusers = [
            await ScriptedClient.connect(limits_broker.ws_url, s, token(s, "client"), name="flood")
            for s in (sid, other)
        ]

        async def flood(abuser: ScriptedClient) -> int | None:
            frame = json.dumps({"type": "draft", "questionnaireId": "x", "step": 0, "selectedOptionIds": ["a"] * 60})
            for _ in range(5000):  # far beyond the 40-frame burst
                try:
                    await abuser.ws.send(frame)
                except websockets.ConnectionClosed:
                    break
            return await abuser.expect_close(timeout=10)

        floods = [asyncio.create_task(flood(a)) for a in abusers]
        during: list[float] = []
        while not all(f.done() for f in floods) and len(during) < 200:
            during += [await rtt(neighbour), await rtt(elsewhere)]
        assert [await f for f in floods] == [1008, 1008]
        after = [await rtt(neighbour), await rtt(elsewhere)]
        # Sane: well under a second while two floods were being cut off, fast again after.
        assert max(during + after) < 0.5, (calm, during, after)
        await complete_one_questionnaire(limits_broker, sid)
    healthy(limits_broker)
