"""Bad input on the inbox socket (``/v1/inbox/ws``): Hypothesis sends it frames of every
shape: frames of the client vocabulary with fuzzed fields, maps and values of every JSON and
msgpack type, bytes that decode to nothing, text where binary is expected and the reverse,
oversized frames; and first frames that are not a valid hello. Every frame after the hello
is answered (a ``pong``, or an ``error`` ``bad_frame``) or, for an oversized one, closed 1009;
a first frame gets the ``inbox`` list or a close code of the protocol. Meanwhile agents keep
questionnaires coming in covered sessions, so the list is live. Afterwards the broker is
healthy, serves everyone else, and logged no line at error level.

``QBROKER_FUZZ_EXAMPLES`` (frames; 2,000 here by default) raises the run: the 10,000-frame
run is ``QBROKER_FUZZ_EXAMPLES=10000 python -m pytest tests/integration/test_abuse_inbox.py``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import msgpack
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from broker.core import frames
from broker.core.errors import BrokerError
from broker.core.frames import SUBPROTOCOL_BY_CODEC, Ping
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.samples import single, start_body

FUZZ_EXAMPLES = int(os.environ.get("QBROKER_FUZZ_EXAMPLES", "2000"))
FRAMES_PER_EXAMPLE = 10
MAX_FRAME = 64 * 1024
FIRST_FRAME_CLOSES = {4400, 4401, 1009, 1008}
TYPES = ["hello", "ping", "answer", "draft", "clarify", "cancel", "confirm", "inbox", "pong", "welcome", ""]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
_frames = st.one_of(
    st.builds(
        lambda kind, extra: {"type": kind, **extra},
        st.sampled_from(TYPES),
        st.dictionaries(st.sampled_from(["ref", "token", "client", "questionnaireId", "step", "answers"]), _values),
    ),
    _values,
)


def _shots() -> st.SearchStrategy[tuple[str, Any, str]]:
    """(kind, payload, codec): a frame to encode, raw bytes or text, or an oversized frame."""
    codecs = st.sampled_from(["json", "msgpack"])
    return st.one_of(
        st.tuples(st.just("frame"), _frames, codecs),
        st.tuples(st.just("frame"), _frames, codecs),
        st.tuples(st.just("raw"), st.binary(max_size=64), codecs),
        st.tuples(st.just("raw"), st.text(max_size=64), codecs),
        st.tuples(st.just("big"), st.integers(MAX_FRAME + 1, MAX_FRAME + 4096), codecs),
    )


def _is_ping(data: str | bytes, codec: str) -> bool:
    """Whether the broker takes ``data`` as a ping, and answers a pong: its own parser says."""
    try:
        value = frames.decode(data, "json" if codec == "json" else "msgpack")
        return frames.peek(value)[0] == "ping" and isinstance(frames.parse_client_frame(value), Ping)
    except (BrokerError, ValueError, TypeError):
        return False


class InboxLane:
    """One inbox socket in one codec, reopened (and said hello on) after each close."""

    def __init__(self, process: BrokerProcess, codec: str, scope: str) -> None:
        self.process, self.codec, self.scope = process, codec, scope
        self.conn: ClientConnection | None = None

    def encode(self, value: Any) -> str | bytes:
        return json.dumps(value) if self.codec == "json" else msgpack.packb(value)

    def decode(self, data: str | bytes) -> dict[str, Any]:
        frame = json.loads(data) if isinstance(data, str) else msgpack.unpackb(data)
        assert isinstance(frame, dict) and "type" in frame, frame
        return frame

    def open(self) -> ClientConnection:
        protocol = Subprotocol(SUBPROTOCOL_BY_CODEC["json" if self.codec == "json" else "msgpack"])
        return connect(
            self.process.ws_url + "/v1/inbox/ws", subprotocols=[protocol], max_size=None, open_timeout=10, legacy=True
        )

    def ready(self) -> ClientConnection:
        if self.conn is None:
            conn = self.open()
            conn.send(self.encode({"type": "hello", "token": token(self.scope, "client")}))
            while self.decode(conn.recv(timeout=10))["type"] != "inbox":
                pass
            self.conn = conn  # (only once its hello was taken)
        return self.conn

    def exchange(self, data: str | bytes) -> list[dict[str, Any]] | int:
        """Send ``data`` and a ping after it; the frames up to the ping's pong, or the close
        code. (A pong carries no ref: ``data`` that is a ping itself is answered by one more.)"""
        conn = self.ready()
        try:
            conn.send(data)
            conn.send(self.encode({"type": "ping"}))
            pongs = 2 if _is_ping(data, self.codec) else 1
            frames: list[dict[str, Any]] = []
            expected = pongs
            while pongs:
                try:
                    frame = self.decode(conn.recv(timeout=10 if pongs == expected else 1))
                except TimeoutError:
                    return frames  # (the data was a ping the parser refused: its error came)
                if frame["type"] == "pong":
                    pongs -= 1
                else:
                    frames.append(frame)
            return frames
        except websockets.ConnectionClosed as exc:
            conn.close()
            self.conn = None
            return exc.rcvd.code if exc.rcvd is not None else 1006

    def first_frame(self, data: str | bytes) -> str | int:
        conn = self.open()
        try:
            conn.send(data)
            while True:
                if self.decode(conn.recv(timeout=15))["type"] == "inbox":
                    return "inbox"
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else 1006
        finally:
            conn.close()

    def log_tail(self) -> str:
        return "\n".join(self.process.log().splitlines()[-6:])

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


@pytest.fixture(scope="module")
def inbox_fuzz_broker() -> Iterator[BrokerProcess]:
    with broker(rate_limit=1_000_000, rate_burst=1_000_000, client_wait=600, log_level="info") as process:
        yield process


def _data(lane: InboxLane, kind: str, payload: Any) -> str | bytes:
    if kind == "raw":
        return payload  # type: ignore[no-any-return]
    if kind == "big":
        return json.dumps({"type": "ping", "ref": "x" * payload}) if lane.codec == "json" else b"\x81" + b"x" * payload
    try:
        return lane.encode(payload)
    except (OverflowError, TypeError, ValueError):
        return json.dumps(payload)


def test_fuzzed_inbox_frames_never_crash_and_are_each_answered(inbox_fuzz_broker: BrokerProcess) -> None:
    tenant = f"fuzz-{uuid.uuid4().hex[:8]}:"
    lanes = {codec: InboxLane(inbox_fuzz_broker, codec, tenant + "*") for codec in ("json", "msgpack")}
    outcomes: Counter[str] = Counter()
    sent = [0]

    def agent_turn(http: httpx.Client) -> None:
        sid = f"{tenant}{sent[0] % 7}"
        headers = {"Authorization": f"Bearer {token(sid, 'agent')}"}
        response = http.post(
            f"{inbox_fuzz_broker.url}/v1/sessions/{sid}/questionnaire?wait=0",
            json=start_body(single()),
            headers=headers,
        )
        assert response.status_code == 202, response.text

    @settings(
        max_examples=-(-FUZZ_EXAMPLES // FRAMES_PER_EXAMPLE),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(shots=st.lists(_shots(), min_size=FRAMES_PER_EXAMPLE, max_size=FRAMES_PER_EXAMPLE), first=st.booleans())
    def send(shots: list[tuple[str, Any, str]], first: bool) -> None:
        for index, (kind, payload, codec) in enumerate(shots):
            lane = lanes[codec]
            data = _data(lane, kind, payload)
            sent[0] += 1
            if first and index == 0:
                outcome = lane.first_frame(data)
                assert outcome == "inbox" or outcome in FIRST_FRAME_CLOSES, (outcome, data[:300])
                outcomes[f"first:{outcome}"] += 1
                continue
            answer = lane.exchange(data)
            if isinstance(answer, int):
                assert answer == 1009 and kind == "big", (answer, kind, codec, data[:300], lane.log_tail())
                outcomes[f"close:{answer}"] += 1
                continue
            assert kind != "big", "an oversized frame was not refused with 1009"
            for frame in answer:
                assert frame["type"] in ("error", "pong", "inbox_item", "inbox_removed"), frame
                if frame["type"] == "error":
                    assert frame["code"] == "bad_frame", frame
                outcomes[frame["type"]] += 1
            if sent[0] % 100 == 0:
                agent_turn(http)

    with httpx.Client(timeout=30) as http:
        agent_turn(http)
        try:
            send()
        finally:
            for lane in lanes.values():
                lane.close()
    print(f"fuzzed {sent[0]} inbox frames: {dict(outcomes.most_common())}")
    assert sent[0] >= FUZZ_EXAMPLES
    assert outcomes["error"] > 0 and outcomes["close:1009"] > 0 and outcomes["first:inbox"] + outcomes["first:4400"] > 0

    # Healthy, serving, and nothing logged at error level.
    assert httpx.get(f"{inbox_fuzz_broker.url}/readyz", timeout=5).status_code == 200
    lane = InboxLane(inbox_fuzz_broker, "json", tenant + "*")
    try:
        assert lane.exchange(lane.encode({"type": "ping"})) == []
    finally:
        lane.close()
    time.sleep(0.2)
    errors = [
        line for line in inbox_fuzz_broker.log().splitlines() if '"level": "error"' in line or "Traceback" in line
    ]
    assert errors == [], errors[:5]
