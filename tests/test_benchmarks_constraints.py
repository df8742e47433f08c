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
    figures = run_constraint_bench(
        tiny_engine, args, stress_tokens=12, stress_repeats=1, vocab262k=False
    )
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


def test_the_262k_stress_figures_come_under_their_own_keys(tiny262k_engine):
    """The stress figures on Gemma 3's vocabulary: every ratio of the 49k stress model's,
    under `vocab262k_stress_`, each the quotient of its own runs."""
    from benchmarks.constraints import VOCAB262K_STRESS, stress_figures

    figures = tiny262k_engine.run(
        lambda loaded: stress_figures(loaded.model, loaded.tokenizer, VOCAB262K_STRESS, 12, 1)
    ).result()
    for key in ("constrained_ratio", "constrained_ratio_serial", "constrained_ratio_unforced"):
        assert figures[VOCAB262K_STRESS + key] > 0, key
        assert figures[f"{VOCAB262K_STRESS}{key}_spread"] == 0, key
    for key in ("mask_mean_ms", "mask_p99_ms", "free_tps", "constrained_tps"):
        assert figures[VOCAB262K_STRESS + key] > 0, key
    quotient = (
        figures[f"{VOCAB262K_STRESS}unforced_constrained_tps"]
        / figures[f"{VOCAB262K_STRESS}unforced_free_tps"]
    )
    ratio = figures[f"{VOCAB262K_STRESS}constrained_ratio_unforced"]
    assert abs(ratio - quotient) < 0.01 * quotient
    assert figures[f"{VOCAB262K_STRESS}unforced_forced_tokens"] == 0


def test_without_gemmas_package_the_262k_figures_say_why(monkeypatch):
    from benchmarks import bench_models
    from benchmarks.constraints import VOCAB262K_STRESS, stress_model_figures

    monkeypatch.setattr(bench_models, "gemma_missing", lambda: "not installed here")
    figures = stress_model_figures("262k", VOCAB262K_STRESS, 12, 1)
    assert figures == {f"{VOCAB262K_STRESS}skipped": "not installed here"}
