"""docs/benchmarks.md as ``bench/run.py --record`` writes it (a library of bench/run.py).

The page is this template: the method and the targets, the run just measured (its machine,
its table, its note), what the numbers mean, and the run's raw figures. The prose that is
not the run's own lives here, once; tests/unit/test_bench_page.py checks that the page in
docs/ says the same. The investigation behind it is docs/benchmarks-history.md, by hand.
"""

from __future__ import annotations

import json
import time
from typing import Any

from load_runs import PACE, LoadResult
from table import STORES, TARGETS, render

RECORDED = "## The run recorded here"
MEANING = "## What the numbers mean"
RAW = "## Raw figures"

INTRO = """\
# Benchmarks

`python bench/run.py` measures qbroker against floors measured in the same run on the same
machine, and checks each figure against its target (below). `--quick` does short runs (a
smoke test); `--record docs/benchmarks.md` rewrites this page (`--note TEXT` adds a remark);
`--profile DIR` also records py-spy profiles of the brokers during the throughput runs
(summarize them with `python bench/profile_summary.py DIR/*.txt`); `--no-redis` skips the
Redis runs. Three more tools look inside one answer:

- `python bench/answer_path.py [--store redis]` breaks one answer's path through the broker
  into stages (parse, state machine, commit, fan-out, write), with the p50 and p99 of each
  and where the slowest 1% of answers spend their time;
- `python bench/cold_path.py` times one answer inside the broker, in one process, with the
  processor's caches emptied before it and without: in the latency runs every answer runs
  cold (see "What the numbers mean"), and this shows a change to that path within seconds,
  a few microseconds apart, where the latency runs' noise is tens;
- `python bench/instructions.py [--store redis]` counts the instructions the brokers run per
  questionnaire under valgrind's callgrind: a figure no other tenant of the machine can move,
  to compare two versions of the broker on any machine. Its second column takes out the
  brokers' clock-driven work (counted over an idle window first, times the run's length):
  under callgrind a run's length follows the machine's load, and the raw count with it (the
  same code 2.32 M and 2.44 M per questionnaire on Redis an hour apart; the second column
  2,296,901 and 2,299,179 for runs of 21 s and 57 s). On Redis it also prints redis-server's
  CPU and `INFO commandstats` per questionnaire (`bench/redis_stats.py`); `--keep DIR` keeps
  callgrind's dumps, to read with `callgrind_annotate` (which C functions, and whose, took them);
  `bench/capacity_idle.py` gives the same for an idle connected client, per second.

`python bench/inbox.py` measures the inbox at the scale it must hold (10,000 open
questionnaires, 1,000 inbox sockets, 3 brokers); its run is the last section of this page,
["The inbox"](#the-inbox), which `bench/run.py --record` keeps as it is.

How these figures came to be, run by run and machine by machine, with what was tried and
not kept: [the benchmarks' history](benchmarks-history.md).
"""

METHOD = """\
## What is measured

- **Floors.** A bare `websockets` echo round trip (server and client in separate processes,
  uvloop, no compression, a question-sized text frame), back to back and paced like the
  paced runs; a bare redis-py (asyncio, hiredis) GET round trip against a redis-server the
  script starts; the resident memory per idle connection of the bare websockets server.
  And two floors that say how the machine is doing at the moment: the round trip between
  two processes before any work (one byte over a socketpair, each side asleep until the
  other writes: what waking a process costs here), and a fixed pure-Python loop
  (`bench/floors.py python-work`), timed at the start and before each throughput run,
  because the broker's CPU figures scale with it.
- **Latency in rounds.** This machine's speed drifts within minutes (the echo alone by 2x),
  so the back-to-back latency is measured in rounds, each right after its own echo (on
  Redis also an echo whose server first writes each message to Redis, one script call
  through the broker's own connection: the least any broker that commits an answer before
  showing the next question can do here).
- **qbroker** on the memory store (one broker) and on Redis (two brokers: each session's
  agent calls go to one, its bots connect to the other), driven by `qbroker bots`:
  - *latency*: {back_to_back} questionnaires of 3 questions in {rounds} rounds, one
    session answering back to back (no think time), as the echo floor's client sends; a
    figure is the median over the rounds, its ratio the median of each round's ratio to
    the echo of that round. The bots time from the moment an encoded frame leaves to the
    moment the reply arrives, before decoding it, as the echo client does. And
    {latency_count} questionnaires *paced*: 2 sessions thinking {pace} ms before each
    action, beside an echo floor paced the same way (between round trips that far apart
    both processes go idle, and waking them costs more than the round trip: the paced echo
    is several times the back-to-back one).
    The targets are checked on the back-to-back figures;
  - *throughput*: 100 and 1,000 concurrent sessions, no think time, {duration:g} s
    each, bots in {bot_processes} processes; the rate is taken over the steady middle of the run
    (10% -> 90% of completions), without set-up and drain;
  - *CPU per questionnaire*: utime+stime of the broker processes (from /proc/<pid>/stat)
    over that same window, divided by the questionnaires completed in it, so it does not
    depend on how fast the load generator is;
  - *memory*: a fresh broker, RSS delta with {clients} idle clients connected (one per
    session, hello said, `idle` received), spread over {client_processes} client processes.
- Every questionnaire the bots run is verified (answers, text lines, clarifications);
  the "note" column gives the errors.
- **Which Python.** The floors, the brokers and the bots all run on the interpreter that
  runs the bench (the "python" of the machine line below). Its build shows in the CPU
  figures: on 2026-12-03, on an Intel Xeon VM, the broker took 13-16% more CPU per
  questionnaire on pyenv's build of 3.11.7 (pyenv's default: no profile-guided
  optimization) than on Debian's python3.11 (built with PGO and LTO, as is the
  `python:3.11-slim` image that `deploy/Dockerfile` builds on), in three paired runs. To
  measure as deployed, run it from a virtualenv of an optimized build:
  `python3.11 -m venv /tmp/venv && /tmp/venv/bin/pip install -e '.[test]' &&
  /tmp/venv/bin/python bench/run.py` (on Debian, `apt install python3.11-venv` first).
"""

TARGETS_NOTE = """\
The latency targets are ratios to the echo measured beside that store's latency rounds, and
are checked on the back-to-back figures; the memory target is per idle connected client.
The table's sixth column says "met" or "MISSED".
"""

RUN_PREAMBLE = """\
The bots share the machine's cores with the brokers (and redis-server): "machine
saturated" in a note means the whole machine was busy, so the load generator (or other
processes), not only the broker, limited that figure. "load generator limited" means the
bots' processes were at a full core while the broker was not.
"""

RUN_FOOTNOTE = """\
Latency ratios are to the p50 (p50 rows) or p99 (p99 rows) of the echo measured beside that
store's latency run (the paced rows: of the paced echo); the memory ratio is to the bare
websockets server's RSS per idle connection.
"""

CONCLUSIONS = f"""\
{MEANING}

**The machine sets the ratios as much as the broker does.** The floors are mostly the
kernel's work (system calls, waking processes), which does not scale with the machine's
cores; the broker's work, Python, does. The same broker code, on Debian's python3.11, took
240-290 us of CPU per questionnaire on the memory store on VM 1 below (an Intel Xeon),
560-630 us on VM 2 (an AMD EPYC), whose echo was no slower (0.08-0.15 ms), so every ratio
went up with the broker's work, and 320-470 us on VM 3 (another Intel Xeon). Hence the
pure-Python work floor in every record, and the CPU model and Python build in its machine
line.

**Where the Redis ratios missed.** The Redis answer -> next question p50 (at most 2.5x the
echo) is the tightest target, and on the same code it is met or missed with the type of VM.
The full runs on each VM the bench ran on (the run recorded on 2026-12-04 is one of VM 7's):

| VM | CPU | date | full runs | Redis answer p50 | every target met |
|---|---|---|---|---|---|
| 1 | Intel Xeon | 2026-12-03 | 17 | met in 10 (2.3x-2.5x), missed in 7 (2.5x-2.7x) | 10 |
| 2 | AMD EPYC | 2026-12-03 | 8 | 3.0x-4.0x, missed in all | 0 |
| 3 | Intel Xeon, CPU model 207 | 2026-12-03 | 9 | missed in 7 (2.6x-2.8x), met at 2.1x and 2.3x | 2 |
| 4 | AMD EPYC, family 26 | 2026-12-03 | 4 | 2.6x-2.9x, missed in all | 0 |
| 5 | AMD EPYC, family 25, model 17 | 2026-12-03 | 12 | 2.1x-2.4x, missed once (2.54x) | 9 |
| 6 | AMD EPYC, family 25, model 1 | 2026-12-03/04 | 6 | 2.7x-3.5x, missed in all (p99 3.4x-3.8x too) | 0 |
| 7 | AMD EPYC, family 25, model 17 | 2026-12-04 | 9 | 2.1x-2.54x, missed once | 8 |

A Redis miss on one type of VM is that machine's: to compare two versions of the broker,
count their instructions (`bench/instructions.py`) rather than compare their ratios.

**Why Redis's ratios are the highest.** The echo pays two process wake-ups per round trip,
qbroker on Redis four (client -> broker -> Redis -> broker -> client), and on a VM waking a
process whose core has gone idle can cost more than the work itself (on VM 7 on
2026-12-04, the wake-up floor was 0.042 ms against the echo's 0.104 ms). Each process on
the path also runs with cold caches, the others having run in between: `bench/cold_path.py`
put the broker's own part of an answer at ~64 us with the caches emptied first and ~20 us
without on VM 1 (~122 us and ~45 us on VM 2), and with the caches emptied between calls the
answer's compare-and-set script took 55-94 us inside Redis, against 22-51 us for the echo +
Redis write floor's script (VM 3). Where the processes run matters more: with the clients'
broker and redis-server pinned to different cores, the "commit returned" stage of
`bench/answer_path.py` took ~160 us, against 70-100 us with both on one core or left to the
scheduler (VM 4). Where the target is met, the tail is Redis's too: on VM 5 the slowest 1%
of answers took 330-420 us inside the clients' broker against a p50 of 190-227 us, and the
commit was 240-270 us of it (113-135 us at the p50).

**CPU follows the machine; instructions follow the code.** `bench/instructions.py` gave
1.06 M instructions per questionnaire on the memory store and 1.83 M on Redis (0.71 M in
the agent's broker, 1.12 M in the clients') for the code of 2026-12-03, on VM 2 and again
on VM 3 (1,058,661 and 1,825,712 there, within 0.4%). The Python build counts as well:
13-16% more CPU without profile-guided optimization ("Which Python").

On 2026-12-06 (an AMD EPYC VM shared with other work) the broker's own Python side was cut
from 1,322,819 to ~1,097,000 instructions per questionnaire on the memory store (-17%), and
on Redis from 2,391,822 (942,507 in the agent's broker, 1,449,316 in the clients') to
2,113,699 (771,558 and 1,342,141; -12%), the store's own commands and scripts unchanged.
Most of it: a start's body and a client's answer frame are decoded by msgspec straight into
their typed values, their shape checked in C as they decode (`core/plain_start.py`,
`core/plain_answer.py`; any other body or frame takes the general path, which words every
refusal); a Host header already judged is not parsed again; a client's own write is shown
without a coroutine. The count includes what the broker does on its clock (the revocations'
refresh twice a second, the reconciliation), so a run that a loaded machine slows down
counts a little more: the same code counted 1,178,006 and 1,220,552 at load averages of 9
and 10 with tests running beside it.

Later that day the Redis path alone was cut from 2,044,100 to 1,724,036 instructions per
questionnaire on both brokers (-15.7%; the clients' broker 1,293,673 -> 1,026,143, the
agent's 750,427 -> 697,893), the memory store's count unchanged (1,071,421 and 1,069,066)
and so were Redis's 32 commands per questionnaire. Each step counted on its own, in order:
the write scripts take their numbers as one argument and, on one Redis, only the
questionnaire's hash of their keys (a cluster is passed all six: it checks them), and the
store packs their calls itself (hiredis packed each of a write's 22 arguments for ~1,500
instructions: -117 k, and -21 k more for joining the parts rather than formatting them);
a notice is handed to its handler as it is read, without waking the link's reader task or
making a timer (-69 k); the notice of a client's answer is dropped unread by the process
that wrote and showed it, known by its first bytes up to its record (-47 k); a record
another process packed has its questions decoded straight into `Question` values (-44 k);
and a record is packed without listing its questions first, a write of ours is awaited by
id and version rather than by hashing its kilobyte of record, and the fan-out's handler
makes no coroutine for a notice it deals with at once (-24 k together).

By the end of that day it was 1,592,412 (from 1,731,490 measured again that morning: -8%;
the clients' broker 936,922, the agent's 655,491; the memory store 1,059,725), Redis's
commands unchanged. This time each call was counted on its own: a harness ran one store
call at a time under callgrind with collection switched on around it alone (valgrind's
client requests). A compare-and-set spent ~83 k instructions before it reached the wire; a
round trip to Redis costs ~25 k whatever it carries; unpacking a record another process
packed cost ~96 k, one of a questionnaire known here ~46 k. So a record's rest is packed
from, and read into, typed msgspec fields (`records._RestRecord`) instead of a dict built
for it and then a state built from that dict; a write formats its retention once and reads
the clock by `time_ns`; the inbox entry is made positionally (-78 k with the packing, then
-50 k for the typed reading: unpacking 96 k -> 74 k and 46 k -> 30 k); notices are read
typed, a question's wire form is made by msgspec from its fields, and a message is told from
a subscription's confirmation without a call (-11 k together).

**Memory and throughput.** An idle client cost the broker 11.6-11.7 KiB on the memory store
and 11.1-11.3 KiB on Redis in every full run on VMs 3, 5 and 7, less than the bare
websockets server's ~15 KiB. Throughput has no target: the bots share the machine's two
cores with the brokers, and the notes say when the machine, not the broker, set the rate.

**Tried and not kept** (the history gives the figures): encoding the next question while
the answer's script runs (the commit stage got longer); taking parts out of that script, or
sparing the clients' broker the
notices of its own answers (nothing the timed runs' noise let show then; done since, its
instructions counted above);
not publishing a shown answer's notice at all when no other process hears the session
(its script counted the channel's subscribers and a channel of the writer's notice
connection's own: -4 k only, as dropping such a notice unread cost ~1.3 k, and Redis's CPU
did not move beyond the noise); packing a record's questions from their fields (the agent's
broker makes their wire forms anyway, for the result's details: -3 k);
spinning for the script's reply instead of sleeping (it moved Redis to the other core); a
slimmer script for answers that do not end a questionnaire (faster alone, not in situ);
publishing the record without the notice around it (other brokers need the notice); and
compiling six of the broker's modules with mypyc (14.6% fewer instructions on the memory
store, but no lower latency that the noise let show, for a C compiler at install time).
"""


def markdown(results: dict[str, Any], rows: list[list[str]], note: str, quick: bool, duration: float) -> str:
    """The whole page for one run."""
    return "\n".join(
        [
            head(results["settings"]),
            recorded(results["machine"], rows, note, quick, duration),
            CONCLUSIONS,
            raw_figures(results),
        ]
    )


def head(settings: dict[str, Any]) -> str:
    """What the page says before the run: the tools, the method (with the run's settings),
    the targets."""
    method = METHOD.format(
        back_to_back=settings["latency_rounds"] * settings["round_count"],
        rounds=settings["latency_rounds"],
        latency_count=settings["latency_count"],
        pace=PACE,
        duration=settings["duration"],
        bot_processes=settings["bot_processes"],
        clients=settings["clients"],
        client_processes=settings["client_processes"],
    )
    return "\n".join([INTRO, method, targets()])


def targets() -> str:
    m, r = TARGETS["memory"], TARGETS["redis"]
    lines = [
        "## Targets",
        "",
        "| figure | memory store | Redis store |",
        "|---|---|---|",
        f"| answer -> next question p50 | <= {m.a50}x echo p50 | <= {r.a50}x echo p50 |",
        f"| answer -> next question p99 | <= {m.a99}x echo p99 | <= {r.a99}x echo p99 |",
        f"| start -> first question p50 | <= {m.s50}x echo p50 | <= {r.s50}x echo p50 |",
        f"| broker CPU per 3-question questionnaire | <= {m.cpu * 1e6:.0f} us | <= {r.cpu * 1e6:.0f} us |",
        f"| RSS per idle client | <= {m.rss_kib} KiB | <= {r.rss_kib} KiB |",
        "",
        TARGETS_NOTE,
    ]
    return "\n".join(lines)


def recorded(machine: dict[str, str], rows: list[list[str]], note: str, quick: bool, duration: float) -> str:
    """The run's own section: when, its machine, its note, its table."""
    m = machine
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    remark = f"**Note:** {note}\n\n" if note else ""
    return f"""\
{RECORDED}

{when}, {"quick" if quick else "full"} run, {duration:.0f} s.

Machine: {m["nproc"]} cores ({m["cpu"]}), {m["memory"]} RAM, Linux {m["kernel"]},
Python {m["python"]}; {m["packages"]}; redis-server {m["redis-server"]}. Hypervisor steal
(this VM's cores running someone else's work, from /proc/stat): {m.get("steal", "-")}.

{remark}{RUN_PREAMBLE}
{render(rows, markdown=True)}

{RUN_FOOTNOTE}"""


def raw_figures(results: dict[str, Any]) -> str:
    return f"""\
{RAW}

<details><summary>The run's figures as measured (JSON)</summary>

```json
{compact_json(plain(results))}
```

</details>
"""


def compact_json(value: Any, depth: int = 0) -> str:
    """JSON indented by two spaces, but an object or array of plain values on one line: a
    run's figures in a quarter of the lines, read by ``json.loads`` as before."""
    pad = "  " * (depth + 1)
    if isinstance(value, dict) and any(isinstance(v, (dict, list)) for v in value.values()):
        items = [f"{pad}{json.dumps(k)}: {compact_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{pad}{compact_json(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * depth + "]"
    return json.dumps(value)


def plain(results: dict[str, Any]) -> dict[str, Any]:
    """The run's results as JSON can hold them: the floors, the settings, and per store the
    figures of each run."""
    out: dict[str, Any] = {"floors": results["floors"], "settings": results["settings"]}
    for store in STORES:
        suite = results.get(store)
        if not suite:
            continue
        entry: dict[str, Any] = {"memory": suite.get("memory")}
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
