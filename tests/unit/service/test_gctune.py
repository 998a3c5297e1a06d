"""The collector settings the daemon applies once it runs."""

from __future__ import annotations

import gc

from apiserver import gctune


def test_tune_gc_freezes_start_up_objects_and_spaces_young_collections() -> None:
    before = gc.get_threshold()
    try:
        gctune.tune_gc()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (
            gctune.GEN0_THRESHOLD,
            gctune.GEN1_THRESHOLD,
            gctune.GEN2_THRESHOLD,
        )
        assert gctune.GEN0_THRESHOLD > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
