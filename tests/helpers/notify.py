"""A deployment with notification routes: brokers on one redis-server, a routes file, and a
local receiver behind every route (tests/helpers/receivers.py).

Each route covers its own session prefix, so a test picks the kind (and the receiver) by
the session id it makes: ``new_sid("slack:")`` is told through Slack, ``new_sid("plain:")``
through nothing. The agent talks to the first broker; people connect to the second.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.processes import BrokerProcess, RedisServer, broker_env, free_port, redis_server
from tests.helpers.receivers import HttpReceiver, SmtpReceiver, black_hole, http_receiver, smtp_receiver

WEBHOOK_SECRET = "whsec_test_0123456789abcdef"
NTFY_TOKEN = "tk_test_topic_token"
PUBLIC_URL = "https://qbroker.example.test/team"
MAIL_FROM = "qbroker@example.test"
MAIL_TO = ["person@example.test", "team@example.test"]
# Shortened waits: the person has 12 s (not 15 minutes) where a route covers the session,
# the broker's own 5 s elsewhere; retries start after 0.5 s; one attempt may take 2 s; a
# delivery its broker stopped holding is taken over after 3 s.
SETTINGS: dict[str, object] = {
    "notify_client_wait": 12,
    "notify_retry_delay": 0.5,
    "notify_timeout": 2,
    "notify_visibility": 3,
    "public_url": PUBLIC_URL,
}
HTTP_ROUTES = ("hook", "slack", "ntfy", "private", "linked", "idle", "flaky", "gone", "held")


def verify_signature(secret: str, header: str, body: bytes, now: float, tolerance: float = 300.0) -> bool:
    """The reference verifier docs/notifications.md gives receivers (the same ten lines)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    timestamp, signature = fields.get("t", ""), fields.get("v1", "")
    if not timestamp.isdigit() or abs(now - int(timestamp)) > tolerance:
        return False  # a replay (or a clock far off)
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def routes_file(http: dict[str, HttpReceiver], smtp: SmtpReceiver, hung: str, closed: str) -> str:
    def webhook(sessions: str, url: str, **extra: Any) -> str:
        lines = [f'sessions = "{sessions}"', 'kind = "webhook"', f'url = "{url}"', f'secret = "{WEBHOOK_SECRET}"']
        lines += [f"{key} = {str(value).lower() if isinstance(value, bool) else value}" for key, value in extra.items()]
        return "[[route]]\n" + "\n".join(lines) + "\n"

    mail = f'kind = "email"\nurl = "{smtp.url}"\nfrom = "{MAIL_FROM}"\nto = {json.dumps(MAIL_TO)}\n'
    return "\n".join(
        [
            webhook("hook:*", http["hook"].url + "/hook/secret-path"),
            f'[[route]]\nsessions = "slack:*"\nkind = "slack"\nurl = "{http["slack"].url}/services/T0/B0/secret"\n',
            f'[[route]]\nsessions = "ntfy:*"\nkind = "ntfy"\nurl = "{http["ntfy"].url}/secret-topic"\n'
            f'priority = "urgent"\ntags = ["robot_face"]\ntoken = "{NTFY_TOKEN}"\n',
            f'[[route]]\nsessions = "mail:*"\n{mail}',
            webhook("private:*", http["private"].url + "/hook", include_prompt=False),
            webhook("linked:*", http["linked"].url + "/hook", link_token=True),
            webhook("idle:*", http["idle"].url + "/hook", after=1),
            webhook("flaky:*", http["flaky"].url + "/hook"),
            webhook("gone:*", http["gone"].url + "/hook/secret-path"),
            webhook("held:*", http["held"].url + "/hook"),
            webhook("dead:*", hung),
            webhook("down:*", closed),
            # "all:": every kind at once (the privacy test reads them all)
            webhook("all:*", http["hook"].url + "/hook/secret-path", after=1),
            f'[[route]]\nsessions = "all:*"\nkind = "slack"\nurl = "{http["slack"].url}/services/T0/B0/secret"\n',
            f'[[route]]\nsessions = "all:*"\nkind = "ntfy"\nurl = "{http["ntfy"].url}/secret-topic"\n',
            f'[[route]]\nsessions = "all:*"\n{mail}',
        ]
    )


@dataclass
class NotifyDeployment:
    redis: RedisServer
    http: dict[str, HttpReceiver]
    smtp: SmtpReceiver
    config_path: str
    brokers: list[BrokerProcess] = field(default_factory=list)

    @property
    def agent_url(self) -> str:
        return self.brokers[0].url

    @property
    def client_ws_url(self) -> str:
        return self.brokers[1].ws_url

    def settings(self) -> dict[str, object]:
        return {**SETTINGS, "notify_config": self.config_path}

    def start_broker(self, data_dir: str) -> BrokerProcess:
        process = BrokerProcess(free_port(), broker_env(data_dir, self.redis.url, **self.settings()), data_dir)
        return process.start()

    def nobody_connected(self) -> bool:
        """No client is connected to any broker here (each counts its own)."""
        return all(b.metric("qbroker_client_connections") == 0 for b in self.brokers)

    def sent(self, kind: str) -> float:
        """Notifications of ``kind`` every broker here counts as sent."""
        return sum(b.metric("qbroker_notifications_total", kind=kind, result="sent") for b in self.brokers)


@contextmanager
def notify_deployment(brokers: int = 2) -> Iterator[NotifyDeployment]:
    with ExitStack() as stack:
        server = stack.enter_context(redis_server())
        http = {name: stack.enter_context(http_receiver()) for name in HTTP_ROUTES}
        http["gone"].default = 404
        smtp = stack.enter_context(smtp_receiver())
        hung = stack.enter_context(black_hole())
        closed = f"http://127.0.0.1:{free_port()}/hook"
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="qbroker-notify-"))
        config_path = os.path.join(directory, "notify.toml")
        with open(config_path, "w") as handle:
            handle.write(routes_file(http, smtp, hung, closed))
        deployment = NotifyDeployment(server, http, smtp, config_path)
        for number in range(brokers):
            data_dir = os.path.join(directory, f"broker-{number}")
            os.mkdir(data_dir)
            process = deployment.start_broker(data_dir)
            stack.callback(process.stop)
            deployment.brokers.append(process)
        yield deployment
