"""``qbroker token``: mint a signed token from the command line.

``qbroker token --session S --role R [--sub NAME] [--ttl 30d|12h|never] [--json]`` signs an
HS256 token with the broker's secret (``--secret``, else ``QBROKER_SECRET``, else the data
dir's secret file, as ``qbroker serve`` finds it). ``--json`` prints ``{"token", "jti",
"exp"}`` (``exp`` null for ``--ttl never``), so a script can keep the id it may revoke.
"""

from __future__ import annotations

import argparse
import json
import sys

import jwt

from broker.auth import DEFAULT_TTL, ROLES, mint_token, parse_ttl, weak_secret


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        required=True,
        help="session id, a prefix pattern such as 'alice:*' (every session starting alice:), or '*' for every"
        " session (an admin token's is always '*')",
    )
    parser.add_argument(
        "--role",
        required=True,
        choices=ROLES,
        help="who will present the token: an agent (HTTP API), a client (websocket), or an operator (admin)",
    )
    parser.add_argument(
        "--sub",
        default=None,
        metavar="NAME",
        help="who holds the token (a person or an agent's name, 1-128 characters)",
    )
    parser.add_argument(
        "--ttl",
        default=DEFAULT_TTL,
        metavar="DURATION",
        help="lifetime: seconds, or a number with s, m, h or d (as in 90m, 12h, 30d), or 'never' for a token"
        f" that never expires (default: {DEFAULT_TTL}, 30 days)",
    )
    parser.add_argument("--json", action="store_true", help='print {"token", "jti", "exp"} as JSON')
    parser.add_argument(
        "--secret",
        default=None,
        help="signing secret (default: $QBROKER_SECRET, else the secret file in the data dir)",
    )
    parser.add_argument("--data-dir", default=None, help="data dir holding the generated secret")


def run(args: argparse.Namespace) -> int:
    try:
        ttl = parse_ttl(args.ttl)
    except ValueError as exc:
        print(f"qbroker token: --ttl {exc}", file=sys.stderr)
        return 1
    secret = signing_secret(args.secret, args.data_dir, generate=True)
    assert secret is not None
    try:
        minted = mint_token(secret, args.session, args.role, ttl, sub=args.sub)
    except ValueError as exc:
        print(f"qbroker token: {exc}", file=sys.stderr)
        return 1
    warning = weak_secret(secret)
    if warning:
        print(f"qbroker token: warning: {warning}", file=sys.stderr)
    if args.json:
        claims = jwt.decode(minted, options={"verify_signature": False})
        print(json.dumps({"token": minted, "jti": claims["jti"], "exp": claims.get("exp")}))
    else:
        print(minted)
    return 0


def signing_secret(given: str | None, data_dir: str | None, *, generate: bool) -> str | None:
    """The secret ``qbroker serve`` would sign with: ``given``, else ``QBROKER_SECRET``, else
    the data dir's secret file; when there is none, generate that file (``generate``) or
    return None."""
    from broker.config import Config

    config = Config.from_env(data_dir=data_dir)
    if given or config.secret:
        return given or config.secret
    existed = config.secret_file.exists()
    if not existed and not generate:
        return None
    secret = config.secret_or_file()
    if not existed:
        print(
            f"qbroker token: note: no secret was set, so one was generated in {config.secret_file}; only a"
            " broker using that data dir (or QBROKER_SECRET set to it) accepts this token",
            file=sys.stderr,
        )
    return secret
