"""docs/benchmarks.md's last section, "The inbox", as ``bench/inbox.py --record`` writes it
(a library of bench/inbox.py; bench/run.py --record keeps the section as it finds it).

The section ends the page, after the main run's raw figures; it holds no code fence (the
main run's raw figures are read back up to the page's last one).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

INBOX = "## The inbox"

METHOD = """\
`python bench/inbox.py` (`--record docs/benchmarks.md` rewrites this section, `--quick` is
ten times smaller) starts three brokers over one redis-server and opens 10,000
questionnaires across 5,000 sessions (250 tenants `t000:*`..`t249:*` of 20 sessions, two
questionnaires each, left open), with 1,000 inbox websockets connected (4 per tenant, each
with its tenant's pattern, spread over the brokers). Then, one request at a time:
`GET /v1/inbox` with a tenant's pattern (20 sessions, 40 items) on a kept-alive connection
to a random broker, beside `GET /healthz` on the same brokers and a bare redis-py round
trip; and 300 answers in 5 live sessions (one per tenant), each answered on one broker while
the session's own clients and two of the tenant's inbox sockets wait on the two other
brokers, timed from the answer leaving to the next `question` (own clients) and to the
`inbox_item` that says so (inbox sockets), at the moment the bytes reach each socket.
"""


def render(rows: list[list[str]]) -> str:
    """The run's table: figure, qbroker, the floors beside it, target, met/MISSED."""
    header = ["figure", "qbroker", "beside it, same run", "target", ""]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


MEANING = """\
What the numbers mean: a `GET` costs two round trips to Redis (the tenant's index shard,
then one script per session, all pipelined) and the sorting of its items, so it grows with
the sessions a page shows, not with the 5,000 sessions beside them; an operator's `*` walks
the 32 index shards from its cursor and reads the page's sessions and one more. An answer
reaches the inbox sockets on another broker through the notice that also brings it to the
session's own clients there, and the inbox hears each notice first: the two arrive together.
"""


def section(results: dict[str, Any], rows: list[list[str]], note: str) -> str:
    m = results["machine"]
    seeded = results["seeded"]
    before, after = results["load_before"], results["load_after"]
    steal = "-" if results["steal"] is None else f"{results['steal']:.1%}"
    run = (
        f"{results['when']}, {'quick' if results['quick'] else 'full'} run, {results['duration_s']} s. "
        f"Machine: {m['nproc']} cores ({m['cpu']}), Python {m['python'].split(' (')[0]}; redis-server "
        f"{m['redis-server']}. How busy it was: load average {before[0]:g} / {before[1]:g} / {before[2]:g}"
        f" (1, 5, 15 min) before the run and {after[0]:g} / {after[1]:g} / {after[2]:g} after it; the "
        f"cores were {results['busy_share']:.0%} busy over the run (this run's processes and every other "
        f"tenant's), hypervisor steal {steal}. {seeded['questionnaires']:,} questionnaires opened in "
        f"{seeded['sessions']:,} sessions ({seeded['s']:g} s); {results['held_sockets']} inbox sockets held "
        f"by a child process beside the 10 measuring ones, which received {results['held_frames']} frames "
        "over the run."
    )
    remark = textwrap.fill(f"**Note:** {note}", 92, break_on_hyphens=False) + "\n\n" if note else ""
    return f"""\
{INBOX}

{METHOD}
{MEANING}
### The run recorded here

{textwrap.fill(run, 92, break_on_hyphens=False)}

{remark}{render(rows)}
"""


def record(path: Path, results: dict[str, Any], rows: list[list[str]], note: str) -> None:
    """Put this run's section at the end of the page, in place of the one before."""
    page = path.read_text(encoding="utf-8")
    path.write_text(without_inbox(page).rstrip("\n") + "\n\n" + section(results, rows, note), encoding="utf-8")


def without_inbox(page: str) -> str:
    at = page.find("\n" + INBOX + "\n")
    return page if at < 0 else page[: at + 1]


def kept_inbox(path: Path) -> str:
    """The page's inbox section as it is ("" when it has none), for bench/run.py to keep."""
    if not path.is_file():
        return ""
    page = path.read_text(encoding="utf-8")
    at = page.find("\n" + INBOX + "\n")
    return "" if at < 0 else page[at:]
