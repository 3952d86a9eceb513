"""How many instructions the broker runs per questionnaire: a count, not a time (not a test).

    python bench/instructions.py [--store memory|redis] [--count 200] [--warm-up 20] [--sessions 1]

On a shared VM the bench's times drift within minutes (another tenant, the host's clock,
cold caches), so a change of a few percent to the broker's work is lost in their noise.
This counts instead: each broker process runs under valgrind's callgrind (no cache
simulation), ``qbroker bots`` runs ``--warm-up`` questionnaires, the counters are zeroed
(``callgrind_control -z``), the bots run ``--count`` more, and the counters are dumped. The
instructions the broker's user space executed, divided by the questionnaires: the same
figure run after run (within 0.3%, measured on 2026-12-03 on an AMD EPYC VM), whatever else
the machine is doing, so two versions of the broker can be compared in a minute each.

- The shape is fixed: 3 single-choice questions of 4 options, answered back to back (the
  bench's bots also mix in multi-choice questions and Other texts, drawn at random).
- On Redis there are two brokers, as in the bench (the agent's calls go to one, the bots
  connect to the other); each is counted, and their sum is the figure.
- The brokers' clock-driven work (the revocation list's poll twice a second, reconciliation,
  heartbeats) runs through the counted run too, and under callgrind a run's length follows
  the machine's load: the same code counted 2.32 M and 2.44 M per questionnaire on Redis an
  hour apart on 2026-12-06. So each broker is also counted over ``--idle`` seconds with
  nothing to do first, and the second column takes that rate times the run's length out:
  the questionnaires' own work, the figure to compare.
- Not counted: the kernel (system calls, the network stack), redis-server, the bots.
  On Redis, what redis-server did is reported beside the count instead (bench/redis_stats.py):
  its CPU and each command's calls per questionnaire (a script's own commands included),
  without the brokers' clock-driven commands (measured over ``--idle`` seconds first).

A time per instruction is the machine's, not the broker's: on 2026-12-03 an AMD EPYC VM
ran the memory broker's ~1.13 M instructions per questionnaire in ~560 us of CPU (kernel
included), where an Intel Xeon VM earlier that day had taken ~250 us for the same code.
Valgrind must be on PATH (Debian: ``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import load_runs  # noqa: E402 - bench/load_runs.py: qbroker bots runs
import procs  # noqa: E402 - bench/procs.py: the bench's process helpers
import redis_stats  # noqa: E402 - bench/redis_stats.py: redis-server's CPU and commands

DUMP_WAIT = 60.0  # seconds for callgrind to write a dump it was asked for


def callgrind(out: Path) -> list[str]:
    # No instrumentation until the broker is ready (``control(pid, "--instr=on")``): its start,
    # imports included, runs several times faster, so a broker becomes ready on a loaded machine.
    return ["valgrind", "--tool=callgrind", "--cache-sim=no", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def control(pid: int, *what: str) -> None:
    """Ask the callgrind running as ``pid`` to zero (-z) or dump (-d) its counters, or to
    start instrumenting (--instr=on)."""
    subprocess.run(["callgrind_control", *what, str(pid)], check=True, capture_output=True, timeout=60)


def dumped_total(out: Path, number: int = 1) -> int:
    """The instruction total of the ``number``-th dump callgrind wrote beside ``out`` (``out.1``, ...)."""
    dump = out.with_name(f"{out.name}.{number}")
    deadline = time.monotonic() + DUMP_WAIT
    while time.monotonic() < deadline:
        if dump.exists():
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"callgrind wrote no dump at {dump}")


def bots(urls: list[str], pids: list[int], count: int, sessions: int) -> dict[str, object]:
    args = ["--sessions", str(sessions), "--count", str(count), "--think-time", "0", "--questions", "3"]
    args += ["--options", "4", "--multi-share", "0", "--other-share", "0", "--processes", "1"]
    report = load_runs.run_bots(urls, pids, args, timeout=1800).report
    errors = report.get("error_total")
    done = report.get("questionnaires", {}).get("verified")
    if errors or done != count:
        raise RuntimeError(f"the bots verified {done} of {count} questionnaires, errors: {report.get('errors')}")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=("memory", "redis"), default="memory")
    parser.add_argument("--count", type=int, default=200, help="questionnaires counted (default 200)")
    parser.add_argument("--warm-up", type=int, default=20, help="questionnaires run before counting (default 20)")
    parser.add_argument("--sessions", type=int, default=1, help="concurrent sessions (default 1, back to back)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle background reading (Redis)")
    parser.add_argument(
        "--ready-within",
        type=float,
        default=900.0,
        help="seconds a broker under callgrind has to become ready (a loaded machine needs minutes)",
    )
    parser.add_argument(
        "--commands-only", action="store_true", help="Redis's figures alone: the brokers run without callgrind (fast)"
    )
    parser.add_argument(
        "--keep", type=Path, help="a directory to keep callgrind's dumps in (read them with callgrind_annotate)"
    )
    args = parser.parse_args()
    if args.count < 1 or args.warm_up < 1 or args.sessions < 1:
        parser.error("--count, --warm-up and --sessions must be positive")
    if args.commands_only and args.store != "redis":
        parser.error("--commands-only needs --store redis")
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing and not args.commands_only:
        print(f"instructions: {' and '.join(missing)} not on PATH (Debian: apt install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="qbroker-instructions-") as tmp, procs.redis_server() as redis_url:
        if args.store == "redis" and redis_url is None:
            print("instructions: --store redis needs redis-server on PATH", file=sys.stderr)
            return 2
        counted = _count(args, Path(tmp), redis_url if args.store == "redis" else None)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for dump in Path(tmp).glob("broker-*.callgrind*"):
                shutil.copy(dump, args.keep / dump.name)
    if counted.totals:
        names = ["the agent's broker", "the clients' broker"] if len(counted.totals) == 2 else ["the broker"]
        print(f"store: {args.store}; {args.count} questionnaires of 3 questions, {args.sessions} session(s)")
        scale = counted.seconds / counted.idle_seconds if counted.idle_seconds > 0 else 0.0
        net = [total - idle * scale for total, idle in zip(counted.totals, counted.idle, strict=True)]
        print(
            f"instructions per questionnaire (user space), and without the clock-driven work of the"
            f" {counted.seconds:.0f} s run ({args.idle:g} s idle measured first):"
        )
        for name, total, own in zip(names, counted.totals, net, strict=True):
            print(f"  {name:<22} {total / args.count:>12,.0f} {own / args.count:>12,.0f}")
        if len(counted.totals) == 2:
            print(f"  {'both':<22} {sum(counted.totals) / args.count:>12,.0f} {sum(net) / args.count:>12,.0f}")
    if counted.redis is not None:
        print(redis_stats.render(counted.redis))
    return 0


@dataclass
class Counted:
    totals: list[int]  # instructions of each broker (none with --commands-only)
    redis: dict[str, object] | None  # redis_stats.per_questionnaire (Redis only)
    idle: list[int] = field(default_factory=list)  # each broker's instructions over the idle window
    idle_seconds: float = 0.0
    seconds: float = 0.0  # of the counted run


def _count(args: argparse.Namespace, tmp: Path, redis_url: str | None) -> Counted:
    """Warm up, zero the counters (and read Redis), run ``--count`` questionnaires, dump."""
    outs = [tmp / f"broker-{i}.callgrind" for i in range(2)]
    count = 2 if redis_url else 1
    counting = not args.commands_only
    print(f"[instructions] starting {count} broker(s){' under callgrind (slow: ~50x)' * counting}", file=sys.stderr)
    wrap = (lambda i: callgrind(outs[i])) if counting else None
    with procs.brokers(count, redis_url, wrap=wrap, ready_within=args.ready_within) as started:
        urls, pids = [b.url for b in started], [b.pid for b in started]
        for pid in pids if counting else ():
            control(pid, "--instr=on")
        print(f"[instructions] warm-up: {args.warm_up} questionnaires", file=sys.stderr)
        bots(urls, pids, args.warm_up, args.sessions)
        # The idle window: the brokers' clock-driven work alone (the revocation list's poll,
        # reconciliation, heartbeats), counted too, as it runs through the counted run as well.
        for pid in pids if counting else ():
            control(pid, "-z")
        began = time.monotonic()
        idle = None
        if redis_url:
            idle = redis_stats.background(redis_url, args.idle)
        else:
            time.sleep(args.idle)
        for pid in pids if counting else ():
            control(pid, "-d")
        idle_seconds = time.monotonic() - began
        for pid in pids if counting else ():
            control(pid, "-z")
        print(f"[instructions] counting: {args.count} questionnaires", file=sys.stderr)
        began = time.monotonic()
        first = redis_stats.read(redis_url) if redis_url else None
        bots(urls, pids, args.count, args.sessions)
        last = redis_stats.read(redis_url) if redis_url else None
        for pid in pids if counting else ():
            control(pid, "-d")
        seconds = time.monotonic() - began
        idle_totals = [dumped_total(out, 1) for out in outs[:count]] if counting else []
        totals = [dumped_total(out, 2) for out in outs[:count]] if counting else []
    figures = None
    if redis_url and first is not None and last is not None:
        figures = redis_stats.per_questionnaire(redis_stats.delta(first, last), idle, args.count)
    return Counted(totals, figures, idle_totals, idle_seconds, seconds)


if __name__ == "__main__":
    sys.exit(main())
