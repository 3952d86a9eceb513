"""bench/inbox.py's section of docs/benchmarks.md: written at the end of the page, in place
of the one before, kept by bench/run.py --record, and no obstacle to reading the main run's
raw figures (no broker is started here)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import inbox  # noqa: E402
import inbox_page  # noqa: E402

from tests.unit.test_bench_page import _raw_figures  # noqa: E402


def figures(p50: float, p99: float) -> dict[str, float]:
    return {"n": 100, "p50": p50, "p90": p50, "p99": p99, "max": p99}


def results(inbox_p50: float = 0.8, own_p50: float = 0.7) -> dict[str, Any]:
    return {
        "machine": {"nproc": "2", "cpu": "A CPU", "python": "3.11.7 (build)", "redis-server": "7.0.15"},
        "when": "2026-12-04 16:53 UTC",
        "load_before": [1.0, 2.0, 3.0],
        "load_after": [1.5, 2.0, 3.0],
        "busy_share": 0.62,
        "steal": 0.001,
        "duration_s": 80,
        "quick": False,
        "seeded": {"questionnaires": 10000, "sessions": 5000, "s": 30.0},
        "held_sockets": 990,
        "held_frames": 600,
        "floors": {"ws_echo": figures(0.1, 0.2), "redis": figures(0.05, 0.1)},
        "get": {"inbox": figures(0.9, 3.0), "healthz": figures(0.1, 0.5), "every_session": figures(300.0, 400.0)},
        "propagation": {"inbox": figures(inbox_p50, 5.0), "own": figures(own_p50, 5.0)},
    }


def test_the_table_checks_the_three_targets() -> None:
    rows = inbox.table(results())
    assert [row[-1] for row in rows] == ["met", "met", "", "met", ""]
    slow = inbox.table(results(inbox_p50=1.2, own_p50=0.7))
    assert slow[3][-1] == "MISSED" and "(1.71x)" in slow[3][1]


def test_the_section_ends_the_page_and_replaces_the_one_before(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    main = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    page.write_text(inbox_page.without_inbox(main), encoding="utf-8")

    inbox_page.record(page, results(), inbox.table(results()), "the run before")
    inbox_page.record(page, results(), inbox.table(results()), "second")

    text = page.read_text(encoding="utf-8")
    assert text.count(inbox_page.INBOX) == 1 and "**Note:** second" in text and "the run before" not in text
    assert text.startswith(inbox_page.without_inbox(main).rstrip("\n"))
    assert "```" not in text[text.index(inbox_page.INBOX) :]
    assert _raw_figures(text) == _raw_figures(main)  # the main run's figures read as before
    flat = " ".join(text.split())
    assert "load average 1 / 2 / 3 (1, 5, 15 min)" in flat and "62% busy" in flat


def test_the_main_run_keeps_the_section_as_it_finds_it(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    assert inbox_page.kept_inbox(page) == ""
    page.write_text("# Benchmarks\n\nmain run\n", encoding="utf-8")
    assert inbox_page.kept_inbox(page) == ""
    inbox_page.record(page, results(), inbox.table(results()), "")
    kept = inbox_page.kept_inbox(page)
    assert kept.startswith("\n" + inbox_page.INBOX + "\n")
    assert "main run" not in kept and page.read_text(encoding="utf-8").endswith(kept)
