"""Attention that reads a shared-prefix cache, in the mlx-lm models that Corral runs.

mlx-lm's attention layers call `scaled_dot_product_attention(queries, keys, values,
cache=cache, ...)` from `mlx_lm.models.base`, imported by name into each model's module.
`install(model)` points that name, in the modules of `model`'s own layers, at
`scaled_dot_product_attention` below: a layer whose cache is a `SharedPrefixKVCache`
attends over its shared views and its own tokens (`shared_prefix.segmented_attention`);
every other call goes to mlx-lm's function unchanged. Only names still bound to mlx-lm's
function are replaced, so a model with attention of its own keeps it.

`supports_shared_prefix(model)` checks, once per model, that the model really reads
shared-prefix caches through it: a prompt is run whole and again as a branch of a shared
prefix; every shared layer must have been attended through Corral's function and the two
runs' logits must agree. A model that fails is served by copying, as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.models import base as mlx_base
from mlx_lm.models import cache as mlx_cache

from engine.memory.shared_prefix import SharedPrefixKVCache, freeze, share, shareable

_MLX_LM = mlx_base.scaled_dot_product_attention
PROBE_TOKENS = [1, 2, 3, 4, 5, 6, 7, 8]
PROBE_SHARED = 5  # tokens the probe's branch shares with the whole run
PROBE_TOLERANCE = 2e-2  # of the largest logit: kernels differ, missing context does not


def scaled_dot_product_attention(
    queries: mx.array,
    keys: Any,
    values: Any,
    cache: Any,
    scale: float,
    mask: Any,
    sinks: mx.array | None = None,
) -> mx.array:
    """mlx-lm's `scaled_dot_product_attention`, reading shared-prefix caches whole."""
    if isinstance(cache, SharedPrefixKVCache):
        return cache.attend(queries, scale=scale, mask=mask, sinks=sinks)
    out: mx.array = _MLX_LM(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)
    return out


def install(model: Any) -> None:
    """Route the attention of `model`'s layers through `scaled_dot_product_attention` here."""
    modules = model.modules() if hasattr(model, "modules") else []
    for name in {type(m).__module__ for m in modules}:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "scaled_dot_product_attention", None) is _MLX_LM:
            module.scaled_dot_product_attention = scaled_dot_product_attention  # type: ignore[attr-defined]


def supports_shared_prefix(model: Any, copy_layer: Callable[[Any, int], Any]) -> bool:
    """Whether `model` decodes from shared-prefix caches exactly as from its own (after
    `install`); `copy_layer(layer, n)` copies the first n tokens of a layer that is not
    shared (sliding windows, state-space layers). Runs a few tokens through the model."""
    try:
        install(model)
        tokens = mx.array([PROBE_TOKENS])
        whole = mlx_cache.make_prompt_cache(model)
        expected = model(tokens, cache=whole)[0, PROBE_SHARED:]
        stored = mlx_cache.make_prompt_cache(model)
        model(tokens[:, : PROBE_SHARED + 2], cache=stored)
        mx.eval([c.state for c in stored])
        if not shareable(stored):
            return False
        freeze(stored)
        branch = share(stored, PROBE_SHARED, copy_layer)
        got = model(tokens[:, PROBE_SHARED:], cache=branch)[0]
        mx.eval(got, expected)
    except Exception:  # a model that cannot run this way is served by copying
        return False
    if any(isinstance(c, SharedPrefixKVCache) and c.unattended for c in branch):
        return False
    error = mx.abs(got.astype(mx.float32) - expected.astype(mx.float32)).max()
    scale = mx.maximum(mx.abs(expected.astype(mx.float32)).max(), 1.0)
    return bool((error <= PROBE_TOLERANCE * scale).item())
