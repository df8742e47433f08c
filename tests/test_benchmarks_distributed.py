from argparse import Namespace

import pytest
from bench_keys import STABLE_KEYS

from benchmarks.distributed import run_distributed_bench

pytestmark = pytest.mark.slow


def test_distributed_section_compares_two_ranks_with_one_process(tiny_engine, tiny_model_dir):
    args = Namespace(model=str(tiny_model_dir), tokens=6, repeats=1)
    figures = run_distributed_bench(tiny_engine, args)
    assert STABLE_KEYS["distributed"] <= set(figures)
    assert figures["dist_mode"] == "tensor" and figures["dist_ranks"] == 2
    assert figures["dist_tps_ratio"] > 0 and figures["dist_comm_ms_per_token"] > 0
    # per token: rank 0's message, and an all_sum after attention and after the MLP per layer
    assert figures["dist_collectives_per_token"] == 1 + 2 * 2
    assert figures["dist_tokens"] > 1
