"""The broker's VAPID keys (RFC 8292): how push services know the pushes come from us.

A browser subscribes with the broker's public key (``GET /v1/push/key``, the
``applicationServerKey``); the push service then takes only pushes signed with the matching
private key. The key is ``QBROKER_VAPID_PRIVATE_KEY``, else one generated once and kept in
the data dir (``vapid-private-key``, 0600) like the token secret: brokers that share a data
dir share it, and brokers on several hosts must be given the same one (a subscription made
with one broker's key cannot be pushed to with another's). Signing is ``py_vapid``'s.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02, VapidException

from broker.runtime.config import Config

DEFAULT_SUBJECT = "mailto:qbroker@localhost"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def generate_private_key() -> str:
    """A new P-256 private key, base64url of its 32 bytes (the form the setting takes)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _b64url(key.private_numbers().private_value.to_bytes(32, "big"))


@dataclass(frozen=True)
class VapidKeys:
    """``signer`` signs the JWTs; ``public_key``: the uncompressed point, base64url (the
    ``applicationServerKey`` a page subscribes with); ``subject``: the JWT's ``sub``."""

    signer: Vapid02
    public_key: str
    subject: str

    def headers(self, endpoint: str, now: float, lifetime: float = 12 * 3600) -> dict[str, str]:
        """``Authorization: vapid t=<JWT>, k=<public key>`` for a push to ``endpoint``: the
        JWT's audience is the push service's origin, it expires in ``lifetime`` (at most 24 h)."""
        parts = urlsplit(endpoint)
        claims = {"aud": f"{parts.scheme}://{parts.netloc}", "exp": int(now + lifetime), "sub": self.subject}
        headers: dict[str, str] = self.signer.sign(claims)
        return headers


def load_private_key(text: str) -> Vapid02:
    """A signer from the setting's text (base64url raw, or PEM); ``SystemExit`` in one line."""
    try:
        if text.startswith("-----BEGIN"):
            return Vapid02.from_pem(text.encode())
        return Vapid02.from_raw(text.rstrip("=").encode())
    except Exception:
        raise SystemExit("qbroker: QBROKER_VAPID_PRIVATE_KEY is not a P-256 private key") from None


def vapid_keys(config: Config) -> VapidKeys:
    """The broker's keys: configured, or kept in the data dir (generated on first use)."""
    signer = load_private_key(config.vapid_key_or_file(generate_private_key))
    if not isinstance(signer.private_key.curve, ec.SECP256R1):
        raise SystemExit("qbroker: QBROKER_VAPID_PRIVATE_KEY must be a key on the P-256 curve")
    public_point = signer.public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    subject = config.vapid_subject
    if subject is None:  # the public page's origin (no port nor path: py_vapid wants a bare host)
        public = urlsplit(config.public_url or "")
        subject = f"https://{public.hostname}" if public.scheme == "https" and public.hostname else DEFAULT_SUBJECT
    keys = VapidKeys(signer, _b64url(public_point), subject)
    try:
        keys.headers("https://push.example.com", 0.0)  # signs once: a subject it refuses stops serve here
    except VapidException:
        raise SystemExit(
            f"qbroker: QBROKER_VAPID_SUBJECT {subject!r} is refused by py_vapid:"
            " use mailto:you@example.com or https://host (no port nor path)"
        ) from None
    return keys
