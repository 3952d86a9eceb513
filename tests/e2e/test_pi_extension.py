"""End-to-end: the Pi coding agent (the real ``pi`` from npm, at clients/pi's lockfile)
with qbroker's extension (clients/pi/questionnaire.ts), a live broker, a scripted person on
the websocket and a scripted model behind an OpenAI-compatible endpoint.

The model's turns are scripted, but read what Pi sends: the resume copies the id and
revision out of the tool result the model received, as a real model would. What the model
receives is asserted on the model's side of the wire (``ScriptedModel.tool_results``), and
what Pi made of each call on its JSON event stream (``tool_execution_end``).

Also here: the extension's own node tests (tests/pi/, with Pi's TypeScript loader), its type
check against the pinned Pi's declarations, and the tool definition it reads held equal to
the broker's. With ``QBROKER_WRITE_TRANSCRIPTS=1`` the clarification run rewrites the
transcript in docs/agents.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.mcp.server import tool_json
from tests.helpers.ansi_png import render_png
from tests.helpers.clients import person
from tests.helpers.docs import has_one_place, replace_block
from tests.helpers.fake_model import Message, ScriptedModel, ToolCall, Turn, text_of
from tests.helpers.pi import PI_PACKAGE, PiDialogs, PiHome, PiRun, PiTerminal, pi_modules
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, free_port, token
from tests.helpers.protocol import resume_for
from tests.helpers.samples import new_sid

DOCS = REPO_ROOT / "docs"
DOCS_AGENTS = DOCS / "agents.md"
TEXTS_OTHER_TITLE = "Other: your own answer"  # clients/pi/steps.ts's TEXTS.otherTitle
TRANSCRIPT_START, TRANSCRIPT_END = "<!-- pi-transcript:start -->", "<!-- pi-transcript:end -->"

PROMPT = "Ship the release: ask me where it goes and which checks must pass first."
# The seed's example, the same as docs/agents.md's worked example.
START: dict[str, Any] = json.loads((REPO_ROOT / "examples" / "deploy.json").read_text())
QUESTIONS: list[dict[str, Any]] = START["questions"]
ASKED = "Do the e2e tests run against production or staging?"
EXPLAINED = "The e2e suite runs against staging before every production deploy; it never touches production."


def release_manager(messages: list[Message]) -> Turn:
    """The scripted model: start the questionnaire; on a clarification, explain and resume
    with the id and revision it was given; on anything else, wrap up."""
    last = messages[-1]
    if last["role"] == "user":
        return Turn(text="I'll ask you both things at once.", tool_calls=(ToolCall("questionnaire", START),))
    if last["role"] == "tool":
        resume = resume_for(text_of(last), EXPLAINED)
        if resume is not None:
            return Turn(text=EXPLAINED, tool_calls=(ToolCall("questionnaire", resume),))
        if text_of(last).startswith("QUESTIONNAIRE_COMPLETED "):
            return Turn(text="Deploying to production once the unit and end-to-end tests and your smoke test pass.")
    return Turn(text="Understood.")


def only_start(messages: list[Message]) -> Turn:
    """A model that starts the questionnaire and, whatever comes back, stops."""
    if messages[-1]["role"] == "user":
        return Turn(tool_calls=(ToolCall("questionnaire", START),))
    return Turn(text="Stopping here.")


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def modules() -> Path:
    return pi_modules()


@pytest.fixture(scope="module")
def live_broker() -> Iterator[BrokerProcess]:
    with broker() as process:
        yield process


@pytest.fixture
def tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="qbroker-pi-") as folder:
        yield Path(folder)


@pytest.fixture
async def runs() -> AsyncIterator[list[PiRun]]:
    """Every pi a test starts, killed in teardown if it is still running."""
    started: list[PiRun] = []
    yield started
    for run in started:
        await run.close()


def connected(live_broker: BrokerProcess, sid: str) -> dict[str, str]:
    return {"url": live_broker.url, "session": sid, "token": token(sid, "agent")}


def tool_ends(run: PiRun) -> list[dict[str, Any]]:
    return [e for e in run.of_type("tool_execution_end") if e.get("toolName") == "questionnaire"]


async def broker_result(live_broker: BrokerProcess, sid: str, qid: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=live_broker.url, timeout=15) as http:
        response = await http.get(
            f"/v1/sessions/{sid}/questionnaires/{qid}",
            params={"wait": "0"},
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- the extension, without pi running ------------------------------------------------


def test_the_tool_definition_the_extension_reads_is_the_brokers() -> None:
    """One definition: clients/pi/questionnaire-tool.json is ``qbroker mcp --print-tool``."""
    printed = json.dumps(tool_json(), indent=2, ensure_ascii=False) + "\n"
    on_disk = (PI_PACKAGE / "questionnaire-tool.json").read_text(encoding="utf-8")
    assert on_disk == printed, "regenerate it: qbroker mcp --print-tool > clients/pi/questionnaire-tool.json"


def test_the_package_is_a_pi_package_whose_entry_is_the_extension() -> None:
    manifest = json.loads((PI_PACKAGE / "package.json").read_text())
    assert manifest["pi"]["extensions"] == ["./questionnaire.ts"]
    assert "pi-package" in manifest["keywords"]
    pinned = manifest["devDependencies"]["@mariozechner/pi-coding-agent"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"pin an exact version, not {pinned!r}"
    lock = json.loads((PI_PACKAGE / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@mariozechner/pi-coding-agent"]["version"] == pinned


def test_the_extensions_own_tests_pass_under_node(modules: Path) -> None:
    files = sorted((REPO_ROOT / "tests" / "pi").glob("*.test.ts"))
    assert files, "no tests/pi/*.test.ts"
    register = modules / "jiti" / "lib" / "jiti-register.mjs"  # the loader Pi itself uses
    result = subprocess.run(
        ["node", "--import", register.as_uri(), "--test", *(str(f) for f in files)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, f"node --test failed:\n{result.stdout[-12000:]}\n{result.stderr[-4000:]}"
    assert re.search(r"^# fail 0$", result.stdout, re.M), result.stdout[-4000:]


def test_the_extension_type_checks_against_the_pinned_pi(modules: Path, tmp: Path) -> None:
    """tsc --noEmit with Pi's own declarations: an API that moved between Pi releases fails
    here, not in a user's session. (A copy beside the installed node_modules, since tsc
    resolves packages from where a file is.)"""
    for source in PI_PACKAGE.iterdir():
        if source.suffix in (".ts", ".json"):
            shutil.copy2(source, tmp / source.name)
    (tmp / "node_modules").symlink_to(modules, target_is_directory=True)
    result = subprocess.run(
        ["node", str(modules / "typescript" / "bin" / "tsc"), "-p", str(tmp / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, f"tsc found errors:\n{result.stdout[-8000:]}{result.stderr[-2000:]}"


# --- pi with the extension ------------------------------------------------------------


async def test_a_clarification_round_trip_through_pi(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    sid = new_sid("pi")
    with ScriptedModel(release_manager) as model:
        home = PiHome(tmp, model, modules)
        async with person(live_broker.ws_url, sid) as someone:
            run = await home.start(PROMPT, env=home.env(**connected(live_broker, sid)))
            runs.append(run)
            first = await someone.wait_for("question", timeout=30)  # pi's start-up included
            assert first["question"]["id"] == "deploy_target"
            await someone.answer(first, ["production"])
            second = await someone.wait_for("question", where=lambda f: f["index"] == 1)
            await someone.clarify(second, ASKED, draft={"selectedOptionIds": ["unit"]})
            # The agent's explanation arrives with the question again, the draft kept.
            again = await someone.wait_for("question", where=lambda f: f["revision"] == 1, timeout=30)
            assert again["clarifications"][0]["response"] == EXPLAINED
            assert again["draft"]["selectedOptionIds"] == ["unit"]
            await someone.answer(again, ["e2e", "unit"], other="Manual smoke test")
            closed = await someone.wait_for("closed")
            assert closed["status"] == "completed"
        events = await run.finish()
    assert model.errors == []
    qid = closed["questionnaireId"]

    # What the model received: the clarification, then the exact answers, as tool results.
    received = [text_of(m) for m in model.tool_results()]
    assert len(received) == 2, received
    assert received[0].startswith(f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1\n")
    assert f'"{ASKED}"' in received[0]
    final = await broker_result(live_broker, sid, qid)
    assert received[1] == final["content"][0]["text"]  # the broker's text, unchanged
    assert received[1].splitlines()[:4] == [
        f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1",
        "The user answered all 2 question(s). Answers, in question order:",
        "deploy_target: optionIds=[production]",
        'checks: optionIds=[unit, e2e] other="Manual smoke test"',
    ]

    # What pi made of the two calls: results (not errors), the broker's details unchanged.
    ends = tool_ends(run)
    assert [e["isError"] for e in ends] == [False, False], run.summary()
    assert ends[1]["result"]["details"] == final["details"]
    assert ends[0]["result"]["details"]["status"] == "needs_clarification"
    starts = [e for e in run.of_type("tool_execution_start") if e.get("toolName") == "questionnaire"]
    assert starts[0]["args"] == START
    assert starts[1]["args"] == {
        "action": "resume",
        "questionnaireId": qid,
        "revision": 1,
        "clarificationResponse": EXPLAINED,
    }

    transcript = render_transcript(
        events,
        {
            0: [
                "[person] answers Target: Production",
                "[person] ticks Unit tests, then asks the agent: " + json.dumps(ASKED),
            ],
            1: ['[person] sees the answer; ticks End-to-end tests, writes Other "Manual smoke test", submits'],
        },
    )
    assert f"questionnaireId={qid}" in transcript
    if os.environ.get("QBROKER_WRITE_TRANSCRIPTS") == "1":
        write_transcript(transcript)


async def test_pi_terminated_mid_wait_aborts_the_questionnaire(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """SIGTERM while the person is answering: pi shuts down, and on its way out the extension
    ends the questionnaire as the agent, so the person is not left answering for nobody."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        async with person(live_broker.ws_url, sid) as someone:
            run = await home.start(PROMPT, env=home.env(**connected(live_broker, sid)))
            runs.append(run)
            question = await someone.wait_for("question", timeout=30)
            await run.wait_for(lambda e: e.get("type") == "tool_execution_start", "the tool call")
            await run.terminate(signal.SIGTERM)
            closed = await someone.wait_for("closed")
    assert (closed["status"], closed.get("reason")) == ("cancelled", "aborted")
    details = (await broker_result(live_broker, sid, question["questionnaireId"]))["details"]
    assert (details["status"], details["cancellationReason"]) == ("cancelled", "aborted")


async def test_pis_abort_ends_the_questionnaire_and_the_model_reads_so(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """Pi's own abort (Escape in the TUI; ``abort`` in RPC mode) reaches the tool as its
    signal: the extension ends the questionnaire and returns the broker's result for it."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        async with person(live_broker.ws_url, sid) as someone:
            run = await home.start(PROMPT, env=home.env(**connected(live_broker, sid)), rpc=True)
            runs.append(run)
            question = await someone.wait_for("question", timeout=30)
            await run.send({"type": "abort"})
            closed = await someone.wait_for("closed")
            end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert (closed["status"], closed.get("reason")) == ("cancelled", "aborted")
    assert end["isError"] is False, end
    text = end["result"]["content"][0]["text"]
    assert text.startswith(f"QUESTIONNAIRE_CANCELLED questionnaireId={question['questionnaireId']} revision=0"), text
    assert end["result"]["details"]["cancellationReason"] == "aborted"


def refused_start() -> dict[str, Any]:
    """Valid for the schema, refused by the broker: selection bounds on a single question."""
    return {"action": "start", "questions": [{**QUESTIONS[0], "minSelections": 1}]}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            "refused", r'questionnaire: question "deploy_target": .*\(error code: invalid_arguments\)$', id="refused"
        ),
        pytest.param(
            "not_configured",
            r"qbroker is not configured\. Set QBROKER_URL .*QBROKER_SESSION .*QBROKER_TOKEN ",
            id="not-configured",
        ),
        pytest.param(
            "unreachable",
            r"cannot reach the broker at http://127\.0\.0\.1:\d+ \(ECONNREFUSED\) after 3 attempt\(s\)$",
            id="unreachable",
        ),
    ],
)
async def test_a_call_that_cannot_be_made_is_a_tool_error_the_model_reads(
    case: str, expected: str, modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    sid = new_sid("pi")
    settings = {
        "refused": connected(live_broker, sid),
        "not_configured": {},
        "unreachable": {"url": f"http://127.0.0.1:{free_port()}", "session": sid, "token": "t", "retries": "2"},
    }[case]
    tool_input = refused_start() if case == "refused" else START

    def model_turn(messages: list[Message]) -> Turn:
        if messages[-1]["role"] == "user":
            return Turn(tool_calls=(ToolCall("questionnaire", tool_input),))
        return Turn(text="I will fix that and ask again.")

    with ScriptedModel(model_turn) as model:
        home = PiHome(tmp, model, modules)
        run = await home.start(PROMPT, env=home.env(**settings))
        runs.append(run)
        await run.finish()
    ends = tool_ends(run)
    assert len(ends) == 1, run.summary()
    assert ends[0]["isError"] is True, ends[0]
    message = ends[0]["result"]["content"][0]["text"]
    assert re.search(expected, message), message
    assert [text_of(m) for m in model.tool_results()] == [message]  # the model read the same words


@pytest.mark.parametrize("route", ["pi-install", "extensions-folder"])
async def test_installed_the_documented_ways_pi_loads_the_tool(
    route: str, modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """docs/agents.md's one-command installs, offline: ``pi install <path>`` (a Pi package
    by path) and a copy into the agent's extensions folder; pi then runs without ``-e``."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        if route == "pi-install":
            home.run_command("install", str(PI_PACKAGE))
            assert str(PI_PACKAGE) in home.run_command("list")
        else:
            shutil.copytree(
                PI_PACKAGE, home.agent_dir / "extensions" / "qbroker", ignore=shutil.ignore_patterns("node_modules")
            )
        async with person(live_broker.ws_url, sid) as someone:
            run = await home.start(PROMPT, env=home.env(**connected(live_broker, sid)), extensions=())
            runs.append(run)
            question = await someone.wait_for("question", timeout=30)
            await someone.cancel(question)
            await someone.wait_for("closed")
        await run.finish()
    ends = tool_ends(run)
    assert len(ends) == 1 and ends[0]["isError"] is False, run.summary()
    assert ends[0]["result"]["details"]["cancellationReason"] == "user_cancelled"


# Pi's own renderer of the tool's result, once the person answered production, unit and e2e
# with "Manual smoke test" as Other.
ANSWERED_IN_THE_PANE = (
    "✓ completed · 2 of 2 answered",
    "Target [deploy_target]: Production [production]",
    'Pre-flight checks [checks]: Unit tests [unit], End-to-end tests [e2e], Other "Manual smoke test"',
)


@pytest.fixture
def terminals() -> Iterator[list[PiTerminal]]:
    opened: list[PiTerminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


async def test_pis_tui_shows_the_answers_as_labels_with_their_ids(
    modules: Path, live_broker: BrokerProcess, tmp: Path, terminals: list[PiTerminal]
) -> None:
    """Interactive pi in a tmux pane: the tool's own renderer draws the call and the result
    (a renderer that throws would fall back to the raw text, so this is its only proof)."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        terminal = PiTerminal(PiHome(tmp, model, modules), connected(live_broker, sid), PROMPT)
        terminals.append(terminal)
        async with person(live_broker.ws_url, sid) as someone:
            question = await someone.wait_for("question", timeout=30)
            await terminal.wait_for("questionnaire 2 questions (Target, Pre-flight checks)", "waiting for the user")
            await someone.answer(question, ["production"])
            question = await someone.wait_for("question", where=lambda f: f["index"] == 1)
            await someone.answer(question, ["unit", "e2e"], other="Manual smoke test")
            await someone.wait_for("closed")
        await terminal.wait_for(*ANSWERED_IN_THE_PANE)


async def test_escape_in_pis_tui_aborts_the_questionnaire(
    modules: Path, live_broker: BrokerProcess, tmp: Path, terminals: list[PiTerminal]
) -> None:
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        terminal = PiTerminal(PiHome(tmp, model, modules), connected(live_broker, sid), PROMPT)
        terminals.append(terminal)
        async with person(live_broker.ws_url, sid) as someone:
            await someone.wait_for("question", timeout=30)
            await terminal.wait_for("waiting for the user")
            terminal.keys("Escape")
            closed = await someone.wait_for("closed")
        assert (closed["status"], closed.get("reason")) == ("cancelled", "aborted")
        await terminal.wait_for("✗ cancelled · aborted by the agent")


# --- asking in Pi: its own dialogs, as one more qbroker client -------------------------


def in_pi(live_broker: BrokerProcess, sid: str, **more: str) -> dict[str, str]:
    """The settings for Pi to ask too: the agent's, and a client token for the session."""
    return {**connected(live_broker, sid), "client_token": token(sid, "client", sub="pi-user"), **more}


async def asking_in_pi(home: PiHome, settings: dict[str, str], runs: list[PiRun]) -> PiRun:
    """pi in RPC mode with qbroker's package and the broker's ``settings``; killed at
    teardown if it is still running."""
    run = await home.start(PROMPT, env=home.env(**settings), extensions=(home.package(),), rpc=True)
    runs.append(run)
    return run


def titled(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda request: text in str(request.get("title", ""))


async def test_answered_in_pis_dialogs_with_a_clarification_asked_from_pi(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """RPC mode, nobody else there (QBROKER_IN_HOST's default, fallback): Pi asks each step
    through select/input dialogs, the person asks the agent from Pi, the model resumes with
    the exact id and revision, and the rest is answered in Pi: a single, a multi with Other."""
    sid = new_sid("pi")
    with ScriptedModel(release_manager) as model:
        home = PiHome(tmp, model, modules)
        run = await asking_in_pi(home, in_pi(live_broker, sid), runs)
        person_at = PiDialogs(run)
        first = await person_at.next(where=titled("Question 1 of 2 · Target"))
        assert "Which environment should this release go to?" in first["title"]
        assert first["options"][:2] == ["Staging", "Production — Requires an approved release window"]
        assert "Other…" not in first["options"]  # allowOther: false
        await person_at.choose(first, "Production")
        checks = await person_at.next(where=titled("Question 2 of 2 · Pre-flight checks"))
        assert "(choose 1-3" in checks["title"]
        await person_at.choose(checks, "[ ] Unit tests")
        ticked = await person_at.next(where=lambda r: "[x] Unit tests" in r["options"])
        await person_at.choose(ticked, "Ask the agent…")
        question = await person_at.next("input")
        await person_at.respond(question, value=ASKED)
        # The model explains and resumes; Pi shows the step again with the agent's answer and the tick kept.
        again = await person_at.next(where=titled(f"The agent: {EXPLAINED}"), timeout=30)
        assert f"You asked: {ASKED}" in again["title"]
        assert "[x] Unit tests" in again["options"]
        await person_at.choose(again, "[ ] End-to-end tests")
        await person_at.choose(await person_at.next(where=lambda r: "[x] End-to-end tests" in r["options"]), "Other…")
        await person_at.respond(await person_at.next("input"), value="Manual smoke test")
        done = await person_at.next(where=lambda r: any(o.startswith("[x] Other") for o in r["options"]))
        await person_at.choose(done, "Done")
        await run.wait_for(lambda e: e.get("type") == "agent_end", "the agent's end", timeout=30)
        await run.terminate(signal.SIGTERM)
    assert model.errors == []
    ends = tool_ends(run)
    assert [e["isError"] for e in ends] == [False, False], run.summary()
    qid = ends[0]["result"]["details"]["questionnaireId"]
    starts = [e for e in run.of_type("tool_execution_start") if e.get("toolName") == "questionnaire"]
    assert starts[1]["args"] == {
        "action": "resume",
        "questionnaireId": qid,
        "revision": 1,
        "clarificationResponse": EXPLAINED,
    }
    final = await broker_result(live_broker, sid, qid)
    received = [text_of(m) for m in model.tool_results()]
    assert received[1] == final["content"][0]["text"]  # the broker's result: Pi was a client
    assert received[1].splitlines()[:4] == [
        f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1",
        "The user answered all 2 question(s). Answers, in question order:",
        "deploy_target: optionIds=[production]",
        'checks: optionIds=[unit, e2e] other="Manual smoke test"',
    ]
    assert final["details"]["clarifications"][0]["request"] == ASKED


async def test_esc_in_pis_dialog_cancels_the_questionnaire(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        run = await asking_in_pi(home, in_pi(live_broker, sid), runs)
        person_at = PiDialogs(run)
        await person_at.respond(await person_at.next(where=titled("Question 1 of 2")), cancelled=True)
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["isError"] is False, end
    text = end["result"]["content"][0]["text"]
    assert text.startswith("QUESTIONNAIRE_CANCELLED "), text
    assert "The user cancelled the questionnaire at question 1 of 2." in text
    assert end["result"]["details"]["cancellationReason"] == "user_cancelled"


async def test_a_client_that_answers_first_withdraws_pis_dialog(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """Pi asks (nobody else there); a qbroker client opens later and answers step 1 first:
    Pi's dialog is withdrawn and step 2 is asked in Pi. Pi's late answer to step 1 changes
    nothing."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        run = await asking_in_pi(home, in_pi(live_broker, sid), runs)
        person_at = PiDialogs(run)
        in_pis_dialog = await person_at.next(where=titled("Question 1 of 2"))
        async with person(live_broker.ws_url, sid) as someone:
            step1 = await someone.wait_for("question")
            await someone.answer(step1, ["staging"])
            step2 = await person_at.next(where=titled("Question 2 of 2"))
            await person_at.choose(in_pis_dialog, "Production")  # late: Pi ignores it, and so would the broker
            await person_at.choose(step2, "[ ] Lint and types")
            # Pi's tick is the session's draft: the other client sees it as it happens.
            drafted = await someone.wait_for(
                "question", where=lambda f: bool((f["draft"] or {}).get("selectedOptionIds"))
            )
            assert drafted["draft"] == {"selectedOptionIds": ["lint"]}
            await person_at.choose(await person_at.next(where=lambda r: "[x] Lint and types" in r["options"]), "Done")
            closed = await someone.wait_for("closed")
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert closed["status"] == "completed"
    assert closed["answeredBy"]["client"] == {"kind": "tui", "name": "pi"}
    assert end["result"]["details"]["answers"] == [
        {"questionId": "deploy_target", "selectedOptionIds": ["staging"]},
        {"questionId": "checks", "selectedOptionIds": ["lint"]},
    ]
    assert len([r for r in person_at.requests() if "Question 1 of 2" in r["title"]]) == 1


async def test_a_broker_that_stops_mid_questionnaire_leaves_it_to_pi_alone(
    modules: Path, tmp: Path, runs: list[PiRun]
) -> None:
    """Pi shows step 1 as a client of the broker; the broker stops: the call cannot reach it
    any more, and Pi asks the questionnaire again, alone, so the person can still answer."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model, broker() as going:
        home = PiHome(tmp, model, modules)
        settings = {**in_pi(going, sid), "retries": "1"}
        run = await asking_in_pi(home, settings, runs)
        person_at = PiDialogs(run)
        brokered = await person_at.next(where=titled("Question 1 of 2"))
        assert any(o.startswith("Answer elsewhere") for o in brokered["options"])
        going.stop()
        alone = await person_at.next(where=titled("Question 1 of 2"), timeout=60)
        assert not any(o.startswith("Answer elsewhere") for o in alone["options"])
        await person_at.respond(alone, cancelled=True)
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["isError"] is False, end
    assert end["result"]["content"][0]["text"].startswith("QUESTIONNAIRE_CANCELLED ")
    assert end["result"]["details"]["brokered"] is False


async def test_answer_elsewhere_hands_the_questionnaire_to_the_other_clients(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """The person hands off from Pi: Pi's dialog closes and Pi leaves the session; the call
    keeps waiting, and a qbroker client that opens then answers it."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        run = await asking_in_pi(home, in_pi(live_broker, sid), runs)
        person_at = PiDialogs(run)
        await person_at.choose(await person_at.next(where=titled("Question 1 of 2")), "Answer elsewhere")
        async with person(live_broker.ws_url, sid) as someone:
            await someone.answer(await someone.wait_for("question"), ["staging"])
            await asyncio.sleep(1)
            assert [r for r in person_at.requests() if "Question 2 of 2" in r["title"]] == []  # Pi asks no more
            await someone.answer(await someone.wait_for("question", where=lambda f: f["index"] == 1), ["unit"])
            await someone.wait_for("closed")
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["result"]["details"]["status"] == "completed"
    notes = [r["message"] for r in person_at.requests("notify")]
    assert any("handed off" in note for note in notes), notes


async def test_an_agent_token_is_no_client_token(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """QBROKER_CLIENT_TOKEN set to the agent's token: the websocket refuses it, Pi says so
    once, and the person answers in a qbroker client."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        settings = {**connected(live_broker, sid), "client_token": token(sid, "agent")}
        run = await asking_in_pi(home, settings, runs)
        person_at = PiDialogs(run)
        refusal = await person_at.next("notify")
        assert "refused the client token" in refusal["message"], refusal
        async with person(live_broker.ws_url, sid) as someone:
            await someone.cancel(await someone.wait_for("question"))
            await someone.wait_for("closed")
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["result"]["details"]["cancellationReason"] == "user_cancelled"
    assert person_at.requests() == []


async def test_with_another_client_open_pi_waits_and_asks_once_it_leaves(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """QBROKER_IN_HOST=fallback: while a qbroker client has the session open, Pi does not
    ask; when it goes, Pi asks, so the person is not left without a way to answer."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        async with person(live_broker.ws_url, sid) as someone:
            run = await home.start(
                PROMPT, env=home.env(**in_pi(live_broker, sid)), extensions=(home.package(),), rpc=True
            )
            runs.append(run)
            await someone.wait_for("question", timeout=30)
            await asyncio.sleep(3)  # time enough for Pi to have asked, were it going to
            assert PiDialogs(run).requests() == []
        person_at = PiDialogs(run)
        await person_at.choose(await person_at.next(where=titled("Question 1 of 2")), "Staging")
        await person_at.respond(await person_at.next(where=titled("Question 2 of 2")), cancelled=True)
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["result"]["details"]["answers"] == [{"questionId": "deploy_target", "selectedOptionIds": ["staging"]}]


@pytest.mark.parametrize("mode", ["race", "off"])
async def test_in_host_race_always_asks_and_off_never(
    mode: str, modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    """A qbroker client has the session open from the start: with ``race`` Pi asks beside
    it, with ``off`` Pi leaves the questionnaire to it (as before the setting existed)."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        async with person(live_broker.ws_url, sid) as someone:
            run = await asking_in_pi(home, in_pi(live_broker, sid, in_host=mode), runs)
            person_at = PiDialogs(run)
            question = await someone.wait_for("question", timeout=30)
            if mode == "race":
                await person_at.next(where=titled("Question 1 of 2"))
            else:
                await asyncio.sleep(3)  # time enough for Pi to have asked, were it going to
                assert person_at.requests() == []
            await someone.cancel(question)
            await someone.wait_for("closed")
        end = await run.wait_for(lambda e: e.get("type") == "tool_execution_end", "the tool's end")
        await run.terminate(signal.SIGTERM)
    assert end["result"]["details"]["cancellationReason"] == "user_cancelled"


async def test_an_unknown_in_host_word_is_a_tool_error_naming_the_words(
    modules: Path, live_broker: BrokerProcess, tmp: Path, runs: list[PiRun]
) -> None:
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        run = await home.start(PROMPT, env=home.env(**in_pi(live_broker, sid, in_host="always")))
        runs.append(run)
        await run.finish()
    ends = tool_ends(run)
    assert len(ends) == 1 and ends[0]["isError"] is True, run.summary()
    message = ends[0]["result"]["content"][0]["text"]
    assert "QBROKER_IN_HOST must be one of fallback, race, off" in message, message


async def test_without_a_broker_pi_asks_alone_with_the_seeds_results(
    modules: Path, tmp: Path, runs: list[PiRun]
) -> None:
    """The broker is stopped: the call cannot reach it, and Pi asks in its own dialogs, with
    the seed's rules and result text; the details say the answers were not brokered."""
    sid = new_sid("pi")
    with broker() as stopped:
        settings = {**in_pi(stopped, sid), "retries": "1"}
    with ScriptedModel(release_manager) as model:
        home = PiHome(tmp, model, modules)
        run = await asking_in_pi(home, settings, runs)
        person_at = PiDialogs(run)
        first = await person_at.next(where=titled("Question 1 of 2"), timeout=60)
        assert "Answer elsewhere" not in " ".join(first["options"])  # no other client to hand it to
        await person_at.choose(first, "Staging")
        checks = await person_at.next(where=titled("Question 2 of 2"))
        await person_at.choose(checks, "Done")  # nothing ticked: below minSelections
        refused = await person_at.next(where=titled("Choose at least 1 (0 chosen)."))
        await person_at.choose(refused, "Ask the agent…")
        await person_at.respond(await person_at.next("input"), value=ASKED)
        again = await person_at.next(where=titled(f"The agent: {EXPLAINED}"), timeout=30)
        await person_at.choose(again, "[ ] Unit tests")
        await person_at.choose(await person_at.next(where=lambda r: "[x] Unit tests" in r["options"]), "Done")
        await run.wait_for(lambda e: e.get("type") == "agent_end", "the agent's end", timeout=30)
        await run.terminate(signal.SIGTERM)
    ends = tool_ends(run)
    assert [e["isError"] for e in ends] == [False, False], run.summary()
    details = ends[1]["result"]["details"]
    qid = details["questionnaireId"]
    assert ends[0]["result"]["content"][0]["text"].startswith(
        f"QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId={qid} revision=1\n"
    )
    assert ends[1]["result"]["content"][0]["text"].splitlines() == [
        f"QUESTIONNAIRE_COMPLETED questionnaireId={qid} revision=1",
        "The user answered all 2 question(s). Answers, in question order:",
        "deploy_target: optionIds=[staging]",
        "checks: optionIds=[unit]",
        "Option ids are the ids you declared; act on them, not on the labels.",
    ]
    assert details["brokered"] is False
    assert "cannot reach the broker" in details["notBrokered"]
    assert details["status"] == "completed" and details["clarifications"][0]["response"] == EXPLAINED


async def test_answered_in_pis_tui_with_the_keys_alone(
    modules: Path, live_broker: BrokerProcess, tmp: Path, terminals: list[PiTerminal]
) -> None:
    """Interactive pi in a tmux pane: Pi's own selector, answered with keys only (Up/Down,
    Enter, Space, an Other text). Saves docs/screenshot-pi.png for docs/agents.md."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        terminal = PiTerminal(home, in_pi(live_broker, sid), PROMPT, extensions=(home.package(),))
        terminals.append(terminal)
        await terminal.wait_for("Questionnaire · Question 1 of 2 · Target", "→ Staging", "Tab answer elsewhere")
        terminal.keys("Down", "Down", "Up")
        await terminal.wait_for("→ Production")
        terminal.keys("Enter")
        await terminal.wait_for("Question 2 of 2 · Pre-flight checks", "[ ] Unit tests")
        terminal.keys("Space", "Down", "Space")
        await terminal.wait_for("[x] Unit tests", "[x] End-to-end tests")
        terminal.keys("Down", "Down", "Enter")
        await terminal.wait_for(TEXTS_OTHER_TITLE)
        terminal.terminal.type("Manual smoke test")
        terminal.keys("Enter")
        await terminal.wait_for('[x] Other: "Manual smoke test"')
        # The pane's lower half: the call, and Pi's selector under it.
        ansi = "\n".join(terminal.screen(ansi=True).split("\n")[-25:-4])
        (DOCS / "screenshot-pi.txt").write_text(ansi, encoding="utf-8")
        image = render_png(ansi, DOCS / "screenshot-pi.png", title="pi — qbroker's questionnaire", columns=120, rows=21)
        assert image.size[0] > 600
        terminal.keys("Down", "Enter")
        await terminal.wait_for(*ANSWERED_IN_THE_PANE)


async def test_escape_in_pis_selector_cancels_the_questionnaire_as_the_person(
    modules: Path, live_broker: BrokerProcess, tmp: Path, terminals: list[PiTerminal]
) -> None:
    """With Pi's selector open, Escape is the person's cancel (the seed's), not Pi's abort."""
    sid = new_sid("pi")
    with ScriptedModel(only_start) as model:
        home = PiHome(tmp, model, modules)
        terminal = PiTerminal(home, in_pi(live_broker, sid), PROMPT, extensions=(home.package(),))
        terminals.append(terminal)
        await terminal.wait_for("Questionnaire · Question 1 of 2 · Target")
        terminal.keys("Escape")
        await terminal.wait_for("✗ cancelled · the user cancelled")


# --- the transcript in docs/agents.md -------------------------------------------------


def render_transcript(events: list[dict[str, Any]], person: dict[int, list[str]]) -> str:
    """The run as a reader follows it: the prompt, each model message, each tool call with
    its arguments and the result pi handed back, from pi's own JSON event stream; and what
    the person did while each call waited (``person``, by the call's index)."""
    command = "pi --offline --no-session --model scripted/scripted -e clients/pi/questionnaire.ts --mode json -p"
    lines = [f'$ {command} "{PROMPT}"', ""]
    calls = 0
    for event in events:
        kind = event.get("type")
        if kind == "message_end" and event["message"].get("role") == "assistant":
            for part in event["message"].get("content", []):
                if part.get("type") == "text" and part.get("text"):
                    lines += [f"[assistant] {part['text']}", ""]
        elif kind == "tool_execution_start":
            lines += [f"[tool call] {event['toolName']} {json.dumps(event['args'], ensure_ascii=False)}", ""]
            lines += [*(f"    {action}" for action in person.get(calls, [])), ""] if person.get(calls) else []
            calls += 1
        elif kind == "tool_execution_end":
            label = "[tool error]" if event["isError"] else "[tool result]"
            text = "\n".join(p.get("text", "") for p in event["result"].get("content", []))
            lines += [f"{label} {text}", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_transcript(transcript: str) -> None:
    replace_block(DOCS_AGENTS, TRANSCRIPT_START, TRANSCRIPT_END, transcript)


def test_docs_agents_md_has_a_place_for_the_transcript() -> None:
    assert has_one_place(DOCS_AGENTS, TRANSCRIPT_START, TRANSCRIPT_END)
