"""``qbroker ask`` / ``qbroker resume`` as real processes against a live broker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.clients import ScriptedClient
from tests.helpers.processes import REPO_ROOT, TEST_SECRET, BrokerProcess, token
from tests.helpers.samples import new_sid

EXAMPLES = Path(REPO_ROOT, "examples")
QUICK = 20.0


@pytest.fixture
def sid() -> str:
    return new_sid("cli")


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


class Command:
    """A running ``python -m qbroker ...``; ``stderr_line`` waits for progress output."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr_lines: list[str] = []

    async def stderr_line(self, containing: str, timeout: float = QUICK) -> str:
        assert self.process.stderr is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stderr.readline()
                if not raw:
                    raise AssertionError(f"stderr ended without {containing!r}: {self.stderr_lines}")
                line = raw.decode()
                self.stderr_lines.append(line)
                if containing in line:
                    return line

    async def finish(self, timeout: float = QUICK) -> Done:
        try:
            stdout, stderr = await asyncio.wait_for(self.process.communicate(), timeout)
        except TimeoutError:
            # Say why it still runs: its signal state (is SIGINT ignored or blocked?) and,
            # from faulthandler (PYTHONFAULTHANDLER) on SIGABRT, where each thread waits.
            status = Path(f"/proc/{self.process.pid}/status")
            signals = [line for line in status.read_text().splitlines() if line.startswith("Sig")]
            self.process.send_signal(signal.SIGABRT)
            try:
                _, stderr = await asyncio.wait_for(self.process.communicate(), QUICK)
            except TimeoutError:
                self.process.kill()
                _, stderr = await self.process.communicate()
            raise AssertionError(
                f"still running after {timeout} s; {signals}; {''.join(self.stderr_lines)}{stderr.decode()}"
            ) from None
        assert self.process.returncode is not None
        return Done(self.process.returncode, stdout.decode(), "".join(self.stderr_lines) + stderr.decode())


async def qbroker(
    live: BrokerProcess,
    sid: str,
    *args: str,
    stdin: bytes | None = None,
    auth: bool = True,
    env: dict[str, str] | None = None,
) -> Command:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}, **(env or {})}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONFAULTHANDLER"] = "1"  # a command that hangs says where (Command.finish)
    if auth:
        env["QBROKER_TOKEN"] = token(sid, "agent")  # the default for --token
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "qbroker.cli",
        *args,
        "--url",
        live.url,
        "--session",
        sid,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(REPO_ROOT),
    )
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        await process.stdin.drain()
        process.stdin.close()
    return Command(process)


def person(live: BrokerProcess, sid: str) -> Any:
    return ScriptedClient.connect(live.ws_url, sid, token(sid, "client"))


def first_line(text: str) -> tuple[str, dict[str, str]]:
    marker, *pairs = text.splitlines()[0].split()
    return marker, dict(pair.split("=", 1) for pair in pairs)


async def test_ask_prints_the_result_text_and_exits_0_when_completed(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", str(EXAMPLES / "deploy.json"))
        closed = await someone.answer_all(
            {"deploy_target": ["production"], "checks": {"selected": ["lint"], "other": "fuzz"}}
        )
        done = await ask.finish()
    assert done.code == 0, done.stderr
    marker, ids = first_line(done.stdout)
    assert marker == "QUESTIONNAIRE_COMPLETED"
    assert ids == {"questionnaireId": closed["questionnaireId"], "revision": "0"}
    assert "deploy_target: optionIds=[production]" in done.stdout
    assert 'checks: optionIds=[lint] other="fuzz"' in done.stdout


async def test_ask_json_reads_standard_input_and_prints_the_whole_result(live: BrokerProcess, sid: str) -> None:
    tool_input = (EXAMPLES / "single.json").read_bytes()
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", "-", "--json", stdin=tool_input)
        await someone.answer_all({"license": {"selected": [], "other": "MPL-2.0"}})
        done = await ask.finish()
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is False
    assert result["content"][0]["text"].startswith("QUESTIONNAIRE_COMPLETED")
    assert result["details"]["answers"] == [{"questionId": "license", "selectedOptionIds": [], "other": "MPL-2.0"}]


async def test_clarification_exits_2_and_resume_finishes_it(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", str(EXAMPLES / "onboarding.json"))
        question = await someone.wait_for("question")
        await someone.clarify(question, "Is infra on call?")
        await someone.wait_for("suspended")
        asked = await ask.finish()
        assert asked.code == 2, asked.stderr
        marker, ids = first_line(asked.stdout)
        assert marker == "QUESTIONNAIRE_NEEDS_CLARIFICATION" and ids["revision"] == "1"
        assert "Is infra on call?" in asked.stdout
        # The README's promise: the shell command that answers it, after the tool's own text.
        assert asked.stdout.splitlines()[-1] == (
            f"From a shell: qbroker resume --id {ids['questionnaireId']} --revision 1 --response 'YOUR ANSWER'"
            f" --url {live.url} --session {sid}"
        )

        resume = await qbroker(
            live,
            sid,
            "resume",
            "--id",
            ids["questionnaireId"],
            "--revision",
            "1",
            "--response",
            "-",
            stdin=b"Yes, from the second month.\n",
        )
        again = await someone.wait_for("question")
        assert again["clarifications"][0]["response"] == "Yes, from the second month."
        await someone.answer_all(first=again)
        done = await resume.finish()
    assert done.code == 0, done.stderr
    assert first_line(done.stdout) == (
        "QUESTIONNAIRE_COMPLETED",
        {"questionnaireId": ids["questionnaireId"], "revision": "1"},
    )

    stale = await qbroker(live, sid, "resume", "--id", ids["questionnaireId"], "--revision", "1", "--response", "again")
    refused = await stale.finish()
    assert refused.code == 1 and refused.stdout == ""
    assert "error not_awaiting_clarification: questionnaire:" in refused.stderr


async def test_cancelled_exits_3(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", str(EXAMPLES / "multi-other.json"))
        await someone.cancel(await someone.wait_for("question"))
        done = await ask.finish()
    assert done.code == 3, done.stderr
    assert done.stdout.startswith("QUESTIONNAIRE_CANCELLED")


async def test_unavailable_exits_4(live: BrokerProcess, sid: str) -> None:
    done = await (await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"))).finish()
    assert done.code == 4, done.stderr
    assert done.stdout.startswith("QUESTIONNAIRE_UNAVAILABLE")


async def test_client_wait_gives_the_person_longer_than_the_broker_s_wait_to_arrive(
    live: BrokerProcess, sid: str
) -> None:
    ask = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"), "--client-wait", "60", "--wait", "0.5")
    await asyncio.sleep(2.5)  # the person arrives after the broker's own 1 s wait (the scenario, not a sync)
    async with person(live, sid) as someone:
        await someone.answer_all({"license": ["mit"]})
        done = await ask.finish()
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("QUESTIONNAIRE_COMPLETED")


async def test_ask_reattaches_after_a_202(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"), "--wait", "0.3")
        question = await someone.wait_for("question")
        line = await ask.stderr_line("questionnaireId=")
        assert f"questionnaireId={question['questionnaireId']}" in line
        await someone.answer(question, ["mit"])
        done = await ask.finish()
    assert done.code == 0, done.stderr
    assert "license: optionIds=[mit]" in done.stdout


async def test_the_same_idempotency_key_twice_is_one_questionnaire(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        args = ("ask", str(EXAMPLES / "single.json"), "--idempotency-key", "release-7")
        first = await qbroker(live, sid, *args)
        question = await someone.wait_for("question")
        second = await qbroker(live, sid, *args, "--wait", "0.3")
        line = await second.stderr_line("questionnaireId=")
        assert f"questionnaireId={question['questionnaireId']}" in line  # attached to the same one
        await someone.answer(question, ["apache_2"])
        one, two = await first.finish(), await second.finish()
        await someone.wait_for("idle")
    assert (one.code, two.code) == (0, 0), (one.stderr, two.stderr)
    assert one.stdout == two.stdout
    assert first_line(one.stdout)[1]["questionnaireId"] == question["questionnaireId"]
    assert [f["questionnaireId"] for f in someone.received if f["type"] == "question"] == [question["questionnaireId"]]


@pytest.mark.parametrize(
    ("args", "stdin", "auth", "expected"),
    [
        (("ask", "-"), b'{"action": "start", "questions": []}', True, "error invalid_arguments: questionnaire:"),
        (("ask", "-"), b"not json", True, "error bad_input:"),
        (("ask", "/nonexistent/tool-input.json"), None, True, "error bad_input:"),
        (
            ("ask", str(EXAMPLES / "single.json")),
            None,
            False,
            "error unauthorized: no agent token: give --token TOKEN or set QBROKER_TOKEN",
        ),
        (("resume", "--id", "nope", "--revision", "1", "--response", "x"), None, True, "error unknown_questionnaire:"),
        (("resume", "--id", "nope", "--revision", "x", "--response", "x"), None, True, "invalid int value"),
    ],
)
async def test_errors_exit_1_and_name_the_code_on_stderr(
    live: BrokerProcess, sid: str, args: tuple[str, ...], stdin: bytes | None, auth: bool, expected: str
) -> None:
    done = await (await qbroker(live, sid, *args, stdin=stdin, auth=auth)).finish()
    assert done.code == 1
    assert expected in done.stderr
    assert done.stdout == ""


# --- saying where it waits, Ctrl-C, running it again ------------------------------------------


@pytest.mark.parametrize("has_secret", [True, False])
async def test_ask_says_at_once_that_it_waits_and_where(
    live: BrokerProcess, sid: str, tmp_path: Path, has_secret: bool
) -> None:
    # This shell has the broker's secret, or nothing to mint with (an empty data dir).
    env = {"QBROKER_DATA_DIR": str(tmp_path), **({"QBROKER_SECRET": TEST_SECRET} if has_secret else {})}
    ask = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"), "--client-wait", "60", env=env)
    line = await ask.stderr_line("waiting for the person", timeout=5)  # not after the first 30 s poll
    assert f"in session {sid}; they answer at {live.url}/#session={sid}" in line
    assert "Ctrl-C withdraws the questions" in line
    if has_secret:
        # The link's token opens the session's page: the person sees the question.
        link = line.split("they answer at ", 1)[1].split(" ", 1)[0]
        async with ScriptedClient.connect(live.ws_url, sid, link.split("&token=", 1)[1]) as person:
            await person.wait_for("question")
    else:
        assert f"with a client token (mint one with `qbroker token --session {sid} --role client --ttl 1h`" in line
    ask.process.send_signal(signal.SIGINT)
    await ask.finish()


@pytest.mark.parametrize("when", ["before-the-first-answer", "after-a-202"])
async def test_ctrl_c_withdraws_the_questionnaire_as_the_agent_and_says_so(
    live: BrokerProcess, sid: str, when: str
) -> None:
    wait = ("--wait", "0.3") if when == "after-a-202" else ()  # else the first POST is still waiting
    async with person(live, sid) as someone:
        ask = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"), *wait)
        question = await someone.wait_for("question")
        await ask.stderr_line("questionnaireId=" if wait else "waiting for the person")
        ask.process.send_signal(signal.SIGINT)
        closed = await someone.wait_for("closed")
        done = await ask.finish()
    assert (closed["status"], closed["reason"]) == ("cancelled", "aborted")
    assert closed["questionnaireId"] == question["questionnaireId"]
    assert done.code == 130 and done.stdout == ""
    assert f"interrupted; questionnaire {question['questionnaireId']} withdrawn (cancelled, aborted)" in done.stderr, (
        done.stderr
    )


async def test_detach_leaves_it_open_and_the_same_command_again_re_attaches(live: BrokerProcess, sid: str) -> None:
    args = ("ask", str(EXAMPLES / "single.json"), "--wait", "0.3", "--detach")
    async with person(live, sid) as someone:
        first = await qbroker(live, sid, *args)
        question = await someone.wait_for("question")
        assert "Ctrl-C stops waiting, the questions stay open" in await first.stderr_line("waiting for the person")
        await first.stderr_line("questionnaireId=")
        first.process.send_signal(signal.SIGINT)
        left = await first.finish()
        assert left.code == 130
        assert f"questionnaire {question['questionnaireId']} stays open for the person" in left.stderr

        again = await qbroker(live, sid, *args)
        line = await again.stderr_line("questionnaireId=")
        assert f"questionnaireId={question['questionnaireId']}" in line  # the same one, not asked twice
        await someone.answer(question, ["mit"])
        done = await again.finish()
    assert done.code == 0, done.stderr
    assert first_line(done.stdout)[1]["questionnaireId"] == question["questionnaireId"]
    assert [f["questionnaireId"] for f in someone.received if f["type"] == "question"] == [question["questionnaireId"]]


async def test_the_same_command_twice_at_once_asks_once_and_again_after_it_ended(live: BrokerProcess, sid: str) -> None:
    async with person(live, sid) as someone:
        one = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"))
        question = await someone.wait_for("question")
        two = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"), "--wait", "0.3")
        assert f"questionnaireId={question['questionnaireId']}" in await two.stderr_line("questionnaireId=")
        await someone.answer(question, ["mit"])
        first, second = await one.finish(), await two.finish()
        assert (first.code, second.code) == (0, 0) and first.stdout == second.stdout
        await someone.wait_for("idle")

        # Ended: the same command asks anew.
        three = await qbroker(live, sid, "ask", str(EXAMPLES / "single.json"))
        fresh = await someone.wait_for("question")
        assert fresh["questionnaireId"] != question["questionnaireId"]
        await someone.answer(fresh, ["apache_2"])
        assert (await three.finish()).code == 0
