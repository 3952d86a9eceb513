"""Waiting for the person a notification brings (docs/protocol.md, "When nobody is there"):
a questionnaire in a session a route covers waits QBROKER_NOTIFY_CLIENT_WAIT for a first
client, one elsewhere keeps the 5-second wait, and an agent's own ?clientWait= wins over both.
Settings are shortened: 12 s stand for the 15 minutes, a person 7 s late for one 10 minutes late.
And a routes file that cannot be used stops ``serve`` in one line."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.clients import person
from tests.helpers.notify import NotifyDeployment, notify_deployment
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, broker_env, free_port
from tests.helpers.protocol import Agent
from tests.helpers.samples import new_sid, single

pytestmark = pytest.mark.redis

BROKER_CLIENT_WAIT = 5.0  # the default QBROKER_CLIENT_WAIT, which the deployment keeps


@pytest.fixture(scope="module")
def deployment() -> Iterator[NotifyDeployment]:
    with notify_deployment() as started:
        yield started


async def test_a_person_arriving_long_after_the_start_still_answers_where_a_route_covers_the_session(
    deployment: NotifyDeployment,
) -> None:
    sid = new_sid("hook:")
    async with Agent(deployment.agent_url, sid) as agent:
        qid = str((await agent.start_pending(single()))["questionnaireId"])
        began = time.monotonic()
        while time.monotonic() - began < BROKER_CLIENT_WAIT + 2:  # the person is late...
            waited = await agent.get(qid, wait=1)
            assert waited.status_code == 202  # ...and the agent's long poll keeps answering 202
        async with person(deployment.client_ws_url, sid) as someone:
            await someone.answer_all({"target": ["production"]})
        outcome = await agent.outcome(qid)
    assert outcome.details["status"] == "completed"


async def test_without_a_route_the_five_second_wait_stays(deployment: NotifyDeployment) -> None:
    sid = new_sid("plain:")
    async with Agent(deployment.agent_url, sid) as agent:
        began = time.monotonic()
        response = await agent.start(single(), wait=30)
        elapsed = time.monotonic() - began
    assert response.status_code == 200
    details = response.json()["details"]
    assert (details["status"], details["cancellationReason"]) == ("unavailable", "ui_unavailable")
    assert BROKER_CLIENT_WAIT - 0.5 <= elapsed < BROKER_CLIENT_WAIT + 10


async def test_an_agent_s_own_client_wait_wins_over_the_route_s(deployment: NotifyDeployment) -> None:
    sid = new_sid("hook:")
    async with Agent(deployment.agent_url, sid) as agent:
        began = time.monotonic()
        response = await agent.http.post(
            f"{deployment.agent_url}/v1/sessions/{sid}/questionnaire",
            params={"wait": "30", "clientWait": "0.5"},
            json={"action": "start", "questions": [single()]},
            headers=agent.headers(),
        )
        elapsed = time.monotonic() - began
    assert response.status_code == 200, response.text
    assert response.json()["details"]["cancellationReason"] == "ui_unavailable"
    assert elapsed < BROKER_CLIENT_WAIT


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"clientWait": "3601"}, "clientWait must be a number of seconds from 0 to 3600"),
        ({"clientWait": "-1"}, "clientWait must be a number of seconds"),
        ({"clientWait": "soon"}, "clientWait must be a number of seconds"),
        ({"clientWait": "1", "wiat": "1"}, "unknown query parameter(s) 'wiat'"),
    ],
)
async def test_a_bad_client_wait_is_refused(deployment: NotifyDeployment, query: dict[str, str], says: str) -> None:
    sid = new_sid("hook:")
    async with Agent(deployment.agent_url, sid) as agent:
        response = await agent.http.post(
            f"{deployment.agent_url}/v1/sessions/{sid}/questionnaire",
            params=query,
            json={"action": "start", "questions": [single()]},
            headers=agent.headers(),
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_arguments"
    assert says in response.json()["error"]["message"]


async def test_a_client_wait_on_a_resume_is_refused(deployment: NotifyDeployment) -> None:
    sid = new_sid("hook:")
    async with Agent(deployment.agent_url, sid) as agent:
        response = await agent.http.post(
            f"{deployment.agent_url}/v1/sessions/{sid}/questionnaire",
            params={"clientWait": "60"},
            json={"action": "resume", "questionnaireId": "q", "revision": 1, "clarificationResponse": "x"},
            headers=agent.headers(),
        )
    assert response.status_code == 400
    assert "clientWait and reattach apply to a start" in response.json()["error"]["message"]


async def test_a_person_who_asked_then_left_has_the_notify_wait_to_come_back_after_the_resume() -> None:
    # A grace of 1 s and a notify wait of 10 s: the resume nobody saw waits the longer one.
    with tempfile.TemporaryDirectory(prefix="qbroker-routes-") as directory:
        path = Path(directory, "notify.toml")
        path.write_text(f'[[route]]\nsessions = "*"\nkind = "slack"\nurl = "http://127.0.0.1:{free_port()}/h"\n')
        with broker(notify_config=str(path), notify_client_wait=10, reconnect_grace=1) as process:
            sid = new_sid("left:")
            async with Agent(process.url, sid) as agent:
                qid = str((await agent.start_pending(single()))["questionnaireId"])
                async with person(process.ws_url, sid) as someone:
                    question = await someone.wait_for("question")
                    await someone.clarify(question, "which production?")
                    asked = await agent.outcome(qid)
                assert asked.status == "needs_clarification"
                await agent.resume(qid, asked.revision, "the EU one")
                began = time.monotonic()
                while time.monotonic() - began < 3:  # three graces later, nobody there...
                    assert (await agent.get(qid, wait=1)).status_code == 202  # ...and still open
                async with person(process.ws_url, sid) as someone:
                    await someone.answer_all({"target": ["production"]})
                outcome = await agent.outcome(qid)
    assert outcome.details["status"] == "completed"


# --- a routes file serve cannot use -------------------------------------------------------------


@pytest.mark.parametrize(
    ("routes", "says"),
    [
        (
            '[[route]]\nsessions = "ok"\nkind = "slack"\nurl = "https://x.test/h"\n\n'
            '[[route]]\nsessions = "team-a:*"\nkind = "webhook"\nurl = "https://x.test/h"\nsecret = "s"\nurll = 1\n',
            ': route 2 (sessions "team-a:*"): unknown key "urll"',
        ),
        ('[[route]]\nsessions = "*"\nkind = "pager"\n', ': route 1 (sessions "*"): key "kind": unknown kind'),
        (
            '[[route]]\nsessions = "*"\nkind = "slack"\nurl = "https://x.test/h"\nafter = -5\n',
            ': route 1 (sessions "*"): key "after" must be',
        ),
        ("[[route]\n", ": not valid TOML"),
    ],
)
def test_a_routes_file_serve_cannot_use_stops_it_in_one_line_naming_the_file_route_and_key(
    routes: str, says: str
) -> None:
    with tempfile.TemporaryDirectory(prefix="qbroker-routes-") as directory:
        path = Path(directory, "notify.toml")
        path.write_text(routes)
        env = broker_env(directory, notify_config=str(path))
        result = subprocess.run(
            [sys.executable, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1", "--port", str(free_port())],
            env=env,
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"qbroker: {path}{says}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_routes_without_a_public_url_are_a_warning_and_the_broker_serves() -> None:
    with tempfile.TemporaryDirectory(prefix="qbroker-routes-") as directory:
        path = Path(directory, "notify.toml")
        path.write_text('[[route]]\nsessions = "*"\nkind = "slack"\nurl = "http://127.0.0.1:9/h"\n')
        process = BrokerProcess(free_port(), broker_env(directory, notify_config=str(path)), directory).start()
        try:
            log = process.log()
        finally:
            process.stop()
    assert "warning: notification routes but no QBROKER_PUBLIC_URL" in log
    assert f"http://127.0.0.1:{process.port}" in log
