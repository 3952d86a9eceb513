"""The benchmark's report: docs/benchmarks.md says what bench/page.py's template says, and
the table keeps the format the page and its readers rely on (no broker is started here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# bench/ is a folder of scripts whose modules import each other by name, as `python
# bench/run.py` finds them beside itself.
sys.path.insert(0, str(ROOT / "bench"))

import page  # noqa: E402
import redis_stats  # noqa: E402
import table  # noqa: E402
from load_runs import LoadResult  # noqa: E402

DOC = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")


def _raw_figures(doc: str) -> dict[str, Any]:
    raw = doc[doc.index(page.RAW) :]
    return dict(json.loads(raw[raw.index("```json\n") + len("```json\n") : raw.rindex("\n```")]))


def test_the_page_before_its_run_is_the_template_with_the_runs_settings() -> None:
    settings = _raw_figures(DOC)["settings"]
    assert DOC[: DOC.index(page.RECORDED)] == page.head(settings) + "\n"


def test_the_page_after_its_run_is_the_template() -> None:
    assert DOC[DOC.index(page.MEANING) : DOC.index(page.RAW)] == page.CONCLUSIONS + "\n"


def test_the_page_links_its_history_and_the_history_exists() -> None:
    assert "(benchmarks-history.md)" in DOC
    assert (ROOT / "docs" / "benchmarks-history.md").is_file()


def test_the_recorded_table_has_the_tables_header_and_a_row_per_target() -> None:
    lines = DOC[DOC.index(page.RECORDED) : DOC.index(page.MEANING)].splitlines()
    assert "| " + " | ".join(table.HEADER) + " |" in lines
    checked = [line for line in lines if "| met |" in line or "| MISSED |" in line]
    assert len(checked) == 10  # five targets per store, two stores


def test_compact_json_reads_back_as_the_same_figures() -> None:
    samples: list[Any] = [{}, [], {"a": []}, {"a": {}}, [[1, 2], [3]], {"a": [{"b": 1.5}], "c": None}]
    for value in samples:
        assert json.loads(page.compact_json(value)) == value
    figures = _raw_figures(DOC)
    assert json.loads(page.compact_json(figures)) == figures


def _floor(p50: float, p99: float) -> dict[str, float]:
    return {"n": 100, "p50": p50, "p90": p50, "p99": p99, "max": p99}


def _run(answer_p50: float, answer_p99: float) -> LoadResult:
    latency = {
        "answer_to_next_question": {"p50": answer_p50, "p99": answer_p99},
        "start_to_first_question": {"p50": 0.3, "p99": 0.5},
    }
    report = {"latency_ms": latency, "questionnaires": {"verified": 10}, "error_total": 0, "verify_errors": 0}
    return LoadResult({**report, "errors": {}}, rate=1000.0, cpu_per_q=0.000299, broker_util=[0.8], bots_util=[0.5])


def test_a_ratio_just_over_its_target_prints_two_decimals_and_misses() -> None:
    rounds = [{"echo": _floor(0.1, 0.2), "write_echo": None, "run": _run(0.152, 0.3), "steal": 0.0}]
    suite = {
        "latency_rounds": rounds,
        "latency_paced": _run(0.4, 1.0),
        "tp100": _run(0.2, 0.3),
        "tp1000": _run(0.2, 0.3),
        "tp100_python": _floor(4.0, 4.5),
        "tp1000_python": _floor(4.1, 4.6),
        "memory": {"clients": 100, "failed": 0, "kib_per_client": 11.6},
    }
    floors = {"ws_echo": _floor(0.1, 0.2), "bare_ws_memory": {"clients": 100, "kib_per_client": 15.0}}
    rows = table.build_rows({"floors": floors, "memory": suite})
    markdown = table.render(rows, markdown=True).splitlines()
    assert markdown[0] == "| " + " | ".join(table.HEADER) + " |"
    assert (
        "| answer -> next question p50 | memory | 0.152 ms | 1.52x | <= 1.5x echo p50 | MISSED"
        " | 10 verified, 0 errors; per round 1.5x |"
    ) in markdown
    assert (
        "| answer -> next question p99 | memory | 0.300 ms | 1.5x | <= 3x echo p99 | met | per round 1.5x |" in markdown
    )
    assert (
        "| broker CPU per 3-question questionnaire | memory | 299 us |  | <= 500 us | met"
        " | min of the 100/1000-session runs: 299 us / 299 us; Python work floor before each: 4.00 ms / 4.10 ms |"
    ) in markdown
    assert (
        "| RSS per idle client (100 clients) | memory | 11.6 KiB | 0.8x | <= 20 KiB | met | 0 failed to connect |"
        in markdown
    )
    text = table.render(rows, markdown=False).splitlines()
    assert text[0].split() == ["figure", "store", "value", "x", "floor", "target", "note"]
    assert len(text) == len(rows) + 1


def test_the_wait_1_runs_get_rows_of_their_own_beside_redis_and_no_idle_figure() -> None:
    rounds = [{"echo": _floor(0.1, 0.2), "write_echo": _floor(0.2, 0.3), "run": _run(0.3, 0.5), "steal": 0.0}]
    runs = {
        "latency_rounds": rounds,
        "latency_paced": _run(0.4, 1.0),
        "tp100": _run(0.2, 0.3),
        "tp1000": _run(0.2, 0.3),
        "tp100_python": _floor(4.0, 4.5),
        "tp1000_python": _floor(4.1, 4.6),
    }
    idle = {"memory": {"clients": 100, "failed": 0, "kib_per_client": 11.0}}
    floors = {"ws_echo": _floor(0.1, 0.2)}
    rows = table.build_rows({"floors": floors, "redis": {**runs, **idle}, table.REDIS_WAIT: runs})
    stores = [row[1] for row in rows]
    assert stores.count("redis") == stores.count(table.REDIS_WAIT) + 1  # the same figures, but the idle one
    assert not any(row[1] == table.REDIS_WAIT and row[0].startswith("RSS") for row in rows)


def test_a_redis_throughput_run_reports_what_redis_server_did_per_questionnaire() -> None:
    rounds = [{"echo": _floor(0.1, 0.2), "write_echo": _floor(0.15, 0.3), "run": _run(0.2, 0.4), "steal": 0.0}]
    before = redis_stats.Reading(0.0, 1.0, {"evalsha": 10, "hset": 20}, {"evalsha": 100, "hset": 10})
    after = redis_stats.Reading(
        10.0, 1.5, {"evalsha": 410, "hset": 720, "publish": 600}, {"evalsha": 30100, "hset": 710}
    )
    suite = {
        "latency_rounds": rounds,
        "tp100": _run(0.2, 0.3),
        "tp1000": _run(0.2, 0.3),
        "tp100_python": _floor(4.0, 4.5),
        "tp1000_python": _floor(4.1, 4.6),
        "tp100_redis": redis_stats.per_questionnaire(redis_stats.delta(before, after), None, 100),
        "memory": {"clients": 100, "failed": 0, "kib_per_client": 11.1},
    }

    rows = table.build_rows({"floors": {"ws_echo": _floor(0.1, 0.2)}, "redis": suite})

    assert [
        "Redis per questionnaire, 100 sessions: CPU / commands",
        "redis",
        "5000 us / 17.0",
        "",
        "",
        "",
        "scripts 4.0 (300 us inside them), publishes 6.0; hset 7.0, publish 6.0, evalsha 4.0",
    ] in rows
