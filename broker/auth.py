"""Tokens: HS256 JWTs with ``sid`` (a session id or ``*``), ``role`` and optional ``exp``.

Agents present theirs as ``Authorization: Bearer``; clients in their ``hello`` frame.
``qbroker token`` mints one from the command line (valid 30 days unless ``--ttl`` says otherwise).
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import sys
import time
import warnings
from typing import Any, Literal

import jwt
import msgspec

from broker.core.errors import BrokerError
from broker.core.wire import SESSION_ID_RULE, is_session_id

Role = Literal["agent", "client"]
ROLES: tuple[Role, ...] = ("agent", "client")
ANY_SESSION = "*"
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
    """A warning when ``secret`` is too short to sign HS256 tokens safely, else None."""
    size = len(secret.encode())
    if size >= MIN_SECRET_BYTES:
        return None
    return (
        f"the token secret is {size} bytes; use at least {MIN_SECRET_BYTES} (for example the output of"
        " python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )


class Claims(msgspec.Struct, frozen=True):
    sid: str
    role: Role
    exp: float | None

    def allows(self, session_id: str) -> bool:
        return self.sid == session_id or (self.sid == ANY_SESSION and self.role == "agent")


def valid_session_id(sid: str) -> bool:
    return is_session_id(sid)


def mint_token(secret: str, sid: str, role: Role, ttl: float | None = None) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    if sid != ANY_SESSION and not valid_session_id(sid):
        raise ValueError(f"session id must be {SESSION_ID_RULE}")
    if sid == ANY_SESSION and role != "agent":
        raise ValueError("only agent tokens may use the service-wide session '*'")
    claims: dict[str, object] = {"sid": sid, "role": role, "iat": int(time.time())}
    if ttl is not None:
        claims["exp"] = math.ceil(time.time() + ttl)  # rounded up: never expired when minted
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


def _decoded_claims(secret: str, token: str) -> dict[str, Any]:
    """The claims of a correctly signed token; raises ``jwt.PyJWTError`` otherwise."""
    claims: dict[str, Any] = jwt.decode(
        token,
        secret,
        algorithms=["HS256"],
        options={"require": ["sid", "role"], "verify_exp": False},
    )
    return claims


# An agent presents the same token on every call, so its HMAC check runs once per token
# (expiry is still checked on every use; failures raise and are not cached). A client
# presents its token once per connection: caching those would only hold memory.
_cached_claims = functools.lru_cache(maxsize=4096)(_decoded_claims)


def verify_token(secret: str, token: str, *, role: Role) -> Claims:
    """Check signature, expiry and role. Raises ``unauthorized`` (401 / close 4401)."""
    if not isinstance(token, str) or not token:
        raise BrokerError("unauthorized", "missing token")
    try:
        claims = _cached_claims(secret, token) if role == "agent" else _decoded_claims(secret, token)
    except jwt.PyJWTError:
        raise BrokerError("unauthorized", "invalid token") from None
    sid, token_role, exp = claims.get("sid"), claims.get("role"), claims.get("exp")
    if exp is not None and (not isinstance(exp, (int, float)) or isinstance(exp, bool)):
        raise BrokerError("unauthorized", "invalid token claims")
    if exp is not None and time.time() >= exp:
        raise BrokerError("unauthorized", "token expired")
    if not isinstance(sid, str) or token_role not in ROLES:
        raise BrokerError("unauthorized", "invalid token claims")
    if token_role != role:
        raise BrokerError("unauthorized", f"{_a(token_role)} {token_role} token cannot be used by {_a(role)} {role}")
    return Claims(sid=sid, role=token_role, exp=float(exp) if exp is not None else None)


# --- qbroker token ----------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", required=True, help="session id, or '*' for a service-wide agent token")
    parser.add_argument("--role", required=True, choices=ROLES, help="who will present the token")
    parser.add_argument(
        "--ttl",
        default=DEFAULT_TTL,
        metavar="DURATION",
        help="lifetime: seconds, or a number with s, m, h or d (as in 90m, 12h, 30d), or 'never' for a token"
        f" that never expires (default: {DEFAULT_TTL}, 30 days)",
    )
    parser.add_argument(
        "--secret",
        default=None,
        help="signing secret (default: $QBROKER_SECRET, else the secret file in the data dir)",
    )
    parser.add_argument("--data-dir", default=None, help="data dir holding the generated secret")


def run(args: argparse.Namespace) -> int:
    from broker.config import Config

    try:
        ttl = parse_ttl(args.ttl)
    except ValueError as exc:
        print(f"qbroker token: --ttl {exc}", file=sys.stderr)
        return 1
    config = Config.from_env(data_dir=args.data_dir)
    secret = args.secret or config.secret
    if not secret:
        existed = config.secret_file.exists()
        secret = config.secret_or_file()
        if not existed:
            print(
                f"qbroker token: note: no secret was set, so one was generated in {config.secret_file}; only a"
                " broker using that data dir (or QBROKER_SECRET set to it) accepts this token",
                file=sys.stderr,
            )
    try:
        minted = mint_token(secret, args.session, args.role, ttl)
    except ValueError as exc:
        print(f"qbroker token: {exc}", file=sys.stderr)
        return 1
    warning = weak_secret(secret)
    if warning:
        print(f"qbroker token: warning: {warning}", file=sys.stderr)
    print(minted)
    return 0


def _a(role: str) -> str:
    return "an" if role == "agent" else "a"
