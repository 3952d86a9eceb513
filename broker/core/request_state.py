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
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Final

import msgspec

PREFIX: Final = "qb1."
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


_encode: Final = msgspec.json.Encoder().encode
_decode: Final = msgspec.json.Decoder(HostAsk).decode


def key_from_secret(secret: str) -> bytes:
    """The request states' key: the broker secret, through HMAC with a label of its own."""
    return hmac.new(secret.encode(), _KEY_LABEL, hashlib.sha256).digest()


def seal(key: bytes, ask: HostAsk) -> str:
    payload = _b64u(_encode(ask))
    return f"{PREFIX}{payload}.{_b64u(_mac(key, payload))}"


def unseal(key: bytes, state: str, *, session_id: str, sub: str | None, now: float) -> HostAsk:
    """The ``HostAsk`` a state binds, if this broker sealed it unchanged, it has not
    expired, and it was made for this session and holder; else ``InvalidRequestState``."""
    if not isinstance(state, str) or not state.startswith(PREFIX) or state.count(".") != 2:
        raise InvalidRequestState("malformed")
    payload, _, mac = state[len(PREFIX) :].partition(".")
    try:
        given = _b64u_decode(mac)
    except ValueError:
        raise InvalidRequestState("malformed") from None
    if not hmac.compare_digest(given, _mac(key, payload)):
        raise InvalidRequestState("signature")
    try:
        ask = _decode(_b64u_decode(payload))
    except (ValueError, msgspec.DecodeError):
        raise InvalidRequestState("malformed") from None
    if not now < ask.expires_at:
        raise InvalidRequestState("expired")
    if ask.session_id != session_id or ask.sub != sub:
        raise InvalidRequestState("another session or holder")
    return ask


def _mac(key: bytes, payload: str) -> bytes:
    return hmac.new(key, PREFIX.encode() + payload.encode(), hashlib.sha256).digest()


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64u_decode(text: str) -> bytes:
    """Strict: only the canonical unpadded encoding decodes (no two spellings of one state)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64u(raw) != text:
        raise ValueError("non-canonical base64url")
    return raw
