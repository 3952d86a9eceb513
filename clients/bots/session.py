"""A session of the load: one session id, its websocket bots and one agent loop.

The agent draws a ``Plan`` (plan.py), POSTs the start call and follows 202s; the bots
(bot.py) play the plan question by question. Bots and agent share the session's ``Round``,
so the agent checks every result against exactly what the bots sent, and the bots check
every frame against it (checks.py). Every loop is bounded: a questionnaire has ``timeout``
seconds and at most ``MAX_AGENT_CALLS`` agent calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from broker.core.frames import Codec
from broker.tokens.claims import mint_token
from clients.bots.bot import Bot
from clients.bots.http import AgentHTTP
from clients.bots.http import HTTPError as BotsHTTPError
from clients.bots.plan import Expectation, make_plan, verify_result
from clients.bots.round import BotSettings, Round, RunView
from clients.bots.stats import VERIFY_MISMATCH

MIXED_CODECS: tuple[Codec, Codec] = ("json", "msgpack")  # --codec mixed: bot by bot, in turn
MAX_AGENT_CALLS = 200  # per questionnaire: 202 re-attaches and resumes together


class Session:
    def __init__(self, run: RunView, index: int, sid: str) -> None:
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
        self.settings = BotSettings(opts.seed, opts.urls, opts.deflate, opts.think_ms, opts.rates)
        self.connect_slots = run.connect_slots
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


def _error_code(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return str(payload["error"].get("code"))
    return "unknown"
