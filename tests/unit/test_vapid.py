"""The VAPID JWT the broker signs is one every push service takes, every time.

ES256 signs with a fresh random nonce, so about one signature in a hundred has an ``r`` or ``s``
under 2**248; its raw form must still be 32 + 32 bytes. py-vapid 1.7.0 dropped the leading
zero bytes there, and push services refused those pushes now and then (hence the floor of
1.7.1 in pyproject.toml). Enough signatures here that such a signer
fails every run in practice.
"""

from __future__ import annotations

import base64

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from broker.notify.vapid import VapidKeys, generate_private_key, load_private_key

SIGNATURES = (
    2000  # a signer that drops a leading zero byte (one signature in ~128) passes all of them once in ~10**7 runs
)


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_every_vapid_jwt_carries_a_full_64_byte_signature_that_verifies() -> None:
    signer = load_private_key(generate_private_key())
    point = signer.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    keys = VapidKeys(signer, base64.urlsafe_b64encode(point).rstrip(b"=").decode(), "mailto:ops@example.com")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    short = []
    for n in range(SIGNATURES):
        authorization = keys.headers("https://push.example.com/send/abc", 1_000_000.0 + n)["Authorization"]
        fields = dict(part.strip().split("=", 1) for part in authorization.split(" ", 1)[1].split(","))
        assert _unb64url(fields["k"]) == point
        token = fields["t"]
        if len(_unb64url(token.rsplit(".", 1)[1])) != 64:
            short.append(n)
            continue
        claims = jwt.decode(
            token, public, algorithms=["ES256"], audience="https://push.example.com", options={"verify_exp": False}
        )
        assert claims == {
            "aud": "https://push.example.com",
            "exp": 1_000_000 + n + 12 * 3600,
            "sub": "mailto:ops@example.com",
        }
    assert short == [], f"{len(short)} of {SIGNATURES} signatures were not 64 bytes"
