"""Broker configuration: ``QBROKER_*`` environment variables, overridable by flags."""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.core.host_form import IN_HOST_MODES
from broker.core.push import DEFAULT_PUSH_SERVICES, PushService, parse_push_services


def _create_whole_once(path: Path, content: str) -> None:
    """Create ``path`` (mode 0600) holding ``content``, unless it exists. It appears whole
    (written aside, then linked into place), and of several processes starting at once on
    one data dir, one creates it and the others read that one: brokers that signed with
    different secrets would refuse each other's tokens."""
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=".secret-")  # (mkstemp: mode 0600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        with contextlib.suppress(FileExistsError):  # another process was first: its secret holds
            os.link(aside, path)
    finally:
        os.unlink(aside)


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
LOG_LEVELS = ("debug", "info", "warning", "error")
_LOG_FORMATS = ("auto", "json", "text")

# Settings that must be above zero (a zero interval would spin: a heartbeat interval of 0
# drove an idle broker to ~50,000 Redis commands a second) and those that may be zero.
_POSITIVE = {
    "retention": "QBROKER_RETENTION",
    "hello_timeout": "QBROKER_HELLO_TIMEOUT",
    "rate_limit": "QBROKER_RATE_LIMIT",
    "heartbeat_interval": "QBROKER_HEARTBEAT_INTERVAL",
    "reconcile_interval": "QBROKER_RECONCILE_INTERVAL",
    "redis_wait_timeout": "QBROKER_REDIS_WAIT_TIMEOUT",
    "notify_retry_delay": "QBROKER_NOTIFY_RETRY_DELAY",
    "notify_timeout": "QBROKER_NOTIFY_TIMEOUT",
    "notify_visibility": "QBROKER_NOTIFY_VISIBILITY",
    "mcp_progress_interval": "QBROKER_MCP_PROGRESS_INTERVAL",
    "jwks_refetch_interval": "QBROKER_JWKS_REFETCH_INTERVAL",
    "push_subscribe_per_minute": "QBROKER_PUSH_SUBSCRIBE_PER_MINUTE",
    "reads_per_minute": "QBROKER_READS_PER_MINUTE",
}
_NOT_NEGATIVE = {
    "client_wait": "QBROKER_CLIENT_WAIT",
    "notify_client_wait": "QBROKER_NOTIFY_CLIENT_WAIT",
    "max_client_wait": "QBROKER_MAX_CLIENT_WAIT",
    "reconnect_grace": "QBROKER_RECONNECT_GRACE",
    "shutdown_grace": "QBROKER_SHUTDOWN_GRACE",
    "redis_wait_replicas": "QBROKER_REDIS_WAIT_REPLICAS",
}
_AT_LEAST_ONE = {
    "rate_burst": "QBROKER_RATE_BURST",
    "max_connections_per_session": "QBROKER_MAX_CONNECTIONS_PER_SESSION",
    "notify_queue_size": "QBROKER_NOTIFY_QUEUE_SIZE",
    "push_subscribe_burst": "QBROKER_PUSH_SUBSCRIBE_BURST",
    "reads_burst": "QBROKER_READS_BURST",
}


def _float(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SystemExit(f"qbroker: {name} must be a number, got {raw!r}") from None


def _log_format(env: dict[str, str]) -> str:
    raw = env.get("QBROKER_LOG_FORMAT", "auto").strip().lower() or "auto"
    if raw not in _LOG_FORMATS:
        raise SystemExit(f"qbroker: QBROKER_LOG_FORMAT must be auto, json or text, got {raw!r}")
    return raw


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _claim_name(env: dict[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if any(character.isspace() for character in raw):
        raise SystemExit(f"qbroker: {name} must be a claim name without spaces, got {raw!r}")
    return raw


_DEFAULT_SERVICES = parse_push_services(",".join(DEFAULT_PUSH_SERVICES))


def _push_services(env: dict[str, str]) -> tuple[PushService, ...]:
    raw = env.get("QBROKER_PUSH_SERVICES", "").strip() or ",".join(DEFAULT_PUSH_SERVICES)
    try:
        services = parse_push_services(raw)
    except ValueError as exc:
        raise SystemExit(f"qbroker: QBROKER_PUSH_SERVICES: {exc}") from None
    if not services:
        raise SystemExit("qbroker: QBROKER_PUSH_SERVICES names no push service")
    return services


def _is_vapid_subject(subject: str) -> bool:
    """RFC 8292: a mailto: URI or an https: URL (push services may refuse anything else)."""
    if subject.startswith("mailto:"):
        return "@" in subject and " " not in subject
    parts = urlsplit(subject)
    return parts.scheme == "https" and bool(parts.hostname)


def _looks_like_vapid_key(key: str) -> bool:
    """PEM, or base64url of 32 bytes (the key itself is read by broker/notify/vapid.py)."""
    if key.startswith("-----BEGIN"):
        return True
    text = key.rstrip("=")
    try:
        return len(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))) == 32
    except (binascii.Error, ValueError):
        return False


def _sentinels(env: dict[str, str]) -> tuple[tuple[str, int], ...]:
    """QBROKER_REDIS_SENTINELS: ``host:port,host:port`` (``[v6]:port`` too)."""
    pairs: list[tuple[str, int]] = []
    for item in filter(None, (part.strip() for part in env.get("QBROKER_REDIS_SENTINELS", "").split(","))):
        host, colon, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise SystemExit(
                f"qbroker: QBROKER_REDIS_SENTINELS must be host:port pairs separated by commas, got {item!r}"
            )
        pairs.append((host, int(port)))
    return tuple(pairs)


def _flag(env: dict[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise SystemExit(f"qbroker: {name} must be 1 or 0, got {raw!r}")


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8700
    secret: str | None = None
    data_dir: Path = field(default_factory=lambda: Path.home() / ".qbroker")
    redis_url: str | None = None
    # Redis Cluster (QBROKER_REDIS_CLUSTER=1, redis_url names any node) and the optional
    # per-write durability waits (WAIT / WAITAOF); see docs/deploy.md.
    redis_cluster: bool = False
    redis_wait_replicas: int = 0
    redis_wait_aof: bool = False
    redis_wait_timeout: float = 2.0
    # Redis behind Sentinel (instead of redis_url): the sentinels, the master's name there, the
    # password of the master and replicas and that of the sentinels (docs/deploy.md).
    redis_sentinels: tuple[tuple[str, int], ...] = ()
    redis_sentinel_master: str = "mymaster"
    redis_password: str | None = field(default=None, repr=False)
    redis_sentinel_password: str | None = field(default=None, repr=False)
    client_wait: float = 5.0
    reconnect_grace: float = 30.0
    retention: float = 7 * 24 * 3600.0
    hello_timeout: float = 10.0
    allowed_origins: tuple[str, ...] = ()
    # Host names the broker answers for besides loopback names and QBROKER_PUBLIC_URL's host
    # ("*": any), against DNS rebinding (broker/runtime/hosts.py).
    allowed_hosts: tuple[str, ...] = ()
    max_frame_bytes: int = 64 * 1024
    # Per-connection token bucket: a burst of ``rate_burst`` frames, refilled at
    # ``rate_limit`` frames per second. People click far slower; bots are sized below it.
    rate_limit: float = 50.0
    rate_burst: float = 100.0
    max_connections_per_session: int = 64
    heartbeat_interval: float = 5.0
    reconcile_interval: float = 2.0
    shutdown_grace: float = 10.0
    # The MCP endpoint's tool calls report progress this often while the person answers.
    mcp_progress_interval: float = 10.0
    # When the MCP endpoint asks in the host's own form (docs/agents.md, "Answering in the
    # host"): fallback (when no qbroker client has the session open), race, or off.
    in_host: str = "fallback"
    log_level: str = "info"
    # auto: readable text when stderr is a terminal, JSON lines otherwise (broker/runtime/logs.py)
    log_format: str = "auto"
    # Tokens from an identity provider, beside the HS256 secret (docs/operations.md): RS256
    # and ES256 tokens signed by a key of the JWKS at ``jwks_url``, for ``jwt_issuer`` and one
    # of ``jwt_audience``, whose scope, role and holder are in the claims named here.
    jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    # (not "sid": OIDC providers put their session id there, in access tokens too)
    jwt_sid_claim: str = "qbroker_sid"
    jwt_role_claim: str = "role"
    jwt_sub_claim: str = "sub"
    # A token whose key id the cached JWKS lacks fetches it again, at most this often.
    jwks_refetch_interval: float = 60.0
    # People sign in with that identity provider (docs/web-client.md, "Signing in"): the id of
    # its public client for the page and the terminal client (None: no sign-in, links carry
    # tokens), and the scopes they ask for.
    oidc_client_id: str | None = None
    oidc_scope: str = "openid"
    # Notifications (docs/notifications.md): the routes' file, the wait for a first client
    # in a session a route covers, the bound on an agent's own ?clientWait, the base of the
    # links, and the delivery queue (its size, the first retry's delay, doubled per attempt,
    # one attempt's timeout, and how long a delivery its broker stopped holding waits before
    # another broker takes it over).
    notify_config: Path | None = None
    notify_client_wait: float = 15 * 60.0
    max_client_wait: float = 3600.0
    public_url: str | None = None
    notify_queue_size: int = 1000
    notify_retry_delay: float = 8.0
    notify_timeout: float = 10.0
    notify_visibility: float = 30.0
    # Browser push (docs/notifications.md, "Web push"): the VAPID private key (base64url of
    # the raw 32 bytes, or PEM; None: generated once into the data dir), the contact the push
    # services see (mailto: or https:; None: QBROKER_PUBLIC_URL when https), and the push
    # services a subscription's endpoint may name (the broker POSTs there).
    vapid_private_key: str | None = None
    vapid_subject: str | None = None
    push_services: tuple[PushService, ...] = field(default_factory=lambda: _DEFAULT_SERVICES)
    # POST /v1/push/subscriptions per token and process: a burst of ``push_subscribe_burst``,
    # refilled at ``push_subscribe_per_minute``. A page posts once per visit and per click.
    push_subscribe_per_minute: float = 10.0
    push_subscribe_burst: float = 10.0
    # GET /v1/inbox and the record (history, events) per token and process: a burst of
    # ``reads_burst``, refilled at ``reads_per_minute``. Pages read them on demand.
    reads_per_minute: float = 600.0
    reads_burst: float = 120.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Config:
        e = dict(os.environ if env is None else env)
        # Browsers send an origin as scheme://host[:port], lower-case, without a slash.
        origins = tuple(
            o.strip().rstrip("/").lower() for o in e.get("QBROKER_ALLOWED_ORIGINS", "").split(",") if o.strip()
        )
        config = cls(
            host=e.get("QBROKER_HOST", cls.host),
            port=int(_float(e, "QBROKER_PORT", cls.port)),
            secret=e.get("QBROKER_SECRET") or None,
            data_dir=Path(e["QBROKER_DATA_DIR"]) if e.get("QBROKER_DATA_DIR") else Path.home() / ".qbroker",
            redis_url=e.get("QBROKER_REDIS_URL") or None,
            redis_cluster=_flag(e, "QBROKER_REDIS_CLUSTER"),
            redis_wait_replicas=int(_float(e, "QBROKER_REDIS_WAIT_REPLICAS", cls.redis_wait_replicas)),
            redis_wait_aof=_flag(e, "QBROKER_REDIS_WAIT_AOF"),
            redis_wait_timeout=_float(e, "QBROKER_REDIS_WAIT_TIMEOUT", cls.redis_wait_timeout),
            redis_sentinels=_sentinels(e),
            redis_sentinel_master=e.get("QBROKER_REDIS_SENTINEL_MASTER", "").strip() or cls.redis_sentinel_master,
            redis_password=e.get("QBROKER_REDIS_PASSWORD") or None,
            redis_sentinel_password=e.get("QBROKER_REDIS_SENTINEL_PASSWORD") or None,
            client_wait=_float(e, "QBROKER_CLIENT_WAIT", cls.client_wait),
            reconnect_grace=_float(e, "QBROKER_RECONNECT_GRACE", cls.reconnect_grace),
            retention=_float(e, "QBROKER_RETENTION", cls.retention),
            hello_timeout=_float(e, "QBROKER_HELLO_TIMEOUT", cls.hello_timeout),
            allowed_origins=origins,
            allowed_hosts=tuple(
                h.strip().lower().rstrip(".") for h in e.get("QBROKER_ALLOWED_HOSTS", "").split(",") if h.strip()
            ),
            rate_limit=_float(e, "QBROKER_RATE_LIMIT", cls.rate_limit),
            rate_burst=_float(e, "QBROKER_RATE_BURST", cls.rate_burst),
            max_connections_per_session=int(
                _float(e, "QBROKER_MAX_CONNECTIONS_PER_SESSION", cls.max_connections_per_session)
            ),
            heartbeat_interval=_float(e, "QBROKER_HEARTBEAT_INTERVAL", cls.heartbeat_interval),
            reconcile_interval=_float(e, "QBROKER_RECONCILE_INTERVAL", cls.reconcile_interval),
            shutdown_grace=_float(e, "QBROKER_SHUTDOWN_GRACE", cls.shutdown_grace),
            mcp_progress_interval=_float(e, "QBROKER_MCP_PROGRESS_INTERVAL", cls.mcp_progress_interval),
            in_host=e.get("QBROKER_IN_HOST", cls.in_host).strip().lower(),
            log_level=e.get("QBROKER_LOG_LEVEL", cls.log_level).strip().lower(),
            log_format=_log_format(e),
            notify_config=Path(e["QBROKER_NOTIFY_CONFIG"]) if e.get("QBROKER_NOTIFY_CONFIG") else None,
            notify_client_wait=_float(e, "QBROKER_NOTIFY_CLIENT_WAIT", cls.notify_client_wait),
            max_client_wait=_float(e, "QBROKER_MAX_CLIENT_WAIT", cls.max_client_wait),
            public_url=(e.get("QBROKER_PUBLIC_URL") or "").strip().rstrip("/") or None,
            notify_queue_size=int(_float(e, "QBROKER_NOTIFY_QUEUE_SIZE", cls.notify_queue_size)),
            notify_retry_delay=_float(e, "QBROKER_NOTIFY_RETRY_DELAY", cls.notify_retry_delay),
            notify_timeout=_float(e, "QBROKER_NOTIFY_TIMEOUT", cls.notify_timeout),
            notify_visibility=_float(e, "QBROKER_NOTIFY_VISIBILITY", cls.notify_visibility),
            jwks_url=e.get("QBROKER_JWKS_URL", "").strip() or None,
            jwt_issuer=e.get("QBROKER_JWT_ISSUER", "").strip() or None,
            jwt_audience=tuple(a.strip() for a in e.get("QBROKER_JWT_AUDIENCE", "").split(",") if a.strip()),
            jwt_sid_claim=_claim_name(e, "QBROKER_JWT_SID_CLAIM", cls.jwt_sid_claim),
            jwt_role_claim=_claim_name(e, "QBROKER_JWT_ROLE_CLAIM", cls.jwt_role_claim),
            jwt_sub_claim=_claim_name(e, "QBROKER_JWT_SUB_CLAIM", cls.jwt_sub_claim),
            jwks_refetch_interval=_float(e, "QBROKER_JWKS_REFETCH_INTERVAL", cls.jwks_refetch_interval),
            oidc_client_id=e.get("QBROKER_OIDC_CLIENT_ID", "").strip() or None,
            oidc_scope=" ".join(e.get("QBROKER_OIDC_SCOPE", cls.oidc_scope).split()) or cls.oidc_scope,
            vapid_private_key=(e.get("QBROKER_VAPID_PRIVATE_KEY") or "").strip() or None,
            vapid_subject=(e.get("QBROKER_VAPID_SUBJECT") or "").strip() or None,
            push_services=_push_services(e),
            push_subscribe_per_minute=_float(e, "QBROKER_PUSH_SUBSCRIBE_PER_MINUTE", cls.push_subscribe_per_minute),
            push_subscribe_burst=_float(e, "QBROKER_PUSH_SUBSCRIBE_BURST", cls.push_subscribe_burst),
            reads_per_minute=_float(e, "QBROKER_READS_PER_MINUTE", cls.reads_per_minute),
            reads_burst=_float(e, "QBROKER_READS_BURST", cls.reads_burst),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        if "data_dir" in clean:
            clean["data_dir"] = Path(clean["data_dir"])
        return replace(config, **clean).checked()

    def checked(self) -> Config:
        """This config, or a one-line stop naming what is wrong (before anything listens):
        a port outside 1-65535 would otherwise wrap around to another port, and a Redis URL
        without its scheme would end in a traceback at startup."""
        if not 1 <= self.port <= 65535:
            raise SystemExit(f"qbroker: the port must be between 1 and 65535, got {self.port}")
        if self.redis_url is not None and not self.redis_url.startswith(_REDIS_SCHEMES):
            raise SystemExit(
                f"qbroker: the Redis URL must start with {', '.join(_REDIS_SCHEMES)}, got {self.redis_url!r}"
            )
        if self.redis_url is not None and self.redis_url.startswith(("redis://", "rediss://")):
            database = urlsplit(self.redis_url).path.strip("/")
            if database and not database.isdigit():  # (redis-py would use database 0 instead)
                raise SystemExit(f"qbroker: the Redis URL's database must be a number, got {database!r}")
        self._check_sentinels()
        if self.in_host not in IN_HOST_MODES:
            modes = ", ".join(IN_HOST_MODES)
            raise SystemExit(f"qbroker: QBROKER_IN_HOST must be one of {modes}, got {self.in_host!r}")
        if self.log_level not in LOG_LEVELS:
            raise SystemExit(
                f"qbroker: QBROKER_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.public_url is not None and not _is_http_url(self.public_url):
            raise SystemExit(f"qbroker: QBROKER_PUBLIC_URL must be an http:// or https:// URL, got {self.public_url!r}")
        self._check_identity_provider()
        if self.vapid_subject is not None and not _is_vapid_subject(self.vapid_subject):
            raise SystemExit(
                "qbroker: QBROKER_VAPID_SUBJECT must be a mailto: address or an https:// URL,"
                f" got {self.vapid_subject!r}"
            )
        if self.vapid_private_key is not None and not _looks_like_vapid_key(self.vapid_private_key):
            raise SystemExit(
                "qbroker: QBROKER_VAPID_PRIVATE_KEY must be a P-256 private key: base64url of its 32 bytes"
                " (as web-push generate-vapid-keys prints it) or PEM"
            )
        least: tuple[tuple[dict[str, str], float, bool, str], ...] = (
            (_POSITIVE, 0, False, "above 0"),  # (names, bound, the bound itself allowed, words)
            (_NOT_NEGATIVE, 0, True, "0 or more"),
            (_AT_LEAST_ONE, 1, True, "1 or more"),
        )
        for settings, bound, inclusive, words in least:
            for name, variable in settings.items():
                value: float = getattr(self, name)
                if value < bound or (value == bound and not inclusive):
                    raise SystemExit(f"qbroker: {variable} must be {words}, got {value:g}")
        return self

    def link_base(self) -> str:
        """Where people open the web page: QBROKER_PUBLIC_URL, else this broker's own address."""
        if self.public_url is not None:
            return self.public_url
        return self.own_url()

    def own_url(self) -> str:
        """This broker's address from its own host (QBROKER_HOST and QBROKER_PORT; a wildcard
        host is reached on the loopback address)."""
        return f"http://{'127.0.0.1' if self.host in ('0.0.0.0', '::') else self.host}:{self.port}"

    def _check_sentinels(self) -> None:
        """Sentinels replace the Redis URL; their passwords mean nothing without them."""
        if self.redis_sentinels and self.redis_url is not None:
            raise SystemExit("qbroker: set QBROKER_REDIS_URL or QBROKER_REDIS_SENTINELS, not both")
        if self.redis_sentinels and self.redis_cluster:
            raise SystemExit("qbroker: a Redis Cluster is not reached through QBROKER_REDIS_SENTINELS")
        if not self.redis_sentinels:
            for name, given in (
                ("QBROKER_REDIS_PASSWORD", self.redis_password),
                ("QBROKER_REDIS_SENTINEL_PASSWORD", self.redis_sentinel_password),
            ):
                if given is not None:
                    raise SystemExit(
                        f"qbroker: {name} is for QBROKER_REDIS_SENTINELS (with QBROKER_REDIS_URL,"
                        " the password goes in the URL: redis://:password@host:6379/0)"
                    )

    def sign_in(self) -> dict[str, str] | None:
        """What the page and the terminal client need to sign people in (GET /v1/signin),
        or None when people do not sign in."""
        if self.oidc_client_id is None or self.jwt_issuer is None:
            return None
        return {"issuer": self.jwt_issuer, "clientId": self.oidc_client_id, "scope": self.oidc_scope}

    def _check_identity_provider(self) -> None:
        """The JWKS settings go together: without an issuer and an audience, any token the
        identity provider signs, for any application, would be accepted."""
        pair = (("QBROKER_JWT_ISSUER", bool(self.jwt_issuer)), ("QBROKER_JWT_AUDIENCE", bool(self.jwt_audience)))
        if self.oidc_client_id is not None and self.jwks_url is None:
            raise SystemExit(
                "qbroker: QBROKER_OIDC_CLIENT_ID needs QBROKER_JWKS_URL, QBROKER_JWT_ISSUER and QBROKER_JWT_AUDIENCE:"
                " people sign in with the identity provider whose tokens the broker trusts"
            )
        if self.jwks_url is None:
            stray = [name for name, given in pair if given]
            if stray:
                raise SystemExit(f"qbroker: {stray[0]} is set but QBROKER_JWKS_URL is not: set both, or neither")
            return
        from broker.tokens.jwks_fetch import url_problem

        if (problem := url_problem(self.jwks_url)) is not None:
            raise SystemExit(f"qbroker: QBROKER_JWKS_URL: {problem}, got {self.jwks_url!r}")
        missing = [name for name, given in pair if not given]
        if missing:
            raise SystemExit(
                f"qbroker: QBROKER_JWKS_URL needs {' and '.join(missing)}: without them a token the identity"
                " provider signed for any other application would be accepted"
            )

    @property
    def secret_file(self) -> Path:
        return self.data_dir / "secret"

    def secret_or_file(self) -> str:
        """The configured secret, else the one kept in the data dir (created 0600 if absent)."""
        if self.secret:
            return self.secret
        path = self.secret_file
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_whole_once(path, secrets.token_urlsafe(32) + "\n")
        return path.read_text().strip()

    @property
    def vapid_key_file(self) -> Path:
        """Where the generated VAPID private key is kept (QBROKER_VAPID_PRIVATE_KEY unset)."""
        return self.data_dir / "vapid-private-key"

    def vapid_key_or_file(self, generate: Callable[[], str]) -> str:
        """The configured VAPID private key, else the one kept in the data dir, made once by
        ``generate`` (as the secret is: 0600, whole, one of several brokers starting at once)."""
        if self.vapid_private_key:
            return self.vapid_private_key
        path = self.vapid_key_file
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_whole_once(path, generate() + "\n")
        return path.read_text().strip()

    @property
    def generated_secret(self) -> bool:
        return not self.secret
