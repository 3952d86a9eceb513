"""The load generator of ``qbroker bots``: sessions of websocket bots plus an agent loop each.

One ``Session`` = one session id, ``bots`` websocket clients and one agent loop. The agent
draws a ``Plan`` (clients/bots/plan.py), POSTs the start call and follows 202s; the bots play
the plan question by question (think, sometimes drop and reconnect, clarify, cancel or
answer). Bots and agent share the session's ``Round``, so the agent can check every result
against exactly what the bots sent, and the bots can check every frame (question snapshot,
index, draft after a reconnect, the agent's clarification responses).

Bots of one session take turns: the bot that acts on a question frame is chosen by its
``step``, the others only watch (and check what they see). Every loop here is bounded: a
questionnaire has ``timeout`` seconds, the run ``duration`` seconds plus a drain, and every
reconnect loop a small number of attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import ssl
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import msgpack
import orjson
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from broker.auth import mint_token
from broker.core.frames import SUBPROTOCOL_BY_CODEC, Codec
from broker.core.status import CloseCode, CloseReason
from clients.bots.http import AgentHTTP
from clients.bots.http import HTTPError as BotsHTTPError
from clients.bots.plan import Expectation, Plan, Rates, Shape, make_plan, verify_result
from clients.bots.stats import RATE_LIMITED_CLOSES, VERIFY_MISMATCH, Stats

MIXED_CODECS: tuple[Codec, Codec] = ("json", "msgpack")  # --codec mixed: bot by bot, in turn
MAX_CONNECT_ATTEMPTS = 6
MAX_AGENT_CALLS = 200  # per questionnaire: 202 re-attaches and resumes together
CONNECT_CONCURRENCY = 64  # handshakes in flight per process (keeps the accept backlog sane)
TRACE = os.environ.get("QBROKER_BOTS_TRACE") == "1"  # keep each bot's last frames for error reports


@dataclass
class Options:
    """Everything one load process needs (plain data: it crosses process boundaries)."""

    urls: list[str]
    secret: str
    session_ids: list[str]
    bots: int = 1
    codec: Literal["json", "msgpack", "mixed"] = "json"
    shape: Shape = field(default_factory=Shape)
    rates: Rates = field(default_factory=Rates)
    think_ms: tuple[float, float] = (20.0, 60.0)
    count: int = 20
    duration: float = 30.0
    timeout: float = 60.0
    wait: float = 30.0
    seed: int = 0
    deflate: bool = False
    connect_timeout: float = 30.0
    session_offset: int = 0  # global index of this process's first session (spreads URLs)
    session_stride: int = 1  # global index step between this process's sessions


def ws_base(url: str) -> str:
    if url.startswith("https://"):
        return "wss://" + url[len("https://") :]
    if url.startswith("http://"):
        return "ws://" + url[len("http://") :]
    return url


class Budget:
    """How many questionnaires may still start, and until when."""

    def __init__(self, count: int, deadline: float) -> None:
        self.left = count
        self.deadline = deadline

    def take(self) -> bool:
        if self.left <= 0 or time.monotonic() >= self.deadline:
            return False
        self.left -= 1
        return True


@dataclass
class Round:
    """One questionnaire in flight: the plan, what the bots did so far, timing."""

    plan: Plan
    expect: Expectation
    started: float
    questionnaire_id: str | None = None
    acted: set[int] = field(default_factory=set)  # steps some bot has acted on
    last_acted: int = -1
    clarified: Counter[int] = field(default_factory=Counter)  # question index -> clarifications sent


class Session:
    def __init__(self, run: LoadRun, index: int, sid: str) -> None:
        self.run = run
        self.stats = run.stats
        self.sid = sid
        opts = run.opts
        n = len(opts.urls)
        global_index = opts.session_offset + index * opts.session_stride
        self.agent_url = opts.urls[global_index % n]
        self.rng = random.Random(f"{opts.seed}:{sid}")
        self.agent_headers = {"Authorization": f"Bearer {mint_token(opts.secret, sid, 'agent')}"}
        self.client_token = mint_token(opts.secret, sid, "client")
        self.bots: list[Bot] = []
        for j in range(opts.bots):
            url = opts.urls[(global_index + 1 + j) % n] if n > 1 else opts.urls[0]
            codec = opts.codec if opts.codec != "mixed" else MIXED_CODECS[(global_index + j) % 2]
            self.bots.append(Bot(self, j, url, codec))
        self.round: Round | None = None
        self.http: AgentHTTP | httpx.AsyncClient
        self.finished: set[str] = set()
        self.orphans: list[asyncio.Task[None]] = []
        self.rounds = 0
        # The highest step any bot of the session was shown, per questionnaire: a bot that says
        # hello after that is shown at least that step (its broker reads the store after it).
        self.steps_seen: dict[str, int] = {}

    # --- shared view for the bots ----------------------------------------------------

    def bind(self, questionnaire_id: str, now: float, question: dict[str, Any] | None) -> Round | None:
        """The round a frame for ``questionnaire_id`` belongs to (None: an old one)."""
        if questionnaire_id in self.finished:
            return None
        rnd = self.round
        if rnd is None:
            self.stats.error("unexpected_questionnaire", f"{self.sid}: {questionnaire_id} with no agent call")
            return None
        if rnd.questionnaire_id is None and rnd.expect.questionnaire_id not in (None, questionnaire_id):
            self.stats.error(
                "unexpected_questionnaire", f"{self.sid}: {questionnaire_id} != {rnd.expect.questionnaire_id}"
            )
            return None
        if rnd.questionnaire_id is None:
            if f"({rnd.plan.tag})" not in str((question or {}).get("prompt", "")):
                # Left over from an earlier round whose start call failed (and was counted).
                self.stats.error("orphan_questionnaire", f"{self.sid}: {questionnaire_id}")
                self.finished.add(questionnaire_id)
                self.orphans.append(asyncio.create_task(self.abort_orphan(questionnaire_id)))
                return None
            rnd.questionnaire_id = questionnaire_id
            rnd.expect.questionnaire_id = questionnaire_id
            self.stats.observe("start_to_first_question", now - rnd.started)
        elif rnd.questionnaire_id != questionnaire_id:
            self.stats.error("unexpected_questionnaire", f"{self.sid}: {questionnaire_id} != {rnd.questionnaire_id}")
            return None
        return rnd

    def mismatch(self, detail: str) -> None:
        self.stats.error(VERIFY_MISMATCH, f"{self.sid}: {detail}")

    # --- the agent loop --------------------------------------------------------------

    async def run_session(self, ready: Callable[[], None], go: asyncio.Event) -> None:
        # One small HTTP client per session (a shared pool of N connections costs O(N) per
        # call in httpx). Plain http:// gets the lean client (clients/bots/http.py): the load
        # generator must cost little next to the broker; https:// goes through httpx.
        if all(url.startswith("http://") for url in self.run.opts.urls):
            self.http = AgentHTTP(timeout=self.run.opts.wait + 15.0)
        else:
            self.http = httpx.AsyncClient(
                verify=self.run.tls,
                limits=httpx.Limits(max_connections=2, max_keepalive_connections=2),
                timeout=httpx.Timeout(self.run.opts.wait + 15.0, connect=15.0),
            )
        tasks = [asyncio.create_task(bot.run_bot(), name=f"bot-{self.sid}-{bot.index}") for bot in self.bots]
        try:
            try:
                async with asyncio.timeout(self.run.opts.connect_timeout):
                    for bot in self.bots:
                        await bot.ready.wait()
            except TimeoutError:
                self.stats.error("connect_timeout", f"{self.sid}: bots not connected in time")
                return
            finally:
                ready()
            await go.wait()
            while self.run.budget.take():
                await self.one_round()
                self.rounds += 1
        finally:
            # The agent can read its result before the bots read the matching ``closed``
            # frame: give the last answer's latency sample a moment to land (bounded).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    while any(bot.pending_answer is not None for bot in self.bots):
                        await asyncio.sleep(0.005)
            for bot in self.bots:
                bot.closing = True
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for bot in self.bots:
                await bot.close()
            if self.orphans:
                await asyncio.wait(self.orphans, timeout=10)
            await self.http.aclose()

    async def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any] | None:
        """(status, JSON body), or None when the request failed in transport. Every status
        other than 200/202 and every transport failure is counted as an error."""
        all_headers = {**self.agent_headers, **(headers or {})}
        try:
            if isinstance(self.http, AgentHTTP):
                status, content = await self.http.request(method, self.agent_url + path, body, all_headers)
            else:
                response = await self.http.request(method, self.agent_url + path, json=body, headers=all_headers)
                status, content = response.status_code, response.content
        except (httpx.HTTPError, BotsHTTPError) as exc:
            self.stats.error(f"http_{type(exc).__name__}", f"{self.sid} {method} {path}: {exc!r}")
            self._fail_over()
            return None
        self.stats.count("http_requests")
        if status >= 500:
            self._fail_over()  # 503 shutting_down / store_unavailable: another process may answer
        try:
            payload = json.loads(content)
        except ValueError:
            payload = None
        if status not in (200, 202):
            self.stats.error(f"http_{status}_{_error_code(payload)}", f"{self.sid} {method} {path}")
        return status, payload

    def _fail_over(self) -> None:
        """Send the next agent calls to the next --url: its process may have died (the
        caller re-attaches or repeats the start under its Idempotency-Key anyway)."""
        urls = self.run.opts.urls
        self.agent_url = urls[(urls.index(self.agent_url) + 1) % len(urls)]

    async def one_round(self) -> None:
        opts = self.run.opts
        plan = make_plan(self.rng, opts.shape, opts.rates, tag=f"{self.sid}-{self.rounds}")
        rnd = Round(plan, Expectation(plan), started=time.perf_counter())
        expect = rnd.expect
        self.round = rnd
        deadline = time.monotonic() + opts.timeout
        wait = opts.wait
        base = f"/v1/sessions/{self.sid}"
        start = ("POST", f"{base}/questionnaire?wait={wait:g}", plan.tool_input, {"Idempotency-Key": plan.tag})
        reply = await self.call(*start)
        resumes: Counter[int] = Counter()  # revision -> resume calls sent
        failures = 0
        try:
            for _ in range(MAX_AGENT_CALLS):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    detail = f"{self.sid}: questionnaire {expect.questionnaire_id} not done in {opts.timeout:g}s"
                    for bot in self.bots:
                        if bot.trace is not None:
                            detail += f" | bot {bot.index} ({bot.url}): " + " ".join(bot.trace)
                    self.stats.error("timeout", detail)
                    return
                qid = expect.questionnaire_id
                attach = f"{base}/questionnaires/{qid}?wait={min(wait, remaining):.3f}"
                if reply is None or reply[0] >= 500 or (reply[0] == 409 and sum(resumes.values()) > len(resumes)):
                    # Transient (counted already): the call may or may not have taken effect.
                    # Re-attach, or repeat the start under the same Idempotency-Key.
                    failures += 1
                    await asyncio.sleep(min(1.0, 0.05 * 2**failures))
                    reply = await (self.call("GET", attach) if qid is not None else self.call(*start))
                    continue
                status, body = reply
                if status not in (200, 202) or not isinstance(body, dict):
                    return  # refused (counted in call)
                details = body.get("details") or {}
                got = body.get("questionnaireId") if status == 202 else details.get("questionnaireId")
                if qid is None and isinstance(got, str):
                    expect.questionnaire_id = qid = got
                elif got != qid:
                    self.mismatch(f"agent got questionnaire {got!r}, the bots saw {qid!r}")
                    return
                if status == 202:
                    reply = await self.call("GET", f"{base}/questionnaires/{qid}?wait={min(wait, remaining):.3f}")
                    continue
                outcome = details.get("status")
                revision = details.get("revision")
                if outcome == "needs_clarification" and expect.clarifications and revision == expect.revision:
                    if "response" not in expect.clarifications[-1]:
                        self._verify(rnd, "needs_clarification", body)
                        self.stats.count("clarifications")
                        # Set before the call: the bots check the response in the next question.
                        expect.responded(revision, plan.response(revision))
                    resumes[revision] += 1
                    reply = await self.call(
                        "POST",
                        f"{base}/questionnaire?wait={min(wait, remaining):.3f}",
                        {
                            "action": "resume",
                            "questionnaireId": qid,  # exactly as the result named them
                            "revision": revision,
                            "clarificationResponse": expect.clarifications[-1]["response"],
                        },
                    )
                    continue
                ok = self._verify(rnd, plan.expected_status, body)
                if outcome in ("completed", "cancelled", "unavailable"):
                    self.stats.count(outcome)
                    self.stats.observe("questionnaire", time.perf_counter() - rnd.started)
                    if ok:
                        self.stats.count("verified")
                return  # done, or an unexpected needs_clarification (counted as a mismatch)
            self.stats.error("too_many_calls", f"{self.sid}: questionnaire {expect.questionnaire_id}")
        finally:
            qid = expect.questionnaire_id
            self.round = None
            if qid is not None:
                self.finished.add(qid)  # its later frames (e.g. closed/aborted below) are not checked
                if not self._terminal(reply):
                    # Leave nothing behind: abort what we gave up on (an outcome is final anyway).
                    await self.call("DELETE", f"{base}/questionnaires/{qid}")

    async def abort_orphan(self, questionnaire_id: str) -> None:
        """A questionnaire of an earlier round whose start call failed: abort it."""
        self.finished.add(questionnaire_id)
        await self.call("DELETE", f"/v1/sessions/{self.sid}/questionnaires/{questionnaire_id}")

    @staticmethod
    def _terminal(reply: tuple[int, Any] | None) -> bool:
        if reply is None or reply[0] != 200:
            return False
        return (reply[1].get("details") or {}).get("status") in ("completed", "cancelled", "unavailable")

    def _verify(self, rnd: Round, status: str, body: Any) -> bool:
        problems = verify_result(rnd.expect, status, body)
        for problem in problems:
            self.mismatch(f"questionnaire {rnd.expect.questionnaire_id}: {problem}")
        return not problems


# What a command may change in an ``Expectation``: answers, clarifications, draft, cancelled.
_Saved = tuple[list[dict[str, Any]], list[dict[str, Any]], "dict[str, Any] | None", bool]


class Bot:
    """One websocket client of a session."""

    def __init__(self, session: Session, index: int, url: str, codec: Codec) -> None:
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
        self.rng = random.Random(f"{session.run.opts.seed}:{session.sid}:bot{index}")
        self.pending_answer: tuple[str, int, float] | None = None  # (questionnaire, step, sent at)
        self.received_at = 0.0  # perf_counter() when the last frame arrived
        self.expect_view: tuple[str, int, int, Any] | None = None  # after a churn reconnect
        # A draft sent whose echo was not read before the connection died: (questionnaire,
        # step, draft); the view after the reconnect says whether it was saved.
        self.draft_in_doubt: tuple[str, int, dict[str, Any]] | None = None
        self.seen: tuple[str, int] | None = None  # the questionnaire and highest step this bot was shown
        # The last command sent, with what to restore if the broker refuses it (an error
        # frame means "changed nothing"): (ref, round, step, expectation, clarified, last_acted).
        self.inflight: tuple[int, Round, int, _Saved, Counter[int], int] | None = None
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
        urls = self.session.run.opts.urls
        self.url = urls[(urls.index(self.url) + 1) % len(urls)]
        self.uri = f"{ws_base(self.url)}/v1/sessions/{self.session.sid}/ws"

    async def connect(self, *, in_churn: bool = False) -> None:
        """Open, say hello, read the welcome and the current view, and act on the view
        (``in_churn``: the churn that reconnects goes on to act itself)."""
        async with self.session.run.connect_slots:
            self.ws = await websockets.connect(
                self.uri,
                subprotocols=[Subprotocol(SUBPROTOCOL_BY_CODEC[self.codec])],
                compression="deflate" if self.session.run.opts.deflate else None,
                open_timeout=15,
                max_size=1 << 20,
                ping_interval=None,
            )
        floor = dict(self.session.steps_seen)  # what the session's bots were shown before this hello
        await self.send(
            {
                "type": "hello",
                "token": self.session.client_token,
                "client": {"kind": "bot", "name": f"qbroker-bots {self.index}"},
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

    def on_suspended(self, frame: dict[str, Any]) -> None:
        rnd = self.session.round
        qid = frame.get("questionnaireId")
        if rnd is None or qid != rnd.questionnaire_id:
            return
        # The frame may be late: this bot's broker (or this bot) can lag behind the one whose
        # bot already acted on the next question, even clarified again. So it must be exactly
        # the clarification its revision names, not the latest one sent; ``_check_order``
        # catches a suspension shown again after something newer.
        clar = rnd.expect.clarifications
        revision = frame.get("revision")
        sent = clar[revision - 1] if isinstance(revision, int) and 0 < revision <= len(clar) else None
        if sent is None or (frame.get("request"), frame.get("questionId")) != (sent["request"], sent["questionId"]):
            self.session.mismatch(f"suspended frame {frame!r} does not match the clarification sent")

    def _check_order(self, frame: dict[str, Any]) -> None:
        """A bot's views of a questionnaire never go back a step: each is the state as of a
        write, and a connection (or a new one) never shows an older write than it showed."""
        qid, step = frame.get("questionnaireId"), frame.get("step")
        if not isinstance(qid, str) or not isinstance(step, int):
            return
        seen = self.seen
        if seen is not None and seen[0] == qid:
            if step < seen[1]:
                self.session.mismatch(f"{frame.get('type')} frame of {qid} at step {step} after step {seen[1]}")
                return
            step = max(step, seen[1])
        self.seen = (qid, step)
        steps = self.session.steps_seen
        steps[qid] = max(step, steps.get(qid, step))

    def on_closed(self, frame: dict[str, Any], now: float) -> None:
        qid = frame.get("questionnaireId")
        if not isinstance(qid, str):
            self.session.mismatch(f"closed frame without a questionnaire id: {frame!r}")
            return
        pending = self.pending_answer
        if pending is not None and pending[0] == qid:
            self.stats.observe("answer_to_next_question", now - pending[2])
            self.pending_answer = None
        rnd = self.session.round
        if rnd is None or rnd.questionnaire_id != qid:
            return
        want = rnd.plan.expected_status
        if frame.get("status") != want or (want == "cancelled" and frame.get("reason") != "user_cancelled"):
            self.session.mismatch(f"closed frame {frame!r}, expected {want}")

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

    def _check_question(self, rnd: Round, frame: dict[str, Any]) -> None:
        expect, plan = rnd.expect, rnd.plan
        index = frame["index"]
        problems = []
        if index != len(expect.answers):
            problems.append(f"index {index}, but {len(expect.answers)} question(s) were answered")
        if frame.get("total") != plan.total:
            problems.append(f"total {frame.get('total')!r} != {plan.total}")
        if 0 <= index < plan.total and frame.get("question") != plan.snapshot[index]:
            problems.append(f"question {frame.get('question')!r} != {plan.snapshot[index]!r}")
        if frame.get("clarifications") != expect.clarifications:
            problems.append(f"clarifications {frame.get('clarifications')!r} != {expect.clarifications!r}")
        if frame.get("draft") != expect.draft:
            problems.append(f"draft {frame.get('draft')!r} != {expect.draft!r}")
        progress = frame.get("progress")
        states = [p.get("state") for p in progress] if isinstance(progress, list) else None
        want = ["answered"] * index + ["current"] + ["pending"] * (plan.total - index - 1)
        if states != want:
            problems.append(f"progress states {states!r} != {want!r}")
        for problem in problems:
            self.session.mismatch(f"question frame of {frame.get('questionnaireId')}: {problem}")

    async def act(self, rnd: Round, qid: str, step: int, index: int, previous: int) -> None:
        opts = self.session.run.opts
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
        if rnd.clarified[index] < plan.clarify_at.count(index):
            rnd.clarified[index] += 1
            request = plan.request(len(expect.clarifications) + 1)
            pick = plan.drafts[index] if self.rng.random() < 0.5 else None
            expect.asked(index, request, pick.expected if pick is not None else None)
            frame: dict[str, Any] = {"type": "clarify", "questionnaireId": qid, "step": step, "request": request}
            if pick is not None:
                frame["draft"] = _selection(pick.sent_ids, pick.sent_other)
        elif index == plan.cancel_at:
            expect.cancelled = True
            frame = {"type": "cancel", "questionnaireId": qid, "step": step}
        else:
            pick = plan.answers[index]
            expect.answered(index)
            self.pending_answer = (qid, step, time.perf_counter())
            frame = {
                "type": "answer",
                "questionnaireId": qid,
                "step": step,
                "questionId": plan.snapshot[index]["id"],
                **_selection(pick.sent_ids, pick.sent_other),
            }
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
            await self.send(self.command({**draft, **_selection(pick.sent_ids, pick.sent_other)}))
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

    def _check_view_after_reconnect(self, expect: tuple[str, int, int, Any], view: dict[str, Any]) -> None:
        qid, step, index, draft = expect
        got = (view.get("type"), view.get("questionnaireId"), view.get("step"), view.get("index"), view.get("draft"))
        if got != ("question", qid, step, index, draft):
            self.session.mismatch(
                f"after a reconnect the view is {got!r}, expected {('question', qid, step, index, draft)!r}"
            )


def _error_code(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return str(payload["error"].get("code"))
    return "unknown"


def _summary(frame: dict[str, Any]) -> str:
    qid = str(frame.get("questionnaireId", ""))[:8]
    parts = [str(frame.get("type")), qid]
    for key in ("step", "index", "ref", "code", "status"):
        if key in frame:
            parts.append(f"{key}={frame[key]}")
    return ":".join(parts)


def _selection(ids: tuple[str, ...], other: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"selectedOptionIds": list(ids)}
    if other is not None:
        out["other"] = other
    return out


class LoadRun:
    """All sessions of one process."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stats = Stats()
        self.budget = Budget(opts.count, time.monotonic() + opts.duration)
        self.connect_slots = asyncio.Semaphore(CONNECT_CONCURRENCY)
        self.tls = ssl.create_default_context()  # shared: building one per client is costly
        self._sessions: list[asyncio.Task[None]] = []

    def interrupt(self) -> None:
        """Ctrl-C: the first starts no more questionnaires and lets those in flight finish,
        the second stops at once. Either way the figures gathered so far are reported."""
        self.stats.count("interrupts")
        self.budget.left = 0
        if self.stats.counters["interrupts"] > 1:
            for task in self._sessions:
                task.cancel()

    async def run(
        self,
        progress: Callable[[Stats], None] | None = None,
        interval: float = 0.25,
        stop_signal: int | None = None,
        on_interrupt: Callable[[int], None] | None = None,
    ) -> Stats:
        """Run every session; ``stop_signal`` (SIGINT, or the parent's signal to a load process)
        calls ``interrupt``, then ``on_interrupt`` with how many there were."""
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            self.interrupt()
            if on_interrupt is not None:
                on_interrupt(self.stats.counters["interrupts"])

        if stop_signal is not None:
            loop.add_signal_handler(stop_signal, interrupted)
        try:
            return await self._run(progress, interval)
        finally:
            if stop_signal is not None:
                loop.remove_signal_handler(stop_signal)

    async def _run(self, progress: Callable[[Stats], None] | None, interval: float) -> Stats:
        opts = self.opts
        cpu0 = time.process_time()
        sessions = [Session(self, i, sid) for i, sid in enumerate(opts.session_ids)]
        go = asyncio.Event()
        waiting = len(sessions)
        started = time.perf_counter()

        def ready() -> None:
            # The clock starts once every bot is connected: setup is not load.
            nonlocal waiting, started
            waiting -= 1
            if waiting == 0:
                started = time.perf_counter()
                self.budget.deadline = time.monotonic() + opts.duration
                go.set()

        tasks = self._sessions = [asyncio.create_task(s.run_session(ready, go)) for s in sessions]
        reporter = asyncio.create_task(self._report(progress, interval)) if progress else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(go.wait(), opts.connect_timeout + 5.0)
        limit = opts.duration + opts.timeout + 30.0
        done, pending = await asyncio.wait(tasks, timeout=limit)
        for task in pending:
            task.cancel()
            self.stats.error("run_timeout", "a session did not finish within the run's deadline")
        for task in done:
            if task.cancelled():
                continue  # stopped at once (a second Ctrl-C)
            exc = task.exception()
            if exc is not None:
                self.stats.error(f"exception_{type(exc).__name__}", repr(exc))
        if pending:
            await asyncio.wait(pending, timeout=5)
        self.stats.elapsed = time.perf_counter() - started
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            if progress:
                progress(self.stats)
        self.stats.cpu = [time.process_time() - cpu0]
        return self.stats

    async def _report(self, progress: Callable[[Stats], None] | None, interval: float) -> None:
        while progress is not None:
            progress(self.stats)
            await asyncio.sleep(interval)


def run_load(
    opts: Options,
    progress: Callable[[Stats], None] | None = None,
    stop_signal: int | None = None,
    on_interrupt: Callable[[int], None] | None = None,
) -> Stats:
    """Run one process's share of the load on a fresh event loop (uvloop when installed);
    ``stop_signal`` and ``on_interrupt``: see ``LoadRun.run``."""
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(LoadRun(opts).run(progress, stop_signal=stop_signal, on_interrupt=on_interrupt))
