"""The constraint benchmark runs every loop side by side and reports the issue's figures:
every ratio measured and the quotient of its own runs (how large a ratio or a time is
depends on the machine and its load, so none is banded or compared with another)."""

from __future__ import annotations

import argparse

from bench_keys import CONSTRAINT_RATIOS, STABLE_KEYS

from benchmarks.constraints import _Run, long_enough, run_constraint_bench

# Constrained over free, or forced tokens fed over not, on the same machine side by side:
# a mask costs a fraction of a forward pass, and a forced token saves at most a pass.
RATIOS = set(CONSTRAINT_RATIOS)
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
        # and so nothing to tell by, which it says
        assert figures[f"{key}_can_tell"] is False, key
        assert "one of its rounds only" in figures[f"{key}_cannot_tell"], key
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


def test_a_loops_side_repeats_its_run_until_it_decoded_long_enough():
    """A stress run decodes a fraction of a second: a side is its runs together, one rate
    over all of them, with the first run's counts and the most any run forced."""
    made: list[_Run] = []

    def run_once() -> _Run:
        forced = 2 if len(made) == 1 else 0
        made.append(_Run(12, 11 / 0.25, None, lead=1, seconds=0.25, forced_after_start=forced))
        return made[-1]

    side = long_enough(run_once, min_s=1.0)
    assert len(made) == 4 and side.runs == 4
    assert abs(side.seconds - 1.0) < 1e-9 and abs(side.tps - 44.0) < 1e-6
    assert side.tokens == 12 and side.lead == 1 and side.forced_after_start == 2
    assert long_enough(run_once, min_s=0.0).runs == 1  # no least time: one run


def test_the_bench_options_decide_the_rounds(tiny_engine, monkeypatch):
    """Unless `--repeats` is given, 3 rounds on the loaded model and 7 on the stress ones
    (one under `--quick`, with the stress replies as short as the others), and each side
    decodes for `--min-side-s`."""
    from benchmarks import constraints

    seen: dict[str, object] = {}
    monkeypatch.setattr(constraints, "measure_constraints", lambda *a, **kw: seen.update(kw) or {})
    full = argparse.Namespace(tokens=64, repeats=3, repeats_given=False, min_side_s=1.5)
    run_constraint_bench(tiny_engine, full)
    assert (seen["repeats"], seen["stress_repeats"], seen["min_s"]) == (3, 7, 1.5)
    assert "stress_tokens" not in seen
    seen.clear()
    quick = argparse.Namespace(
        tokens=16, repeats=1, repeats_given=False, min_side_s=0.0, quick=True
    )
    run_constraint_bench(tiny_engine, quick)
    assert (seen["repeats"], seen["stress_repeats"], seen["stress_tokens"]) == (1, 1, 16)
    seen.clear()
    given = argparse.Namespace(tokens=64, repeats=4, repeats_given=True, min_side_s=0.5)
    run_constraint_bench(tiny_engine, given, stress_repeats=2)
    assert (seen["repeats"], seen["stress_repeats"], seen["min_s"]) == (4, 2, 0.5)
