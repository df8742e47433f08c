"""The extract bench section on the tiny model: every figure it promises, measured, within
what it can be on any machine (wide bands: no figure here depends on the machine's speed)."""

from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.extract import run_extract_bench


def test_extract_section_reports_every_figure(tiny_engine):
    figures = run_extract_bench(tiny_engine, Namespace(tokens=24, repeats=1))
    assert STABLE_KEYS["extract"] == set(figures), sorted(STABLE_KEYS["extract"] ^ set(figures))
    # decoding is constrained, so every row validates; the rambling tiny model's are valid
    # (the model ended them) or filled (Corral did), never both, never anything else
    valid, filled = figures["extract_valid_rate"], figures["extract_filled_rate"]
    assert 0 <= valid <= 1 and 0 <= filled <= 1
    assert abs(valid + filled - 1.0) < 1e-3, figures
    assert figures["extract_docs_per_min"] > 0 and figures["extract_resume_overhead_s"] >= 0
    assert 0.05 < figures["extract_batch_speedup"] < 20
    assert 0.05 < figures["extract_batch_speedup_8"] < 20
    assert 0.05 < figures["batch_api_tps_ratio"] < 20
    assert figures["batch_api_tps_ratio_spread"] >= 0  # alternating rounds, side by side
