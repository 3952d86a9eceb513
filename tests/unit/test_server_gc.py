"""``qbroker serve`` runs the cyclic collector less often (broker/server.py: tune_gc)."""

from __future__ import annotations

import gc

from broker.server import tune_gc


def test_serve_freezes_startup_objects_and_collects_young_ones_less_often() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (50_000, 20, 10)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
