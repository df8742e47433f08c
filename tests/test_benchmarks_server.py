from argparse import Namespace

from bench_keys import STABLE_KEYS

from benchmarks.server import run_server_bench


def test_server_section_compares_http_with_the_engine(tiny_engine):
    figures = run_server_bench(tiny_engine, Namespace(tokens=8, repeats=2))
    assert STABLE_KEYS["server"] <= set(figures)
    assert figures["server_tokens"] == 8 and figures["server_runs"] == 2
    assert figures["server_http_decode_tps"] > 0 and figures["server_direct_decode_tps"] > 0
    # how far the client's rate is from the engine's depends on the machine and its load:
    # measured, not banded
    assert figures["server_tps_ratio"] > 0, figures
    assert figures["server_tps_ratio_spread"] >= 0, figures
    # two rounds: each spread says whether it can tell (ratios within 0.05)
    told = figures["server_tps_ratio_spread"] <= 0.05
    assert figures["server_tps_ratio_can_tell"] is told, figures
    assert (figures["server_tps_ratio_cannot_tell"] is None) is told, figures
    assert figures["server_http_ttft_ms"] > 0 and figures["server_direct_ttft_ms"] > 0
    # caller's lag behind the engine, HTTP's minus direct's: each lag lies between 0 and
    # its side's TTFT (the caller starts its clock before the engine does)
    overhead = figures["server_ttft_overhead_ms"]
    assert -figures["server_direct_ttft_ms"] <= overhead <= figures["server_http_ttft_ms"], figures
    for dialect in ("messages", "responses"):
        # measured like chat completions; a lag no earlier than the engine's own start
        assert figures[f"{dialect}_tps_ratio"] > 0, figures
        assert figures[f"{dialect}_decode_tps"] > 0
        lag = figures[f"{dialect}_ttft_overhead_ms"]
        assert -figures["server_direct_ttft_ms"] <= lag, figures
    # every recorded agent conversation is answered in its dialect's schema
    assert figures["agent_replay_ok"] == 1.0, figures
