"""The batch bench section on the tiny model: every figure it promises, measured."""

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.batch import run_batch_bench


def test_batch_section_reports_every_figure(tiny_engine):
    figures = run_batch_bench(tiny_engine, Namespace(tokens=6, repeats=1))
    assert STABLE_KEYS["batch"] <= set(figures), sorted(STABLE_KEYS["batch"] - set(figures))
    assert figures["batch_tokens_per_reply"] == 6 and figures["batch_runs"] == 1
    for key in STABLE_KEYS["batch"]:
        assert figures[key] > 0, key
