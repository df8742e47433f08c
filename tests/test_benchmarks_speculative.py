"""The speculative bench section on the tiny model: every figure it promises, measured."""

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.speculative import run_speculative_bench


def test_speculative_section_reports_every_figure(tiny_engine):
    figures = run_speculative_bench(tiny_engine, Namespace(tokens=12, repeats=2))
    assert STABLE_KEYS["speculative"] <= set(figures), sorted(
        STABLE_KEYS["speculative"] - set(figures)
    )
    assert figures["spec_identical"] is True
    assert figures["spec_tokens_per_reply"] == 12
    for key in ("spec_grounded_tps", "spec_open_tps"):
        assert figures[key] > 0, key
    # measured (how large depends on the machine and its load: no band), with a spread
    for key in ("spec_grounded_speedup", "spec_open_ratio"):
        assert figures[key] > 0 and figures[f"{key}_spread"] >= 0, (key, figures[key])
        # two rounds of the whole group: the spread is over them, and says if it can tell
        told = figures[f"{key}_spread"] <= 0.05
        assert figures[f"{key}_can_tell"] is told, figures
        assert (figures[f"{key}_cannot_tell"] is None) is told, figures
    assert figures["spec_grounded_rounds"] == figures["spec_open_rounds"] == 2
    assert figures["spec_drafted_code_rename"] > 0
    assert 0 < figures["spec_acceptance_rate_grounded"] <= 1
