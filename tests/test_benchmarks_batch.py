"""The batch bench section on the tiny model: every figure it promises, measured, each
ratio the quotient of its own runs (how large it is depends on the machine and its load,
so no band is asserted); and its rounds alternate the order of each pair."""

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.batch import round_plan, run_batch_bench

TOKENS = 24  # past the record schema's forced opening, so its rows also sample


def test_batch_section_reports_every_figure(tiny_engine):
    figures = run_batch_bench(tiny_engine, Namespace(tokens=TOKENS, repeats=1, vocab262k=False))
    assert STABLE_KEYS["batch"] <= set(figures), sorted(STABLE_KEYS["batch"] - set(figures))
    assert figures["batch_tokens_per_reply"] == TOKENS and figures["batch_runs"] == 1
    for key in STABLE_KEYS["batch"]:
        if key.endswith("_spread"):  # one round: nothing to spread over
            assert figures[key] == 0, key
        else:
            assert figures[key] > 0, key
    # one round: each ratio is exactly the quotient of its own two tokens/s
    for ratio, a, b in (
        ("batch_speedup_4", "batch_tps_4", "batch_sequential_tps_4"),
        ("batch_speedup_8", "batch_tps_8", "batch_sequential_tps_8"),
        ("batch_constrained_ratio", "batch_constrained_tps_4", "batch_free_tps_4"),
    ):
        quotient = figures[a] / figures[b]
        assert abs(figures[ratio] - quotient) < 0.01 * quotient + 0.002, ratio
    # not fed, every row takes one token a step: as many steps as tokens (one more for the
    # step that finds every row done at most); fed, the record's keys come in fewer
    assert TOKENS <= figures["batch_unforced_steps"] <= TOKENS + 1
    assert figures["batch_forced_steps"] < figures["batch_unforced_steps"]


def test_the_262k_constrained_batch_ratio_is_its_own_runs_quotient(tiny262k_engine):
    from benchmarks.batch import constrained_batch_figures

    figures = constrained_batch_figures(tiny262k_engine, "vocab262k_", TOKENS, 1)
    quotient = figures["vocab262k_batch_constrained_tps_4"] / figures["vocab262k_batch_free_tps_4"]
    ratio = figures["vocab262k_batch_constrained_ratio"]
    assert abs(ratio - quotient) < 0.01 * quotient + 0.002
    assert figures["vocab262k_batch_constrained_ratio_spread"] == 0


def test_without_gemmas_package_the_262k_batch_figure_says_why(monkeypatch):
    from benchmarks import bench_models
    from benchmarks.batch import vocab262k_batch_figures

    monkeypatch.setattr(bench_models, "gemma_missing", lambda: "not installed here")
    assert vocab262k_batch_figures(TOKENS, 1) == {"vocab262k_batch_skipped": "not installed here"}


def test_rounds_alternate_which_run_of_a_pair_goes_first():
    names = ["speed4", "ratio", "vs_mlx", "forced", "speed8"]
    plan = round_plan(4, names)
    orders = [dict(round_) for round_ in plan]
    assert [o["speed4"] for o in orders] == ["AB", "BA", "AB", "BA"]
    assert all(len(set(o.values())) == 1 for o in orders)  # one order per round
    # the slow 8-row pair: repeats // 2 rounds, every other one, among the others
    assert [("speed8" in o) for o in orders] == [False, True, False, True]
    assert all(name in o for o in orders for name in names[:4])
    assert [("speed8" in dict(r)) for r in round_plan(1, names)] == [True]
    assert [("speed8" in dict(r)) for r in round_plan(3, names)] == [False, True, False]
