"""A stand-in identity provider: RSA and EC signing keys made in the test (``cryptography``),
their JWKS served over HTTP on 127.0.0.1 from a thread, and tokens signed with them.

    with IdentityProvider() as idp:
        key = idp.add_key("rsa")                       # published at idp.jwks_url
        token = idp.sign(key, sid="alice:*", role="client", sub="alice")

``publish`` replaces the published keys (a rotation), ``fetches`` counts the JWKS requests
the provider has served; ``delay`` slows each down, ``down`` answers them 503.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.example.test/"
AUDIENCE = "qbroker"


@dataclass
class SigningKey:
    kid: str
    alg: str  # RS256 or ES256
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def jwk(self) -> dict[str, Any]:
        public_key = self.private.public_key()
        if isinstance(public_key, rsa.RSAPublicKey):
            text = RSAAlgorithm.to_jwk(public_key)
        else:
            text = ECAlgorithm.to_jwk(public_key)
        public: dict[str, Any] = json.loads(text)
        return {**public, "kid": self.kid, "alg": self.alg, "use": "sig"}


def new_key(kind: str, kid: str | None = None) -> SigningKey:
    """A fresh ``rsa`` (RS256, 2048 bits) or ``ec`` (ES256, P-256) signing key."""
    if kind == "rsa":
        return SigningKey(kid or f"rsa-{uuid.uuid4().hex[:8]}", "RS256", rsa.generate_private_key(65537, 2048))
    return SigningKey(kid or f"ec-{uuid.uuid4().hex[:8]}", "ES256", ec.generate_private_key(ec.SECP256R1()))


class IdentityProvider:
    def __init__(self, issuer: str = ISSUER, audience: str = AUDIENCE) -> None:
        self.issuer = issuer
        self.audience = audience
        self._published: list[SigningKey] = []
        self._lock = threading.Lock()
        self.fetches = 0
        self.delay = 0.0  # seconds each JWKS request takes (a slow provider)
        self.down = False  # answer 503 (a provider that is down)
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                with provider._lock:
                    provider.fetches += 1
                    body = json.dumps({"keys": [key.jwk() for key in provider._published]}).encode()
                time.sleep(provider.delay)
                if provider.down:
                    self.send_error(503)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), name="test-idp", daemon=True)

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"

    def settings(self, **more: object) -> dict[str, object]:
        """The broker's QBROKER_* settings for this provider (as ``broker(...)`` takes them)."""
        return {"jwks_url": self.jwks_url, "jwt_issuer": self.issuer, "jwt_audience": self.audience, **more}

    def add_key(self, kind: str) -> SigningKey:
        key = new_key(kind)
        with self._lock:
            self._published.append(key)
        return key

    def publish(self, *keys: SigningKey) -> None:
        with self._lock:
            self._published = list(keys)

    def sign(
        self,
        key: SigningKey,
        *,
        ttl: float | None = 600,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A token signed by ``key``: iss, aud, iat and exp (unless given otherwise or None)
        and ``claims`` (``sid``: the scope, as the claim ``qbroker_sid``); a claim given as None
        is left out."""
        now = time.time()
        body: dict[str, Any] = {"iss": self.issuer, "aud": self.audience, "iat": int(now)}
        if ttl is not None:
            body["exp"] = int(now + ttl)
        if "sid" in claims:  # (the scope, in the claim a broker reads by default)
            claims["qbroker_sid"] = claims.pop("sid")
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key.private, algorithm=key.alg, headers={"kid": key.kid, **(headers or {})})

    def __enter__(self) -> IdentityProvider:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
