"""One websocket client of a load session: its connection (connect, hello, reconnect, fail
over, encode and decode frames), the frames it reads, and how it plays the plan (think,
sometimes drop and reconnect, clarify, cancel or answer).

Bots of one session take turns: the bot that acts on a question frame is chosen by its
``step``, the others only watch (and check what they see, checks.py). A reconnect loop makes
a small number of attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter, deque
from typing import Any

import msgpack
import orjson
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from broker.core.frames import SUBPROTOCOL_BY_CODEC, Codec
from broker.core.status import CloseCode, CloseReason
from clients.bots.checks import BOT_NAME, FrameChecks
from clients.bots.round import Round, Saved, SessionView
from clients.bots.stats import RATE_LIMITED_CLOSES

MAX_CONNECT_ATTEMPTS = 6
TRACE = os.environ.get("QBROKER_BOTS_TRACE") == "1"  # keep each bot's last frames for error reports


def ws_base(url: str) -> str:
    if url.startswith("https://"):
        return "wss://" + url[len("https://") :]
    if url.startswith("http://"):
        return "ws://" + url[len("http://") :]
    return url


class Bot(FrameChecks):
    """One websocket client of a session."""

    def __init__(self, session: SessionView, index: int, url: str, codec: Codec) -> None:
        self.session = session
        self.stats = session.stats
        self.index = index
        self.url = url
        self.uri = f"{ws_base(url)}/v1/sessions/{session.sid}/ws"
        self.codec = codec
        self.ws: ClientConnection | None = None
        self.ready = asyncio.Event()
        self.closing = False
        self.ref = 0
        self.rng = random.Random(f"{session.settings.seed}:{session.sid}:bot{index}")
        self.pending_answer: tuple[str, int, float] | None = None  # (questionnaire, step, sent at)
        self.received_at = 0.0  # perf_counter() when the last frame arrived
        self.expect_view: tuple[str, int, int, Any] | None = None  # after a churn reconnect
        # A draft sent whose echo was not read before the connection died: (questionnaire,
        # step, draft); the view after the reconnect says whether it was saved.
        self.draft_in_doubt: tuple[str, int, dict[str, Any]] | None = None
        self.seen: tuple[str, int] | None = None  # the questionnaire and highest step this bot was shown
        # The last command sent, with what to restore if the broker refuses it (an error
        # frame means "changed nothing"): (ref, round, step, expectation, clarified, last_acted).
        self.inflight: tuple[int, Round, int, Saved, Counter[int], int] | None = None
        self.trace: deque[str] | None = deque(maxlen=16) if TRACE else None

    # --- connection ----------------------------------------------------------------

    async def run_bot(self) -> None:
        failures = 0
        while not self.closing:
            try:
                await self.connect()
                failures = 0
                await self.pump()
                if self.closing:
                    return
                self.stats.error("closed_by_broker", f"{self.session.sid}: connection closed")
            except ConnectionClosed as exc:
                if self.closing:
                    return
                code = exc.rcvd.code if exc.rcvd is not None else CloseCode.ABNORMAL_CLOSURE
                self.stats.error(f"close_{code}", f"{self.session.sid}: {exc}")
                if exc.rcvd is not None and exc.rcvd.reason == CloseReason.RATE_LIMITED:
                    self.stats.count(RATE_LIMITED_CLOSES)  # (1008 has other causes: the reason tells)
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
                self.stats.error("connect_error", f"{self.session.sid}: {exc!r}")
            except Exception as exc:  # noqa: BLE001 - e.g. an undecodable frame: count it, reconnect
                self.stats.error(f"bot_{type(exc).__name__}", f"{self.session.sid}: {exc!r}")
            await self.close()
            self._fail_over()
            failures += 1
            if failures >= MAX_CONNECT_ATTEMPTS:
                self.stats.error("bot_gave_up", f"{self.session.sid}: bot {self.index}")
                return
            await asyncio.sleep(min(2.0, 0.05 * 2**failures))
            self.stats.count("reconnects")

    def _fail_over(self) -> None:
        """Reconnect through the next --url: the process this bot was on may have died."""
        urls = self.session.settings.urls
        self.url = urls[(urls.index(self.url) + 1) % len(urls)]
        self.uri = f"{ws_base(self.url)}/v1/sessions/{self.session.sid}/ws"

    async def connect(self, *, in_churn: bool = False) -> None:
        """Open, say hello, read the welcome and the current view, and act on the view
        (``in_churn``: the churn that reconnects goes on to act itself)."""
        async with self.session.connect_slots:
            self.ws = await websockets.connect(
                self.uri,
                subprotocols=[Subprotocol(SUBPROTOCOL_BY_CODEC[self.codec])],
                compression="deflate" if self.session.settings.deflate else None,
                open_timeout=15,
                max_size=1 << 20,
                ping_interval=None,
            )
        floor = dict(self.session.steps_seen)  # what the session's bots were shown before this hello
        await self.send(
            {
                "type": "hello",
                "token": self.session.client_token,
                "client": {"kind": "bot", "name": f"{BOT_NAME} {self.index}"},
            }
        )
        async with asyncio.timeout(15):
            welcome = await self.receive()
            view = await self.receive()
        if welcome.get("type") != "welcome" or welcome.get("sessionId") != self.session.sid:
            self.session.mismatch(f"first frame is not a welcome for this session: {welcome!r}")
        qid, step = view.get("questionnaireId"), view.get("step")
        if isinstance(qid, str) and isinstance(step, int) and step < floor.get(qid, step):
            self.session.mismatch(
                f"the view after a hello shows {qid} at step {step}, one of its bots saw {floor[qid]}"
            )
        await self.joined(view, in_churn=in_churn)

    async def joined(self, view: dict[str, Any], *, in_churn: bool = False) -> None:
        """The first view after a (re)connect: settle what the lost connection left in doubt,
        check it, and act on it unless a churn goes on to."""
        doubt, self.draft_in_doubt = self.draft_in_doubt, None
        rnd = self.session.round
        if doubt is not None and rnd is not None and rnd.questionnaire_id == doubt[0]:
            # A draft sent just before the connection died, its echo never read: saved or
            # not, the broker's view says which. (Anything else is a mismatch below.)
            qid, step, draft = doubt
            shown = (view.get("type"), view.get("questionnaireId"), view.get("step"), view.get("draft"))
            if shown == ("question", qid, step, draft):
                rnd.expect.draft = draft
        expect, self.expect_view = self.expect_view, None
        if expect is not None:
            self._check_order(view)
            self._check_view_after_reconnect(expect, view)
        self.ready.set()
        if in_churn:
            return
        inflight = self.inflight
        if (
            inflight is not None
            and view.get("type") == "question"
            and view.get("questionnaireId") == inflight[1].questionnaire_id
            and view.get("step") == inflight[2]
        ):
            # Our last command died with the connection (the step did not move): it
            # changed nothing, like a refused one, so act on this question again.
            self.stats.count("retried")
            self._roll_back(inflight[0])
        await self.on_frame(view)

    async def close(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await ws.close()

    async def send(self, frame: dict[str, Any]) -> None:
        assert self.ws is not None
        data: str | bytes = (
            orjson.dumps(frame).decode() if self.codec == "json" else msgpack.packb(frame, use_bin_type=True)
        )
        pending = self.pending_answer
        if pending is not None and frame.get("type") == "answer" and frame.get("step") == pending[1]:
            # The latency runs from the moment the encoded answer leaves, like the echo floor's.
            self.pending_answer = (pending[0], pending[1], time.perf_counter())
        await self.ws.send(data)
        self.stats.count("frames_out")
        if self.trace is not None:
            self.trace.append(f"> {_summary(frame)}")

    async def receive(self) -> dict[str, Any]:
        assert self.ws is not None
        raw = await self.ws.recv()
        self.received_at = time.perf_counter()  # before decoding: the latencies end here
        self.stats.count("frames_in")
        if self.codec == "json":
            if not isinstance(raw, str):
                self.session.mismatch("a binary frame on the json subprotocol")
                return {}
            frame = orjson.loads(raw)
        else:
            if not isinstance(raw, bytes):
                self.session.mismatch("a text frame on the msgpack subprotocol")
                return {}
            frame = msgpack.unpackb(raw, raw=False)
        if not isinstance(frame, dict):
            return {}
        if self.trace is not None:
            self.trace.append(f"< {_summary(frame)}")
        return frame

    async def pump(self) -> None:
        while not self.closing:
            frame = await self.receive()
            await self.on_frame(frame)

    def command(self, frame: dict[str, Any]) -> dict[str, Any]:
        self.ref += 1
        frame["ref"] = self.ref
        return frame

    # --- frames --------------------------------------------------------------------

    async def on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        now = self.received_at
        if kind in ("question", "suspended"):
            self._check_order(frame)
        if kind == "question":
            await self.on_question(frame, now)
        elif kind == "suspended":
            self.on_suspended(frame)
        elif kind == "closed":
            self.on_closed(frame, now)
        elif kind == "error":
            detail = f"{self.session.sid} bot {self.index}: {frame.get('message')}"
            if self.trace is not None:
                detail += " | " + " ".join(self.trace)
            self.stats.error(f"frame_{frame.get('code')}", detail)
            self._roll_back(frame.get("ref"))
        elif kind not in ("idle", "pong"):
            self.stats.error("unexpected_frame", f"{self.session.sid}: {kind!r}")

    def _roll_back(self, ref: object) -> None:
        """The broker refused our last command and changed nothing: forget we sent it, so the
        fresh view that follows a ``stale_step`` is acted on again (the error still counts)."""
        inflight, self.inflight = self.inflight, None
        if inflight is None or inflight[0] != ref:
            return
        _, rnd, step, expect, clarified, last_acted = inflight
        if self.session.round is not rnd:
            return
        rnd.expect.answers, rnd.expect.clarifications, rnd.expect.draft, rnd.expect.cancelled = expect
        rnd.clarified = clarified
        rnd.acted.discard(step)
        rnd.last_acted = last_acted
        if self.pending_answer is not None and self.pending_answer[1] == step:
            self.pending_answer = None

    def _answer_latency(self, questionnaire_id: str, step: int, now: float) -> None:
        pending = self.pending_answer
        if pending is not None and pending[0] == questionnaire_id and step > pending[1]:
            self.stats.observe("answer_to_next_question", now - pending[2])
            self.pending_answer = None

    async def on_question(self, frame: dict[str, Any], now: float) -> None:
        qid, step, index = frame.get("questionnaireId"), frame.get("step"), frame.get("index")
        if not isinstance(qid, str) or not isinstance(step, int) or not isinstance(index, int):
            self.session.mismatch(f"malformed question frame {frame!r}")
            return
        self._answer_latency(qid, step, now)
        rnd = self.session.bind(qid, now, frame.get("question"))
        if rnd is None or step in rnd.acted or step <= rnd.last_acted:
            return
        bots = self.session.bots
        if bots[step % len(bots)] is not self:
            return  # another bot of the session acts on this step
        previous = rnd.last_acted
        rnd.acted.add(step)
        rnd.last_acted = step
        self._check_question(rnd, frame)
        self.inflight = None  # (a command of an earlier step is settled: the step moved on)
        try:
            await self.act(rnd, qid, step, index, previous)
        except BaseException:
            if self.inflight is None and self.session.round is rnd:
                # The connection failed before the command went out (while thinking or in a
                # churn whose broker died): give the step back, so that the view after the
                # reconnect is acted on, not skipped as already done.
                rnd.acted.discard(step)
                rnd.last_acted = previous
            raise

    async def act(self, rnd: Round, qid: str, step: int, index: int, previous: int) -> None:
        opts = self.session.settings
        plan, expect = rnd.plan, rnd.expect
        low, high = opts.think_ms
        if high > 0:
            await asyncio.sleep(self.rng.uniform(low, high) / 1000.0)
        if opts.rates.churn > 0 and self.rng.random() < opts.rates.churn:
            await self.churn(rnd, qid, step, index)
        if index >= plan.total:
            self.session.mismatch(f"question index {index} beyond the {plan.total} questions")
            return
        saved = (
            (list(expect.answers), list(expect.clarifications), expect.draft, expect.cancelled),
            Counter(rnd.clarified),
            previous,
        )
        frame = rnd.next_command(qid, step, index, self.rng)
        if frame["type"] == "answer":
            self.pending_answer = (qid, step, time.perf_counter())
        frame = self.command(frame)
        self.inflight = (frame["ref"], rnd, step, *saved)
        await self.send(frame)

    async def churn(self, rnd: Round, qid: str, step: int, index: int) -> None:
        """Drop the connection mid-questionnaire (after saving a draft on multi questions)
        and reconnect: the broker must show the same question, step and draft again."""
        pick = rnd.plan.drafts[index] if index < rnd.plan.total else None
        if pick is not None:
            draft = {"type": "draft", "questionnaireId": qid, "step": step}
            self.draft_in_doubt = (qid, step, pick.expected)  # until its echo is read
            await self.send(self.command({**draft, **pick.selection()}))
            async with asyncio.timeout(10):  # the echo: every client gets a fresh question frame
                while True:
                    frame = await self.receive()
                    if frame.get("type") == "question" and frame.get("questionnaireId") == qid:
                        self._check_order(frame)
                        if frame.get("draft") != pick.expected:
                            self.session.mismatch(f"draft echo {frame.get('draft')!r} != {pick.expected!r}")
                        break
                    await self.on_frame(frame)
            self.draft_in_doubt = None
            rnd.expect.draft = pick.expected
        self.closing = True
        await self.close()
        self.closing = False
        self.expect_view = (qid, step, index, rnd.expect.draft)
        for attempt in range(MAX_CONNECT_ATTEMPTS):
            try:
                await self.connect(in_churn=True)
                self.stats.count("reconnects")
                return
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                self.stats.error("connect_error", f"{self.session.sid}: churn reconnect: {exc!r}")
                self.expect_view = (qid, step, index, rnd.expect.draft)
                await asyncio.sleep(0.05 * 2**attempt)
        raise ConnectionError("could not reconnect after a churn")


def _summary(frame: dict[str, Any]) -> str:
    qid = str(frame.get("questionnaireId", ""))[:8]
    parts = [str(frame.get("type")), qid]
    for key in ("step", "index", "ref", "code", "status"):
        if key in frame:
            parts.append(f"{key}={frame[key]}")
    return ":".join(parts)
