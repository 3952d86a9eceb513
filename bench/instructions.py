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
- Not counted: the kernel (system calls, the network stack), redis-server, the bots.

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
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import load_runs  # noqa: E402 - bench/load_runs.py: qbroker bots runs
import procs  # noqa: E402 - bench/procs.py: the bench's process helpers

DUMP_WAIT = 60.0  # seconds for callgrind to write a dump it was asked for


def callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--cache-sim=no", f"--callgrind-out-file={out}"]


def control(pid: int, what: str) -> None:
    """Ask the callgrind running as ``pid`` to zero (-z) or dump (-d) its counters."""
    subprocess.run(["callgrind_control", what, str(pid)], check=True, capture_output=True, timeout=60)


def dumped_total(out: Path) -> int:
    """The instruction total of the first dump callgrind wrote beside ``out`` (``out.1``)."""
    dump = out.with_name(out.name + ".1")
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
    args = parser.parse_args()
    if args.count < 1 or args.warm_up < 1 or args.sessions < 1:
        parser.error("--count, --warm-up and --sessions must be positive")
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        print(f"instructions: {' and '.join(missing)} not on PATH (Debian: apt install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="qbroker-instructions-") as tmp, procs.redis_server() as redis_url:
        if args.store == "redis" and redis_url is None:
            print("instructions: --store redis needs redis-server on PATH", file=sys.stderr)
            return 2
        outs = [Path(tmp) / f"broker-{i}.callgrind" for i in range(2)]
        count = 2 if args.store == "redis" else 1
        print(f"[instructions] starting {count} broker(s) under callgrind (slow: ~50x)", file=sys.stderr)
        with procs.brokers(
            count, redis_url if args.store == "redis" else None, wrap=lambda i: callgrind(outs[i]), ready_within=300
        ) as started:
            urls, pids = [b.url for b in started], [b.pid for b in started]
            print(f"[instructions] warm-up: {args.warm_up} questionnaires", file=sys.stderr)
            bots(urls, pids, args.warm_up, args.sessions)
            for pid in pids:
                control(pid, "-z")
            print(f"[instructions] counting: {args.count} questionnaires", file=sys.stderr)
            began = time.monotonic()
            bots(urls, pids, args.count, args.sessions)
            for pid in pids:
                control(pid, "-d")
            totals = [dumped_total(out) for out in outs[:count]]
            took = time.monotonic() - began
    names = ["the agent's broker", "the clients' broker"] if count == 2 else ["the broker"]
    print(f"store: {args.store}; {args.count} questionnaires of 3 questions, {args.sessions} session(s), {took:.0f} s")
    print("instructions per questionnaire (user space):")
    for name, total in zip(names, totals, strict=True):
        print(f"  {name:<22} {total / args.count:>12,.0f}")
    if count == 2:
        print(f"  {'both':<22} {sum(totals) / args.count:>12,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
