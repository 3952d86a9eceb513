"""``qbroker bots``: load-test a broker with scripted websocket bots, and verify every answer.

Runs ``--sessions`` sessions at once. Each has ``--bots`` websocket clients (json, msgpack
or a mix) and an agent loop that starts questionnaires of the configured shape over HTTP,
follows 202s, resumes after clarifications, and checks each result it gets back against
what its bots answered. The bots think for ``--think-time`` ms before each action, ask for
clarification (``--clarify-rate``), cancel (``--cancel-rate``) or drop and reconnect
(``--reconnect-churn``) as configured. The run stops after ``--count`` questionnaires or
``--duration`` seconds, whichever comes first; ``--processes`` spreads the sessions over
several load processes and merges their figures.

Exit status: 0 clean, 1 at least one verification mismatch (a lost or wrong answer),
2 other errors (timeouts, refused calls, dropped connections), 64 bad usage, 130 interrupted
(Ctrl-C: no more questionnaires start, those in flight finish; a second Ctrl-C stops at once).

The implementation lives in clients/bots/plan.py (questionnaires, answers, the verifier),
clients/bots/run.py (bots and agent loops) and clients/bots/stats.py (figures and report).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
from typing import Any, NoReturn
from urllib.parse import urlsplit

from broker.core.model import MAX_OPTIONS, MAX_QUESTIONS

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_COUNT = 10_000_000
MAX_DURATION = 24 * 3600.0
DEFAULT_COUNT = 20
DEFAULT_DURATION = 30.0
MAX_SESSIONS = 100_000
EXIT_VERIFY = 1
EXIT_ERRORS = 2
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130  # as a shell reports a process stopped by Ctrl-C
# How the parent passes Ctrl-C on to its load processes (which ignore SIGINT).
_WORKER_STOP = signal.SIGUSR1

_EPILOG = """\
examples:
  export QBROKER_SECRET=...   # the broker's secret: bots mint their own per-session tokens
                              # (unset: the secret a local broker generated in its data dir)
  qbroker bots --url http://127.0.0.1:8700 --sessions 10 --count 200
  qbroker bots --url http://127.0.0.1:8701,http://127.0.0.1:8702 --sessions 100 --bots 2 \\
      --codec mixed --clarify-rate 0.2 --cancel-rate 0.1 --reconnect-churn 0.05 \\
      --duration 60 --count 100000 --processes 2 --json

Several --url values spread each session over brokers (the agent on one, its bots on the
others); that needs brokers sharing one Redis store.

Before any load, each broker's /readyz is asked once: when none answers, nothing starts.

Ctrl-C starts no more questionnaires and lets those in flight finish; a second stops at
once. The figures so far are reported either way.

exit status: 0 clean, 1 verification mismatch, 2 other errors (or no broker answers, or the
brokers refuse tokens signed with the secret),
64 bad usage, 130 interrupted
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG

    def usage_error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {message}\n")

    parser.error = usage_error  # type: ignore[method-assign]
    add = parser.add_argument
    add(
        "--url",
        action="append",
        default=None,
        metavar="URL",
        help="broker base URL; repeat or comma-separate for several (default: $QBROKER_URL or http://127.0.0.1:8700)",
    )
    add(
        "--secret",
        "--token-secret",
        dest="secret",
        default=None,
        help="the broker's QBROKER_SECRET, to mint per-session tokens (default: $QBROKER_SECRET, "
        "else the secret a broker on this machine generated in its data dir)",
    )
    add(
        "--data-dir",
        default=None,
        help="the data dir of a broker that generated its secret (default: $QBROKER_DATA_DIR or ~/.qbroker)",
    )
    add("--sessions", type=int, default=4, help="concurrent sessions (default 4)")
    add("--bots", type=int, default=1, help="websocket clients per session (default 1)")
    add(
        "--codec",
        choices=("json", "msgpack", "mixed"),
        default="json",
        help="websocket subprotocol (default json; mixed: json and msgpack, alternating)",
    )
    add("--questions", type=int, default=3, help=f"questions per questionnaire (1-{MAX_QUESTIONS}, default 3)")
    add("--options", type=int, default=4, help=f"options per question (1-{MAX_OPTIONS}, default 4)")
    add("--multi-share", type=float, default=0.3, help="share of multi-select questions (default 0.3)")
    add("--other-share", type=float, default=0.1, help="share of answers using Other (default 0.1)")
    add(
        "--think-time",
        default="20-60",
        metavar="MS[-MS]",
        help="pause before each bot action, ms or a range in ms (default 20-60; the broker's "
        "per-connection rate limit is 50 frames/s)",
    )
    add(
        "--clarify-rate",
        type=float,
        default=0.0,
        help="share of questionnaires with a clarification request (default 0)",
    )
    add("--cancel-rate", type=float, default=0.0, help="share of questionnaires the person cancels (default 0)")
    add(
        "--reconnect-churn",
        type=float,
        default=0.0,
        help="per question, probability the answering bot drops and reconnects first (default 0)",
    )
    add(
        "--count",
        type=int,
        default=None,
        help="stop after this many questionnaires (default 20; with only --duration, no count limit)",
    )
    add(
        "--duration",
        type=float,
        default=None,
        help="stop starting questionnaires after this many seconds (default 30; with only --count, no time limit)",
    )
    add("--timeout", type=float, default=60.0, help="give up on one questionnaire after this many seconds (default 60)")
    add("--wait", type=float, default=30.0, help="the agent calls' long-poll ?wait= (seconds, default 30)")
    add("--processes", type=int, default=1, help="load-generator processes (1-64, default 1)")
    add("--seed", type=int, default=None, help="random seed (default: random)")
    add("--deflate", action="store_true", help="offer permessage-deflate (off by default)")
    add("--json", action="store_true", help="print the final figures as JSON on stdout")
    add("--progress", action="store_true", help="show the progress line even when stderr is not a terminal")
    add("--allow-remote", action="store_true", help="allow broker URLs other than localhost")


def _say_interrupted(presses: int) -> None:
    if presses == 1:
        print(
            ("\n" if sys.stderr.isatty() else "")
            + "qbroker bots: interrupted: no more questionnaires start; those in flight finish"
            " (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )
    elif presses == 2:
        print("qbroker bots: stopping at once", file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    print(f"qbroker bots: {message}", file=sys.stderr)
    return EXIT_USAGE


def parse_think(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    lo = float(low)
    hi = float(high) if high else lo
    if lo < 0 or hi < lo or hi > 600_000:
        raise ValueError("--think-time must be MS or LOW-HIGH with 0 <= LOW <= HIGH <= 600000")
    return lo, hi


def _generated_secret(data_dir: str | None) -> str | None:
    """The secret a broker started without QBROKER_SECRET generated in its data dir (as
    ``qbroker serve`` and ``qbroker token`` use it), if there is one: read, never created."""
    from clients.local_secret import generated_secret, generated_secret_file

    secret = generated_secret(data_dir)
    if secret:
        print(f"qbroker bots: using the generated secret in {generated_secret_file(data_dir)}", file=sys.stderr)
    return secret


def probe_brokers(urls: list[str], timeout: float = 5.0) -> tuple[bool, list[str]]:
    """Ask each broker's ``/readyz`` once before any load: (whether any answered, what to
    warn about). Without it a dead URL is retried for the whole run and ends in an empty
    table. One that answers "not ready" (draining, store unreachable) is a warning only, as
    is one that does not answer beside others that do: a fault test may start mid-restart."""
    import ssl

    import httpx

    reachable, warnings = False, []
    with httpx.Client(verify=ssl.create_default_context(), timeout=timeout) as client:
        for url in urls:
            try:
                response = client.get(url.rstrip("/") + "/readyz")
            except httpx.HTTPError as exc:
                said = str(exc) or type(exc).__name__
                hint = (
                    "a private CA? point SSL_CERT_FILE at its certificate"
                    if "CERTIFICATE_VERIFY_FAILED" in said
                    else "is it running?"
                )
                warnings.append(f"cannot reach the broker at {url}: {said} ({hint})")
                continue
            reachable = True
            if response.status_code != 200:
                said = " ".join(response.text.split())[:200]
                warnings.append(f"the broker at {url} is not ready (/readyz: {response.status_code} {said})")
    return reachable, warnings


def token_refusal(urls: list[str], secret: str, timeout: float = 5.0) -> str | None:
    """Why the brokers would refuse every bot (a token signed with another secret), or None.
    Asked once, of each broker that answers, before any load: refused tokens would otherwise
    be retried for the whole run and end in a table of close_4401 errors. An agent token
    asks for a questionnaire that does not exist: qbroker's 404 means the token was
    accepted; any other 404 means the URL is not a qbroker broker."""
    import ssl
    import uuid

    import httpx

    from broker.tokens.claims import mint_token

    sid = f"bots-preflight-{os.urandom(4).hex()}"
    headers = {"Authorization": f"Bearer {mint_token(secret, sid, 'agent', ttl=60)}"}
    with httpx.Client(verify=ssl.create_default_context(), timeout=timeout) as client:
        for url in urls:
            try:
                response = client.get(f"{url}/v1/sessions/{sid}/questionnaires/{uuid.uuid4()}?wait=0", headers=headers)
            except httpx.HTTPError:
                continue  # not reachable: probe_brokers said so already
            if response.status_code in (401, 403):
                return (
                    f"the broker at {url} refuses tokens signed with this secret (HTTP"
                    f" {response.status_code}): pass the broker's QBROKER_SECRET with --secret"
                    " (or --data-dir for one that generated its own)"
                )
            if response.status_code == 404 and _error_code(response) != "unknown_questionnaire":
                return f"{url} does not answer as a qbroker broker (its agent API: HTTP 404, not a qbroker error)"
    return None


def _error_code(response: Any) -> str | None:
    """The qbroker error code in ``response`` (an httpx.Response), or None."""
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


def likely_causes(report: dict[str, Any], urls: list[str], rate_limited: int = 0) -> list[str]:
    """What the operator most likely got wrong, when the figures show a known symptom
    (``rate_limited``: how many bots the broker closed for sending too fast)."""
    causes = []
    unavailable = report["questionnaires"]["unavailable"]
    if len(urls) > 1 and unavailable:
        # Each session's agent calls go to one broker and its bots to another: brokers that
        # do not share a store never see each other's clients.
        causes.append(
            f"{unavailable} questionnaires ended 'unavailable' (no client connected to their"
            " session anywhere), though the bots were connected: do these brokers share one"
            " Redis store? Several --url need that."
        )
    if rate_limited:
        causes.append(
            "the broker closed bots for sending too fast (its per-connection rate limit,"
            " QBROKER_RATE_LIMIT/QBROKER_RATE_BURST): raise --think-time, or lift the limit on"
            " the broker for this test."
        )
    return causes


def split_urls(values: list[str] | None) -> list[str]:
    raw = values or [os.environ.get("QBROKER_URL") or "http://127.0.0.1:8700"]
    urls = [u.strip().rstrip("/") for value in raw for u in value.split(",") if u.strip()]
    return urls


def check_url(url: str, allow_remote: bool) -> str | None:
    """An error message, or None when ``url`` may be used."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--url must be an http(s):// base URL, got {url!r}"
    if parts.path not in ("", "/"):
        return f"--url is the broker's base URL (no path), got {url!r}"
    if not allow_remote and parts.hostname not in LOCAL_HOSTS:
        return f"refusing to load-test {parts.hostname}: only localhost unless --allow-remote"
    return None


def run(args: argparse.Namespace) -> int:
    from clients.bots.options import Options
    from clients.bots.plan import Rates, Shape
    from clients.bots.stats import RATE_LIMITED_CLOSES

    urls = split_urls(args.url)
    for url in urls:
        problem = check_url(url, args.allow_remote)
        if problem:
            return _fail(problem)
    secret = args.secret or os.environ.get("QBROKER_SECRET") or _generated_secret(args.data_dir)
    if not secret:
        return _fail(
            "no token secret: pass --secret or set QBROKER_SECRET (the broker's secret); a broker"
            " started without one keeps the secret it generated in its data dir (--data-dir)"
        )
    try:
        shape = Shape(args.questions, args.options, args.multi_share, args.other_share)
        think = parse_think(args.think_time)
    except ValueError as exc:
        return _fail(str(exc))
    for name in ("clarify_rate", "cancel_rate", "reconnect_churn"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return _fail(f"--{name.replace('_', '-')} must be between 0 and 1")
    if not 1 <= args.sessions <= MAX_SESSIONS:
        return _fail(f"--sessions must be 1-{MAX_SESSIONS}")
    if not 1 <= args.bots <= 32:
        return _fail("--bots must be 1-32")
    # Either bound alone is the run's bound; neither: a short run (20 questionnaires, 30 s).
    if args.count is None and args.duration is None:
        args.count, args.duration = DEFAULT_COUNT, DEFAULT_DURATION
    elif args.count is None:
        args.count = MAX_COUNT
    elif args.duration is None:
        args.duration = MAX_DURATION
    if not 1 <= args.processes <= 64:
        return _fail("--processes must be 1-64")
    if not 1 <= args.count <= MAX_COUNT:
        return _fail(f"--count must be 1-{MAX_COUNT}")
    if not 0 < args.duration <= MAX_DURATION:
        return _fail(f"--duration must be in (0, {MAX_DURATION:g}] seconds")
    if not 0 < args.timeout <= 3600 or not 0 <= args.wait <= 300:
        return _fail("--timeout must be in (0, 3600] and --wait in [0, 300]")
    reachable, warnings = probe_brokers(urls)
    for warning in warnings:
        print(f"qbroker bots: {warning}", file=sys.stderr)
    if not reachable:
        print("qbroker bots: no broker to load-test; nothing was started", file=sys.stderr)
        return EXIT_ERRORS
    refusal = token_refusal(urls, secret)
    if refusal:
        print(f"qbroker bots: {refusal}; nothing was started", file=sys.stderr)
        return EXIT_ERRORS
    processes = max(1, min(args.processes, args.sessions, 64))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    run_id = os.urandom(4).hex()  # fresh session ids every run, even with a fixed --seed
    session_ids = [f"bots-{run_id}-{i}" for i in range(args.sessions)]

    def options_for(worker: int) -> Options:
        mine = session_ids[worker::processes]
        count = args.count // processes + (1 if worker < args.count % processes else 0)
        return Options(
            urls=urls,
            secret=secret,
            session_ids=mine,
            bots=args.bots,
            codec=args.codec,
            shape=shape,
            rates=Rates(args.clarify_rate, args.cancel_rate, args.reconnect_churn),
            think_ms=think,
            count=count,
            duration=args.duration,
            timeout=args.timeout,
            wait=args.wait,
            seed=seed,
            deflate=args.deflate,
            session_offset=worker,
            session_stride=processes,
        )

    config: dict[str, Any] = {
        "urls": urls,
        "processes": processes,
        "sessions": args.sessions,
        "bots_per_session": args.bots,
        "codec": args.codec,
        "questions": args.questions,
        "options": args.options,
        "multi_share": args.multi_share,
        "other_share": args.other_share,
        "think_ms": list(think),
        "clarify_rate": args.clarify_rate,
        "cancel_rate": args.cancel_rate,
        "reconnect_churn": args.reconnect_churn,
        "count": args.count,
        "duration_s": args.duration,
        "seed": seed,
    }
    show_progress = args.progress or sys.stderr.isatty()
    try:
        stats = _run_processes(options_for, processes, show_progress, args)
    except KeyboardInterrupt:  # before the load's own handler was in place
        print("\nqbroker bots: interrupted before the load started", file=sys.stderr)
        return EXIT_INTERRUPTED
    report = stats.report(config)
    report["interrupted"] = interrupted = stats.counters["interrupts"] > 0
    if args.json:
        import json

        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(stats.table(config))
        if interrupted:
            print("  interrupted (Ctrl-C): the figures are of what ran until then")
    for cause in likely_causes(report, urls, stats.counters[RATE_LIMITED_CLOSES]):
        print(f"qbroker bots: {cause}", file=sys.stderr)
    if report["verify_errors"]:
        return EXIT_VERIFY
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_ERRORS if report["error_total"] else 0


# --- processes and progress ------------------------------------------------------------


class _Progress:
    """The live line on stderr: done / rate / errors, about twice a second."""

    def __init__(self, enabled: bool) -> None:
        import time

        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.clock = time.monotonic
        self.started = self.clock()
        self.last = 0.0
        self.shown = False

    def show(self, done: int, verified: int, errors: int, frames: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        elapsed = max(1e-9, now - self.started)
        line = (
            f"[bots] {elapsed:6.1f}s  done {done}  verified {verified}  {done / elapsed:7.1f} q/s  "
            f"{frames / elapsed:8.0f} frames/s  errors {errors}"
        )
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.enabled and self.shown and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _run_processes(options_for: Any, processes: int, show_progress: bool, args: argparse.Namespace) -> Any:
    from clients.bots.run import run_load
    from clients.bots.stats import Stats

    progress = _Progress(show_progress)
    if processes == 1:

        def tick(stats: Stats) -> None:
            progress.show(
                stats.done,
                stats.counters["verified"],
                stats.error_total,
                stats.counters["frames_in"] + stats.counters["frames_out"],
            )

        try:
            stats = run_load(
                options_for(0),
                tick if show_progress else None,
                stop_signal=signal.SIGINT,
                on_interrupt=_say_interrupted,
            )
            progress.show(
                stats.done,
                stats.counters["verified"],
                stats.error_total,
                stats.counters["frames_in"] + stats.counters["frames_out"],
                force=True,
            )
            return stats
        finally:
            progress.finish()

    import multiprocessing as mp
    import queue as queue_module
    import time

    ctx = mp.get_context("fork")
    shared = [ctx.Array("d", 4, lock=False) for _ in range(processes)]
    results: Any = ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(i, options_for(i), shared[i], results), daemon=True) for i in range(processes)
    ]
    # The load processes ignore SIGINT (from the fork on): Ctrl-C reaches the parent, which
    # passes it on as _WORKER_STOP. A terminal sends SIGINT to every process of the group,
    # so one press would otherwise count twice in each of them.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    for worker in workers:
        worker.start()
    presses = itertools.count(1)

    def forward(signum: int, frame: object) -> None:
        _say_interrupted(next(presses))
        for worker in workers:
            if worker.pid is not None and worker.is_alive():
                os.kill(worker.pid, _WORKER_STOP)

    signal.signal(signal.SIGINT, forward)
    merged = Stats()
    received = 0
    hard_deadline = time.monotonic() + args.duration + args.timeout + 120.0
    try:
        while received < processes and time.monotonic() < hard_deadline:
            try:
                data = results.get(timeout=0.25)
            except queue_module.Empty:
                if not any(w.is_alive() for w in workers) and results.empty():
                    break
            else:
                merged.merge(Stats.from_dict(data))
                received += 1
            totals = [sum(arr[k] for arr in shared) for k in range(4)]
            progress.show(int(totals[0]), int(totals[1]), int(totals[2]), int(totals[3]))
        totals = [sum(arr[k] for arr in shared) for k in range(4)]
        progress.show(int(totals[0]), int(totals[1]), int(totals[2]), int(totals[3]), force=True)
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.finish()
        for worker in workers:
            worker.join(timeout=5)
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=5)
    if received < processes:
        merged.error("worker_lost", f"{processes - received} load process(es) returned no figures")
    return merged


def _worker(index: int, opts: Any, shared: Any, results: Any) -> None:
    from clients.bots.run import run_load
    from clients.bots.stats import Stats

    def tick(stats: Stats) -> None:
        shared[0] = stats.done
        shared[1] = stats.counters["verified"]
        shared[2] = stats.error_total
        shared[3] = stats.counters["frames_in"] + stats.counters["frames_out"]

    try:  # (SIGINT is ignored here: see _run_processes)
        stats = run_load(opts, tick, stop_signal=_WORKER_STOP)
    except Exception as exc:  # noqa: BLE001 - report it as an error figure, never hang the parent
        stats = Stats()
        stats.error(f"exception_{type(exc).__name__}", f"load process {index}: {exc!r}")
    results.put(stats.to_dict())
