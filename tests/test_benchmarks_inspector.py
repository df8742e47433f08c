"""The inspector bench section on the tiny model: every figure it promises, measured."""

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.inspector import run_inspector_bench


def test_inspector_section_reports_every_figure(tiny_engine):
    figures = run_inspector_bench(tiny_engine, Namespace(tokens=6, repeats=1))
    assert STABLE_KEYS["inspector"] <= set(figures), sorted(STABLE_KEYS["inspector"] - set(figures))
    assert figures["inspector_top_logprobs"] == 20 and figures["inspector_runs"] == 1
    for key in STABLE_KEYS["inspector"]:
        if key.endswith("_spread"):  # one round: nothing to spread over
            assert figures[key] == 0, key
        elif key.endswith("_can_tell"):  # and so nothing to tell by, which it says
            assert figures[key] is False, key
            assert "one of its rounds only" in figures[key.replace("_can", "_cannot")], key
        elif not key.endswith("_cannot_tell"):
            assert figures[key] > 0, key
    # one round: each ratio is exactly its two tokens/s's quotient (how large it is
    # depends on the machine and its load: no band)
    for name in ("", "constrained_"):
        ratio = figures[f"inspector_{name}tps_ratio"]
        quotient = figures[f"inspector_{name}recorded_tps"] / figures[f"inspector_{name}plain_tps"]
        assert abs(ratio - quotient) < 0.01 * quotient + 0.002, name
