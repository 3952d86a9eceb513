"""What each kind of route sends, field by field, from real brokers (two, on Redis) to local
receivers on 127.0.0.1: the webhook's JSON and its signature, Slack's blocks, ntfy's headers,
the e-mail; and what a notification never says (docs/notifications.md)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from broker.tokens.claims import mint_token, verify_token
from tests.helpers.clients import close_code, hello, person, raw_socket
from tests.helpers.notify import (
    MAIL_FROM,
    MAIL_TO,
    NTFY_TOKEN,
    PUBLIC_URL,
    WEBHOOK_SECRET,
    NotifyDeployment,
    notify_deployment,
    verify_signature,
)
from tests.helpers.processes import TEST_SECRET, token
from tests.helpers.protocol import Agent
from tests.helpers.receivers import Received
from tests.helpers.samples import multi, new_sid, single
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.redis

DEPLOY = single(
    "target", ("staging", "production"), label="Deploy target", prompt="Where should v2.3 go?", allowOther=True
)
CHECKS = multi("checks", ("unit", "lint"), label="Checks", prompt="Which checks must pass first?", allowOther=True)
WEBHOOK_KEYS = {
    "type",
    "version",
    "id",
    "trigger",
    "sessionId",
    "questionnaireId",
    "askedBy",
    "questions",
    "question",
    "link",
    "at",
}


@pytest.fixture(scope="module")
def deployment() -> Iterator[NotifyDeployment]:
    with notify_deployment() as started:
        yield started


def agent_of(deployment: NotifyDeployment, sid: str, sub: str | None = "build-bot") -> Agent:
    return Agent(deployment.agent_url, sid, mint_token(TEST_SECRET, sid, "agent", sub=sub))


async def started(deployment: NotifyDeployment, sid: str, *questions: dict[str, Any]) -> str:
    """Start a questionnaire in ``sid`` with nobody connected; its id."""
    async with agent_of(deployment, sid) as agent:
        pending = await agent.start_pending(*(questions or (DEPLOY, CHECKS)))
    return str(pending["questionnaireId"])


def one_for(requests: list[Received], sid: str) -> Received:
    mine = [r for r in requests if sid.encode() in r.body or sid in str(r.headers)]
    assert len(mine) == 1, mine
    return mine[0]


# --- webhook ----------------------------------------------------------------------------


async def test_a_webhook_gets_the_payload_key_for_key_signed_and_with_an_idempotency_key(
    deployment: NotifyDeployment,
) -> None:
    sid = new_sid("hook:")
    before = time.time()
    qid = await started(deployment, sid)
    request = one_for(await _arrived(deployment.http["hook"], sid), sid)

    assert request.method == "POST" and request.path == "/hook/secret-path"
    assert request.headers["Content-Type"] == "application/json"
    payload = json.loads(request.body)
    assert set(payload) == WEBHOOK_KEYS
    assert payload["type"] == "questionnaire.waiting" and payload["version"] == 1
    assert payload["trigger"] == "started"
    assert (payload["sessionId"], payload["questionnaireId"]) == (sid, qid)
    assert payload["askedBy"] == "build-bot"
    assert payload["questions"] == 2
    assert payload["question"] == {"label": "Deploy target", "prompt": "Where should v2.3 go?"}
    assert payload["link"] == f"{PUBLIC_URL}/#session={sid}"
    assert isinstance(payload["at"], int) and before - 1 <= payload["at"] <= time.time()
    assert uuid.UUID(payload["id"]) and request.headers["Idempotency-Key"] == payload["id"]

    header = request.headers["X-QBroker-Signature"]
    assert verify_signature(WEBHOOK_SECRET, header, request.body, now=time.time())


async def test_the_reference_verifier_rejects_a_replay_an_altered_body_and_another_secret(
    deployment: NotifyDeployment,
) -> None:
    sid = new_sid("hook:")
    await started(deployment, sid)
    hooks = deployment.http["hook"]
    request = one_for(await _arrived(hooks, sid), sid)
    header, body = request.headers["X-QBroker-Signature"], request.body
    timestamp = int(dict(part.split("=", 1) for part in header.split(","))["t"])

    assert verify_signature(WEBHOOK_SECRET, header, body, now=timestamp + 299)
    assert not verify_signature(WEBHOOK_SECRET, header, body, now=timestamp + 301)  # replayed later
    altered = body.replace(b'"started"', b'"idle"')
    assert altered != body and not verify_signature(WEBHOOK_SECRET, header, altered, now=timestamp)
    assert not verify_signature("whsec_another", header, body, now=timestamp)
    forged = header.replace(f"t={timestamp}", f"t={timestamp + 60}")  # a fresh time on an old signature
    assert not verify_signature(WEBHOOK_SECRET, forged, body, now=timestamp + 60)


async def test_without_a_sub_askedby_is_null(deployment: NotifyDeployment) -> None:
    sid = new_sid("hook:")
    async with agent_of(deployment, sid, sub=None) as agent:
        await agent.start_pending(DEPLOY)
    payload = json.loads(one_for(await _arrived(deployment.http["hook"], sid), sid).body)
    assert payload["askedBy"] is None and payload["questions"] == 1


# --- slack ------------------------------------------------------------------------------


async def test_slack_gets_block_kit_with_the_question_who_asked_the_session_the_count_and_an_answer_button(
    deployment: NotifyDeployment,
) -> None:
    sid = new_sid("slack:")
    await started(deployment, sid)
    request = one_for(await _arrived(deployment.http["slack"], sid), sid)

    assert request.path == "/services/T0/B0/secret"
    assert request.headers["Content-Type"] == "application/json"
    message = json.loads(request.body)
    assert set(message) == {"text", "blocks"}
    assert message["text"] == f"build-bot has 2 questions for you (session {sid})"
    header, question, facts, actions = message["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "build-bot has 2 questions for you"}}
    assert question == {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Deploy target*\nWhere should v2.3 go?"},
    }
    assert facts == {
        "type": "section",
        "fields": [
            {"type": "mrkdwn", "text": "*Asked by*\nbuild-bot"},
            {"type": "mrkdwn", "text": f"*Session*\n`{sid}`"},
            {"type": "mrkdwn", "text": "*Questions*\n2"},
        ],
    }
    assert actions == {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Answer"},
                "url": f"{PUBLIC_URL}/#session={sid}",
                "style": "primary",
                "action_id": "qbroker-answer",
            }
        ],
    }


# --- ntfy -------------------------------------------------------------------------------


async def test_ntfy_gets_title_click_priority_tags_and_the_question_as_the_message(
    deployment: NotifyDeployment,
) -> None:
    sid = new_sid("ntfy:")
    await started(deployment, sid)
    request = one_for(await _arrived(deployment.http["ntfy"], sid), sid)

    assert request.path == "/secret-topic"
    assert request.headers["Title"] == "build-bot has 2 questions for you"
    assert request.headers["Click"] == f"{PUBLIC_URL}/#session={sid}"
    assert request.headers["Priority"] == "5"  # "urgent" in the route
    assert request.headers["Tags"] == "robot_face,started"
    assert request.headers["Authorization"] == f"Bearer {NTFY_TOKEN}"
    assert request.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert request.body.decode() == f"Deploy target\nWhere should v2.3 go?\n\n2 questions in session {sid}"


# --- email ------------------------------------------------------------------------------


async def test_email_names_the_agent_the_question_the_session_and_the_link(deployment: NotifyDeployment) -> None:
    sid = new_sid("mail:")
    await started(deployment, sid)
    smtp = deployment.smtp
    (mail,) = await _mails(deployment, sid)
    sender, recipients, message = mail

    assert sender == MAIL_FROM and recipients == MAIL_TO
    assert message["From"] == MAIL_FROM and message["To"] == ", ".join(MAIL_TO)
    assert message["Subject"] == "[qbroker] build-bot has 2 questions for you"
    assert message["Message-ID"].endswith("@qbroker>")
    body = message.get_payload(decode=True).decode().replace("\r\n", "\n")
    assert "Deploy target\nWhere should v2.3 go?" in body
    assert f"Session: {sid}" in body and "Questions: 2\n" in body
    assert f"Answer: {PUBLIC_URL}/#session={sid}" in body
    assert smtp.port  # (a local aiosmtpd)


# --- privacy ----------------------------------------------------------------------------


async def test_a_route_without_the_prompt_says_no_label_and_no_prompt(deployment: NotifyDeployment) -> None:
    sid = new_sid("private:")
    await started(deployment, sid)
    request = one_for(await _arrived(deployment.http["private"], sid), sid)
    payload = json.loads(request.body)
    assert payload["question"] is None
    assert b"Deploy target" not in request.body and b"v2.3" not in request.body


async def test_a_link_token_is_a_client_token_for_that_one_session_for_an_hour(deployment: NotifyDeployment) -> None:
    sid = new_sid("linked:")
    await started(deployment, sid)
    link = json.loads(one_for(await _arrived(deployment.http["linked"], sid), sid).body)["link"]
    base, _, fragment = link.partition("#")
    assert base == f"{PUBLIC_URL}/"
    params = dict(parse_qsl(fragment))
    assert params["session"] == sid and set(params) == {"session", "token"}
    claims = verify_token(TEST_SECRET, params["token"], role="client")
    assert claims.allows(sid) and not claims.allows(sid + "x") and not claims.allows(new_sid("linked:"))
    assert claims.exp is not None and claims.iat is not None
    assert 3599 <= claims.exp - claims.iat <= 3601 and abs(claims.iat - time.time()) < 60
    assert urlsplit(base).scheme == "https"


async def test_a_link_token_is_held_by_its_route_and_its_jti_is_logged_so_a_revocation_reaches_it(
    deployment: NotifyDeployment,
) -> None:
    """The link token names a holder (the route's ``link_sub``, else ``notify-route-<N>``),
    and the broker's line for the notification carries its ``jti``: revoking either refuses it."""
    sid = new_sid("linked:")
    await started(deployment, sid)
    note = json.loads(one_for(await _arrived(deployment.http["linked"], sid), sid).body)
    claims = verify_token(TEST_SECRET, dict(parse_qsl(note["link"].partition("#")[2]))["token"], role="client")
    assert claims.sub is not None and claims.sub.startswith("notify-route-")

    def logged() -> list[dict[str, object]]:
        lines = [json.loads(line) for b in deployment.brokers for line in b.log().splitlines() if line.startswith("{")]
        return [e for e in lines if e.get("msg") == "notification sent" and e.get("notification") == note["id"]]

    (line,) = await eventually(logged, "the notification's log line")
    assert line["link_jti"] == claims.jti
    admin = token("*", "admin", 600, sub="ops")
    async with httpx.AsyncClient(timeout=10) as http:
        revoked = await http.post(
            f"{deployment.brokers[0].url}/v1/revocations",
            json={"sub": claims.sub},
            headers={"Authorization": f"Bearer {admin}"},
        )
    assert revoked.status_code == 200
    ws = await raw_socket(deployment.brokers[0].ws_url, sid)
    await ws.send(hello(dict(parse_qsl(note["link"].partition("#")[2]))["token"]))
    assert await close_code(ws) == 4401


async def test_no_answer_other_or_clarification_text_reaches_any_kind(deployment: NotifyDeployment) -> None:
    """The person answers with an Other text and asks for a clarification, goes away, and the
    agent resumes: every kind announces the resume, and none says any of those texts (nor
    the agent's response, nor the chosen option)."""
    sid = new_sid("all:")
    secrets = ["OTHER-7d1f-text", "CLARIFY-93ab-text", "RESPONSE-51c0-text"]
    async with agent_of(deployment, sid) as agent:
        async with person(deployment.client_ws_url, sid) as someone:
            qid = str((await agent.start_pending(DEPLOY, CHECKS))["questionnaireId"])
            question = await someone.wait_for("question")
            await someone.answer(question, [], other=secrets[0])
            second = await someone.wait_for("question", where=lambda f: f["question"]["id"] == "checks")
            await someone.clarify(second, secrets[1])
            await someone.wait_for("suspended")
        await eventually(deployment.nobody_connected, "the person to have left")
        assert (await agent.resume(qid, 1, secrets[2])).status_code == 202

    hooks = await _arrived(deployment.http["hook"], sid, trigger="resumed")
    resumed = [json.loads(r.body) for r in hooks if b'"resumed"' in r.body]
    assert resumed[0]["question"] == {"label": "Checks", "prompt": "Which checks must pass first?"}
    await _arrived(deployment.http["slack"], sid, trigger="answered your question")
    await _arrived(deployment.http["ntfy"], sid, trigger="resumed")
    await _mails(deployment, sid)

    everything = [
        r.body.decode() + str(r.headers) for name in ("hook", "slack", "ntfy") for r in deployment.http[name].about(sid)
    ]
    everything += [m.as_string() + str(m.get_payload(decode=True)) for _, _, m in deployment.smtp.about(sid)]
    assert len(everything) >= 4
    for text in everything:
        for secret in secrets:
            assert secret not in text
        assert "selectedOptionIds" not in text and "answers" not in text


# --- helpers ------------------------------------------------------------------------------


async def _arrived(receiver: Any, sid: str, trigger: str | None = None, timeout: float = 20.0) -> list[Received]:
    """The requests about ``sid`` once one has arrived (one that mentions ``trigger``, when given)."""

    def found() -> list[Received] | None:
        mine: list[Received] = receiver.about(sid)
        if trigger is None:
            return mine or None
        return mine if any(trigger.encode() in r.body or trigger in str(r.headers) for r in mine) else None

    return await eventually(found, f"a notification about {sid} ({trigger or 'any'})", timeout=timeout)


async def _mails(deployment: NotifyDeployment, sid: str) -> list[Any]:
    return await eventually(lambda: deployment.smtp.about(sid) or None, f"a mail about {sid}", timeout=20)
