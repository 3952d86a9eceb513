"""Past one machine, on paper: how many broker processes, Redis shards and how much memory a
load needs, from unit costs measured on one machine (docs/capacity.md). JSON in, markdown out.

    python bench/capacity.py FIGURES.json [--clients 1000000] [--rate 10000] [--retention 3600]

FIGURES.json holds the unit costs (docs/capacity.md lists where each comes from)::

    {"broker": {"cpu_us_per_questionnaire": 431, "cpu_us_per_client_s": 14.8,
                "kib_per_client": 11.1, "base_mib": 60, "clients_per_process": 50000,
                "core_share": 0.7},
     "redis": {"cpu_us_per_questionnaire": 405, "cpu_us_per_client_s": 7.8,
               "commands_per_questionnaire": 43, "commands_per_client_s": 1.0,
               "publishes_per_questionnaire": 6,
               "bytes_per_retained": 2700, "core_share": 0.5, "gib_per_shard": 25,
               "brokers_per_notice": 2, "index_shards": 32}}

Each tier is sized by every resource it spends (CPU at ``core_share`` of a core, memory,
connections per process); the resource that asks for the most processes or shards is that
tier's bottleneck. A CPU figure is the machine's where it was measured: scale it for
another machine (docs/capacity.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Load:
    clients: int  # connected clients (websockets), idle between questions
    rate: float  # questionnaires completed per second
    retention: float  # seconds a questionnaire is kept (QBROKER_RETENTION)


@dataclass(frozen=True)
class Need:
    """What one resource asks of a tier: so many units (cores, GiB, processes, shards)."""

    resource: str
    amount: float
    unit: str
    count: int  # processes or shards it alone would need


def broker_needs(load: Load, broker: dict[str, Any]) -> list[Need]:
    cores = (load.rate * broker["cpu_us_per_questionnaire"] + load.clients * broker["cpu_us_per_client_s"]) / 1e6
    by_cpu = math.ceil(cores / broker["core_share"])
    by_clients = math.ceil(load.clients / broker["clients_per_process"])
    return [
        Need("CPU (questionnaires and idle clients' heartbeats)", cores, "cores", by_cpu),
        Need("connections per process", load.clients, "clients", by_clients),
    ]


def redis_needs(load: Load, redis: dict[str, Any]) -> list[Need]:
    cores = (load.rate * redis["cpu_us_per_questionnaire"] + load.clients * redis["cpu_us_per_client_s"]) / 1e6
    gib = load.rate * load.retention * redis["bytes_per_retained"] / 2**30
    return [
        Need("CPU (scripts, heartbeats, pub/sub)", cores, "cores", math.ceil(cores / redis["core_share"])),
        Need("memory (retained questionnaires)", gib, "GiB", math.ceil(gib / redis["gib_per_shard"])),
    ]


def bottleneck(needs: list[Need]) -> Need:
    return max(needs, key=lambda need: need.count)


def table(figures: dict[str, Any], load: Load) -> str:
    """The markdown table of what ``load`` needs, from ``figures``' unit costs."""
    broker, redis = figures["broker"], figures["redis"]
    brokers, shards = broker_needs(load, broker), redis_needs(load, redis)
    processes, masters = bottleneck(brokers).count, bottleneck(shards).count
    broker_gib = (load.clients * broker["kib_per_client"] / 2**20) + processes * broker["base_mib"] / 2**10
    published = load.rate * redis["publishes_per_questionnaire"]
    delivered = published * redis["brokers_per_notice"]
    commands = load.rate * redis["commands_per_questionnaire"] + load.clients * redis["commands_per_client_s"]
    index_channel = load.rate / redis["index_shards"]
    rows = [
        ("load", f"{load.clients:,} clients, {load.rate:,.0f} questionnaires/s, retention {load.retention:,.0f} s"),
        *((f"brokers: {need.resource}", f"{_amount(need)} -> {need.count:,} processes") for need in brokers),
        ("broker processes", f"**{processes:,}** (bottleneck: {bottleneck(brokers).resource})"),
        ("broker memory", f"{broker_gib:,.1f} GiB ({broker['kib_per_client']} KiB per client)"),
        *((f"Redis: {need.resource}", f"{_amount(need)} -> {need.count:,} shards") for need in shards),
        ("Redis shards (masters)", f"**{masters:,}** (bottleneck: {bottleneck(shards).resource})"),
        ("Redis commands/s", f"{commands:,.0f} ({commands / masters:,.0f} per shard)"),
        ("pub/sub messages/s", f"{published:,.0f} published, {delivered:,.0f} delivered to brokers"),
        ("busiest channel", f"an inbox index shard: {index_channel:,.0f} publishes/s, one per broker that watches it"),
    ]
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def _amount(need: Need) -> str:
    return f"{need.amount:,.0f} {need.unit}" if need.unit == "clients" else f"{need.amount:,.1f} {need.unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figures", type=Path, help="the unit costs (JSON)")
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=10_000.0, help="questionnaires per second")
    parser.add_argument("--retention", type=float, default=3600.0, help="QBROKER_RETENTION (seconds)")
    args = parser.parse_args()
    figures = json.loads(args.figures.read_text(encoding="utf-8"))
    print(table(figures, Load(args.clients, args.rate, args.retention)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
