"""bench/capacity.py: the capacity table recomputed from a run's unit costs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import capacity  # noqa: E402

FIGURES: dict[str, Any] = {
    "broker": {
        "cpu_us_per_questionnaire": 500,
        "cpu_us_per_client_s": 10,
        "kib_per_client": 10,
        "base_mib": 64,
        "clients_per_process": 50_000,
        "core_share": 0.5,
    },
    "redis": {
        "cpu_us_per_questionnaire": 250,
        "cpu_us_per_client_s": 5,
        "commands_per_questionnaire": 40,
        "commands_per_client_s": 1,
        "publishes_per_questionnaire": 6,
        "bytes_per_retained": 2**10,
        "core_share": 0.5,
        "gib_per_shard": 16,
        "brokers_per_notice": 2,
        "index_shards": 32,
    },
}


def test_each_tier_is_sized_by_the_resource_that_asks_for_the_most() -> None:
    load = capacity.Load(clients=1_000_000, rate=10_000, retention=3600)

    brokers = capacity.broker_needs(load, FIGURES["broker"])
    shards = capacity.redis_needs(load, FIGURES["redis"])

    # brokers: 10,000 x 500 us + 1e6 x 10 us = 15 cores, at half a core each -> 30; 1e6 / 50,000 -> 20
    assert [(need.amount, need.count) for need in brokers] == [(15.0, 30), (1_000_000, 20)]
    # Redis: 2.5 + 5 = 7.5 cores -> 15 shards; 10,000 x 3600 x 1 KiB = 34.3 GiB -> 3 shards
    assert [need.count for need in shards] == [15, 3]
    assert capacity.bottleneck(shards).resource.startswith("CPU")


def test_a_long_retention_makes_memory_the_redis_bottleneck() -> None:
    week = capacity.Load(clients=1_000_000, rate=10_000, retention=7 * 24 * 3600)

    need = capacity.bottleneck(capacity.redis_needs(week, FIGURES["redis"]))

    assert need.resource.startswith("memory") and need.count == 361  # 5,768 GiB / 16


def test_the_table_is_markdown_with_the_counts_in_bold(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(FIGURES))

    table = capacity.table(json.loads(path.read_text()), capacity.Load(1_000_000, 10_000, 3600))

    lines = table.splitlines()
    assert lines[:2] == ["| figure | value |", "|---|---|"]
    assert "| broker processes | **30** (bottleneck: CPU" in table
    assert "| Redis shards (masters) | **15** (bottleneck: CPU" in table
    assert "| Redis commands/s | 1,400,000 (93,333 per shard) |" in table
    assert "| pub/sub messages/s | 60,000 published, 120,000 delivered to brokers |" in table
    assert all(line.startswith("|") and line.endswith("|") for line in lines)


def test_the_figures_recorded_beside_the_script_load() -> None:
    figures = json.loads((ROOT / "bench" / "capacity_figures.json").read_text(encoding="utf-8"))

    assert capacity.table(figures, capacity.Load(1_000_000, 10_000, 3600)).count("\n") > 10
