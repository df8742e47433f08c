"""The constraint benchmark runs every loop side by side and reports the issue's figures."""

from __future__ import annotations

import argparse

from bench_keys import STABLE_KEYS

from benchmarks.constraints import run_constraint_bench

# The section's figures that must be positive (ratios, rates and times).
POSITIVE = {
    "constrained_ratio",
    "constrained_ratio_serial",
    "stress_constrained_ratio",
    "stress_constrained_ratio_serial",
    "forced_token_speedup",
    "free_tps",
    "constrained_tps",
    "constrained_serial_tps",
    "stress_free_tps",
    "stress_constrained_tps",
    "stress_constrained_serial_tps",
    "forced_tps",
    "forced_free_tps",
    "drop_to_first_mask_ms",
    "drop_to_first_mask_two_compiles_ms",
    "first_mask_reused_grammar_ms",
    "first_mask_recompiled_grammar_ms",
    "depth_check_ms",
    "depth_check_tool_grammar_ms",
    "grammar_check_in_process_ms",
    "grammar_check_child_process_ms",
    "depth_check_share",
}


def test_bench_reports_every_figure(tiny_engine):
    args = argparse.Namespace(tokens=12, repeats=1)
    figures = run_constraint_bench(tiny_engine, args, stress_tokens=12, stress_repeats=1)
    stable = STABLE_KEYS["constraints"]
    assert stable <= set(figures), sorted(stable - set(figures))
    for key in POSITIVE:
        assert figures[key] is not None and figures[key] > 0, key
    # the same count of tokens on every loop, and the forced tokens of the key-heavy schema
    # are fed in fewer forward passes than there are tokens
    for key in ("constrained_tokens", "stress_constrained_tokens"):
        assert 1 < figures[key] <= 12
    forced, total = map(int, figures["forced_tokens"].split(" of "))
    assert forced > 0 and figures["forced_forward_passes"] < total
