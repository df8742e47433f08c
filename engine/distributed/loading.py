"""Loading a model sharded across the group: the steps every rank takes together.

Rank 0 resolves the model first (importing a GGUF file into its cache, say) and then tells the
others which model to load; each rank loads and splits it (`shard.shard_model`), reading only
its own share of the weights. No collective runs while the ranks load, so a rank that fails
cannot leave the others waiting inside one: all ranks then gather each other's outcome, and
either all go on or all report which rank failed and why. A one-token forward pass through
the split model measures each rank's KV bytes per token (and warms its kernels up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache

from engine.distributed.plan import (
    RankFigures,
    decode_report,
    encode_report,
    kv_bytes_per_token,
    local_figures,
)
from engine.distributed.shard import ShardMode, shard_model
from engine.errors import ModelLoadError
from engine.library.load import LoadedModel, load_model

ProgressFn = Callable[[str, float], None]


@dataclass
class GroupLoad:
    """A rank's loaded share, how the model was split, and every rank's figures."""

    loaded: LoadedModel
    mode: str
    figures: list[RankFigures]


def _gather_reports(
    group: mx.distributed.Group, figures: RankFigures | None, error: str | None
) -> list[tuple[RankFigures | None, str | None]]:
    row = mx.array(encode_report(figures, error))[None]
    rows = np.array(mx.distributed.all_gather(row, group=group, stream=mx.cpu), dtype=np.int32)
    return [decode_report(rows[r], r) for r in range(group.size())]


def load_on_rank(
    spec: str,
    group: mx.distributed.Group,
    mode: ShardMode,
    hosts: list[str],
    on_progress: ProgressFn | None = None,
) -> GroupLoad:
    """Load this rank's share of `spec`; every rank of `group` calls this together.

    Raises ModelLoadError naming each rank (and its host, from `hosts`) that failed.
    """
    rank = group.rank()
    split: list[str] = []
    loaded: LoadedModel | None = None
    error: str | None = None
    try:
        loaded = load_model(
            spec, on_progress, shard=lambda model: split.append(shard_model(model, group, mode))
        )
    except Exception as exc:  # every rank must reach the gather below, failed or not
        error = str(exc) or type(exc).__name__
    reports = _gather_reports(group, None, error)
    failed = [(r, e) for r, (_, e) in enumerate(reports) if e is not None]
    if failed:
        raise ModelLoadError(
            "; ".join(f"rank {r} ({hosts[r] if r < len(hosts) else '?'}): {e}" for r, e in failed)
        )
    assert loaded is not None
    if on_progress:
        on_progress("Measuring the shares", 0.97)
    # One token through the split model: all ranks at once (its collectives pair up).
    cache = make_prompt_cache(loaded.model)
    mx.eval(loaded.model(mx.array([[0]], mx.int32), cache=cache))
    own = local_figures(rank, loaded.info.weights_bytes, kv_bytes_per_token(cache))
    reports = _gather_reports(group, own, None)
    figures = [f for f, _ in reports if f is not None]
    if len(figures) != group.size():  # cannot happen after the first gather succeeded
        raise ModelLoadError("a rank could not measure its share of the model")
    return GroupLoad(loaded, split[0] if split else "none", figures)
