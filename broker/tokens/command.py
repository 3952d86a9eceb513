"""``qbroker token``: mint a signed token, or revoke tokens on a running broker.

``qbroker token --session S --role R [--sub NAME] [--ttl 30d|12h|never] [--json]`` signs an
HS256 token with the broker's secret (``--secret``, else ``QBROKER_SECRET``, else the data
dir's secret file, as ``qbroker serve`` finds it). ``--json`` prints ``{"token", "jti",
"exp"}`` (``exp`` null for ``--ttl never``), so a script can keep the id it may revoke.

``qbroker token revoke [--url URL] (--jti ID | --sub NAME) [--exp UNIX]`` calls ``POST
/v1/revocations`` on the broker at ``--url`` (default ``QBROKER_URL``, else the broker on
this host, where ``qbroker serve`` listens by ``QBROKER_HOST``/``QBROKER_PORT``; its base
URL, a trailing ``/v1`` is taken off) with an admin token: ``--token``/``QBROKER_TOKEN`` when it
holds one, else one minted for the call (valid a minute, held by ``--by``, by default
``qbroker-cli:<user>@<host>``, so that the broker's log says who revoked) from the secret
when this command has it; any other token is sent as it is (the broker then says why it
refuses).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
from typing import Any

import jwt

from broker.tokens.claims import DEFAULT_TTL, MAX_SUB, ROLES, mint_token, parse_ttl, sub_problem, weak_secret

REVOKE_TOKEN_TTL = 60.0  # the admin token minted for one revocation call
REVOCATIONS_PATH = "/v1/revocations"  # (broker/http/operator.py's; this command only calls it)


def configure(parser: argparse.ArgumentParser) -> None:
    # --session and --role are required to mint; ``revoke`` takes neither (checked in run).
    parser.usage = (
        "%(prog)s --session S --role {agent,client,admin} [--sub NAME] [--ttl DURATION] [--json] [--secret SECRET]"
        " [--data-dir DIR]\n       %(prog)s revoke [--url URL] (--jti ID | --sub NAME) [--exp UNIX] [...]"
    )
    parser.add_argument(
        "--session",
        help="(required) session id, a prefix pattern such as 'alice:*' (every session starting alice:), or"
        " '*' for every session (an admin token's is always '*')",
    )
    parser.add_argument(
        "--role",
        choices=ROLES,
        help="(required) who will present the token: an agent (HTTP API), a client (websocket), or an"
        " operator (admin: the operator endpoints only)",
    )
    parser.add_argument(
        "--sub", default=None, metavar="NAME", help="who holds the token: a person or an agent's name (1-128 chars)"
    )
    parser.add_argument(
        "--ttl",
        default=DEFAULT_TTL,
        metavar="DURATION",
        help="lifetime: seconds, or a number with s, m, h or d (as in 90m, 12h, 30d), or 'never' for a token"
        f" that never expires (default: {DEFAULT_TTL}, 30 days)",
    )
    parser.add_argument("--json", action="store_true", help='print {"token", "jti", "exp"} as JSON')
    _secret_options(parser)
    parser.set_defaults(_token_parser=parser, action=None)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    # Its own prog and usage: argparse would otherwise put the whole of the parent's usage
    # (two lines here) in front of "revoke".
    revoke = actions.add_parser(
        "revoke",
        prog=f"{parser.prog} revoke",
        usage="%(prog)s [--url URL] (--jti ID | --sub NAME) [--exp UNIX] [--token TOKEN] [--by NAME]"
        " [--timeout SECONDS] [--secret SECRET] [--data-dir DIR]",
        help="revoke one token (--jti) or every token of a holder issued before now (--sub) on a running broker",
        description="Revoke tokens on a running broker (POST /v1/revocations, with an admin token).",
    )
    revoke.add_argument(
        "--url",
        default=None,
        help="the broker's base URL, as in http://127.0.0.1:8700 (default: $QBROKER_URL, else the broker on this"
        " host at $QBROKER_HOST:$QBROKER_PORT, as `qbroker serve` would listen; a trailing /v1 is taken off)",
    )
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("--jti", help="the id of the token to revoke (qbroker token --json prints it)")
    which.add_argument("--sub", dest="revoke_sub", metavar="NAME", help="revoke every token of this holder")
    revoke.add_argument(
        "--exp",
        type=float,
        default=None,
        metavar="UNIX",
        help="the latest expiry of the tokens revoked (Unix seconds, in the future), after which the broker"
        " forgets the revocation: a token that expires later works again then (default: it keeps it for the"
        " longest lifetime a token may have)",
    )
    revoke.add_argument("--token", default=None, help="an admin token (default: $QBROKER_TOKEN, else one minted)")
    revoke.add_argument(
        "--by",
        default=None,
        metavar="NAME",
        help="who revokes, as the broker's log will say: the holder of the admin token minted from the secret"
        " (default: qbroker-cli:<user>@<host>; a given admin token names its own holder)",
    )
    revoke.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="seconds to wait for the broker (default: 10)"
    )
    _secret_options(revoke)
    revoke.set_defaults(_revoke_parser=revoke)


def _secret_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secret",
        default=None,
        help="signing secret (default: $QBROKER_SECRET, else the secret file in the data dir)",
    )
    parser.add_argument("--data-dir", default=None, metavar="DIR", help="data dir holding the generated secret")


def run(args: argparse.Namespace) -> int:
    if args.action == "revoke":
        return run_revoke(args)
    missing = [flag for flag, value in (("--session", args.session), ("--role", args.role)) if value is None]
    if missing:
        args._token_parser.error(f"the following arguments are required: {', '.join(missing)}")
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


def run_revoke(args: argparse.Namespace) -> int:
    import httpx

    base = args.url or os.environ.get("QBROKER_URL") or _own_broker_url()
    if args.by is not None and (problem := sub_problem(args.by)) is not None:
        args._revoke_parser.error(f"--by: {problem.replace('sub must', 'it must')}")
    token = _admin_token(args)
    if token is None:
        print(
            "qbroker token revoke: no admin token: set QBROKER_TOKEN to one (qbroker token --session '*' --role"
            " admin), or QBROKER_SECRET (or --secret, --data-dir) to the broker's secret",
            file=sys.stderr,
        )
        return 1
    body: dict[str, Any] = {"jti": args.jti} if args.jti is not None else {"sub": args.revoke_sub}
    if args.exp is not None:
        body["exp"] = args.exp
    url = broker_base(base) + REVOCATIONS_PATH
    try:
        response = httpx.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=args.timeout)
    except httpx.HTTPError as exc:
        print(f"qbroker token revoke: cannot reach {url}: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code == 200 and isinstance(answer, dict):
        print(json.dumps(answer))
        return 0
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        print(f"qbroker token revoke: {error.get('code')}: {error.get('message')}", file=sys.stderr)
    else:
        print(f"qbroker token revoke: {url} answered {response.status_code}", file=sys.stderr)
    return 1


def _admin_token(args: argparse.Namespace) -> str | None:
    """The given token when it is an admin's, else one minted from the secret when there is
    one, else the given token (the broker says why it refuses it), else None."""
    given = args.token or os.environ.get("QBROKER_TOKEN") or None
    if given is not None and _role_of(given) == "admin":
        return given
    secret = signing_secret(args.secret, args.data_dir, generate=False)
    if secret:
        return mint_token(secret, "*", "admin", REVOKE_TOKEN_TTL, sub=args.by or default_revoker())
    return given


def _own_broker_url() -> str:
    """Where ``qbroker serve`` on this host listens, by the same settings it reads."""
    from broker.runtime.config import Config

    try:
        return Config.from_env().own_url()
    except (SystemExit, ValueError):  # a setting serve would refuse too: the documented default
        return f"http://127.0.0.1:{Config.port}"


def default_revoker() -> str:
    """Who a revocation made with a minted admin token is by: ``qbroker-cli:<user>@<host>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment nor the password database
        user = ""
    host = socket.gethostname() or "localhost"
    return f"qbroker-cli:{user}@{host}"[:MAX_SUB] if user else f"qbroker-cli@{host}"[:MAX_SUB]


def broker_base(url: str) -> str:
    """The broker's base URL from ``url``, without a trailing slash, ``/v1`` or the whole
    revocations path (``$QBROKER_URL`` set to the API's root, or a pasted endpoint)."""
    base = url.strip().rstrip("/")
    for tail in (REVOCATIONS_PATH, "/v1"):
        if base.endswith(tail):
            base = base[: -len(tail)].rstrip("/")
    return base


def _role_of(token: str) -> object:
    """The role a token says it has (unverified: the broker verifies it)."""
    try:
        return jwt.decode(token, options={"verify_signature": False}).get("role")
    except jwt.PyJWTError:
        return None


def signing_secret(given: str | None, data_dir: str | None, *, generate: bool) -> str | None:
    """The secret ``qbroker serve`` would sign with: ``given``, else ``QBROKER_SECRET``, else
    the data dir's secret file; when there is none, generate that file (``generate``) or
    return None."""
    from broker.runtime.config import Config

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
