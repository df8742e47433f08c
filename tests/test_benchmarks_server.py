from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.server import run_server_bench


def test_server_section_compares_http_with_the_engine(tiny_engine):
    figures = run_server_bench(tiny_engine, Namespace(tokens=8, repeats=2))
    assert STABLE_KEYS["server"] <= set(figures)
    assert figures["server_tokens"] == 8 and figures["server_runs"] == 2
    assert figures["server_http_decode_tps"] > 0 and figures["server_direct_decode_tps"] > 0
    assert figures["server_tps_ratio"] > 0
    assert figures["server_http_ttft_ms"] > 0 and figures["server_direct_ttft_ms"] > 0
    assert isinstance(figures["server_ttft_overhead_ms"], float)
    for dialect in ("messages", "responses"):
        assert figures[f"{dialect}_tps_ratio"] > 0 and figures[f"{dialect}_decode_tps"] > 0
        assert isinstance(figures[f"{dialect}_ttft_overhead_ms"], float)
