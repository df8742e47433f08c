from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.server import run_server_bench


def test_server_section_compares_http_with_the_engine(tiny_engine):
    figures = run_server_bench(tiny_engine, Namespace(tokens=8, repeats=2))
    assert STABLE_KEYS["server"] <= set(figures)
    assert figures["server_tokens"] == 8 and figures["server_runs"] == 2
    assert figures["server_http_decode_tps"] > 0 and figures["server_direct_decode_tps"] > 0
    # HTTP cannot make decoding faster, and costs a fraction of a token's time
    assert 0.2 < figures["server_tps_ratio"] < 5, figures
    assert figures["server_http_ttft_ms"] > 0 and figures["server_direct_ttft_ms"] > 0
    # caller's lag behind the engine, HTTP's minus direct's: each lag lies between 0 and
    # its side's TTFT (the caller starts its clock before the engine does)
    overhead = figures["server_ttft_overhead_ms"]
    assert -figures["server_direct_ttft_ms"] <= overhead <= figures["server_http_ttft_ms"], figures
    for dialect in ("messages", "responses"):
        # the same bands as chat completions: a dialect cannot make decoding faster, and
        # its lag is bounded by the TTFTs measured beside it
        assert 0.2 < figures[f"{dialect}_tps_ratio"] < 5, figures
        assert figures[f"{dialect}_decode_tps"] > 0
        lag = figures[f"{dialect}_ttft_overhead_ms"]
        assert -figures["server_direct_ttft_ms"] <= lag < 10_000, figures
