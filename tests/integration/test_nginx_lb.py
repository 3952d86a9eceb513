"""deploy/nginx.conf, run by a real nginx in front of three real brokers on one redis-server.

The config under test is deploy/nginx.conf itself with only what must change on a test
machine rewritten: the three upstream host names become 127.0.0.1 ports, the listen address
becomes 127.0.0.1:<free port>, and temp paths move into a temporary directory. ``nginx -t``
checks it, then nginx serves it: consecutive websocket connections land on three different
brokers (plain round-robin, no stickiness), and a questionnaire completes with the person
and the agent both going through nginx, including a long poll that re-attaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.clients import ScriptedClient, raw_socket
from tests.helpers.processes import REPO_ROOT, BrokerProcess, broker, free_port, need, port_open, redis_server, token
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.redis

DEPLOY_CONF = REPO_ROOT / "deploy" / "nginx.conf"
UPSTREAM = re.compile(r"^(\s*server )broker-(\d+):8700\b", re.MULTILINE)

QUESTIONS = [
    {"id": "target", "prompt": "Deploy where?", "type": "single", "options": [{"id": "staging"}, {"id": "production"}]},
    {"id": "checks", "prompt": "Which checks?", "type": "multi", "options": [{"id": "unit"}, {"id": "e2e"}]},
]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def local_conf(text: str, broker_ports: list[int], listen_port: int, tmp: Path) -> str:
    """deploy/nginx.conf for this machine: same directives, local addresses and temp paths."""
    names = [int(n) for _, n in UPSTREAM.findall(text)]
    assert names == list(range(1, len(broker_ports) + 1)), f"upstream servers broker-1..N expected, got {names}"
    text = UPSTREAM.sub(lambda m: f"{m.group(1)}127.0.0.1:{broker_ports[int(m.group(2)) - 1]}", text)
    assert text.count("listen 8080;") == 1
    text = text.replace("listen 8080;", f"listen 127.0.0.1:{listen_port};")
    temp = "".join(
        f"    {kind}_temp_path {tmp / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    assert text.count("http {\n") == 1
    return text.replace("http {\n", "http {\n" + temp, 1)


@contextlib.contextmanager
def nginx(broker_ports: list[int]) -> Iterator[str]:
    binary = nginx_binary()
    need(binary is not None, "nginx is not installed (apt-get install nginx-light)")
    assert binary is not None
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qbroker-nginx-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)  # nginx workers may run as another user
        conf = tmp / "nginx.conf"
        conf.write_text(local_conf(DEPLOY_CONF.read_text(), broker_ports, port, tmp))
        args = [
            binary,
            "-p",
            f"{tmp}/",
            "-c",
            str(conf),
            "-e",
            str(tmp / "error.log"),
            "-g",
            f"daemon off; pid {tmp / 'nginx.pid'};",
        ]
        checked = subprocess.run([*args, "-t"], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
        with open(tmp / "stdout.log", "wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: process.poll() is not None or port_open(port), what="nginx to listen")
            assert process.poll() is None, (tmp / "error.log").read_text()
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def _broker_of(client_id: str, brokers: list[BrokerProcess]) -> int:
    """Which broker logged this client joining (exactly one must have)."""

    def joined() -> list[int]:
        return [
            n
            for n, process in enumerate(brokers)
            if any(
                line.get("msg") == "client joined" and line.get("client") == client_id
                for line in map(_json_or_empty, process.log().splitlines())
            )
        ]

    found = wait_until(joined, what=f"a broker to log client {client_id}")
    assert len(found) == 1, found
    return int(found[0])


def _json_or_empty(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def _through_nginx(lb: str, brokers: list[BrokerProcess]) -> None:
    sid = "through-nginx"
    ws_base, http_base = f"ws://{lb}", f"http://{lb}"
    async with contextlib.AsyncExitStack() as stack:
        people = [
            await stack.enter_async_context(ScriptedClient.connect(ws_base, sid, token(sid, "client"))) for _ in brokers
        ]
        # Round-robin, no stickiness: three consecutive connections, three brokers.
        landed = [await asyncio.to_thread(_broker_of, p.welcome["clientId"], brokers) for p in people]
        assert sorted(landed) == list(range(len(brokers))), landed
        for p in people:
            await p.wait_for("idle")

        agent = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=http_base, headers={"Authorization": f"Bearer {token(sid, 'agent')}"}, timeout=60
            )
        )
        path = f"/v1/sessions/{sid}/questionnaire"
        start = asyncio.create_task(agent.post(f"{path}?wait=30", json={"action": "start", "questions": QUESTIONS}))
        closed = await people[0].answer_all({"target": ["production"], "checks": ["unit", "e2e"]})
        assert closed["status"] == "completed"
        for other in people[1:]:  # every client, on every broker, saw it close
            await other.wait_for("closed")
        result = (await asyncio.wait_for(start, 40)).json()
        assert result["details"]["answers"] == [
            {"questionId": "target", "selectedOptionIds": ["production"]},
            {"questionId": "checks", "selectedOptionIds": ["unit", "e2e"]},
        ]

        # A long poll through nginx: start without waiting, re-attach with a wait, answer.
        pending = await agent.post(f"{path}?wait=0", json={"action": "start", "questions": QUESTIONS})
        assert pending.status_code == 202, pending.text
        qid = pending.json()["questionnaireId"]
        reattached = asyncio.create_task(agent.get(f"/v1/sessions/{sid}/questionnaires/{qid}?wait=60"))
        await people[1].answer_all({"target": ["staging"], "checks": ["e2e"]})
        response = await asyncio.wait_for(reattached, 60)
        assert response.status_code == 200, response.text
        assert response.json()["details"]["status"] == "completed"

        # The same-origin check still works behind nginx (it forwards Host with the port).
        browser = await raw_socket(ws_base, sid, origin=f"http://{lb}")
        try:
            await browser.send(
                json.dumps({"type": "hello", "token": token(sid, "client"), "client": {"kind": "web", "name": "page"}})
            )
            assert json.loads(await asyncio.wait_for(browser.recv(), 10))["type"] == "welcome"
        finally:
            await browser.close()


def test_a_questionnaire_completes_through_nginx_round_robin_over_three_brokers() -> None:
    need(nginx_binary() is not None, "nginx is not installed (apt-get install nginx-light)")
    with redis_server() as redis, contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(redis.url)) for _ in range(3)]
        lb = stack.enter_context(nginx([b.port for b in brokers]))
        assert httpx.get(f"http://{lb}/healthz", timeout=5).json() == {"status": "ok"}
        assert httpx.get(f"http://{lb}/metrics", timeout=5).status_code == 404  # not for the public
        assert httpx.get(f"{brokers[0].url}/metrics", timeout=5).status_code == 200  # for the scraper
        asyncio.run(_through_nginx(lb, brokers))
