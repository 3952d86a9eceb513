"""Tokens: JWTs with ``sid`` (a scope), ``role``, and optional ``exp``, ``sub``, ``jti``, ``iat``.

- ``sid``: a session id, a prefix pattern (``alice:*``) or ``*`` (broker/core/scopes.py);
- ``role``: ``agent`` (the HTTP agent API), ``client`` (the websocket) or ``admin`` (the
  operator endpoints, and nothing else; its ``sid`` is ``*``);
- ``sub``: who holds it, a person or an agent's name (1-128 characters), shown as who
  asked and who answered; ``jti``: the token's id, for revocation; ``iat``: when it was issued.

``mint_token`` signs HS256 tokens with the broker's secret (``qbroker token``,
broker/tokens/command.py); ``verify_token`` checks one against the secret alone. A running
broker checks every token through ``broker.tokens.checks.Tokens``, which adds keys from an
identity provider's JWKS and the revocations kept in the store.
"""

from __future__ import annotations

import functools
import math
import re
import time
import uuid
import warnings
from typing import Any, Final, Literal

import jwt
import msgspec

from broker.core.errors import BrokerError
from broker.core.scopes import ANY, SCOPE_RULE, covers, is_scope
from broker.core.wire import is_session_id

Role = Literal["agent", "client", "admin"]
ROLES: tuple[Role, ...] = ("agent", "client", "admin")
ANY_SESSION: Final = ANY
MAX_SUB: Final = 128
MAX_JTI: Final = 256
# A sub is shown to people ("answered by alice") and written to logs: no control characters.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# HS256 wants a key of at least 32 bytes (RFC 7518, 3.2). A shorter secret still works, and
# ``serve`` and ``token`` say so once, in their own words: PyJWT's warning (with its file
# and line) would otherwise come with every token minted.
MIN_SECRET_BYTES = 32
warnings.filterwarnings("ignore", message=r"The HMAC key is \d+ bytes long")  # (PyJWT >= 2.10)
# ``qbroker token --ttl``: a token that nobody asked to keep forever expires after 30 days.
DEFAULT_TTL = "30d"
MAX_TTL = 100 * 365 * 86400.0
_TTL_RE = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([smhd]?)")  # ASCII digits only
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def weak_secret(secret: str) -> str | None:
    """Why ``secret`` is too short to sign HS256 tokens safely, or None."""
    size = len(secret.encode())
    if size >= MIN_SECRET_BYTES:
        return None
    return (
        f"the token secret is {size} bytes; use at least {MIN_SECRET_BYTES} (for example the output of"
        " python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )


def sub_problem(sub: object) -> str | None:
    """What is wrong with ``sub`` as a token holder's name, or None when it is one."""
    if not isinstance(sub, str) or not 1 <= len(sub) <= MAX_SUB:
        return f"sub must be 1-{MAX_SUB} characters"
    if _CONTROL.search(sub) is not None:
        return "sub must not contain control characters"
    return None


def jti_problem(jti: object) -> str | None:
    """What is wrong with ``jti`` as a token id, or None when it is one."""
    if not isinstance(jti, str) or not 1 <= len(jti) <= MAX_JTI or _CONTROL.search(jti) is not None:
        return f"jti must be 1-{MAX_JTI} characters, without control characters"
    return None


class Claims(msgspec.Struct, frozen=True):
    """A verified token's claims (``exp`` and ``iat`` in Unix seconds)."""

    sid: str
    role: Role
    exp: float | None
    sub: str | None = None
    jti: str | None = None
    iat: float | None = None

    def allows(self, session_id: str) -> bool:
        """Whether the token may act on session ``session_id`` (a valid id): its scope covers
        it. An admin token acts on no session."""
        return self.role != "admin" and covers(self.sid, session_id)


class ClaimNames(msgspec.Struct, frozen=True):
    """Which claims carry the scope, the role and the holder: qbroker's own names, or an
    identity provider's (``QBROKER_JWT_SID_CLAIM`` and its siblings, broker/runtime/config.py)."""

    sid: str = "sid"
    role: str = "role"
    sub: str = "sub"


STANDARD_NAMES: Final = ClaimNames()


def read_claims(payload: dict[str, Any], names: ClaimNames = STANDARD_NAMES) -> Claims:
    """The claims of a correctly signed token's payload, checked; raises ``unauthorized``
    naming what is wrong (the expiry is the caller's to check: it changes with the clock)."""
    sid, role, exp = payload.get(names.sid), payload.get(names.role), payload.get("exp")
    sub, jti, iat = payload.get(names.sub), payload.get("jti"), payload.get("iat")
    if isinstance(role, list):  # an identity provider's list of roles (app roles, groups)
        ours = [each for each in role if each in ROLES]
        role = ours[0] if len(ours) == 1 else None
    problem: str | None = None
    if not isinstance(sid, str) or not is_scope(sid):
        problem = f"{names.sid} must be {SCOPE_RULE}"
    elif role not in ROLES:
        problem = f"{names.role} must be one of {', '.join(ROLES)} (or a list holding exactly one of them)"
    elif role == "admin" and sid != ANY_SESSION:
        problem = f"an admin token's {names.sid} must be *"
    elif not _number_or_none(exp):
        problem = "exp must be a number"
    elif not _number_or_none(iat):
        problem = "iat must be a number"
    elif sub is not None and (problem := sub_problem(sub)) is not None:
        problem = problem.replace("sub", names.sub, 1)
    elif jti is not None:
        problem = jti_problem(jti)
    if problem is not None:
        raise BrokerError("unauthorized", f"invalid token claims: {problem}")
    return Claims(
        sid=sid,  # type: ignore[arg-type]  # (checked above)
        role=role,  # type: ignore[arg-type]
        exp=None if exp is None else float(exp),
        sub=sub,
        jti=jti,
        iat=None if iat is None else float(iat),
    )


def _number_or_none(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def valid_session_id(sid: str) -> bool:
    return is_session_id(sid)


def mint_token(secret: str, sid: str, role: Role, ttl: float | None = None, *, sub: str | None = None) -> str:
    """An HS256 token for scope ``sid`` and ``role``, with a fresh ``jti`` and ``iat``, held
    by ``sub`` (optional), valid ``ttl`` seconds (None: no expiry). Raises ``ValueError``
    saying what is wrong."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if not is_scope(sid):
        raise ValueError(f"session must be {SCOPE_RULE}; a session id is 1-128 characters of [A-Za-z0-9._:-]")
    if role == "admin" and sid != ANY_SESSION:
        raise ValueError("an admin token is for the whole service: its session must be *")
    if sub is not None and (problem := sub_problem(sub)) is not None:
        raise ValueError(problem)
    now = time.time()
    # iat with its fraction (a NumericDate may have one): a token minted just after a
    # revocation of its holder ("every token issued before now") is not issued before it.
    claims: dict[str, object] = {"sid": sid, "role": role, "iat": now}
    claims["jti"] = uuid.uuid4().hex
    if sub is not None:
        claims["sub"] = sub
    if ttl is not None:
        claims["exp"] = math.ceil(now + ttl)  # rounded up: never expired when minted
    return jwt.encode(claims, secret, algorithm="HS256")


def parse_ttl(text: str) -> float | None:
    """Seconds for a ``--ttl`` value: a number of seconds, or one with a unit ``s``, ``m``,
    ``h`` or ``d`` (``90m``, ``12h``, ``1.5h``, ``30d``); None for ``never`` (no expiry).
    Raises ``ValueError`` saying what ``--ttl`` must be, to follow the flag's name."""
    word = text.strip()
    if word.lower() == "never":
        return None
    match = _TTL_RE.fullmatch(word)
    if match is None:
        raise ValueError(
            f"must be a number of seconds, or one with s, m, h or d (as in 90m, 12h, 30d), or never; got {text!r}"
        )
    sign, number, unit = match.groups()
    seconds = float(number) * _TTL_UNITS[unit]
    if not math.isfinite(seconds) or seconds > MAX_TTL:
        raise ValueError(f"must be at most 100 years (use never for no expiry); got {text!r}")
    if sign == "-" or not seconds > 0:
        raise ValueError(f"must be more than 0 (a token would be born expired), or never; got {text!r}")
    return seconds


def hs256_claims(secret: str, token: str) -> Claims:
    """The checked claims of a token signed with ``secret``; raises ``unauthorized``."""
    try:
        payload: dict[str, Any] = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            options={"require": ["sid", "role"], "verify_exp": False},
        )
    except jwt.PyJWTError:
        raise BrokerError("unauthorized", "invalid token") from None
    return read_claims(payload)


# An agent presents the same token on every call, so its HMAC check runs once per token
# (expiry and revocation are still checked on every use; failures raise and are not
# cached). A client presents its token once per connection: caching those would only hold memory.
cached_hs256_claims = functools.lru_cache(maxsize=4096)(hs256_claims)


def check_use(claims: Claims, role: Role | None, now: float) -> Claims:
    """``claims`` if the token is unexpired and of ``role`` (None: any); raises ``unauthorized``."""
    if claims.exp is not None and now >= claims.exp:
        raise BrokerError("unauthorized", "token expired")
    if role is not None and claims.role != role:
        raise BrokerError("unauthorized", f"{_a(claims.role)} {claims.role} token cannot be used by {_a(role)} {role}")
    return claims


def verify_token(secret: str, token: str, *, role: Role | None) -> Claims:
    """Check signature (HS256 with ``secret``), claims, expiry and role (None: any). Raises
    ``unauthorized`` (401 / close 4401). Revocations and JWKS keys are ``Tokens``'s."""
    if not isinstance(token, str) or not token:
        raise BrokerError("unauthorized", "missing token")
    claims = cached_hs256_claims(secret, token) if role == "agent" else hs256_claims(secret, token)
    return check_use(claims, role, time.time())


def _a(role: str) -> str:
    return "an" if role[0] in "aeiou" else "a"
