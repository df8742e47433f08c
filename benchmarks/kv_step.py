"""One attention layer's decode step at full precision and at 8 bits (`python -m
benchmarks.kv_step`).

A step is what each layer does per token: the cache takes the new keys and values, then
attention reads the cache. Full precision is mlx-lm's `KVCache` and fused attention; 8
bits its `QuantizedKVCache` and quantized attention (`mlx_lm.models.base`), and beside it
the same 8-bit cache dequantized and read by the fused kernel. Shapes are the default
model's (9 query heads, 3 KV heads, head dimension 64, float32) unless given; rounds
alternate which side runs first; medians in microseconds per layer and step.

    python -m benchmarks.kv_step --contexts 64,1024,4096
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.models import cache as mlx_cache
from mlx_lm.models.base import scaled_dot_product_attention

GROUP, BITS = 64, 8


def _dequantized(queries: mx.array, keys: Any, values: Any, *, scale: float) -> mx.array:
    (kw, ks, kb), (vw, vs, vb) = keys, values
    k = mx.dequantize(kw, ks, kb, group_size=GROUP, bits=BITS)
    v = mx.dequantize(vw, vs, vb, group_size=GROUP, bits=BITS)
    return mx.fast.scaled_dot_product_attention(queries, k, v, scale=scale)


def _step_us(kind: str, context: int, heads: tuple[int, int, int], steps: int) -> float:
    q_heads, kv_heads, dim = heads
    make: Any = mlx_cache.KVCache if kind == "full" else mlx_cache.QuantizedKVCache
    cache: Any = make() if kind == "full" else make(GROUP, BITS)
    kv = mx.random.normal((1, kv_heads, context, dim))
    cache.update_and_fetch(kv, kv)
    mx.eval(cache.state)
    queries = mx.random.normal((1, q_heads, 1, dim))
    new = mx.random.normal((1, kv_heads, 1, dim))
    mx.eval(queries, new)
    attend: Callable[..., mx.array]
    if kind == "dequantized":
        attend = lambda q, k, v: _dequantized(q, k, v, scale=dim**-0.5)  # noqa: E731
    else:
        attend = lambda q, k, v: scaled_dot_product_attention(  # noqa: E731
            q, k, v, cache=cache, scale=dim**-0.5, mask=None
        )
    started = time.perf_counter()
    for _ in range(steps):
        keys, values = cache.update_and_fetch(new, new)
        mx.eval(attend(queries, keys, values))
    return (time.perf_counter() - started) / steps * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="64,1024,4096")
    parser.add_argument("--heads", default="9,3,64", help="query heads, KV heads, head dim")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    q_heads, kv_heads, dim = (int(x) for x in args.heads.split(","))
    kinds = ("full", "8-bit", "dequantized")
    for context in (int(c) for c in args.contexts.split(",")):
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for r in range(args.rounds):
            for kind in kinds if r % 2 == 0 else tuple(reversed(kinds)):
                times[kind].append(_step_us(kind, context, (q_heads, kv_heads, dim), args.steps))
        figures = ", ".join(f"{k} {statistics.median(v):.0f} us" for k, v in times.items())
        print(f"context {context}: {figures}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
