"""KV caches at reduced precision: mlx-lm's QuantizedKVCache in place of its KVCache.

`--kv-bits 8|4` (and the app's Preferences) quantize the keys and values each attention
layer keeps, in groups along the head dimension: 8 bits hold them in about a half of
float16's bytes (a quarter of float32's), 4 bits in about a quarter (an eighth). Only
plain KV layers are quantized; sliding-window and state-space layers keep their own cache.
A model whose head dimension no group size divides keeps full precision (`group_size`
says None), and the engine reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx.utils import tree_flatten
from mlx_lm.models import cache as mlx_cache

from engine.memory.store import KVState

KV_BITS = (4, 8)


def check_kv_bits(bits: int | None) -> int | None:
    """`bits` if it is a KV precision the engine offers (None: full precision)."""
    if bits is not None and bits not in KV_BITS:
        raise ValueError(f"kv_bits must be 8 or 4 (or unset for full precision), not {bits}")
    return bits


def head_dim(model: Any) -> int | None:
    """The attention head dimension of an mlx-lm model, if its arguments say."""
    args = getattr(model, "args", None)
    dim = getattr(args, "head_dim", None)
    if dim is None and args is not None:
        hidden, heads = getattr(args, "hidden_size", None), getattr(args, "num_attention_heads", 0)
        dim = hidden // heads if hidden and heads else None
    return int(dim) if dim else None


def group_size(model: Any) -> int | None:
    """The quantization group size for the model's KV heads (None: it cannot be quantized)."""
    dim = head_dim(model)
    for size in (64, 32):
        if dim and dim % size == 0:
            return size
    return None


def cache_maker(bits: int | None) -> Callable[[Any], KVState]:
    """`make_cache(model)` for the prompt cache: mlx-lm's own, its KV layers quantized to
    `bits` when given and the model allows it."""
    if bits is None:
        return mlx_cache.make_prompt_cache

    def make(model: Any) -> KVState:
        cache = mlx_cache.make_prompt_cache(model)
        size = group_size(model)
        if size is None:
            return cache
        return [
            mlx_cache.QuantizedKVCache(size, bits) if type(c) is mlx_cache.KVCache else c
            for c in cache
        ]

    return make


def kv_dtype_bytes(model: Any) -> int:
    """Bytes of one value of the model's activations (its first floating parameter)."""
    leaves: list[tuple[str, Any]] = tree_flatten(model.parameters())  # type: ignore[assignment]
    for _, p in leaves:
        if hasattr(p, "dtype") and "float" in str(p.dtype):
            return int(p.dtype.size)
    return 2


def kv_bytes_per_token(model: Any, bits: int | None) -> int | None:
    """KV bytes one token takes in every layer at `bits` (None: full precision), or None if
    the model does not say its shape."""
    args = getattr(model, "args", None)
    layers = len(getattr(model, "layers", []) or [])
    heads = getattr(args, "num_key_value_heads", None) or getattr(args, "num_attention_heads", 0)
    dim = head_dim(model)
    if not (layers and heads and dim):
        return None
    width = kv_dtype_bytes(model)
    size = group_size(model)
    if bits is None or size is None:
        per_head = dim * width
    else:  # packed values, plus a scale and a bias per group
        per_head = dim * bits // 8 + 2 * (dim // size) * width
    return 2 * layers * int(heads) * per_head
