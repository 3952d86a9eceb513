"""End-to-end: the real ``qbroker tui`` in an 80x24 tmux pane against a live broker.

Each test starts the program in its own tmux server (a unique ``-L`` socket, killed in
teardown), plays the agent over HTTP, presses keys with ``send-keys`` and waits, with a
deadline, for the text it expects on the captured screen. The screenshot test also saves
``docs/screenshot-tui.txt`` (ANSI) and renders it to ``docs/screenshot-tui.png``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.tui.text import cells
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, need, redis_server, token
from tests.helpers.samples import new_sid
from tests.helpers.waiting import wait_until

WIDTH, HEIGHT = 80, 24
DOCS = REPO_ROOT / "docs"


# --- a tmux-driven terminal -------------------------------------------------------------


class Terminal:
    """One detached tmux server with one 80x24 pane running a command."""

    def __init__(self, tmp: Path) -> None:
        self.binary = shutil.which("tmux") or "tmux"
        self.socket = f"qbroker-tui-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.conf = tmp / "tmux.conf"
        # No status line (the pane gets all 24 rows); keep a finished pane to read its status.
        self.conf.write_text("set -g status off\nset -g remain-on-exit on\nset -g history-limit 100\n")
        # The server's socket lives in the test's temporary directory, removed with it.
        self.env = _tmux_env(tmp)
        self.status_file = tmp / "exit-status"
        self.output_file = tmp / "output"
        self.started = False
        self.width = WIDTH  # set before start() for a narrower pane

    def tmux(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            [self.binary, "-u", "-L", self.socket, "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=self.env,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Run ``argv`` in the pane; its exit status goes to a file (see ``exit_status``)."""
        settings = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONPATH": str(REPO_ROOT), **(env or {})}
        command = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in settings.items())
        command += " " + " ".join(shlex.quote(a) for a in argv)
        command += f"; echo $? > {shlex.quote(str(self.status_file))}"
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            str(self.width),
            "-y",
            str(HEIGHT),
            "-c",
            str(REPO_ROOT),
            command,
        )
        self.started = True
        # Everything the program writes, escape sequences included, for the restore checks.
        self.tmux("pipe-pane", "-t", "main", f"cat >> {shlex.quote(str(self.output_file))}")

    def screen(self, *, ansi: bool = False) -> str:
        args = ["capture-pane", "-p", "-t", "main"]
        if ansi:
            args[2:2] = ["-e", "-N"]  # colours, and trailing (coloured) spaces kept
        return self.tmux(*args)

    def wait_for(self, *texts: str, timeout: float = 15.0) -> str:
        def shown() -> str | None:
            screen = self.screen()
            return screen if all(t in screen for t in texts) else None

        try:
            return str(wait_until(shown, timeout=timeout, interval=0.05, what=f"screen to show {texts}"))
        except AssertionError:
            raise AssertionError(f"screen never showed {texts}; it shows:\n{self.screen()}") from None

    def wait_gone(self, text: str, timeout: float = 15.0) -> str:
        def gone() -> str | None:
            screen = self.screen()
            return screen if text not in screen else None

        return str(wait_until(gone, timeout=timeout, interval=0.05, what=f"{text!r} to disappear"))

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "main", "-l", text)

    def pane(self, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", "main", fmt).strip()

    def exit_status(self, timeout: float = 10.0) -> int:
        """The program's exit status (tmux's own pane_dead_status can lag: it reaps late)."""

        def finished() -> str | None:
            try:
                text = self.status_file.read_text().strip()
            except FileNotFoundError:
                return None
            return text or None

        return int(wait_until(finished, timeout=timeout, what="the program to exit"))

    def output(self) -> str:
        return self.output_file.read_text(errors="replace") if self.output_file.exists() else ""

    def history(self) -> str:
        """The whole pane, scrollback included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "main")

    def close(self) -> None:
        if self.started:
            self.tmux("kill-server", check=False)


def _tmux_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env.update(
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        TERM="xterm-256color",
        TMUX_TMPDIR=str(tmp),
    )
    return env


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    need(shutil.which("tmux") is not None, "tmux is not installed")
    with tempfile.TemporaryDirectory(prefix="qbroker-tui-") as tmp:
        term = Terminal(Path(tmp))
        try:
            yield term
        finally:
            term.close()


@pytest.fixture(scope="module")
def live() -> Iterator[BrokerProcess]:
    with broker(client_wait=10, reconnect_grace=30) as process:
        yield process


def session_id() -> str:
    return new_sid("tui")


def tui_argv(process: BrokerProcess, sid: str, client_token: str | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "qbroker.cli",
        "tui",
        "--url",
        process.url,
        "--session",
        sid,
        "--token",
        client_token or token(sid, "client"),
    ]


def open_tui(term: Terminal, process: BrokerProcess, sid: str, **env: str) -> None:
    term.start(tui_argv(process, sid), env=env)
    term.wait_for("Waiting for questions", "● connected")


# --- the agent side ---------------------------------------------------------------------


def start(process: BrokerProcess, sid: str, *questions: dict[str, Any]) -> str:
    response = httpx.post(
        f"{process.url}/v1/sessions/{sid}/questionnaire",
        params={"wait": 0},
        json={"action": "start", "questions": list(questions)},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["questionnaireId"])


def outcome(process: BrokerProcess, sid: str, qid: str, wait: float = 15) -> dict[str, Any]:
    response = httpx.get(
        f"{process.url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": wait},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=wait + 10,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def resume(process: BrokerProcess, sid: str, qid: str, revision: int, text: str) -> None:
    response = httpx.post(
        f"{process.url}/v1/sessions/{sid}/questionnaire",
        params={"wait": 0},
        json={"action": "resume", "questionnaireId": qid, "revision": revision, "clarificationResponse": text},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text


TARGET = {
    "id": "deploy_target",
    "label": "Target",
    "prompt": "Which environment should this release go to?",
    "type": "single",
    "options": [
        {"id": "staging", "label": "Staging"},
        {"id": "production", "label": "Production", "description": "Requires an approved release window"},
    ],
    "allowOther": False,
}

CHECKS = {
    "id": "checks",
    "label": "Pre-flight checks",
    "prompt": "Which checks must pass before the deploy?",
    "type": "multi",
    "options": [
        {"id": "unit", "label": "Unit tests"},
        {"id": "e2e", "label": "End-to-end tests", "description": "Runs in the staging cluster (12 min)"},
        {"id": "lint", "label": "Lint and types"},
    ],
    "minSelections": 1,
    "maxSelections": 2,
}

NAME = {
    "id": "codename",
    "label": "Codename",
    "prompt": "What should the release be called?",
    "type": "single",
    "options": [{"id": "aurora", "label": "Aurora"}, {"id": "borealis", "label": "Borealis"}],
}


def answers(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["questionId"]: a for a in result["details"]["answers"]}


# --- the paths --------------------------------------------------------------------------


def test_single_question_is_answered_with_enter(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = start(live, sid, TARGET, NAME)
    screen = terminal.wait_for("Question 1 of 2", "❯ Staging", "Requires an approved release window")
    assert "● Target" in screen and "○ Codename" in screen
    terminal.keys("Down", "Enter")
    screen = terminal.wait_for("Question 2 of 2", "✓ Target", "❯ Aurora")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed", "Waiting for questions")
    result = outcome(live, sid, qid)
    assert result["details"]["status"] == "completed"
    assert answers(result)["deploy_target"]["selectedOptionIds"] == ["production"]
    assert answers(result)["codename"]["selectedOptionIds"] == ["aurora"]


def test_multi_question_explains_unmet_bounds(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = start(live, sid, CHECKS)
    terminal.wait_for("choose 1–2", "[ ] Unit tests")
    terminal.keys("Enter")
    terminal.wait_for("Choose at least 1 (you have 0)")
    terminal.keys("Space", "Down", "Down", "Space", "Down")
    terminal.wait_for("[✓] Unit tests", "[✓] Lint and types", "2 selected of at most 2")
    terminal.keys("Up", "Up", "Space")
    terminal.wait_for("You can choose at most 2")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    result = outcome(live, sid, qid)
    assert answers(result)["checks"]["selectedOptionIds"] == ["unit", "lint"]


def test_other_answer_is_typed_trimmed_and_sent(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = start(live, sid, NAME)
    terminal.wait_for("❯ Aurora", "Other…")
    terminal.keys("Down", "Down", "Enter")
    terminal.wait_for("Your own answer", "0/2000")
    terminal.type("  Nordlicht 北極光 ✨  ")
    terminal.wait_for("Nordlicht 北極光")
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    answer = answers(outcome(live, sid, qid))["codename"]
    assert answer["selectedOptionIds"] == []
    assert answer["other"] == "Nordlicht 北極光 ✨"


def test_clarify_then_resume_shows_the_agents_response(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = start(live, sid, CHECKS)
    terminal.wait_for("[ ] Unit tests")
    terminal.keys("Space")  # a toggle in progress survives the clarification
    terminal.wait_for("[✓] Unit tests")
    terminal.keys("End", "Up", "Enter")
    terminal.wait_for("Ask the agent about this question")
    terminal.type("How long do end-to-end")
    terminal.keys("Escape")  # back to the options: what was typed is kept
    terminal.wait_gone("Ask the agent about this question")
    terminal.keys("Enter")
    terminal.wait_for("Ask the agent about this question", "How long do end-to-end")
    terminal.type(" tests take?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent", "How long do end-to-end tests take?")
    result = outcome(live, sid, qid)
    assert result["details"]["status"] == "needs_clarification"
    revision = result["details"]["revision"]
    resume(live, sid, qid, revision, "About twelve minutes on the staging cluster.")
    # Back on the first chosen option (not on "Ask to clarify…"), so Enter would continue.
    screen = terminal.wait_for("About twelve minutes on the staging cluster.", "❯ [✓] Unit tests", "Enter continue")
    assert "Agent" in screen and "You asked" in screen
    terminal.keys("Down", "Space", "Enter")
    terminal.wait_for("Questionnaire completed")
    done = outcome(live, sid, qid)
    assert answers(done)["checks"]["selectedOptionIds"] == ["unit", "e2e"]
    assert done["details"]["clarifications"][0]["response"].startswith("About twelve")


def test_escape_cancels_only_after_confirmation(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    qid = start(live, sid, TARGET)
    terminal.wait_for("❯ Staging")
    terminal.keys("Escape")
    terminal.wait_for("Cancel this questionnaire?")
    terminal.keys("n")
    terminal.wait_gone("Cancel this questionnaire?")
    pending = httpx.get(
        f"{live.url}/v1/sessions/{sid}/questionnaires/{qid}",
        params={"wait": 0},
        headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
        timeout=10,
    )
    assert pending.status_code == 202
    terminal.keys("Escape")
    terminal.wait_for("Cancel this questionnaire?")
    terminal.keys("y")
    terminal.wait_for("Questionnaire cancelled", "Waiting for questions")
    result = outcome(live, sid, qid)
    assert result["details"]["status"] == "cancelled"
    assert result["details"]["cancellationReason"] == "user_cancelled"


def test_ctrl_c_exits_cleanly_and_restores_the_terminal(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    assert terminal.pane("#{alternate_on}") == "1"
    terminal.keys("C-c")
    assert terminal.exit_status() == 0
    assert terminal.pane("#{alternate_on}") == "0"  # back on the normal screen
    assert "Waiting for questions" not in terminal.history()
    assert_terminal_restored(terminal.output())


def assert_terminal_restored(output: str) -> None:
    """The last words of the program leave the alternate screen and show the cursor again."""
    assert "\x1b[?1049h" in output  # it did use the alternate screen
    tail = output[output.rindex("\x1b[?1049l") :]
    assert output.rindex("\x1b[?25h") > output.rindex("\x1b[?25l")
    assert "\x1b[?2004l" in output  # bracketed paste off
    assert tail.count("\x1b[?1049h") == 0


def test_a_refused_token_is_shown_and_exits_non_zero(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    terminal.start(tui_argv(live, sid, client_token=token(sid, "agent")))  # wrong role
    assert terminal.exit_status() == 1
    assert "refused the token (4401" in terminal.history()
    assert_terminal_restored(terminal.output())


def test_a_token_for_another_session_is_shown_and_exits_non_zero(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    terminal.start(tui_argv(live, sid, client_token=token("someone-else", "client")))
    assert terminal.exit_status() == 1
    assert "the token is for another session (4403" in terminal.history()


def test_unicode_labels_line_up_in_80_columns(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    labels = ["日本語のラベル", "Emoji 🎉 launch", "한국어 옵션", "Ünïcödé àccents", "中文" * 60]
    question = {
        "id": "langs",
        "label": "言語 🌐",
        "prompt": "どれを使いますか？ Pick any.",
        "type": "multi",
        "options": [{"id": f"l{i}", "label": label} for i, label in enumerate(labels)],
    }
    start(live, sid, question)
    screen = terminal.wait_for("[ ] 日本語のラベル", "[ ] Emoji 🎉 launch", "[ ] 한국어 옵션")
    terminal.keys("Space", "Down", "Space")
    screen = terminal.wait_for("[✓] Emoji 🎉 launch")
    lines = screen.split("\n")
    assert all(cells(line) <= WIDTH for line in lines)
    header = lines[0]
    assert header.rstrip().endswith("● connected") and cells(header.rstrip()) == WIDTH - 1
    # The checkbox column is the same on every option row, whatever the label is written in.
    columns = {line.index("[") for line in lines if re.search(r"\[[ ✓]\] ", line)}
    assert len(columns) == 1
    long_row = next(line for line in lines if "中文中文" in line)
    assert long_row.rstrip().endswith("…")


def test_reconnects_after_a_broker_restart_with_state_intact(terminal: Terminal) -> None:
    with redis_server() as redis, broker(redis.url, client_wait=10, reconnect_grace=60) as process:
        sid = session_id()
        open_tui(terminal, process, sid)
        qid = start(process, sid, CHECKS)
        terminal.wait_for("[ ] Lint and types")
        terminal.keys("Down", "Down", "Space")
        terminal.wait_for("[✓] Lint and types", "1 selected")
        process.stop()
        terminal.wait_for("offline", "Connection lost", "Answers already sent are saved by the broker")
        terminal.keys("Space")  # refused while offline: nothing is sent, and the screen says so
        terminal.wait_for("Not connected — nothing was sent")
        process.start()
        screen = terminal.wait_for("● connected", "[✓] Lint and types", timeout=30)
        assert "Connection lost" not in screen
        terminal.wait_gone("Not connected")  # with no key pressed: the welcome ends that notice
        terminal.keys("Enter")
        terminal.wait_for("Questionnaire completed")
        assert answers(outcome(process, sid, qid))["checks"]["selectedOptionIds"] == ["lint"]


def test_a_questionnaire_lost_in_a_broker_restart_is_explained(terminal: Terminal) -> None:
    with broker(client_wait=10, reconnect_grace=60) as process:  # a memory store: a restart forgets
        sid = session_id()
        open_tui(terminal, process, sid)
        start(process, sid, TARGET)
        terminal.wait_for("❯ Staging")
        process.stop()
        terminal.wait_for("offline", "Answers already sent are saved by the broker")
        process.start()
        terminal.wait_for(
            "● connected",
            "Waiting for questions",
            "The questionnaire you were answering ended while you were offline",
            timeout=30,
        )


def _page_down_until(terminal: Terminal, text: str, steady: str) -> str:
    """Press PageDown (at most 12 times, each time until the screen has moved on and shows
    ``steady``) until ``text`` was on screen; returns every screen seen."""
    seen, screen = "", terminal.screen()
    for _ in range(12):
        terminal.keys("PageDown")

        def moved(before: str = screen) -> str | None:
            now = terminal.screen()
            return now if now != before and steady in now else None

        screen = str(wait_until(moved, timeout=15, interval=0.05, what="the text to scroll"))
        seen += screen
        if text in seen:
            break
    return seen


def test_a_long_prompt_and_reply_are_read_with_page_down(terminal: Terminal, live: BrokerProcess) -> None:
    sid = session_id()
    open_tui(terminal, live, sid)
    prompt = " ".join(f"Sentence {i} of the prompt adds one more detail to read." for i in range(1, 33))
    reply = " ".join(f"Reply {i} explains the staging cluster a little more." for i in range(1, 20))
    assert len(prompt) > 1750 and 990 < len(reply) <= 1000  # the seed's limit
    qid = start(live, sid, dict(TARGET, prompt=prompt))
    screen = terminal.wait_for("Sentence 1 of", "more lines · PgDn", "PgUp/PgDn read", "❯ Staging")
    assert "Sentence 32 of" not in screen
    seen = screen + _page_down_until(terminal, "Sentence 32 of", "❯ Staging")
    joined = " ".join(seen.split())
    assert all(f"Sentence {i} of" in joined for i in range(1, 33)), seen
    terminal.wait_for("lines above · PgUp")
    terminal.keys("End", "Up", "Enter")
    terminal.wait_for("Ask the agent about this question")
    terminal.type("What is staging?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    resume(live, sid, qid, outcome(live, sid, qid)["details"]["revision"], reply)
    seen = terminal.wait_for("You asked  What is staging?", "Reply 1 explains", "❯ Staging")  # shown at its start
    seen += _page_down_until(terminal, "Reply 19 explains", "❯ Staging")
    joined = " ".join(seen.split())
    assert all(f"Reply {i} explains" in joined for i in range(1, 20)), seen
    terminal.keys("Enter")
    terminal.wait_for("Questionnaire completed")
    assert answers(outcome(live, sid, qid))["deploy_target"]["selectedOptionIds"] == ["staging"]


def test_sixty_columns_show_every_question_mark_or_an_ellipsis_and_whole_options(terminal: Terminal) -> None:
    with broker(client_wait=10, reconnect_grace=30) as process:
        terminal.width = 60
        sid = session_id()
        open_tui(terminal, process, sid)
        label = " ".join(f"word{i}" for i in range(1, 21))
        description = " ".join(f"detail{i}" for i in range(1, 31))
        first = dict(
            TARGET,
            options=[
                {"id": "staging", "label": "Staging"},
                {"id": "production", "label": label, "description": description},
            ],
        )
        others = [dict(NAME, id=f"q{i}", label=f"Question {i}") for i in range(2, 21)]
        start(process, sid, first, *others)
        screen = terminal.wait_for("Question 1 of 20", "❯ Staging")
        progress = screen.split("\n")[1]
        assert progress.rstrip().endswith("…") and progress.count("○") < 19, progress
        assert "word20" not in screen  # one line while not highlighted
        terminal.keys("Down")
        screen = terminal.wait_for("word20", "detail30")
        assert all(cells(line) <= 60 for line in screen.split("\n"))


def test_screenshot(terminal: Terminal, live: BrokerProcess) -> None:
    """The README's picture: a multi question after a clarification, taken from a real run."""
    sid = "demo"
    terminal.start(tui_argv(live, sid), env={"COLORTERM": "truecolor"})
    terminal.wait_for("Waiting for questions")
    checks = dict(
        CHECKS,
        options=[
            {"id": "unit", "label": "Unit tests", "description": "pytest, about 40 s"},
            {
                "id": "e2e",
                "label": "End-to-end tests",
                "description": "Browser and terminal clients against a live broker, about 3 minutes",
            },
            {"id": "lint", "label": "Lint and types"},
            {"id": "i18n", "label": "Translations · 翻訳チェック"},
        ],
        maxSelections=3,
    )
    qid = start(live, sid, TARGET, checks, NAME)
    terminal.wait_for("❯ Staging")
    terminal.keys("Enter")
    terminal.wait_for("[ ] Unit tests")
    terminal.keys("Space", "End", "Up", "Enter")
    terminal.type("Do the end-to-end tests need the staging cluster?")
    terminal.keys("Enter")
    terminal.wait_for("Waiting for the agent")
    revision = outcome(live, sid, qid)["details"]["revision"]
    resume(live, sid, qid, revision, "No — each test starts its own broker on 127.0.0.1.")
    terminal.wait_for("its own broker on 127.0.0.1.", "[✓] Unit tests")
    terminal.keys("Home", "Down", "Space")
    terminal.wait_for("[✓] End-to-end tests", "2 selected")
    ansi = terminal.screen(ansi=True)
    DOCS.mkdir(exist_ok=True)
    (DOCS / "screenshot-tui.txt").write_text(ansi, encoding="utf-8")
    image = render_png(ansi, DOCS / "screenshot-tui.png", title=f"qbroker tui — session {sid}")
    assert image.size[0] > 600
    terminal.keys("Enter")
    terminal.wait_for("Question 3 of 3")
    terminal.keys("Escape", "y")
    terminal.wait_for("Questionnaire cancelled")


# --- ANSI screen -> PNG -----------------------------------------------------------------

PALETTE16 = [
    (0x23, 0x26, 0x34),
    (0xE7, 0x82, 0x84),
    (0xA6, 0xD1, 0x89),
    (0xE5, 0xC8, 0x90),
    (0x8C, 0xAA, 0xEE),
    (0xF4, 0xB8, 0xE4),
    (0x81, 0xC8, 0xBE),
    (0xB5, 0xBF, 0xE2),
    (0x62, 0x68, 0x80),
    (0xE7, 0x82, 0x84),
    (0xA6, 0xD1, 0x89),
    (0xE5, 0xC8, 0x90),
    (0x8C, 0xAA, 0xEE),
    (0xF4, 0xB8, 0xE4),
    (0x81, 0xC8, 0xBE),
    (0xFF, 0xFF, 0xFF),
]
DEFAULT_FG = (0xC6, 0xD0, 0xF5)
DEFAULT_BG = (0x29, 0x2C, 0x3C)


def _xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return PALETTE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    level = 8 + (n - 232) * 10
    return level, level, level


def parse_ansi(text: str) -> list[list[tuple[str, dict[str, Any]]]]:
    """Lines of (character, attributes) from ``capture-pane -e`` output (SGR codes only)."""
    rows: list[list[tuple[str, dict[str, Any]]]] = []
    attrs: dict[str, Any] = {}
    for raw in text.split("\n")[:HEIGHT]:
        row: list[tuple[str, dict[str, Any]]] = []
        pos = 0
        while pos < len(raw):
            match = re.match(r"\x1b\[([0-9;:]*)m", raw[pos:])
            if match:
                attrs = _sgr(attrs, match.group(1))
                pos += match.end()
                continue
            if raw[pos] == "\x1b":  # another escape sequence: skip it
                other = re.match(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|.)", raw[pos:])
                pos += other.end() if other else 1
                continue
            row.append((raw[pos], dict(attrs)))
            pos += 1
        rows.append(row)
    return rows


def _sgr(attrs: dict[str, Any], params: str) -> dict[str, Any]:
    attrs = dict(attrs)
    codes = [int(p) if p else 0 for p in params.replace(":", ";").split(";")] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            attrs = {}
        elif code in (1, 2, 3, 4, 7):
            attrs[{1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}[code]] = True
        elif code in (22, 23, 24, 27):
            for name in {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("reverse",)}[code]:
                attrs.pop(name, None)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            attrs["fg"] = PALETTE16[code - 30 if code < 90 else code - 82]
        elif 40 <= code <= 47 or 100 <= code <= 107:
            attrs["bg"] = PALETTE16[code - 40 if code < 100 else code - 92]
        elif code == 39:
            attrs.pop("fg", None)
        elif code == 49:
            attrs.pop("bg", None)
        elif code in (38, 48) and i + 1 < len(codes):
            key = "fg" if code == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                attrs[key] = _xterm256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                attrs[key] = tuple(codes[i + 2 : i + 5])
                i += 4
        i += 1
    return attrs


def render_png(ansi: str, path: Path, *, title: str) -> Any:
    """Draw the captured screen like a terminal window; CJK and emoji fonts when installed."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        need(False, "Pillow is not installed (pip install pillow) to render the TUI screenshot")
        raise
    from prompt_toolkit.utils import get_cwidth

    def font(*names: str, size: int, index: int = 0) -> Any:
        for name in names:
            for root in ("/usr/share/fonts/truetype", "/usr/share/fonts/opentype"):
                found = list(Path(root).rglob(name)) if Path(root).exists() else []
                if found:
                    return ImageFont.truetype(str(found[0]), size, index=index)
        return None

    size = 16
    regular = font("DejaVuSansMono.ttf", size=size) or ImageFont.load_default()
    bold = font("DejaVuSansMono-Bold.ttf", size=size) or regular
    oblique = font("DejaVuSansMono-Oblique.ttf", size=size) or regular
    wide = font("wqy-microhei.ttc", size=size, index=1) or font("NotoSansCJK-Regular.ttc", size=size)
    # Without a CJK font the picture would show boxes: better no new picture than a worse one.
    need(wide is not None, "fonts-wqy-microhei is not installed (CJK glyphs for the screenshot)")
    emoji = font("NotoColorEmoji.ttf", size=109)  # optional: the screenshot shows no emoji
    cell_w = round(regular.getlength("M"))
    cell_h = round(size * 1.4)
    pad, bar = 18, 34
    width = WIDTH * cell_w + 2 * pad
    height = HEIGHT * cell_h + 2 * pad + bar
    image = Image.new("RGB", (width, height), (0x1E, 0x20, 0x2B))
    draw = ImageDraw.Draw(image)
    # A window frame: title bar with the three familiar dots.
    draw.rounded_rectangle((0, 0, width - 1, height - 1), radius=12, fill=DEFAULT_BG, outline=(0x44, 0x48, 0x5C))
    draw.rounded_rectangle((0, 0, width - 1, bar + 10), radius=12, fill=(0x1E, 0x20, 0x2B))
    draw.rectangle((0, bar, width - 1, bar + 10), fill=DEFAULT_BG)
    for i, colour in enumerate([(0xE7, 0x82, 0x84), (0xE5, 0xC8, 0x90), (0xA6, 0xD1, 0x89)]):
        x = 18 + i * 22
        draw.ellipse((x, bar // 2 - 6, x + 12, bar // 2 + 6), fill=colour)
    title_w = regular.getlength(title)
    draw.text(((width - title_w) / 2, bar // 2 - size // 2 - 1), title, font=regular, fill=(0x83, 0x8B, 0xA7))
    top = bar + pad
    for y, row in enumerate(parse_ansi(ansi)):
        col = 0
        for ch, attrs in row:
            w = max(0, get_cwidth(ch))
            if w == 0:
                continue
            fg = attrs.get("fg", DEFAULT_FG)
            bg = attrs.get("bg")
            if attrs.get("reverse"):
                fg, bg = bg or DEFAULT_BG, fg
            x0, y0 = pad + col * cell_w, top + y * cell_h
            if bg is not None:
                draw.rectangle((x0, y0, x0 + w * cell_w - 1, y0 + cell_h - 1), fill=tuple(bg))
            if attrs.get("dim"):
                fg = tuple((c + b) // 2 for c, b in zip(fg, DEFAULT_BG, strict=True))
            if ch != " ":
                baseline = y0 + (cell_h - size) // 2 - 1
                if w == 2 and emoji is not None and not _is_cjk(ch):
                    glyph = Image.new("RGBA", (136, 128), (0, 0, 0, 0))
                    ImageDraw.Draw(glyph).text((0, 0), ch, font=emoji, embedded_color=True)
                    box = glyph.getbbox()
                    if box:
                        glyph = glyph.crop(box)
                        scale = (size + 2) / max(glyph.size)
                        glyph = glyph.resize(
                            (max(1, round(glyph.size[0] * scale)), max(1, round(glyph.size[1] * scale))),
                            Image.Resampling.LANCZOS,
                        )
                        image.paste(
                            glyph, (x0 + (2 * cell_w - glyph.size[0]) // 2, y0 + (cell_h - glyph.size[1]) // 2), glyph
                        )
                else:
                    face = (
                        wide
                        if (w == 2 and wide is not None)
                        else (bold if attrs.get("bold") else oblique if attrs.get("italic") else regular)
                    )
                    if ch in "─│┌┐└┘":
                        _box_char(draw, ch, x0, y0, cell_w, cell_h, tuple(fg))
                    else:
                        # Centre the glyph in its cell(s): CJK fonts are narrower than 2 cells.
                        dx = max(0, (w * cell_w - round(face.getlength(ch))) // 2)
                        draw.text((x0 + dx, baseline), ch, font=face, fill=tuple(fg))
            if attrs.get("underline"):
                draw.line((x0, y0 + cell_h - 3, x0 + w * cell_w - 1, y0 + cell_h - 3), fill=tuple(fg))
            col += w
    image.save(path, optimize=True)
    return image


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x1100 <= code <= 0x11FF
        or 0x2E80 <= code <= 0xA4CF
        or 0xAC00 <= code <= 0xD7A3
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFF60
        or 0x20000 <= code <= 0x3FFFD
    )


def _box_char(draw: Any, ch: str, x: int, y: int, w: int, h: int, fill: tuple[int, ...]) -> None:
    """Box-drawing lines reach the cell edges, so frames join up at any line height."""
    cx, cy = x + w // 2, y + h // 2
    right, down = ch in "─┌└", ch in "│┌┐"
    left, up = ch in "─┐┘", ch in "│└┘"
    if left:
        draw.line((x, cy, cx, cy), fill=fill)
    if right:
        draw.line((cx, cy, x + w, cy), fill=fill)
    if up:
        draw.line((cx, y, cx, cy), fill=fill)
    if down:
        draw.line((cx, cy, cx, y + h), fill=fill)
