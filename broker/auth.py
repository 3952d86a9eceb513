"""Tokens: HS256 JWTs with ``sid`` (a session id or ``*``), ``role`` and optional ``exp``.

Agents present theirs as ``Authorization: Bearer``; clients in their ``hello`` frame.
``qbroker token`` mints one from the command line.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import time
import warnings
from typing import Any, Literal

import jwt
import msgspec

from broker.errors import BrokerError

Role = Literal["agent", "client"]
ROLES: tuple[Role, ...] = ("agent", "client")
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
ANY_SESSION = "*"
# HS256 wants a key of at least 32 bytes (RFC 7518, 3.2). A shorter secret still works, and
# ``serve`` and ``token`` say so once, in their own words: PyJWT's warning (with its file
# and line) would otherwise come with every token minted.
MIN_SECRET_BYTES = 32
warnings.filterwarnings("ignore", message=r"The HMAC key is \d+ bytes long")  # (PyJWT >= 2.10)


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
    return bool(SESSION_ID_RE.fullmatch(sid))  # fullmatch: "$" alone would let "sid\n" through


def mint_token(secret: str, sid: str, role: Role, ttl: float | None = None) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    if sid != ANY_SESSION and not valid_session_id(sid):
        raise ValueError("session id must be 1-128 characters of [A-Za-z0-9._:-]")
    if sid == ANY_SESSION and role != "agent":
        raise ValueError("only agent tokens may use the service-wide session '*'")
    claims: dict[str, object] = {"sid": sid, "role": role, "iat": int(time.time())}
    if ttl is not None:
        claims["exp"] = int(time.time() + ttl)
    return jwt.encode(claims, secret, algorithm="HS256")


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
    parser.add_argument("--ttl", type=float, default=None, metavar="SECONDS", help="lifetime (default: no expiry)")
    parser.add_argument(
        "--secret",
        default=None,
        help="signing secret (default: $QBROKER_SECRET, else the secret file in the data dir)",
    )
    parser.add_argument("--data-dir", default=None, help="data dir holding the generated secret")


def run(args: argparse.Namespace) -> int:
    from broker.config import Config

    if args.ttl is not None and not args.ttl > 0:
        print(f"qbroker token: --ttl must be a positive number of seconds, got {args.ttl:g}", file=sys.stderr)
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
        minted = mint_token(secret, args.session, args.role, args.ttl)
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
