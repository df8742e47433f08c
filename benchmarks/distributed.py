"""Bench section `distributed`: the model sharded over two ranks on loopback (`mlx.launch -n 2
--backend ring`) against the single-process engine, same prompt, greedy, alternating runs.

- `dist_tps_ratio`: median decode tokens/s of the sharded engine over the single-process one.
  On one machine both ranks share its cores and every step crosses between two processes, so
  this is expected below 1: the point is the overhead, which two Macs pay over their link.
- `dist_comm_ms_per_token`: the communication one decode step costs on the group, measured by
  replaying that step's collectives (rank 0's message with the token, and the model's own
  `all_sum`s or `send`/`recv`/`all_gather`) with no compute (`engine.distributed.comm`).
- `dist_overhead_ms_per_token`: per-token time of the sharded engine minus the single one's.

Runs at most 32 tokens per reply: the two processes on a 2-core CPU decode slowly.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks.rounds import round_ratios, spread
from engine.api import EngineAPI
from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."
MAX_TOKENS = 32
PROBE_STEPS = 50


def _decode_tps(engine: EngineAPI, tokens: int) -> tuple[float, int]:
    request = ChatRequest(
        [{"role": "user", "content": PROMPT}], SamplingSettings(temperature=0.0, max_tokens=tokens)
    )
    result = engine.chat(request)
    if result.error:
        raise RuntimeError(result.error)
    return result.stats.decode_tps, result.stats.generated_tokens


def run_distributed_bench(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Figures of a 2-rank loopback group against `engine` (loaded with `args.model`)."""
    from engine.distributed import DistributedConfig, DistributedEngine, loopback_hostfile

    tokens = min(args.tokens, MAX_TOKENS)
    group = DistributedEngine(DistributedConfig(loopback_hostfile(2), timeout_s=600))
    single: list[float] = []
    sharded: list[float] = []
    counts: list[int] = []
    try:
        group.load_model(args.model).result()
        info = group.group_info
        _decode_tps(engine, 4)  # warm-up: kernels, the prompt in both prefix caches
        _decode_tps(group, 4)
        for i in range(args.repeats):
            sides = (engine, group) if i % 2 == 0 else (group, engine)
            for side in sides:
                tps, n = _decode_tps(side, tokens)
                (single if side is engine else sharded).append(tps)
                counts.append(n)
        comm_ms, collectives = group.probe_communication(PROBE_STEPS).result()
    finally:
        group.close()
    one, many = statistics.median(single), statistics.median(sharded)
    overhead = 1e3 / many - 1e3 / one if one > 0 and many > 0 else None
    return {
        "dist_tps_ratio": round(many / one, 3) if one else None,
        "dist_tps_ratio_spread": spread(round_ratios(zip(sharded, single, strict=True))),
        "dist_comm_ms_per_token": round(comm_ms, 3),
        "dist_overhead_ms_per_token": round(overhead, 2) if overhead is not None else None,
        "dist_tps": round(many, 2),
        "dist_single_tps": round(one, 2),
        "dist_collectives_per_token": collectives,
        "dist_mode": info.mode if info is not None else None,
        "dist_ranks": 2,
        "dist_tokens": min(counts),
        "dist_runs": args.repeats,
    }
