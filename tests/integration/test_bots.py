"""``qbroker bots`` as an operator runs it: a subprocess against a live broker, small counts.

Each run must finish with every questionnaire verified and zero errors, and ``--json`` must
carry the figures the benchmark reads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import (
    REPO_ROOT,
    TEST_SECRET,
    BrokerProcess,
    broker,
    broker_env,
    free_port,
    need,
    redis_server,
)

LATENCIES = ("start_to_first_question", "answer_to_next_question", "questionnaire")


def bots_env(**settings: str) -> dict[str, str]:
    """The environment of a bots process: none of ours but ``settings`` (and a trace switch)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_") or k == "QBROKER_BOTS_TRACE"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(settings)
    return env


def run_bots(*args: str, timeout: float = 120.0) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "qbroker.cli", "bots", "--json", "--seed", "42", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=bots_env(QBROKER_SECRET=TEST_SECRET),
        cwd=str(REPO_ROOT),
    )
    try:
        report = json.loads(done.stdout) if done.stdout.strip() else {}
    except ValueError:
        pytest.fail(f"--json output does not parse:\n{done.stdout}\n{done.stderr}")
    return done.returncode, report, done.stderr


def assert_clean(code: int, report: dict[str, Any], stderr: str, count: int) -> None:
    assert report, stderr
    assert report["errors"] == {}, (report["mismatch_samples"], report["error_samples"], stderr)
    assert code == 0, stderr
    done = report["questionnaires"]
    assert done["done"] == done["verified"] == count
    assert report["error_total"] == report["verify_errors"] == 0
    assert report["questionnaires_per_s"] > 0 and report["frames_per_s"] > 0
    for key in LATENCIES:
        row = report["latency_ms"][key]
        assert set(row) == {"count", "p50", "p90", "p99", "max"}
        assert row["count"] > 0
        assert 0 <= row["p50"] <= row["p90"] <= row["p99"] <= row["max"]


def test_json_bots_complete_and_verify_every_questionnaire() -> None:
    with broker(log_level="warning") as b:
        code, report, err = run_bots("--url", b.url, "--sessions", "3", "--count", "12", "--think-time", "1-5")
    assert_clean(code, report, err, 12)
    assert report["questionnaires"]["completed"] == 12
    assert report["latency_ms"]["answer_to_next_question"]["count"] == 12 * 3
    assert report["config"]["codec"] == "json"


def test_either_bound_alone_bounds_the_run_and_processes_must_be_1_to_64() -> None:
    with broker(log_level="warning") as b:
        # --duration alone: no count limit (it was once cut at the default count of 20).
        code, report, err = run_bots("--url", b.url, "--sessions", "4", "--duration", "2", "--think-time", "25-30")
        assert code == 0, err
        assert (report["config"]["count"], report["config"]["duration_s"]) == (10_000_000, 2.0)
        assert report["questionnaires"]["done"] > 20, report["questionnaires"]
        # --count alone: no time limit (the default 30 s would cut a long count short).
        code, report, err = run_bots("--url", b.url, "--count", "3", "--think-time", "0")
        assert code == 0, err
        assert (report["config"]["count"], report["config"]["duration_s"]) == (3, 24 * 3600.0)
        code, report, err = run_bots("--url", b.url, "--processes", "0")
    assert code == 64 and "--processes must be 1-64" in err


def test_msgpack_bots_with_clarifications_and_cancellations() -> None:
    with broker(log_level="warning") as b:
        code, report, err = run_bots(
            "--url",
            b.url,
            "--codec",
            "msgpack",
            "--sessions",
            "4",
            "--count",
            "24",
            "--think-time",
            "1-5",
            "--clarify-rate",
            "0.5",
            "--cancel-rate",
            "0.3",
            "--multi-share",
            "0.6",
            "--other-share",
            "0.4",
        )
    assert_clean(code, report, err, 24)
    assert report["clarifications"] > 0
    assert report["questionnaires"]["cancelled"] > 0
    assert report["questionnaires"]["completed"] > 0


def test_reconnect_churn_with_two_bots_per_session_loses_nothing() -> None:
    with broker(log_level="warning") as b:
        code, report, err = run_bots(
            "--url",
            b.url,
            "--codec",
            "mixed",
            "--sessions",
            "3",
            "--bots",
            "2",
            "--count",
            "15",
            "--think-time",
            "1-5",
            "--reconnect-churn",
            "0.5",
            "--multi-share",
            "0.7",
            "--clarify-rate",
            "0.3",
        )
    assert_clean(code, report, err, 15)
    assert report["reconnects"] > 0


def test_two_load_processes_merge_their_figures() -> None:
    with broker(log_level="warning") as b:
        code, report, err = run_bots(
            "--url",
            b.url,
            "--processes",
            "2",
            "--sessions",
            "4",
            "--count",
            "16",
            "--think-time",
            "1-5",
            "--clarify-rate",
            "0.2",
            "--cancel-rate",
            "0.2",
        )
    assert_clean(code, report, err, 16)
    assert report["config"]["processes"] == 2
    assert len(report["load_cpu_s"]) == 2


def test_bots_refuse_a_remote_broker_without_allow_remote() -> None:
    code, report, err = run_bots("--url", "http://192.0.2.1:8700", "--count", "1")
    assert code == 64 and report == {}
    assert "only localhost" in err


def test_brokers_that_share_no_store_are_named_as_the_likely_cause() -> None:
    """Two memory-store brokers: a session's agent calls reach one, its bots the other, so
    every questionnaire ends unavailable. That is a mismatch (exit 1), and the bots say why."""
    with broker(log_level="warning", client_wait=1) as one, broker(log_level="warning", client_wait=1) as two:
        code, report, err = run_bots("--url", f"{one.url},{two.url}", "--sessions", "2", "--count", "2")
    assert code == 1
    assert report["questionnaires"]["unavailable"] == 2 and report["verify_errors"] > 0
    assert "do these brokers share one Redis store?" in err


def _bots_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qbroker.cli", "bots", "--json", "--progress", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=bots_env(QBROKER_SECRET=TEST_SECRET),
        cwd=str(REPO_ROOT),
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
    )


def _await_stderr(process: subprocess.Popen[str], pattern: str, within: float = 30.0) -> None:
    """Read the bots' stderr (the progress lines, the messages) until a line matches."""
    assert process.stderr is not None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if re.search(pattern, line):
            return
        assert line or process.poll() is None, f"the bots ended before printing {pattern!r}"
    pytest.fail(f"the bots did not print {pattern!r} in time")


def _after_first_completions(process: subprocess.Popen[str]) -> None:
    _await_stderr(process, r"done [1-9]")


@pytest.mark.parametrize("processes", [1, 2])
def test_ctrl_c_finishes_what_is_in_flight_and_reports(processes: int) -> None:
    """One Ctrl-C (SIGINT to the whole process group, as a terminal sends it): no more
    questionnaires start, those in flight finish and verify, the figures are printed, and
    the exit status says it was interrupted."""
    with broker(log_level="warning") as b:
        bots = _bots_process(
            "--url", b.url, "--sessions", "4", "--processes", str(processes), "--duration", "120",
            "--count", "100000", "--think-time", "100-200",
        )  # fmt: skip
        try:
            _after_first_completions(bots)
            os.killpg(bots.pid, signal.SIGINT)
            stopped = time.monotonic()
            out, err = bots.communicate(timeout=30)
        finally:
            if bots.poll() is None:
                bots.kill()
        took = time.monotonic() - stopped
    assert bots.returncode == 130, err
    report = json.loads(out)
    assert report["interrupted"] is True
    done = report["questionnaires"]
    assert done["done"] > 0 and done["verified"] == done["done"], report
    assert report["errors"] == {}, report["error_samples"]
    assert "no more questionnaires start" in err and "stopping at once" not in err  # one press, once
    assert took < 15, took  # a questionnaire in flight needs ~1 s at this pace, not the --duration


def test_a_second_ctrl_c_stops_at_once() -> None:
    with broker(log_level="warning") as b:
        bots = _bots_process(
            "--url", b.url, "--sessions", "2", "--duration", "120", "--count", "100000", "--think-time", "100-200",
        )  # fmt: skip
        try:
            _after_first_completions(bots)
            bots.send_signal(signal.SIGINT)
            # The second only once the first was taken: two pending SIGINTs would merge into one.
            _await_stderr(bots, "interrupted: no more questionnaires start")
            bots.send_signal(signal.SIGINT)
            out, err = bots.communicate(timeout=30)
        finally:
            if bots.poll() is None:
                bots.kill()
    assert bots.returncode == 130, err
    assert json.loads(out)["interrupted"] is True
    assert "stopping at once" in err


def test_a_rate_limited_run_says_which_limit_and_how_to_lift_it() -> None:
    with broker(log_level="warning", rate_limit=5, rate_burst=5) as b:
        code, report, err = run_bots("--url", b.url, "--sessions", "1", "--count", "10", "--think-time", "0")
    assert code == 2 and report["errors"].get("close_1008")
    assert "QBROKER_RATE_LIMIT" in err and "--think-time" in err


def test_bots_stop_at_once_when_no_broker_answers() -> None:
    code, report, err = run_bots("--url", f"http://127.0.0.1:{free_port()}", "--count", "1", timeout=30)
    assert code == 2 and report == {}
    assert "cannot reach the broker at" in err and "nothing was started" in err


def _bots_without_secret(data_dir: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``qbroker bots`` with no secret given: no --secret, no QBROKER_SECRET."""
    return subprocess.run(
        [sys.executable, "-m", "qbroker.cli", "bots", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=bots_env(QBROKER_DATA_DIR=data_dir),
        cwd=str(REPO_ROOT),
    )


def test_bots_need_a_token_secret(tmp_path: Path) -> None:
    done = _bots_without_secret(str(tmp_path), "--url", "http://127.0.0.1:1", "--count", "1")
    assert done.returncode == 64 and "no token secret" in done.stderr and "--data-dir" in done.stderr
    assert not (tmp_path / "secret").exists()  # looked for, never made


def test_bots_with_another_secret_stop_before_any_load(tmp_path: Path) -> None:
    """A wrong --secret is said at once, in one line, not retried as close_4401 for the run."""
    process = BrokerProcess(free_port(), broker_env(str(tmp_path)), str(tmp_path)).start()
    try:
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "qbroker.cli", "bots", "--url", process.url, "--count", "2"]
            + ["--secret", "not-the-brokers-secret-not-the-brokers"],
            capture_output=True,
            text=True,
            timeout=60,
            env=bots_env(),
            cwd=str(REPO_ROOT),
        )
        took = time.monotonic() - began
    finally:
        process.stop()
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"qbroker bots: the broker at {process.url} refuses tokens signed with this secret (HTTP 401):"
        " pass the broker's QBROKER_SECRET with --secret (or --data-dir for one that generated its own);"
        " nothing was started\n"
    )
    assert took < 20, took  # not the run's 30-second connect timeout


def test_bots_use_the_secret_a_local_broker_generated(tmp_path: Path) -> None:
    """``qbroker serve`` without QBROKER_SECRET keeps a generated secret in its data dir, as
    the quick start runs it; the bots find it there, by QBROKER_DATA_DIR or --data-dir."""
    broker_dir, elsewhere = tmp_path / "broker", tmp_path / "elsewhere"
    broker_dir.mkdir()
    elsewhere.mkdir()
    env = broker_env(str(broker_dir))
    del env["QBROKER_SECRET"]
    process = BrokerProcess(free_port(), env, str(broker_dir)).start()
    try:
        secret_file = broker_dir / "secret"
        assert secret_file.exists()
        for args in ((), ("--data-dir", str(broker_dir))):
            data_dir = str(broker_dir) if not args else str(elsewhere)
            done = _bots_without_secret(data_dir, "--url", process.url, "--count", "3", "--json", *args)
            assert f"using the generated secret in {secret_file}" in done.stderr
            assert_clean(done.returncode, json.loads(done.stdout), done.stderr, 3)
    finally:
        process.stop()


@pytest.mark.redis
def test_two_brokers_on_redis_agent_on_one_bots_on_the_other() -> None:
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    with (
        redis_server() as redis,
        broker(redis.url, log_level="warning") as one,
        broker(redis.url, log_level="warning") as two,
    ):
        code, report, err = run_bots(
            "--url",
            f"{one.url},{two.url}",
            "--codec",
            "mixed",
            "--sessions",
            "4",
            "--bots",
            "2",
            "--count",
            "16",
            "--think-time",
            "1-5",
            "--clarify-rate",
            "0.3",
            "--cancel-rate",
            "0.2",
            "--reconnect-churn",
            "0.2",
        )
    assert_clean(code, report, err, 16)
    assert report["config"]["urls"] == [one.url, two.url]


def _error_lines(log: str) -> list[str]:
    """A broker log's error-level lines (JSON lines, or tracebacks in any format)."""
    found = []
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        level = entry.get("level") if isinstance(entry, dict) else None
        if level in ("error", "critical") or (level is None and ("Traceback" in line or " error " in line)):
            found.append(line[:2000])
    return found


@pytest.mark.heavy
def test_the_mixed_load_on_two_brokers_over_redis_is_clean() -> None:
    """Every bots feature at once (two bots a session on different brokers, both codecs,
    multi and Other answers, clarifications, cancellations, reconnect churn), two load
    processes: nothing lost or wrong, nothing unavailable, no error in either broker's log."""
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    with (
        redis_server() as redis,
        broker(redis.url, log_level="info") as one,
        broker(redis.url, log_level="info") as two,
    ):
        code, report, err = run_bots(
            *("--url", f"{one.url},{two.url}", "--sessions", "150", "--bots", "2", "--codec", "mixed"),
            *("--questions", "5", "--options", "6", "--multi-share", "0.4", "--other-share", "0.2"),
            *("--think-time", "5-40", "--clarify-rate", "0.2", "--cancel-rate", "0.1"),
            *("--reconnect-churn", "0.05", "--duration", "10", "--count", "100000", "--processes", "2"),
        )
        logs = {url: b.log() for url, b in ((one.url, one), (two.url, two))}
    assert report, err
    assert report["errors"] == {}, (report["mismatch_samples"], report["error_samples"], err)
    assert code == 0, err
    done = report["questionnaires"]
    assert done["done"] == done["verified"] > 100
    assert done["unavailable"] == 0
    assert done["completed"] > 0 and done["cancelled"] > 0 and report["clarifications"] > 0
    assert report["reconnects"] > 0
    for url, log in logs.items():
        assert _error_lines(log) == [], f"error lines in the log of the broker at {url}"
