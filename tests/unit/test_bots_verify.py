"""The bots' verifier: a faithful tool result passes, every kind of wrong one is caught.

Results are produced by the broker's own pure core (parse_tool_input -> machine -> results),
played exactly as the bots play a plan, so the "faithful" case is the real thing; each
tampering then changes one fact the way a buggy broker could.
"""

from __future__ import annotations

import contextlib
import copy
import random
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close

from broker.core import frames, machine, results
from broker.core.actors import Actor, ClientInfo
from broker.core.model import parse_tool_input
from broker.core.status import CloseCode, CloseReason
from clients.bots.cli import check_url, likely_causes, parse_think, probe_brokers, split_urls, token_refusal
from clients.bots.plan import Expectation, Plan, Rates, Shape, answer_line, make_plan, verify_result
from clients.bots.run import Bot, LoadRun, Options, Round, Session
from clients.bots.stats import RATE_LIMITED_CLOSES, Samples, Stats, percentile
from tests.helpers.processes import free_port, need

NOW = 1_700_000_000.0


def _plan(seed: int = 7, **rates: float) -> Plan:
    shape = Shape(questions=4, options=5, multi_share=0.5, other_share=0.5)
    return make_plan(random.Random(seed), shape, Rates(**rates), tag=f"t{seed}")


def _play(plan: Plan, until_clarification: bool = False) -> tuple[Expectation, dict[str, Any]]:
    """Drive the real state machine with what the bots would send; return the result."""
    start = parse_tool_input(copy.deepcopy(plan.tool_input))
    state = machine.start("qn-1", "sess", start.questions, NOW)  # type: ignore[union-attr]
    expect = Expectation(plan, questionnaire_id="qn-1")
    clarified: dict[int, int] = {}
    for index in range(plan.total):
        while clarified.get(index, 0) < plan.clarify_at.count(index):
            clarified[index] = clarified.get(index, 0) + 1
            request = plan.request(expect.revision + 1)
            pick = plan.drafts[index]
            draft = machine.Selection(pick.sent_ids, pick.sent_other) if pick else None
            expect.asked(index, request, pick.expected if pick else None)
            state = machine.apply(state, machine.Clarify(state.id, state.step, request, draft), NOW)
            if until_clarification:
                return expect, results.tool_result(state)
            response = plan.response(state.revision)
            expect.responded(state.revision, response)
            state = machine.apply(state, machine.Resume(state.revision, response), NOW)
        if index == plan.cancel_at:
            state = machine.apply(state, machine.Cancel(state.id, state.step), NOW)
            return expect, results.tool_result(state)
        pick = plan.answers[index]
        expect.answered(index)
        command = machine.AnswerQuestion(
            state.id, state.step, plan.snapshot[index]["id"], pick.sent_ids, pick.sent_other
        )
        state = machine.apply(state, command, NOW)
    return expect, results.tool_result(state)


@pytest.mark.parametrize("seed", range(12))
def test_a_faithful_completed_result_verifies(seed: int) -> None:
    plan = _plan(seed)
    expect, result = _play(plan)
    assert verify_result(expect, "completed", result) == []


@pytest.mark.parametrize("seed", range(8))
def test_a_faithful_cancelled_result_verifies(seed: int) -> None:
    plan = _plan(seed, cancel=1.0, clarify=1.0)
    expect, result = _play(plan)
    assert plan.expected_status == "cancelled"
    assert verify_result(expect, "cancelled", result) == []


@pytest.mark.parametrize("seed", range(8))
def test_a_faithful_clarification_result_verifies(seed: int) -> None:
    plan = _plan(seed, clarify=1.0)
    expect, result = _play(plan, until_clarification=True)
    assert result["details"]["status"] == "needs_clarification"
    assert verify_result(expect, "needs_clarification", result) == []


def _completed_with_other() -> tuple[Expectation, dict[str, Any]]:
    for seed in range(200):
        plan = _plan(seed)
        expect, result = _play(plan)
        if any("other" in a for a in expect.answers) and any(len(a["selectedOptionIds"]) > 1 for a in expect.answers):
            return expect, result
    raise AssertionError("no plan with an Other answer and a multi selection")


def _tamper_first(result: dict[str, Any], key: str, change: Any) -> None:
    for answer in result["details"]["answers"]:
        if key in answer and (key != "selectedOptionIds" or len(answer[key]) > 1):
            change(answer)
            return
    raise AssertionError(f"no answer with {key}")


def test_a_lost_answer_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    result["details"]["answers"].pop()
    assert any("answers differ" in p for p in verify_result(expect, "completed", result))


def test_a_wrong_option_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    _tamper_first(
        result, "selectedOptionIds", lambda a: a.__setitem__("selectedOptionIds", a["selectedOptionIds"][:-1])
    )
    assert verify_result(expect, "completed", result)


def test_option_ids_out_of_declared_order_are_a_mismatch() -> None:
    expect, result = _completed_with_other()
    _tamper_first(result, "selectedOptionIds", lambda a: a["selectedOptionIds"].reverse())
    assert verify_result(expect, "completed", result)


def test_an_untrimmed_or_altered_other_text_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    _tamper_first(result, "other", lambda a: a.__setitem__("other", a["other"] + " "))
    assert verify_result(expect, "completed", result)


def test_a_wrong_answer_line_in_the_text_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    line = answer_line(expect.answers[0])
    text = result["content"][0]["text"]
    assert line in text.split("\n")
    result["content"][0]["text"] = text.replace(line, line.replace("optionIds=[", "optionIds=[zz, "))
    problems = verify_result(expect, "completed", result)
    assert problems and all("answer lines" in p for p in problems)


def test_a_wrong_marker_line_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    text = result["content"][0]["text"]
    result["content"][0]["text"] = text.replace("revision=0", "revision=1", 1)
    assert any("first text line" in p for p in verify_result(expect, "completed", result))


def test_a_cancellation_must_say_user_cancelled() -> None:
    plan = _plan(3, cancel=1.0)
    expect, result = _play(plan)
    result["details"]["cancellationReason"] = "aborted"
    assert any("cancellationReason" in p for p in verify_result(expect, "cancelled", result))


def test_a_completed_result_when_the_person_cancelled_is_a_mismatch() -> None:
    plan = _plan(3, cancel=1.0)
    expect, result = _play(plan)
    assert any("status" in p for p in verify_result(expect, "completed", result))


def test_a_clarification_must_carry_the_right_response() -> None:
    for seed in range(50):
        plan = _plan(seed, clarify=1.0)
        expect, result = _play(plan)
        if plan.cancel_at is None and expect.clarifications:
            break
    result["details"]["clarifications"][0]["response"] = "something else"
    assert any("clarifications differ" in p for p in verify_result(expect, "completed", result))


def test_a_clarification_result_must_name_the_exact_resume_call() -> None:
    plan = _plan(5, clarify=1.0)
    expect, result = _play(plan, until_clarification=True)
    result["content"][0]["text"] = result["content"][0]["text"].replace('"revision": 1', '"revision": 2')
    assert any("resume call" in p for p in verify_result(expect, "needs_clarification", result))


def test_a_result_for_another_questionnaire_is_a_mismatch() -> None:
    expect, result = _completed_with_other()
    expect.questionnaire_id = "qn-2"
    assert verify_result(expect, "completed", result)


def test_garbage_is_a_mismatch_not_a_crash() -> None:
    expect, _ = _completed_with_other()
    assert verify_result(expect, "completed", None) == ["the result has no details object"]
    assert verify_result(expect, "completed", {"details": {}, "content": "x"})


# --- small helpers --------------------------------------------------------------------


def test_only_local_urls_are_allowed_without_allow_remote() -> None:
    assert check_url("http://127.0.0.1:8700", False) is None
    assert check_url("http://localhost:1", False) is None
    assert check_url("http://[::1]:8700", False) is None
    assert "refusing" in (check_url("http://example.com:8700", False) or "")
    assert check_url("http://example.com:8700", True) is None
    assert check_url("ftp://127.0.0.1", False)
    assert check_url("http://127.0.0.1:8700/v1", False)


def test_urls_may_be_repeated_or_comma_separated() -> None:
    assert split_urls(["http://a:1, http://b:2/", "http://c:3"]) == ["http://a:1", "http://b:2", "http://c:3"]


@contextlib.contextmanager
def _readyz(status: int, body: bytes, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """A local HTTP(S) server whose every GET answers ``status`` with ``body``; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_probe_refuses_only_when_no_broker_answers() -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    reachable, warnings = probe_brokers([dead], timeout=2)
    assert not reachable
    assert len(warnings) == 1
    assert warnings[0].startswith(f"cannot reach the broker at {dead}: ")
    assert warnings[0].endswith("(is it running?)")
    with (
        _readyz(200, b'{"status": "ready"}') as ready,
        _readyz(503, b'{"error": {"code": "store_unavailable"}}') as busy,
    ):
        assert probe_brokers([ready], timeout=2) == (True, [])
        # One that does not answer, or is not ready, beside one that is: warnings only (a
        # fault test may start while a broker restarts).
        reachable, warnings = probe_brokers([dead, busy, ready], timeout=2)
        assert reachable
        assert len(warnings) == 2
        assert warnings[0].startswith(f"cannot reach the broker at {dead}: ")
        assert (
            warnings[1]
            == f'the broker at {busy} is not ready (/readyz: 503 {{"error": {{"code": "store_unavailable"}}}})'
        )
        assert probe_brokers([busy], timeout=2) == (True, warnings[1:])  # it answers: not a refusal


def test_a_server_that_is_not_a_qbroker_broker_is_named_before_any_load() -> None:
    # (python -m http.server, say: /readyz is a 404 page, so is the agent API)
    with _readyz(404, b"<html>Not Found</html>") as stranger:
        refusal = token_refusal([stranger], "s" * 40, timeout=2)
    assert refusal == f"{stranger} does not answer as a qbroker broker (its agent API: HTTP 404, not a qbroker error)"
    unknown = b'{"error": {"code": "unknown_questionnaire", "message": "questionnaire: no such questionnaire"}}'
    with _readyz(404, unknown) as broker:
        assert token_refusal([broker], "s" * 40, timeout=2) is None  # the token was accepted


def test_a_certificate_the_bots_cannot_verify_names_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load balancer with a self-signed (or private-CA) certificate: the probe says how to
    trust it, and with SSL_CERT_FILE pointing at it the broker is reachable."""
    need(shutil.which("openssl") is not None, "openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with _readyz(200, b'{"status": "ready"}', tls) as url:
        reachable, warnings = probe_brokers([url], timeout=5)
        assert not reachable
        assert "CERTIFICATE_VERIFY_FAILED" in warnings[0] and "SSL_CERT_FILE" in warnings[0]
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert probe_brokers([url], timeout=5) == (True, [])


def test_think_time_is_a_value_or_a_range() -> None:
    assert parse_think("5") == (5.0, 5.0)
    assert parse_think("5-20") == (5.0, 20.0)
    with pytest.raises(ValueError):
        parse_think("20-5")


def test_percentiles_are_nearest_rank() -> None:
    ordered = [float(i) for i in range(1, 101)]
    assert percentile(ordered, 50) == 50.0
    assert percentile(ordered, 99) == 99.0
    assert percentile([], 50) is None


def test_stats_merge_across_processes_through_plain_dicts() -> None:
    a, b = Stats(), Stats()
    a.count("completed", 2)
    a.observe("questionnaire", 0.5)
    b.count("completed", 3)
    b.error("verify_mismatch", "lost q2")
    b.observe("questionnaire", 1.5)
    merged = Stats()
    for part in (a, b):
        merged.merge(Stats.from_dict(part.to_dict()))
    report = merged.report()
    assert report["questionnaires"]["completed"] == 5
    assert report["verify_errors"] == 1 and report["mismatch_samples"] == ["lost q2"]
    assert report["latency_ms"]["questionnaire"]["max"] == 1500.0


def test_samples_keep_an_exact_maximum_beyond_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clients.bots.stats.SAMPLE_CAP", 10)
    samples = Samples()
    rng = random.Random(1)
    for i in range(1000):
        samples.add(float(i), rng)
    assert len(samples.values) == 10 and samples.seen == 1000 and samples.maximum == 999.0


# --- the bots' checks of the frames they are shown ------------------------------------


class _Frames:
    """One questionnaire of a plan on the real state machine, and the frames its writes
    show (the broker's own view frames, through the JSON codec as a bot reads them)."""

    def __init__(self, plan: Plan) -> None:
        start = parse_tool_input(copy.deepcopy(plan.tool_input))
        self.state = machine.start("qn-1", "sess", start.questions, NOW)  # type: ignore[union-attr]

    def apply(self, command: machine.Command) -> dict[str, Any]:
        self.state = machine.apply(self.state, command, NOW)
        return self.view()

    def view(self) -> dict[str, Any]:
        frame = orjson.loads(frames.encode_bytes(frames.view(self.state), "json"))
        assert isinstance(frame, dict)
        return frame


def _two_bots(plan: Plan) -> tuple[Session, Bot, Bot]:
    opts = Options(urls=["http://127.0.0.1:1"], secret="s" * 32, session_ids=["sess"], bots=2)
    session = Session(LoadRun(opts), 0, "sess")
    session.round = Round(plan, Expectation(plan, questionnaire_id="qn-1"), started=0.0, questionnaire_id="qn-1")
    return session, session.bots[0], session.bots[1]


def _mismatches(session: Session) -> list[str]:
    assert session.stats.error_total == len(session.stats.mismatches)  # nothing else went wrong
    return session.stats.mismatches


async def test_a_late_suspended_frame_is_checked_against_the_clarification_its_revision_names() -> None:
    # As seen under the mixed load: one bot clarifies, the agent resumes, the other bot
    # (its turn) clarifies again, and only then does the first bot, on a broker lagging
    # behind, read the first suspension. A true frame, late: not a mismatch.
    plan = _plan()
    session, acting, lagging = _two_bots(plan)
    expect, play = session.round.expect, _Frames(plan)  # type: ignore[union-attr]
    first, second = plan.request(1), plan.request(2)

    expect.asked(0, first, None)
    suspended_once = play.apply(machine.Clarify("qn-1", 0, first, None))
    await acting.on_frame(suspended_once)
    expect.responded(1, plan.response(1))
    play.apply(machine.Resume(1, plan.response(1)))  # step 2: the acting bot's turn
    expect.asked(0, second, None)
    suspended_twice = play.apply(machine.Clarify("qn-1", play.state.step, second, None))
    await acting.on_frame(suspended_twice)

    await lagging.on_frame(suspended_once)
    await lagging.on_frame(suspended_twice)

    assert _mismatches(session) == []


async def test_a_suspended_frame_whose_request_is_not_the_one_sent_is_a_mismatch() -> None:
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    expect, play = session.round.expect, _Frames(plan)  # type: ignore[union-attr]
    expect.asked(0, plan.request(1), None)
    frame = play.apply(machine.Clarify("qn-1", 0, "another text", None))

    await bot.on_frame(frame)

    assert len(_mismatches(session)) == 1


async def test_a_suspended_frame_naming_a_clarification_never_sent_is_a_mismatch() -> None:
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    play = _Frames(plan)
    frame = play.apply(machine.Clarify("qn-1", 0, plan.request(1), None))  # the bots sent nothing

    await bot.on_frame(frame)

    assert len(_mismatches(session)) == 1


async def test_a_bot_shown_an_older_state_after_a_newer_one_is_a_mismatch() -> None:
    plan = _plan()
    session, _, bot = _two_bots(plan)
    expect, play = session.round.expect, _Frames(plan)  # type: ignore[union-attr]
    expect.asked(0, plan.request(1), None)
    suspended = play.apply(machine.Clarify("qn-1", 0, plan.request(1), None))
    expect.responded(1, plan.response(1))
    resumed = play.apply(machine.Resume(1, plan.response(1)))  # step 2: the other bot acts on it
    await bot.on_frame(suspended)
    await bot.on_frame(resumed)
    assert _mismatches(session) == []

    await bot.on_frame(suspended)  # the suspension again, after the question that followed it

    assert len(_mismatches(session)) == 1


async def test_a_step_whose_command_never_went_out_is_acted_on_after_the_reconnect() -> None:
    # The broker died while the bot was thinking, or in a churn before its command: the view
    # after the reconnect shows the same step, and the bot must act on it (it once skipped it
    # as done, and the questionnaire waited for its timeout).
    plan = _plan()
    session, bot, _ = _two_bots(plan)  # the first bot acts on step 0
    question = _Frames(plan).view()
    acted: list[int] = []

    async def dies(rnd: Round, qid: str, step: int, index: int, previous: int) -> None:
        raise ConnectionClosed(None, None)

    async def acts(rnd: Round, qid: str, step: int, index: int, previous: int) -> None:
        acted.append(step)

    bot.act = dies  # type: ignore[method-assign]
    with pytest.raises(ConnectionClosed):
        await bot.on_frame(question)
    bot.act = acts  # type: ignore[method-assign]
    await bot.on_frame(question)  # the view after the reconnect

    assert acted == [0]


def _recording(bot: Bot) -> list[int]:
    acted: list[int] = []

    async def acts(rnd: Round, qid: str, step: int, index: int, previous: int) -> None:
        acted.append(step)

    bot.act = acts  # type: ignore[method-assign]
    return acted


async def test_after_a_churn_that_could_not_reconnect_the_view_elsewhere_is_acted_on() -> None:
    # The churn's broker died: the churn gave up (its step given back, its expected view
    # left behind), and the bot reconnected through another broker. That view must be acted
    # on, not only checked (it once was only checked, and the questionnaire waited).
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    question = _Frames(plan).view()
    bot.expect_view = ("qn-1", 0, 0, None)
    acted = _recording(bot)

    await bot.joined(question)

    assert acted == [0]
    assert _mismatches(session) == []


@pytest.mark.parametrize("saved", [True, False])
async def test_a_draft_whose_echo_was_lost_with_the_connection_is_taken_as_the_view_shows_it(saved: bool) -> None:
    plan = _plan()  # its first question has a draft to send
    session, bot, _ = _two_bots(plan)
    pick = plan.drafts[0]
    assert pick is not None
    play = _Frames(plan)
    if saved:
        play.apply(machine.Draft("qn-1", 0, pick.sent_ids, pick.sent_other))
    bot.draft_in_doubt = ("qn-1", 0, pick.expected)
    acted = _recording(bot)

    await bot.joined(play.view())

    assert session.round is not None
    assert session.round.expect.draft == (pick.expected if saved else None)
    assert acted == [0]
    assert _mismatches(session) == []


async def test_a_draft_in_doubt_does_not_excuse_another_draft_in_the_view() -> None:
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    pick = plan.drafts[0]
    assert pick is not None
    play = _Frames(plan)
    play.apply(machine.Draft("qn-1", 0, pick.sent_ids[:1], None))  # not what the bot sent
    bot.draft_in_doubt = ("qn-1", 0, pick.expected)
    _recording(bot)

    await bot.joined(play.view())

    assert len(_mismatches(session)) == 1


class _Socket:
    """A websocket as a bot uses it: hands out ``incoming`` frames, then the connection dies."""

    def __init__(self, *incoming: dict[str, Any]) -> None:
        self.incoming = list(incoming)
        self.sent: list[dict[str, Any]] = []

    async def send(self, data: str) -> None:
        self.sent.append(orjson.loads(data))

    async def recv(self) -> str:
        if not self.incoming:
            raise ConnectionClosed(None, None)
        return orjson.dumps(self.incoming.pop(0)).decode()

    async def close(self) -> None:
        pass


async def test_a_draft_whose_echo_never_came_is_in_doubt_not_expected() -> None:
    plan = _plan()  # its first question has a draft to send
    session, bot, _ = _two_bots(plan)
    assert session.round is not None and plan.drafts[0] is not None
    bot.ws = _Socket()  # type: ignore[assignment]  # the draft goes out; the connection dies before its echo

    with pytest.raises(ConnectionClosed):
        await bot.churn(session.round, "qn-1", 0, 0)

    assert bot.ws.sent[0]["type"] == "draft"  # type: ignore[union-attr]
    assert session.round.expect.draft is None  # unknown until a view shows it
    assert bot.draft_in_doubt == ("qn-1", 0, plan.drafts[0].expected)


@pytest.mark.parametrize(("shown", "mismatches"), [(3, 0), (4, 0), (2, 1)])
async def test_the_view_after_a_hello_is_at_least_the_step_a_bot_of_the_session_saw(
    monkeypatch: pytest.MonkeyPatch, shown: int, mismatches: int
) -> None:
    plan = _plan()
    session, _, bot = _two_bots(plan)
    session.steps_seen["qn-1"] = 3
    view = {**_Frames(plan).view(), "step": shown}
    socket = _Socket({"type": "welcome", "sessionId": "sess"}, view)

    async def connect(*args: Any, **kwargs: Any) -> _Socket:
        return socket

    monkeypatch.setattr("clients.bots.bot.websockets.connect", connect)
    _recording(bot)

    await bot.connect()

    assert len(_mismatches(session)) == mismatches


# --- closes by the broker ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("close", "error", "rate_limited"),
    [
        (Close(CloseCode.POLICY_VIOLATION, CloseReason.RATE_LIMITED), "close_1008", 1),
        (Close(CloseCode.POLICY_VIOLATION, CloseReason.TOO_SLOW), "close_1008", 0),
        (Close(CloseCode.SERVICE_RESTART, "restart"), "close_1012", 0),
        (None, "close_1006", 0),  # no close frame at all: the connection dropped
    ],
)
async def test_a_close_is_counted_by_its_code_and_a_rate_limit_by_its_reason(
    close: Close | None, error: str, rate_limited: int
) -> None:
    session, bot, _ = _two_bots(_plan())
    attempts = 0

    async def connect(*, in_churn: bool = False) -> None:
        nonlocal attempts
        attempts += 1
        bot.closing = attempts > 1  # the run ends during the reconnect
        raise ConnectionClosed(close, None)

    bot.connect = connect  # type: ignore[method-assign]
    await bot.run_bot()

    assert dict(session.stats.errors) == {error: 1}
    assert session.stats.counters[RATE_LIMITED_CLOSES] == rate_limited


def test_a_rate_limit_is_named_as_a_likely_cause_only_when_bots_were_closed_for_it() -> None:
    report = Stats().report()
    assert likely_causes(report, ["http://127.0.0.1:8700"]) == []
    (cause,) = likely_causes(report, ["http://127.0.0.1:8700"], rate_limited=2)
    assert "sending too fast" in cause


async def test_a_frame_saying_a_bot_answered_verifies() -> None:
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    play = _Frames(plan)
    first = play.state.questions[0]
    by = Actor(None, "client", ClientInfo("bot", "qbroker-bots 1"))
    play.state = machine.apply(play.state, machine.AnswerQuestion("qn-1", 0, first.id, (first.options[0].id,)), NOW, by)
    frame = play.view()  # (the broker's own frame, as a bot reads it)
    assert frame["index"] == 1 and frame["answeredBy"] == by.to_wire()
    bot._check_answered_by(frame)
    bot._check_answered_by({"type": "question", "questionnaireId": "qn-1"})  # (a broker before answeredBy)
    assert _mismatches(session) == []


@pytest.mark.parametrize(
    "answered_by",
    [
        {"sub": "alice", "role": "client", "client": {"kind": "web", "name": "qbroker web"}},
        {"sub": None, "role": "agent", "client": None},
        {"sub": None, "role": "client", "client": {"kind": "bot", "name": "someone else's bot"}},
        "a bot",
    ],
)
async def test_a_frame_saying_someone_else_answered_in_a_bots_session_is_a_mismatch(answered_by: Any) -> None:
    plan = _plan()
    session, bot, _ = _two_bots(plan)
    bot._check_answered_by({"type": "question", "questionnaireId": "qn-1", "answeredBy": answered_by})
    assert len(_mismatches(session)) == 1
