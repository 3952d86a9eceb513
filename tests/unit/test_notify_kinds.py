"""Each kind's rendering and its reading of a receiver's answer, without a broker."""

from __future__ import annotations

import asyncio
import email.header
import hashlib
import hmac
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from broker.notify import ntfy, slack
from broker.notify.channel import FailedDelivery, RetryableDelivery
from broker.notify.config import Route
from broker.notify.email import EmailChannel, mail
from broker.notify.notification import Notification, QuestionText
from broker.notify.posting import post
from broker.notify.webhook import WebhookChannel, signature
from tests.helpers.receivers import smtp_receiver

NOTE = Notification(
    "8d0c3f0e-1111-5222-8333-444455556666",
    "started",
    "team-a:build",
    "q-1",
    "build-bot",
    3,
    QuestionText("Target", "Where to?"),
    "https://q.example/#session=team-a:build",
    1_700_000_000.7,
)


def route(kind: str, **options: Any) -> Route:
    return Route(1, "*", kind, options=options)


# --- webhook ----------------------------------------------------------------------------


def test_the_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() -> None:
    body = b'{"a":1}'
    expected = hmac.new(b"whsec", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature("whsec", 1_700_000_000, body) == f"t=1700000000,v1={expected}"


async def test_the_webhook_posts_the_payload_signed_at_the_attempt_s_time() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        channel = WebhookChannel(route("webhook", url="https://h.test/x", secret="whsec"), http, clock=lambda: 1234.9)
        await channel.deliver(NOTE)
    (request,) = seen
    assert request.headers["X-QBroker-Signature"] == signature("whsec", 1234, request.content)
    assert request.headers["Idempotency-Key"] == NOTE.id
    assert request.content.startswith(b'{"type":"questionnaire.waiting","version":1,')


def test_the_payload_says_at_in_whole_seconds_and_question_null_when_left_out() -> None:
    payload = Notification(**{**{f: getattr(NOTE, f) for f in NOTE.__struct_fields__}, "question": None}).payload()
    assert payload["at"] == 1_700_000_000 and payload["question"] is None


# --- what an HTTP answer means ----------------------------------------------------------


def _answering(response: httpx.Response | Exception) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        if isinstance(response, Exception):
            raise response
        return response

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


@pytest.mark.parametrize("status", [200, 201, 202, 204])
async def test_a_2xx_is_delivered(status: int) -> None:
    async with _answering(httpx.Response(status)) as http:
        await post(http, "https://h.test/x", b"{}", {})


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(500),
        httpx.Response(503),
        httpx.Response(429),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
    ids=["500", "503", "429", "refused", "timeout"],
)
async def test_timeouts_refusals_5xx_and_429_are_worth_another_attempt(response: httpx.Response | Exception) -> None:
    async with _answering(response) as http:
        with pytest.raises(RetryableDelivery) as raised:
            await post(http, "https://h.test/secret-path", b"{}", {})
    assert "secret-path" not in raised.value.reason


async def test_a_429_s_retry_after_is_passed_on() -> None:
    async with _answering(httpx.Response(429, headers={"Retry-After": "7"})) as http:
        with pytest.raises(RetryableDelivery) as raised:
            await post(http, "https://h.test/x", b"{}", {})
    assert raised.value.retry_after == 7.0


@pytest.mark.parametrize("status", [301, 400, 401, 403, 404, 410, 422])
async def test_any_other_answer_is_given_up(status: int) -> None:
    async with _answering(httpx.Response(status)) as http:
        with pytest.raises(FailedDelivery, match=f"HTTP {status}"):
            await post(http, "https://h.test/x", b"{}", {})


# --- slack ------------------------------------------------------------------------------


def test_slack_escapes_mrkdwn_so_a_prompt_cannot_ping_or_forge_links() -> None:
    note = Notification(
        **{
            **{f: getattr(NOTE, f) for f in NOTE.__struct_fields__},
            "question": QuestionText("<!channel> & co", "see <https://evil.test|here>"),
        }
    )
    text = slack.message(note)["blocks"][1]["text"]["text"]
    assert text == "*&lt;!channel&gt; &amp; co*\nsee &lt;https://evil.test|here&gt;"


def test_slack_keeps_its_length_limits() -> None:
    note = Notification(
        **{
            **{f: getattr(NOTE, f) for f in NOTE.__struct_fields__},
            "asked_by": "a" * 400,
            "question": QuestionText("L" * 200, "P" * 2000 + "&" * 1000),
        }
    )
    blocks = slack.message(note)["blocks"]
    assert len(blocks[0]["text"]["text"]) == slack.HEADER_LIMIT
    assert len(blocks[1]["text"]["text"]) == slack.TEXT_LIMIT


# --- ntfy -------------------------------------------------------------------------------


def test_a_title_that_is_not_ascii_is_rfc_2047_encoded() -> None:
    encoded = ntfy.header_text("Équipe 🚀\nwartet")
    assert encoded.isascii() and "\n" not in encoded
    ((raw, charset),) = email.header.decode_header(encoded)
    assert isinstance(raw, bytes) and raw.decode(charset or "ascii") == "Équipe 🚀 wartet"
    assert ntfy.header_text("plain") == "plain"


def test_ntfy_defaults_to_high_priority_and_the_question_tag_without_authorization() -> None:
    headers = ntfy.headers(route("ntfy", url="https://ntfy.test/t"), NOTE)
    assert headers["Priority"] == "4" and headers["Tags"] == "question,started"
    assert "Authorization" not in headers


def test_ntfy_without_the_prompt_says_only_the_count_and_the_session() -> None:
    note = Notification(**{**{f: getattr(NOTE, f) for f in NOTE.__struct_fields__}, "question": None})
    assert ntfy.body(note) == "3 questions in session team-a:build"


# --- email ------------------------------------------------------------------------------


def test_the_mail_carries_the_notification_id_as_its_message_id() -> None:
    message = mail(route("email", url="smtp://m.test", to=["a@b.test"], **{"from": "q@b.test"}), NOTE)
    assert message["Message-ID"] == f"<{NOTE.id}@qbroker>"
    assert message["Subject"] == "[qbroker] build-bot has 3 questions for you"


@pytest.fixture
def refusing_smtp() -> Iterator[tuple[str, list[str]]]:
    """A local aiosmtpd that answers RCPT with the codes the test puts in the list."""
    from aiosmtpd.controller import Controller

    from tests.helpers.processes import free_port

    codes: list[str] = []

    class Refuse:
        async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
            if codes:
                return codes.pop(0)
            envelope.rcpt_tos.append(address)
            return "250 OK"

    port = free_port()
    controller = Controller(Refuse(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}", codes
    finally:
        controller.stop()


async def test_a_5xx_from_the_mail_server_is_given_up_a_4xx_retried(refusing_smtp: tuple[str, list[str]]) -> None:
    url, codes = refusing_smtp
    channel = EmailChannel(route("email", url=url, to=["a@b.test"], **{"from": "q@b.test"}), timeout=5)
    codes.append("550 no such user")
    with pytest.raises(FailedDelivery, match="550"):
        await channel.deliver(NOTE)
    codes.append("451 try later")
    with pytest.raises(RetryableDelivery, match="451"):
        await channel.deliver(NOTE)
    await channel.deliver(NOTE)  # accepted


async def test_a_mail_server_that_is_down_is_worth_another_attempt() -> None:
    from tests.helpers.processes import free_port

    channel = EmailChannel(
        route("email", url=f"smtp://127.0.0.1:{free_port()}", to=["a@b.test"], **{"from": "q@b.test"}), timeout=2
    )
    with pytest.raises(RetryableDelivery):
        await channel.deliver(NOTE)
    assert await channel.check() is not None  # and the start-up check warns


async def test_mail_goes_through_a_local_aiosmtpd() -> None:
    with smtp_receiver() as smtp:
        channel = EmailChannel(route("email", url=smtp.url, to=["a@b.test"], **{"from": "q@b.test"}), timeout=5)
        await channel.deliver(NOTE)
        ((sender, recipients, message),) = smtp.mails
    assert (sender, recipients, message["Message-ID"]) == ("q@b.test", ["a@b.test"], f"<{NOTE.id}@qbroker>")


@pytest.fixture
async def cleartext_smtp() -> AsyncIterator[tuple[str, list[bytes]]]:
    """An SMTP server on 127.0.0.1 that offers AUTH but no STARTTLS (as one whose STARTTLS
    an on-path attacker stripped looks), accepts everything, and keeps every line it reads."""
    lines: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 mail.test ESMTP\r\n")
        in_data = False
        while line := await reader.readline():
            lines.append(line)
            if in_data:
                if line == b".\r\n":
                    in_data = False
                    writer.write(b"250 queued\r\n")
                continue
            verb = line[:4].upper()
            if verb == b"EHLO":
                writer.write(b"250-mail.test\r\n250 AUTH PLAIN LOGIN\r\n")
            elif verb == b"AUTH":
                writer.write(b"235 ok\r\n")
            elif verb == b"DATA":
                in_data = True
                writer.write(b"354 go on\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                break
            else:
                writer.write(b"250 ok\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", lines
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("credentials", "link_token"), [("bot:secret-password@", False), ("", True)], ids=["credentials", "link tokens"]
)
async def test_without_starttls_mail_with_credentials_or_link_tokens_is_given_up_unsent(
    cleartext_smtp: tuple[str, list[bytes]], credentials: str, link_token: bool
) -> None:
    address, lines = cleartext_smtp
    options = {"url": f"smtp://{credentials}{address}", "to": ["a@b.test"], "from": "q@b.test"}
    channel = EmailChannel(Route(1, "*", "email", link_token=link_token, options=options), timeout=5)
    with pytest.raises(FailedDelivery, match="offers no STARTTLS"):
        await channel.deliver(NOTE)
    said = b"".join(lines)
    assert b"AUTH" not in said.upper() and b"DATA" not in said.upper() and b"MAIL FROM" not in said.upper()


async def test_without_credentials_or_link_tokens_mail_may_go_in_clear(
    cleartext_smtp: tuple[str, list[bytes]],
) -> None:
    address, lines = cleartext_smtp
    channel = EmailChannel(route("email", url=f"smtp://{address}", to=["a@b.test"], **{"from": "q@b.test"}), timeout=5)
    await channel.deliver(NOTE)
    assert any(line.upper().startswith(b"DATA") for line in lines)
