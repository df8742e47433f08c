"""The model pool's bench figures (the `serving` section's) on tiny models, one of them an
embedding model: a swap timed, the limit held."""

from __future__ import annotations

from pathlib import Path

from bench_keys import STABLE_KEYS

from benchmarks.serving_pool import pool_figures


def test_pool_figures_time_a_swap_and_check_the_limit(tiny_model_dir: Path) -> None:
    figures = pool_figures(str(tiny_model_dir), rounds=1, tokens=2)
    assert set(figures) <= STABLE_KEYS["serving"], sorted(set(figures) - STABLE_KEYS["serving"])
    assert figures["pool_cap_held"] == 1.0 and figures["pool_held_max_share"] <= 1.0
    assert figures["pool_requests"] == 3 and figures["pool_swaps"] >= 1  # three, in turn
    assert figures["model_swap_s"] > 0 and figures["model_swap_runs"] == 1
    assert figures["model_load_alone_s"] > 0
