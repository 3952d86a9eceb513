"""docs/benchmarks.md's last section, "The inbox", as ``bench/inbox.py --record`` writes it
(a library of bench/inbox.py; bench/run.py --record keeps the section as it finds it).

The section ends the page, after the main run's raw figures; it holds no code fence (the
main run's raw figures are read back up to the page's last one).
"""

from __future__ import annotations

import time
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


def section(results: dict[str, Any], rows: list[list[str]], note: str) -> str:
    m = results["machine"]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    seeded = results["seeded"]
    load = results["load_before"], results["load_after"]
    remark = f"**Note:** {note}\n\n" if note else ""
    return f"""\
{INBOX}

{METHOD}
### The run recorded here

{when}, {"quick" if results["quick"] else "full"} run, {results["duration_s"]} s. Machine: {m["nproc"]} cores
({m["cpu"]}), Python {m["python"].split(" (")[0]}; redis-server {m["redis-server"]}. How busy the
machine was: load average {load[0][0]:g} / {load[0][1]:g} / {load[0][2]:g} (1, 5, 15 min) before the run and
{load[1][0]:g} / {load[1][1]:g} / {load[1][2]:g} after it; the cores were {results["busy_share"]:.0%} busy over
the run (this run's processes and every other tenant's), hypervisor steal
{"-" if results["steal"] is None else f"{results['steal']:.1%}"}. {seeded["questionnaires"]} questionnaires
opened in {seeded["sessions"]} sessions ({seeded["s"]} s); {results["held_sockets"]} inbox sockets held
by a child process beside the 10 measuring ones; they received {results["held_frames"]} frames over the run.

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
