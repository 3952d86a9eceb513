"""The ``requestState`` of MCP's multi round-trip pattern, as the broker seals it. Pure.

When the broker puts a questionnaire into the host's own form, the tool call ends with the
form and a ``requestState``; the host repeats the call with the person's reply and that
state, possibly to another broker, possibly an hour later. The state says which form this
is: the session, the token's holder (``sub``), the questionnaire, its revision and step
when the form was made, and until when it holds. It is the broker's own, not the MCP SDK's
per-process default: authenticated with a key derived from the broker secret (HMAC-SHA256),
which every broker of a deployment shares, and valid for the questionnaire's whole life
(the store keeps a questionnaire ``QBROKER_RETENTION``; a person may take that long).

A state that was altered, has expired, or names another session or holder is refused
(``InvalidRequestState``, with a reason for the logs), before anything is stored. It is
signed, not encrypted: it holds ids and counters only, never an answer.

Format: ``qb1.<base64url of the JSON claims>.<base64url of the HMAC>``.

The same signature makes the ``Mcp-Session-Id`` of an older-protocol host's MCP session
(``StreamSession``, prefix ``qbs1.``): the session is the host's, not a broker's, so that
any broker serves any of its requests (``broker/remote_mcp/streams.py``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Final

import msgspec

PREFIX: Final = "qb1."
SESSION_PREFIX: Final = "qbs1."
# Keeps this key apart from every other use of the broker secret (tokens are signed with it).
_KEY_LABEL: Final = b"qbroker/mcp-request-state/v1"


class InvalidRequestState(Exception):
    """A ``requestState`` the broker will not take; the message is a reason for the logs."""


class HostAsk(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One form put to a host: what the ``requestState`` binds."""

    session_id: str
    sub: str | None
    questionnaire_id: str
    revision: int
    step: int
    first: int  # the index of the first question the form asks
    expires_at: float


class StreamSession(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An older-protocol host's MCP session: whose it is, and what its ``initialize`` said."""

    session_id: str
    sub: str | None
    protocol_version: str
    host_name: str


_encode: Final = msgspec.json.Encoder().encode
_decode: Final = msgspec.json.Decoder(HostAsk).decode
_decode_session: Final = msgspec.json.Decoder(StreamSession).decode


def key_from_secret(secret: str) -> bytes:
    """The request states' key: the broker secret, through HMAC with a label of its own."""
    return hmac.new(secret.encode(), _KEY_LABEL, hashlib.sha256).digest()


def seal(key: bytes, ask: HostAsk) -> str:
    return _signed(key, PREFIX, _encode(ask))


def unseal(key: bytes, state: str, *, session_id: str, sub: str | None, now: float) -> HostAsk:
    """The ``HostAsk`` a state binds, if this broker sealed it unchanged, it has not
    expired, and it was made for this session and holder; else ``InvalidRequestState``."""
    try:
        ask = _decode(_verified(key, PREFIX, state))
    except (ValueError, msgspec.DecodeError):
        raise InvalidRequestState("malformed") from None
    if not now < ask.expires_at:
        raise InvalidRequestState("expired")
    if ask.session_id != session_id or ask.sub != sub:
        raise InvalidRequestState("another session or holder")
    return ask


def seal_session(key: bytes, session: StreamSession) -> str:
    return _signed(key, SESSION_PREFIX, _encode(session))


def open_session(key: bytes, token: str, *, session_id: str, sub: str | None) -> StreamSession:
    """The ``StreamSession`` an ``Mcp-Session-Id`` names, if a broker of this deployment made
    it for this session and holder; else ``InvalidRequestState``."""
    try:
        session = _decode_session(_verified(key, SESSION_PREFIX, token))
    except (ValueError, msgspec.DecodeError):
        raise InvalidRequestState("malformed") from None
    if session.session_id != session_id or session.sub != sub:
        raise InvalidRequestState("another session or holder")
    return session


def _signed(key: bytes, prefix: str, claims: bytes) -> str:
    payload = _b64u(claims)
    return f"{prefix}{payload}.{_b64u(_mac(key, prefix, payload))}"


def _verified(key: bytes, prefix: str, token: object) -> bytes:
    """The claims of ``token`` when its signature is this key's (else ``InvalidRequestState``)."""
    if not isinstance(token, str) or not token.startswith(prefix) or token.count(".") != 2:
        raise InvalidRequestState("malformed")
    payload, _, mac = token[len(prefix) :].partition(".")
    try:
        given = _b64u_decode(mac)
    except ValueError:
        raise InvalidRequestState("malformed") from None
    if not hmac.compare_digest(given, _mac(key, prefix, payload)):
        raise InvalidRequestState("signature")
    try:
        return _b64u_decode(payload)
    except ValueError:
        raise InvalidRequestState("malformed") from None


def _mac(key: bytes, prefix: str, payload: str) -> bytes:
    return hmac.new(key, prefix.encode() + payload.encode(), hashlib.sha256).digest()


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64u_decode(text: str) -> bytes:
    """Strict: only the canonical unpadded encoding decodes (no two spellings of one state)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64u(raw) != text:
        raise ValueError("non-canonical base64url")
    return raw
