"""Memory planning per rank: each machine holds its share of the weights and of every KV state.

Every rank measures what it holds (its weights, the KV bytes one token takes in its layers) and
what its machine offers; rank 0 gathers the figures and plans each rank with the same
`engine.memory.plan.plan_memory` as on one machine. The prompt cache on rank 0 decides for all
ranks, so its budget is the number of tokens the tightest rank can keep, in rank 0's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import mlx.core as mx
import numpy as np

from engine.distributed.info import RankPlan
from engine.memory.plan import machine_memory_bytes, plan_memory
from engine.types import MemoryPlan

KIB = 1024
ERROR_BYTES = 400  # room for a rank's load error in the gathered report


@dataclass(frozen=True)
class RankFigures:
    """What one rank holds and what its machine offers."""

    rank: int
    weights_bytes: int
    kv_bytes_per_token: int
    working_set_bytes: int  # Metal's recommended working set; 0 off Metal
    machine_bytes: int

    def plan(self, kv_budget_bytes: int | None) -> MemoryPlan:
        """This rank's plan, as `plan_memory` would make it on its own machine."""
        info = {"max_recommended_working_set_size": self.working_set_bytes}
        return plan_memory(
            self.weights_bytes, kv_budget_bytes, device_info=info, machine_bytes=self.machine_bytes
        )


def local_figures(rank: int, weights_bytes: int, kv_bytes_per_token: int) -> RankFigures:
    """This machine's figures for rank `rank`."""
    info = mx.device_info()
    working_set = int(info.get("max_recommended_working_set_size") or 0)
    return RankFigures(rank, weights_bytes, kv_bytes_per_token, working_set, machine_memory_bytes())


def kv_bytes_per_token(cache: list[Any]) -> int:
    """Bytes one token takes in a KV state holding exactly one token."""
    total = 0
    for layer in cache:
        state = layer.state
        arrays = state if isinstance(state, list | tuple) else [state]
        for a in arrays:
            for leaf in a if isinstance(a, list | tuple) else [a]:
                if isinstance(leaf, mx.array) and leaf.ndim >= 3:
                    total += leaf.nbytes // max(1, leaf.shape[-2])
    return total


def encode_report(figures: RankFigures | None, error: str | None) -> np.ndarray:
    """A rank's load outcome as int32 values for an all_gather (sizes in KiB)."""
    head = np.zeros(6, np.int64)
    head[0] = 0 if error else 1
    if figures is not None:
        head[1:] = [
            figures.weights_bytes // KIB,
            figures.kv_bytes_per_token,
            figures.working_set_bytes // KIB,
            figures.machine_bytes // KIB,
            figures.rank,
        ]
    text = np.zeros(ERROR_BYTES, np.int64)
    raw = (error or "").encode("utf-8")[:ERROR_BYTES]
    text[: len(raw)] = list(raw)
    return np.concatenate([np.minimum(head, 2**31 - 1), text]).astype(np.int32)


def decode_report(row: np.ndarray, rank: int) -> tuple[RankFigures | None, str | None]:
    """(figures, None) for a rank that loaded (zero figures if it sent none), (None, its
    error) for one that did not."""
    ok, weights, per_token, working, machine = (int(v) for v in row[:5])
    if not ok:
        raw = bytes(int(v) for v in row[6:] if v).decode("utf-8", errors="replace")
        return None, raw or "failed to load"
    return RankFigures(rank, weights * KIB, per_token, working * KIB, machine * KIB), None


def group_plan(
    figures: list[RankFigures], hosts: list[str], kv_budget_bytes: int | None
) -> tuple[MemoryPlan, list[RankPlan]]:
    """Rank 0's plan for the group, and every rank's own plan.

    Args:
        figures: every rank's figures, in rank order.
        hosts: how messages name each rank's machine.
        kv_budget_bytes: the user's per-machine prompt-cache budget (None: automatic).
    """
    plans = [f.plan(kv_budget_bytes) for f in figures]
    pairs = list(zip(figures, plans, strict=True))
    tokens = min(p.kv_budget_bytes // max(1, f.kv_bytes_per_token) for f, p in pairs)
    ranks = [
        RankPlan(f.rank, hosts[f.rank], f.weights_bytes, tokens * f.kv_bytes_per_token, p)
        for f, p in zip(figures, plans, strict=True)
    ]
    warnings = [
        f"rank {r.rank} ({r.host}): {r.plan.warning}" for r in ranks if r.plan.warning is not None
    ]
    own = plans[0]
    kv = tokens * figures[0].kv_bytes_per_token
    wired = min(own.model_bytes + kv, own.device_budget_bytes) if own.metal else None
    plan = replace(
        own,
        kv_budget_bytes=kv,
        wired_limit_bytes=wired,
        fits=all(p.fits for p in plans),
        warning=" ".join(warnings) or None,
    )
    return plan, ranks
