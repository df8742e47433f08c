"""What communication costs per token: the collectives of one decode step, replayed alone.

Every rank runs one one-token forward pass with MLX's collectives wrapped to record each call
(which function, the shape and type it moved, its peer), then replays that list `steps` times
with arrays of zeros, chained in the same order as in the real step and evaluated once per step
as a decode step is, plus rank 0's message that carries the token. The time per replayed step
is the communication a token costs on this group, without the model's compute.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from engine.distributed.channel import WIDTH

_WRAPPED = ("all_sum", "all_gather", "send", "recv_like", "all_max", "all_min")


@dataclass(frozen=True)
class Collective:
    """One recorded collective call: MLX's function name, what it moved, its other args."""

    name: str
    shape: tuple[int, ...]
    dtype: mx.Dtype
    kwargs: tuple[tuple[str, Any], ...]
    peer: int | None


@contextlib.contextmanager
def recording() -> Iterator[list[Collective]]:
    """Record every collective MLX is asked for inside the block (this thread or any)."""
    calls: list[Collective] = []
    dist = mx.distributed
    originals = {name: getattr(dist, name) for name in _WRAPPED}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(x: Any, *args: Any, **kwargs: Any) -> Any:
            peer = args[0] if args and isinstance(args[0], int) else None
            kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in ("group",)))
            calls.append(Collective(name, tuple(x.shape), x.dtype, kw, peer))
            return fn(x, *args, **kwargs)

        return recorded

    for name, fn in originals.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def _replay(calls: list[Collective], group: mx.distributed.Group) -> mx.array:
    """One step's collectives on zeros, each queued after the previous one (a `recv` depends
    on no input, so only queueing them in turn keeps them in order)."""
    dist = mx.distributed
    last = dist.all_sum(mx.zeros((WIDTH,), mx.int32), group=group)
    for c in calls:
        mx.async_eval(last)
        x = mx.depends(mx.zeros(c.shape, c.dtype), last)
        kwargs = dict(c.kwargs)
        fn = getattr(dist, c.name)
        last = fn(x, c.peer, **kwargs) if c.peer is not None else fn(x, **kwargs)
    return last


def replay_probe(
    group: mx.distributed.Group, model: Any, forward: Any, steps: int
) -> tuple[float, int]:
    """(milliseconds of communication per decode step on this rank, collectives per step);
    every rank calls it at the same time.

    Args:
        group: the distributed group.
        model: the sharded model (for an empty cache of this rank's layers).
        forward: what this rank evaluates for a forward pass (the model, or its body).
        steps: how many steps to replay (after two warm-up steps).
    """
    cache = make_prompt_cache(model)
    with recording() as calls:
        out = forward(mx.array([[0]], mx.int32), cache=cache)
    mx.eval(out)
    for _ in range(2):
        mx.eval(_replay(calls, group))
    times = []
    for _ in range(max(1, steps)):
        started = time.perf_counter()
        mx.eval(_replay(calls, group))
        times.append(time.perf_counter() - started)
    # The median: on a busy machine a few steps wait for a core, which is not the network.
    return statistics.median(times) * 1e3, len(calls) + 1
