"""A fake browser push service on 127.0.0.1, and devices whose keys the test made.

It does what a real push service does with a push before passing it on, and what the
browser then does with it:

- the VAPID JWT (``Authorization: vapid t=<JWT>, k=<key>``): signed (ES256) by the key in
  ``k``, which must be the broker's public key; ``aud`` this service's origin; ``exp`` in
  the future and at most 24 h away; ``sub`` a mailto: or https: contact (RFC 8292);
- the body, decrypted with the device's private key and auth secret (``http_ece``,
  aes128gcm, RFC 8291) and parsed as JSON.

A push that passes is recorded with its decrypted payload and answered 201; one that does
not is recorded with the reason and answered 400/401/403. ``statuses[device]`` scripts the
answers of one device's endpoint (404, 410: the subscription is gone; 503: try again).

    with push_service() as service:
        phone = service.device("phone")           # its keys; phone.subscription() to post
        ...
        push = service.wait_for(1)[0]              # deadline: fails with what it got
        assert push.payload["session"] == sid
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
import jwt
import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.helpers.waiting import wait_until


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Device:
    """A browser's subscription: its endpoint on the fake service and the keys the test made."""

    name: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        point = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(point)

    def subscription(self) -> dict[str, Any]:
        """What ``PushSubscription.toJSON()`` gives the page."""
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
        }


@dataclass(frozen=True)
class Push:
    device: str
    headers: dict[str, str]
    claims: dict[str, Any] | None  # the verified VAPID JWT's claims
    vapid_key: str | None  # the JWT's signing key, as ``k`` gave it
    payload: Any  # the decrypted JSON (None when it could not be read)
    status: int  # what the service answered
    problem: str | None  # why it was refused (None: accepted or scripted)
    at: float


@dataclass
class PushService:
    server: ThreadingHTTPServer
    devices: dict[str, Device] = field(default_factory=dict)
    statuses: dict[str, list[int]] = field(default_factory=dict)
    pushes: list[Push] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def device(self, name: str, *statuses: int) -> Device:
        """A new device subscribed at ``/push/<name>``; ``statuses``: its endpoint's answers
        in order (then 201 for a push that passes the checks)."""
        made = Device(name, f"{self.origin}/push/{name}-{os.urandom(4).hex()}")
        with self.lock:
            self.devices[made.endpoint.rsplit("/", 1)[1]] = made
            self.statuses[made.endpoint.rsplit("/", 1)[1]] = list(statuses)
        return made

    def wait_for(self, count: int, timeout: float = 20.0, device: str | None = None) -> list[Push]:
        def arrived() -> list[Push]:
            with self.lock:
                return [p for p in self.pushes if device is None or p.device == device]

        wait_until(lambda: len(arrived()) >= count, timeout=timeout, what=f"{count} push(es) at {self.origin}")
        return arrived()[:count]

    def to(self, device: str) -> list[Push]:
        with self.lock:
            return [p for p in self.pushes if p.device == device]

    def receive(self, path: str, headers: dict[str, str], body: bytes) -> Push:
        key = path.rsplit("/", 1)[-1]
        with self.lock:
            device = self.devices.get(key)
            scripted = self.statuses.get(key, [])
            status = scripted.pop(0) if scripted else None
        name = device.name if device else key
        lower = {k.lower(): v for k, v in headers.items()}
        claims, vapid_key, problem = self._check_vapid(lower.get("authorization", ""))
        payload = None
        if device is None:
            problem, status = "no such subscription", 404
        elif problem is None:
            try:
                if lower.get("content-encoding") != "aes128gcm":
                    raise ValueError(f"Content-Encoding {lower.get('content-encoding')!r}")
                plain = http_ece.decrypt(
                    body, private_key=device.private_key, auth_secret=device.auth, version="aes128gcm"
                )
                payload = orjson.loads(plain)
            except Exception as exc:  # what a browser would drop
                problem = f"cannot decrypt: {type(exc).__name__}: {exc}"
        if status is None:
            status = 201 if problem is None else (400 if problem.startswith("cannot decrypt") else 401)
        push = Push(name, headers, claims, vapid_key, payload, status, problem, time.time())
        with self.lock:
            self.pushes.append(push)
        return push

    def _check_vapid(self, authorization: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
        scheme, _, rest = authorization.partition(" ")
        if scheme.lower() != "vapid":
            return None, None, f"Authorization is not vapid: {authorization[:20]!r}"
        fields = dict(part.strip().split("=", 1) for part in rest.split(",") if "=" in part)
        token, key = fields.get("t"), fields.get("k")
        if not token or not key:
            return None, None, "Authorization lacks t= or k="
        try:
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
            claims: dict[str, Any] = jwt.decode(
                token, public, algorithms=["ES256"], audience=self.origin, options={"require": ["exp", "aud", "sub"]}
            )
        except Exception as exc:
            return None, key, f"bad VAPID JWT: {type(exc).__name__}: {exc}"
        if claims["exp"] > time.time() + 24 * 3600:
            return claims, key, "VAPID exp more than 24 h away"
        if not str(claims["sub"]).startswith(("mailto:", "https://")):
            return claims, key, f"VAPID sub {claims['sub']!r} is no mailto: or https: contact"
        return claims, key, None


def _handler(holder: list[PushService]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            push = holder[0].receive(self.path, dict(self.headers.items()), body)
            self.send_response(push.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def push_service() -> Iterator[PushService]:
    holder: list[PushService] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    server.daemon_threads = True
    service = PushService(server)
    holder.append(service)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
