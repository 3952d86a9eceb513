"""The ``email`` kind: a plain-text mail over SMTP, sent with ``aiosmtplib``.

``url`` names the server: ``smtp://[user:password@]host[:port]`` (port 25 unless given, 587
is usual) or ``smtps://...`` (TLS from the start, port 465 unless given). Over ``smtp://``
the mail goes after STARTTLS, with the server's certificate checked; without TLS only when
there is nothing an on-path attacker could use: a route with credentials or with link
tokens (``link_token``) gives up on a server that offers no STARTTLS. ``from`` and ``to``
(one address or a list) the envelope and headers; ``from`` and ``to`` (one address or a list) the envelope and headers;
``subject_prefix`` (default ``[qbroker]``) starts the subject. The Message-ID is made from
the notification's id, so a mail system can drop a repeat.

An SMTP reply in the 4xx range, a refused or dropped connection and a timeout are worth
another attempt; a 5xx (a recipient refused, authentication failed) is not.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate
from urllib.parse import unquote, urlsplit

import aiosmtplib

from broker.notify.channel import Channel, FailedDelivery, RetryableDelivery
from broker.notify.config import Route
from broker.notify.notification import Notification
from broker.notify.posting import reachable

DEFAULT_SUBJECT_PREFIX = "[qbroker]"
NO_STARTTLS = "the server offers no STARTTLS (TLS is required with credentials or link tokens)"


def mail(route: Route, note: Notification) -> EmailMessage:
    message = EmailMessage()
    prefix = str(route.options.get("subject_prefix", DEFAULT_SUBJECT_PREFIX))
    message["Subject"] = f"{prefix} {note.headline}"
    message["From"] = str(route.options["from"])
    message["To"] = ", ".join(route.options["to"])
    message["Date"] = formatdate(note.at)
    message["Message-ID"] = f"<{note.id}@qbroker>"
    lines = [note.headline + ".", ""]
    if note.question is not None:
        lines += [note.question.label, note.question.prompt, ""]
    lines += [f"Session: {note.session_id}", f"Questions: {note.questions}", "", f"Answer: {note.link}", ""]
    message.set_content("\n".join(lines))
    return message


class EmailChannel(Channel):
    kind = "email"

    def __init__(self, route: Route, timeout: float) -> None:
        super().__init__(route)
        self.timeout = timeout
        parts = urlsplit(route.url)
        self.tls = parts.scheme == "smtps"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (465 if self.tls else 25)
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        # A password or a token in a link must never cross the network in clear.
        self.requires_tls = self.username is not None or self.password is not None or bool(route.link_token)

    async def deliver(self, note: Notification) -> None:
        smtp = aiosmtplib.SMTP(
            hostname=self.host, port=self.port, use_tls=self.tls, start_tls=False, timeout=self.timeout
        )
        try:
            async with smtp:
                if not self.tls:
                    await smtp.ehlo()
                    if smtp.supports_extension("starttls"):
                        await smtp.starttls()
                    elif self.requires_tls:
                        raise FailedDelivery(
                            "the server offers no STARTTLS (TLS is required with credentials or link tokens)"
                        )
                if self.username is not None:
                    await smtp.login(self.username, self.password or "")
                await smtp.send_message(mail(self.route, note))
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = sorted({refusal.code for refusal in exc.recipients})
            reason = f"recipients refused (SMTP {', '.join(map(str, codes))})"
            if any(code < 500 for code in codes):
                raise RetryableDelivery(reason) from None
            raise FailedDelivery(reason) from None
        except aiosmtplib.SMTPResponseException as exc:
            if exc.code >= 500:
                raise FailedDelivery(f"SMTP {exc.code}") from None
            raise RetryableDelivery(f"SMTP {exc.code}") from None
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:  # connect, timeout, disconnect
            raise RetryableDelivery(f"cannot send ({type(exc).__name__})") from None

    async def check(self) -> str | None:
        return await reachable(self.route.url, min(self.timeout, 5.0))
