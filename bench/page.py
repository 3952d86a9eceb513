"""docs/benchmarks.md as ``bench/run.py --record`` writes it (a library of bench/run.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from load_runs import PACE, LoadResult
from table import render


def markdown(results: dict[str, Any], rows: list[list[str]], note: str, quick: bool, duration: float) -> str:
    m = results["machine"]
    s = results["settings"]
    rounds, back_to_back = s["latency_rounds"], s["latency_rounds"] * s["round_count"]
    remark = f"**Note:** {note}\n\n" if note else ""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""# Benchmarks

`python bench/run.py` measures qbroker against floors measured in the same run on the same
machine, and compares each figure with the targets of issue 6. `--quick` does short runs
(a smoke test); `--record docs/benchmarks.md` rewrites this page (`--note TEXT` adds a remark);
`--profile DIR` also records py-spy profiles of the brokers during the throughput runs
(summarize them with `python bench/profile_summary.py DIR/*.txt`). `python bench/answer_path.py
[--store redis]` breaks one answer's path through the broker into stages (parse, state
machine, commit, fan-out, write), with the p50 and p99 of each and where the slowest 1% of
answers spend their time. `python bench/cold_path.py`
times one answer inside the broker, in one process, with the processor's caches emptied
before it and without: in the latency runs every answer runs cold (see below), and this
shows a change to that path within seconds, a few microseconds apart, where the latency
runs' noise is tens. `python bench/instructions.py [--store redis]` counts the instructions
the brokers run per questionnaire under valgrind's callgrind: a figure no other tenant of
the machine can move (the same within 0.3% run to run), to compare two versions of the
broker on any machine (see "Which machine").

## What is measured

- **Floors.** A bare `websockets` echo round trip (server and client in separate processes,
  uvloop, no compression, a question-sized text frame); a bare redis-py (asyncio, hiredis)
  GET round trip against a redis-server the script starts; the resident memory per idle
  connection of the bare websockets server. This machine's speed drifts within minutes
  (the echo alone by 2x), so the back-to-back latency is measured in rounds, each right
  after its own echo (on Redis also an echo whose server first writes each message to
  Redis, one script call through the broker's own connection: the least any broker that
  commits an answer before showing the next question can do here). And the cost of a
  round trip between two processes before any work (one byte over a socketpair, each side
  asleep until the other writes): on a VM, waking a process whose core has gone idle can
  cost more than the work itself. The echo pays two such wake-ups per round trip, qbroker
  on Redis four (client -> broker -> Redis -> broker -> client): a large part of why its
  Redis ratios are what they are. And each process on the path runs with cold caches: the
  others ran in between. `bench/cold_path.py` puts the broker's own part of an answer at
  ~64 us with the caches emptied first and ~20 us without on an Intel Xeon VM on
  2026-12-03 (~122 us and ~45 us on an AMD EPYC VM the same day); on the Intel VM,
  even a system call as small as `getpid` took a few microseconds in the latency
  runs (by py-spy's native samples of a broker), 0.1 us in a loop. Redis pays for cold
  caches too, and a script more than a plain command. With the caches emptied between
  calls, `EVALSHA` of `return 1` took 9-34 us inside Redis, depending on the minute,
  against 2-4 us in a loop (a GET: 3-6 us and 0.5 us); the answer's compare-and-set
  script took 55-94 us against 22-51 us for the floor's (SET, INCR, PUBLISH); and in
  `bench/answer_path.py`'s runs the answer's script took 45-56 us per call (INFO
  commandstats, on a third VM, an Intel Xeon, the evening of 2026-12-03). Taking parts out
  of the script one at a time (the three PEXPIREs, the PUBLISH, the notice's building)
  changed nothing that this noise let show, and neither did sparing the clients' broker
  the notices of its own answers (switched on and off between rounds on the same
  processes: the same p50, lower in 15 of 30 paired rounds). Nor does the broker get the
  script's time for free: encoding the next question while the script ran, tried that
  evening, made the "commit returned" stage of `bench/answer_path.py` 16-38 us longer, not
  shorter, and was not kept. Most likely a socket write wakes its reader on the writer's own core when it
  can (a "sync" wake-up), so Redis started only once the broker slept; and that VM's
  kernel halts an idle vCPU at once (`haltpoll.guest_halt_poll_ns=0` in /proc/cmdline), so
  waking one costs the hypervisor's round trip.
  Where the processes run matters more than any of that. On a fourth VM, an AMD EPYC
  (family 26), the evening of 2026-12-03, `bench/answer_path.py --store redis` with the
  clients' broker and redis-server pinned (`taskset`) to different cores gave a "commit
  returned" stage of ~160 us, against 70-100 us with both on one core or left to the
  scheduler (which mostly keeps them together). Three more things were tried there and
  not kept, none of them moving the figure out of the run-to-run noise (consecutive
  30-second runs of the same code differ by up to 25%): the broker spinning (polling its
  socket, up to 150 us) for the script's reply instead of sleeping, which only moved Redis
  to the other core; a slimmer script for answers that do not end a questionnaire (no
  notice building, no queue and counter PEXPIREs), 23 -> 17 us inside Redis called alone
  every 200 us, but the same 22-32 us per call in `bench/answer_path.py`; and compiling six
  of the broker's modules (machine, ws, ws_frames, service, the memory store, records) with
  mypyc (an opt-in `QBROKER_COMPILE=1` build, written, then taken out again). It cut 14.6% of
  the instructions per questionnaire on the memory store (1,058,661 -> 904,504), 13% in the
  Redis clients' broker (1,118,593 -> 972,190), and the memory broker's CPU per
  questionnaire to 198-259 us (275-358 us pure). Five full runs of it gave the Redis answer
  p50 at 2.4x-2.6x (four pure runs that evening: 2.6x-2.9x), but the memory answer p50 at
  1.4x-1.6x, missed in three (pure: 1.3x-1.51x). Run in turns against the pure broker
  (`qbroker bots`, one session, 300 questionnaires a run), the compiled memory broker was the
  slower to show a started questionnaire in all 8 pairs run with `service` among the
  compiled modules (by 13-93 us), and in 4 of 7 without it; on Redis its answers were the
  slower in 2 of 3 pairs.
  Less CPU, then, but no lower latency that the noise let show, for a C compiler at install
  time, classes the tests and `bench/answer_path.py` can no longer patch, and one real
  difference found by the fault tests: with coroutines suspended inside `finally` blocks, a
  websocket worker's task ended with an agent call's exception (its traceback and all).
- **qbroker** on the memory store (one broker) and on Redis (two brokers: each session's
  agent calls go to one, its bots connect to the other), driven by `qbroker bots`:
  - *latency*: {back_to_back} questionnaires of 3 questions in {rounds} rounds, one
    session answering back to back (no think time), as the echo floor's client sends; a
    figure is the median over the rounds, its ratio the median of each round's ratio to
    the echo of that round. The bots time from the moment an encoded frame leaves to the
    moment the reply arrives, before decoding it, as the echo client does. And
    {s["latency_count"]} questionnaires *paced*: 2 sessions thinking {PACE} ms before each
    action, beside an echo floor paced the same way (between round trips that far apart
    both processes go idle, and waking them costs more than the round trip: the paced echo
    is several times the back-to-back one).
    The targets are checked on the back-to-back figures;
  - *throughput*: 100 and 1,000 concurrent sessions, no think time, {s["duration"]:g} s
    each, bots in {s["bot_processes"]} processes; the rate is taken over the steady middle of the run
    (10% -> 90% of completions), without set-up and drain;
  - *CPU per questionnaire*: utime+stime of the broker processes (from /proc/<pid>/stat)
    over that same window, divided by the questionnaires completed in it, so it does not
    depend on how fast the load generator is;
  - *memory*: a fresh broker, RSS delta with {s["clients"]} idle clients connected (one per
    session, hello said, `idle` received), spread over {s["client_processes"]} client processes.
- Every questionnaire the bots run is verified (answers, text lines, clarifications);
  the "note" column gives the errors.
- **Which Python.** The floors, the brokers and the bots all run on the interpreter that
  runs the bench (the "python" of the machine line below). Its build shows in the CPU
  figures: on 2026-12-03, on a machine like this one, the broker took 13-16% more CPU per
  questionnaire on pyenv's build of 3.11.7 (pyenv's default: no profile-guided
  optimization) than on Debian's python3.11 (built with PGO and LTO, as is the
  `python:3.11-slim` image that `deploy/Dockerfile` builds on), in three paired runs. To
  measure as deployed, run it from a virtualenv of an optimized build:
  `python3.11 -m venv /tmp/venv && /tmp/venv/bin/pip install -e '.[test]' &&
  /tmp/venv/bin/python bench/run.py` (on Debian, `apt install python3.11-venv` first).
- **Which machine.** The ratios set the broker's work, which runs at the speed of the
  machine's cores, against floors made mostly of the kernel's work (system calls, waking
  processes), which does not scale with it. The same broker code, on Debian's python3.11,
  took 240-290 us of CPU per questionnaire on the memory store on an Intel Xeon VM on
  2026-12-02/03, and 560-630 us on an AMD EPYC VM on 2026-12-03, where a plain Python loop
  also ran at half the speed (and varied by 1.8x from one second to the next); there the
  echo was no slower (0.08-0.15 ms) and every ratio went up with the broker's work. On a
  third VM, another Intel Xeon (CPU model 207), the evening of 2026-12-03, it took
  320-470 us. So the bench also times a fixed pure-Python loop (`bench/floors.py
  python-work`), at the start and before each throughput run: a record then says how fast
  its machine ran Python when the CPU figures were taken (on the AMD VM, 9.7-12.6 ms, from
  one minute to the next; on the third VM, 4.5-9.9 ms). What
  the broker does is better told by a count, which depends on the code and the Python
  build, not on how fast or how busy the machine is: `bench/instructions.py` gave 1.13 M
  instructions per questionnaire on the memory store and 1.94 M on Redis (0.77 M in the
  agent's broker, 1.17 M in the clients') for the code of those runs, and 1.06 M and
  1.83 M (0.71 M + 1.12 M) after five cuts the same day, on the AMD VM and again on the
  third VM (1,058,661 and 1,825,712 there, within 0.4%): the count follows the code, not
  the machine. The latency ratios follow the machine as well: on the fourth VM (an AMD
  EPYC of CPU family 26) the Redis answer p50 missed its target in all four full runs
  (2.6x-2.9x); on a fifth (an AMD EPYC of family 25, the same evening, with the same kernel
  command line) the same code met it in eleven of twelve (2.1x-2.4x; missed at 2.54x), and
  every target in nine of those twelve. There the tail was Redis's: in `bench/answer_path.py --store redis`, the
  slowest 1% of answers took 330-420 us inside the clients' broker against a p50 of
  190-227 us, and the commit (the script's round trip) was 240-270 us of it, against
  113-135 us at the p50; no other stage was more than 16 us above its own p50. On a sixth
  (an AMD EPYC of family 25, model 1, on 2026-12-03/04, where the pure-Python loop ran at
  6-12 ms from one minute to the next) the same code missed the Redis answer p50 in all six
  full runs (2.7x-3.5x) and its p99 too (3.4x-3.8x); there the answer's script alone took
  48 us inside Redis at the p50 and 116 us at the p99 (INFO latencystats); called alone
  every 200 us it took 28-35 us, and 18-23 us when it published the record as it came
  instead of building the notice around it (not kept: other brokers need the notice).

## The run recorded here

{when}, {"quick" if quick else "full"} run, {duration:.0f} s.

Machine: {m["nproc"]} cores ({m["cpu"]}), {m["memory"]} RAM, Linux {m["kernel"]},
Python {m["python"]}; {m["packages"]}; redis-server {m["redis-server"]}. Hypervisor steal
(this VM's cores running someone else's work, from /proc/stat): {m.get("steal", "-")}.

{remark}The bots share the machine's cores with the brokers (and redis-server): "machine
saturated" in a note means the whole machine was busy, so the load generator (or other
processes), not only the broker, limited that figure. "load generator limited" means the
bots' processes were at a full core while the broker was not.

{render(rows, markdown=True)}

Latency ratios are to the p50 (p50 rows) or p99 (p99 rows) of the echo measured beside that
store's latency run (the paced rows: of the paced echo); the memory ratio is to the bare
websockets server's RSS per idle connection.

## Raw figures

```json
{json.dumps(plain(results), indent=2)}
```
"""


def plain(results: dict[str, Any]) -> dict[str, Any]:
    """The run's results as JSON can hold them: the floors, the settings, and per store the
    figures of each run."""
    out: dict[str, Any] = {"floors": results["floors"], "settings": results["settings"]}
    for store in ("memory", "redis"):
        suite = results.get(store)
        if not suite:
            continue
        entry: dict[str, Any] = {"memory": suite["memory"]}
        entry["latency_rounds"] = [
            {
                "echo": r["echo"],
                "write_echo": r["write_echo"],
                "latency_ms": r["run"].report["latency_ms"],
                "steal": r.get("steal"),
            }
            for r in suite["latency_rounds"]
        ]
        for key in ("latency_paced", "tp100", "tp1000"):
            entry[key] = _plain_run(suite[key], suite.get(f"{key}_python"))
        out[store] = entry
    return out


def _plain_run(lr: LoadResult, python_work: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "steady_rate_per_s": None if lr.rate is None else round(lr.rate, 1),
        "cpu_us_per_questionnaire": None if lr.cpu_per_q is None else round(lr.cpu_per_q * 1e6),
        "broker_util": [round(u, 2) for u in lr.broker_util],
        "bots_util": [round(u, 2) for u in lr.bots_util],
        "machine_util": None if lr.machine_util is None else round(lr.machine_util, 2),
        "steal": None if lr.steal is None else round(lr.steal, 3),
        "python_work": python_work,
        "notes": lr.notes,
        "bots": {
            k: lr.report[k]
            for k in (
                "elapsed_s",
                "questionnaires",
                "questionnaires_per_s",
                "frames_per_s",
                "latency_ms",
                "errors",
            )
        },
    }
