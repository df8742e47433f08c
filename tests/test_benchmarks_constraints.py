"""The constraint benchmark runs every loop side by side and reports the issue's figures:
every ratio measured and the quotient of its own runs (how large a ratio or a time is
depends on the machine and its load, so none is banded or compared with another)."""

from __future__ import annotations

import argparse

from bench_keys import STABLE_KEYS

from benchmarks.constraints import run_constraint_bench

# Constrained over free, or forced tokens fed over not, on the same machine side by side:
# a mask costs a fraction of a forward pass, and a forced token saves at most a pass.
RATIOS = {
    "constrained_ratio",
    "constrained_ratio_serial",
    "constrained_ratio_unforced",
    "stress_constrained_ratio",
    "stress_constrained_ratio_serial",
    "stress_constrained_ratio_unforced",
    "forced_token_speedup",
}
# tokens/s, and times in ms that a few ms of mask work cannot take below 0.01 ms
POSITIVE = {
    "free_tps",
    "constrained_tps",
    "constrained_serial_tps",
    "unforced_free_tps",
    "unforced_constrained_tps",
    "stress_free_tps",
    "stress_constrained_tps",
    "stress_constrained_serial_tps",
    "stress_unforced_free_tps",
    "stress_unforced_constrained_tps",
    "forced_tps",
    "forced_free_tps",
    "forced_unfed_tps",
    "drop_to_first_mask_ms",
    "drop_to_first_mask_two_compiles_ms",
    "first_mask_reused_grammar_ms",
    "first_mask_recompiled_grammar_ms",
    "depth_check_ms",
    "depth_check_tool_grammar_ms",
    "grammar_check_in_process_ms",
    "grammar_check_child_process_ms",
}


def test_bench_reports_every_figure(tiny_engine):
    args = argparse.Namespace(tokens=12, repeats=1)
    figures = run_constraint_bench(tiny_engine, args, stress_tokens=12, stress_repeats=1)
    stable = STABLE_KEYS["constraints"]
    assert stable <= set(figures), sorted(stable - set(figures))
    for key in RATIOS:
        assert figures[key] is not None and figures[key] > 0, (key, figures[key])
        assert figures[f"{key}_spread"] == 0, key  # one round: nothing to spread over
    for key in POSITIVE:
        assert figures[key] is not None and figures[key] > 0, key
    assert 0 < figures["depth_check_share"] < 1
    # a ratio is the paired tokens/s of its two loops (one round: exactly their quotient)
    for prefix in ("", "stress_"):
        quotient = (
            figures[f"{prefix}unforced_constrained_tps"] / figures[f"{prefix}unforced_free_tps"]
        )
        assert abs(figures[f"{prefix}constrained_ratio_unforced"] - quotient) < 0.01 * quotient
    quotient = figures["forced_tps"] / figures["forced_unfed_tps"]
    assert abs(figures["forced_token_speedup"] - quotient) < 0.01 * quotient
    # the same count of tokens on every loop, and the forced tokens of the key-heavy schema
    # are fed in fewer forward passes than there are tokens; not fed, one pass per token
    for key in ("constrained_tokens", "stress_constrained_tokens"):
        assert 1 < figures[key] <= 12
    forced, total = map(int, figures["forced_tokens"].split(" of "))
    assert forced > 0 and figures["forced_forward_passes"] < total
    assert figures["forced_unfed_forward_passes"] > figures["forced_forward_passes"]
    # the free-string schema forces nothing once the first token is sampled, and its
    # replies run to the token count (the string cannot close before 2,000 characters)
    for prefix in ("", "stress_"):
        assert figures[f"{prefix}unforced_forced_tokens"] == 0
        assert figures[f"{prefix}unforced_constrained_tokens"] == 12
