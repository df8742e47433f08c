"""The `overhead` bench section on the tiny model: every key it promises, with figures that
are what they say (forward passes that take time, overheads smaller than whole steps)."""

from __future__ import annotations

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.overhead import run_overhead_bench


def test_overhead_section_reports_corral_beside_mlx_lm(tiny_engine) -> None:
    figures = run_overhead_bench(tiny_engine, Namespace(tokens=12, repeats=1))
    assert STABLE_KEYS["overhead"] <= set(figures), sorted(STABLE_KEYS["overhead"] - set(figures))
    assert figures["forward_ms"] > 0 and figures["forward_4_ms"] > 0
    for key in STABLE_KEYS["overhead"]:
        if not key.startswith(("step_overhead", "mlx_lm_step_overhead")):
            continue
        if key.endswith("_ms") and "spread" not in key:
            forward = figures["forward_4_ms" if "_4" in key else "forward_ms"]
            assert figures[key] > -forward, (key, figures)  # a step takes some time
        elif key.endswith("_can_tell"):  # one round: nothing to tell by, and it says so
            assert figures[key] is False and figures[key.replace("_can", "_cannot")], key
    assert figures["overhead_runs"] == 1
