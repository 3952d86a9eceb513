"""``qbroker serve``: run the broker under uvicorn (uvloop + httptools when installed)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import logging
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import uvicorn

from broker.runtime import logs
from broker.runtime.config import LOG_LEVELS, Config
from broker.tokens.claims import mint_token

log = logging.getLogger("qbroker.server")

DEMO_SESSION = "demo"
STARTUP_FAILED = 3  # the status uvicorn exits with when the app cannot start (an unreachable Redis)
# The banner's link and agent token are for trying the broker out, and end up in terminal
# scrollback and shell history: they expire after a day (each start prints new ones).
DEMO_TOKEN_TTL = 24 * 3600
# Secrets that examples ship or shipped (deploy/k8s/secret.yaml): refused, never signed with.
KNOWN_PLACEHOLDERS = frozenset(
    {
        "change-me-to-a-long-random-string",
        "REPLACE-ME-with-the-output-of-secrets.token_urlsafe(32)",
    }
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=None, help="address to listen on (default: $QBROKER_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default: $QBROKER_PORT or 8700)")
    parser.add_argument(
        "--redis-url", default=None, help="Redis URL (default: $QBROKER_REDIS_URL; none = memory store)"
    )
    parser.add_argument(
        "--data-dir", default=None, help="where the generated secret lives (default: $QBROKER_DATA_DIR or ~/.qbroker)"
    )
    parser.add_argument(
        "--log-level",
        default=None,
        choices=LOG_LEVELS,
        help="log level (default: $QBROKER_LOG_LEVEL or info)",
    )
    parser.epilog = (
        "Other settings come from QBROKER_* environment variables, among them QBROKER_SECRET, "
        "QBROKER_CLIENT_WAIT, QBROKER_RECONNECT_GRACE, QBROKER_RETENTION, QBROKER_ALLOWED_ORIGINS, "
        "QBROKER_RATE_LIMIT, QBROKER_NOTIFY_CONFIG (notification routes: docs/notifications.md) "
        "and QBROKER_LOG_FORMAT (auto, the default: readable lines on a "
        "terminal, JSON lines otherwise; or json, or text); docs/operations.md lists all of them "
        "with their defaults, and docs/deploy.md the Redis Cluster and durability ones."
    )


class _Server(uvicorn.Server):
    """uvicorn's server, printing the banner once it listens, and telling the broker the
    moment a shutdown signal arrives.

    uvicorn closes websockets (1012) and then waits for in-flight requests; waking the
    agent calls that are long-polling lets them answer 202 at once and re-attach elsewhere.
    """

    broker: Any = None
    banner: Callable[[], None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # Only now: the store answered and the port is ours (a port in use or an
        # unreachable Redis exits inside super().startup, before any "listening" line).
        if self.started and self.banner is not None:
            self.banner()

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.broker is not None:
            self.broker.begin_shutdown()
        super().handle_exit(sig, frame)


def run(args: argparse.Namespace) -> int:
    from broker.app import create_app
    from broker.speedups.http_protocol import CoalescingHttpProtocol
    from broker.ws.handshake import handshake_for
    from broker.ws.transport import protocol_for

    config = Config.from_env(
        host=args.host, port=args.port, redis_url=args.redis_url, data_dir=args.data_dir, log_level=args.log_level
    )
    logs.configure(config.log_level, logs.json_lines(config.log_format, sys.stderr))
    generated = config.generated_secret
    try:
        secret = config.secret_or_file()
    except OSError as exc:
        print(f"qbroker serve: cannot read or create the secret in {config.data_dir}: {exc}", file=sys.stderr)
        return 1
    from dataclasses import replace

    refusal = refused_secret(secret)
    if refusal:
        print(f"qbroker serve: {refusal}", file=sys.stderr, flush=True)
        return 1
    if generated and (config.redis_url or config.redis_sentinels):
        print(
            "qbroker serve: warning: no QBROKER_SECRET with a Redis store: this broker signs with"
            f" the secret in {config.secret_file}, and brokers with another data dir refuse its"
            " tokens; give every broker the same QBROKER_SECRET",
            file=sys.stderr,
            flush=True,
        )
    config = replace(config, secret=secret)
    if port_taken(config.host, config.port):
        # Before the app starts: uvicorn would log its bind error among its startup lines.
        print(
            f"qbroker serve: {config.host}:{config.port} is already in use; pick another with --port or QBROKER_PORT",
            file=sys.stderr,
            flush=True,
        )
        return STARTUP_FAILED
    app = create_app(config, web_dir=getattr(args, "web_dir", None), keep_revocations=True)
    if config.notify_config is not None and config.public_url is None:
        print(
            "qbroker serve: warning: notification routes but no QBROKER_PUBLIC_URL: their links"
            f" point at {config.link_base()}, which people elsewhere cannot open",
            file=sys.stderr,
            flush=True,
        )
    uv_config = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # nothing reads the client address: skip the per-request rewrite
        http=CoalescingHttpProtocol,  # a response in one write, not two (broker/speedups/http_protocol.py)
        # The websocket transport serves the broker's sockets itself; the handshake says which.
        ws=protocol_for(handshake_for(app.state.broker), app.state.broker.metrics),
        ws_max_size=config.max_frame_bytes,
        # No permessage-deflate: frames are small (a question is well under 1 KiB), and
        # compressing them costs more than it saves: ~40 us more per answer at the bots,
        # and zlib state in every connection. Browsers and websockets' client offer it
        # by default; refusing it is part of the protocol (they just send uncompressed).
        ws_per_message_deflate=False,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=max(1, round(config.shutdown_grace)),
        lifespan="on",
    )
    server = _Server(uv_config)
    server.broker = app.state.broker
    server.banner = lambda: _banner(config, generated)
    tune_gc()
    with contextlib.suppress(KeyboardInterrupt):
        server.run()  # uvicorn picks uvloop when installed (asyncio.run would not)
    return 0 if server.started or not server.should_exit else 1


def port_taken(host: str, port: int) -> bool:
    """Whether another process listens on ``host:port`` (any of its addresses), tried as
    uvicorn binds (SO_REUSEADDR: a port whose old connections linger is not taken). Another
    bind error (an address not on this machine) is left for uvicorn to say in its words."""
    if port == 0:
        return False
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return False
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


def refused_secret(secret: str) -> str | None:
    """Why ``serve`` will not sign with ``secret``, in one line, or None: a placeholder
    shipped in an example (anyone could mint admin tokens with it) or a secret too short
    to sign HS256 tokens safely."""
    from broker.tokens.claims import weak_secret

    if secret.strip() in KNOWN_PLACEHOLDERS:
        return (
            "QBROKER_SECRET is a placeholder from an example, which anyone can use to mint tokens;"
            " set a random one (python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return weak_secret(secret)


def tune_gc() -> None:
    """Run the cyclic garbage collector less often: under load its passes cost the broker
    about a fifth of its CPU. Nearly everything a frame or a request allocates is acyclic
    and freed by reference counting; the collector's work is walking the long-lived heap
    (stored questionnaires, connections) looking for cycles that are rarely there. What
    startup built is frozen out of those walks for good; young objects are examined every
    50,000 allocations instead of 700, the whole heap every ~10 million."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)


def _banner(config: Config, generated: bool) -> None:
    base = f"http://{'127.0.0.1' if config.host in ('0.0.0.0', '::') else config.host}:{config.port}"
    store = f"redis ({_redacted(config.redis_url)})" if config.redis_url else "memory (embedded, one process)"
    if config.redis_sentinels:
        sentinels = ",".join(f"{host}:{port}" for host, port in config.redis_sentinels)
        store = f"redis (master {config.redis_sentinel_master!r} of the sentinels {sentinels})"
    lines = [f"qbroker listening on {base}  store: {store}"]
    if generated:
        assert config.secret is not None
        # Taken before minting, and shown to the minute: never later than the tokens' exp.
        until = datetime.fromtimestamp(time.time() + DEMO_TOKEN_TTL, UTC).strftime("%Y-%m-%d %H:%M UTC")
        client = mint_token(config.secret, DEMO_SESSION, "client", ttl=DEMO_TOKEN_TTL)
        agent = mint_token(config.secret, DEMO_SESSION, "agent", ttl=DEMO_TOKEN_TTL)
        lines += [
            f"No QBROKER_SECRET set: using the generated secret in {config.secret_file}",
            f"The link and tokens below are valid {DEMO_TOKEN_TTL // 3600} h, until {until};"
            " each start prints new ones",
            f"Open the web client for session '{DEMO_SESSION}':",
            f"  {base}/#session={DEMO_SESSION}&token={client}",
            "Agent token for that session:",
            f"  export QBROKER_TOKEN={agent}",
            "Then, in another shell:",
            f"  qbroker ask examples/deploy.json --url {base} --session {DEMO_SESSION}",
            f"  QBROKER_TOKEN={client} qbroker tui --url {base} --session {DEMO_SESSION}",
        ]
    print("\n".join(lines), flush=True)


def _redacted(url: str) -> str:
    """The Redis URL without its passwords (in the user part or the query, as redis-py
    takes either), fit for a terminal or a log."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = "&".join(
        f"{pair.partition('=')[0]}=***" if "password" in pair.partition("=")[0].lower() else pair
        for pair in parts.query.split("&")
    )
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if parts.query else "")
