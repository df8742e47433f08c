"""Caches that share a prompt's KV state with their branches instead of copying it.

MLX arrays are values: an array that another array still references is copied, whole, the
first time it is written to. A branch (an edit, a regenerate of an earlier turn, an agent
prompt that diverges before the cached end) that wrote its tokens into the buffer a stored
entry holds would copy that buffer: every layer's keys and values, 377 MB for 8k tokens of
the default model in float32 (155 ms on the development CPU). Here nothing shared is
written again:

- `freeze(cache)` turns what a cache's full-precision layers have written into a `KVBlock`,
  in place and without copying: each plain `KVCache` layer becomes a `SharedPrefixKVCache`
  reading its own buffer through a view. A block is only an account of the buffers its
  views keep alive (`nbytes`), so the prompt cache can count a shared block once.
- `SharedPrefixKVCache` is one layer's cache: its prefix is a list of views into blocks, in
  token order, and the tokens after it go into an mlx-lm `KVCache` of its own (the only
  part ever written; it starts empty). Attention reads the views and that part side by
  side (`engine.memory.attention`): no buffer holding more than one branch's tokens exists.
- `share(cache, n)` gives a new cache holding the first n tokens of a frozen one: views of
  the same blocks. The two then write past the branch point, each into its own part.

A layer's prefix gains a view at each freeze that found new tokens; past `MAX_SEGMENTS`
views it is compacted into one block (a copy, once). Layers of other kinds (sliding
windows, quantized, state-space) are not shared: the caller copies them as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
from mlx_lm.models import cache as mlx_cache

from engine.memory.store import KVState

MAX_SEGMENTS = 8  # views one layer reads before its prefix is compacted into one block
FIRST_STEP = 16  # token positions a layer's own buffer starts with; it doubles up to mlx-lm's


class KVBlock:
    """Keys and values of a run of tokens in every sharing layer of one cache, read through
    views and never written again; `nbytes` is what the buffers it keeps alive hold."""

    __slots__ = ("nbytes", "__weakref__")

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


class SharedPrefixKVCache(mlx_cache._BaseCache):
    """One attention layer's KV state: a prefix shared with other caches (views into
    blocks) and the tokens after it in an mlx-lm `KVCache` of its own.

    Only a model whose attention Corral reads it with (`engine.memory.attention.install`)
    may run on it; a forward pass that updates it without attending through it makes the
    next update raise instead of decoding from half the context.
    """

    def __init__(self, keys: list[mx.array], values: list[mx.array], blocks: list[KVBlock]) -> None:
        self.prefix_keys = keys
        self.prefix_values = values
        self.blocks = blocks  # blocks[i] keeps the buffer of prefix_keys[i] alive
        self.prefix_length = sum(int(k.shape[2]) for k in keys)
        self.tail: Any = mlx_cache.KVCache()  # type: ignore[no-untyped-call]
        self.unattended = False  # updated by a forward pass that has not read it yet

    @property
    def offset(self) -> int:
        return self.prefix_length + int(self.tail.offset)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        if self.unattended:
            raise RuntimeError(
                "this model's attention does not read Corral's shared-prefix KV cache"
            )
        self.unattended = True
        # Grow the own buffer by what it holds (16, 32, ... up to mlx-lm's step): a branch
        # that adds a few tokens allocates a few positions, not mlx-lm's 256 at once.
        tail = self.tail
        tail.step = min(mlx_cache.KVCache.step, max(FIRST_STEP, int(tail.offset)))
        out: tuple[mx.array, mx.array] = tail.update_and_fetch(keys, values)
        return out

    def parts(self) -> tuple[list[mx.array], list[mx.array]]:
        """Every run of keys and of values this layer attends to, in token order."""
        keys, values = list(self.prefix_keys), list(self.prefix_values)
        if self.tail.offset:
            k, v = self.tail.keys_and_values()
            keys.append(k)
            values.append(v)
        return keys, values

    def attend(
        self,
        queries: mx.array,
        *,
        scale: float,
        mask: Any,
        sinks: mx.array | None = None,
    ) -> mx.array:
        """Attention of `queries` (the tokens just added) over every token this layer holds."""
        self.unattended = False
        keys, values = self.parts()
        return segmented_attention(queries, keys, values, scale=scale, mask=mask, sinks=sinks)

    def size(self) -> int:
        return self.offset

    @property
    def state(self) -> list[mx.array]:
        keys, values = self.parts()
        return [*keys, *values]

    @state.setter
    def state(self, v: Any) -> None:
        raise ValueError("a shared-prefix cache is made by sharing, not from a saved state")

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        from_tail = min(n, int(self.tail.offset))
        self.tail.trim(from_tail)
        if n > from_tail:
            self.cut(self.prefix_length - (n - from_tail))
        return n

    def cut(self, length: int) -> None:
        """Keep the first `length` tokens of the prefix (views of views: no copy); the
        tail must be empty."""
        keys, values, blocks = [], [], []
        left = length
        for k, v, b in zip(self.prefix_keys, self.prefix_values, self.blocks, strict=True):
            if left <= 0:
                break
            run = int(k.shape[2])
            if run > left:
                k, v = k[..., :left, :], v[..., :left, :]
            keys.append(k)
            values.append(v)
            blocks.append(b)
            left -= min(run, left)
        self.prefix_keys, self.prefix_values, self.blocks = keys, values, blocks
        self.prefix_length = length

    @property
    def capacity(self) -> int:
        """Token positions its state holds: the prefix's and its own buffer's, slack included."""
        own = self.tail.keys.shape[2] if self.tail.keys is not None else 0
        return self.prefix_length + int(own)

    def make_mask(self, n: int, return_array: bool = False, window_size: int | None = None) -> Any:
        return mlx_cache.create_attention_mask(
            n, offset=self.offset, return_array=return_array, window_size=window_size
        )

    def empty(self) -> bool:
        return self.offset == 0

    @classmethod
    def merge(cls, caches: list[Any]) -> Any:
        """mlx-lm's batch cache of these rows (each copied into the batch's buffer, as
        merging copies every row)."""
        batch: Any = mlx_cache.BatchKVCache
        return batch.merge([plain_layer(c) for c in caches])

    @property
    def nbytes(self) -> int:
        """Bytes of every token this layer reads, its share of blocks included (what a copy
        would take: the prompt cache counts a block once, the rows decoding count it whole)."""
        prefix = zip(self.prefix_keys, self.prefix_values, strict=True)
        return sum(int(k.nbytes) + int(v.nbytes) for k, v in prefix) + int(self.tail.nbytes)

    @property
    def own_nbytes(self) -> int:
        """Bytes of the buffer this layer writes (blocks not included)."""
        return int(self.tail.nbytes)


def _plain(c: Any) -> bool:
    return type(c) is mlx_cache.KVCache and c.keys is not None


def shareable(cache: KVState) -> bool:
    """Whether `cache` has a layer that `freeze` and `share` share."""
    return any(_plain(c) or isinstance(c, SharedPrefixKVCache) for c in cache)


def freeze(cache: KVState) -> KVBlock | None:
    """Make what `cache`'s full-precision layers have written a block, in place and without
    copying: plain `KVCache` layers become `SharedPrefixKVCache`s over views of their own
    buffers; shared ones move their own tokens into their prefix. Returns the new block (None
    when nothing was written since the last freeze)."""
    fresh = [
        i
        for i, c in enumerate(cache)
        if _plain(c) and c.offset or isinstance(c, SharedPrefixKVCache) and c.tail.offset
    ]
    if not fresh:
        return None
    nbytes = 0
    for i in fresh:
        c = cache[i]
        nbytes += int(c.tail.nbytes if isinstance(c, SharedPrefixKVCache) else c.nbytes)
    block = KVBlock(nbytes)
    for i in fresh:
        c = cache[i]
        if isinstance(c, SharedPrefixKVCache):
            k, v = c.tail.keys_and_values()
            c.prefix_keys.append(k)
            c.prefix_values.append(v)
            c.blocks.append(block)
            c.prefix_length += int(c.tail.offset)
            c.tail = mlx_cache.KVCache()  # type: ignore[no-untyped-call]
        else:
            n = int(c.offset)
            cache[i] = SharedPrefixKVCache([c.keys[..., :n, :]], [c.values[..., :n, :]], [block])
    return block


def compact_prefixes(cache: KVState) -> KVBlock | None:
    """Copy the prefix of every shared layer that reads more than `MAX_SEGMENTS` views into
    one exact-size block of its own (in place); None when no layer needed it."""
    wide = [
        c for c in cache if isinstance(c, SharedPrefixKVCache) and len(c.prefix_keys) > MAX_SEGMENTS
    ]
    if not wide:
        return None
    block = KVBlock(0)
    for c in wide:
        k = mx.concatenate(c.prefix_keys, axis=2)
        v = mx.concatenate(c.prefix_values, axis=2)
        c.prefix_keys, c.prefix_values, c.blocks = [k], [v], [block]
        block.nbytes += int(k.nbytes) + int(v.nbytes)
    mx.eval([c.prefix_keys + c.prefix_values for c in wide])
    return block


def share(cache: KVState, n: int, other: Callable[[Any, int], Any]) -> KVState:
    """A new cache holding the first `n` tokens of `cache` (frozen: see `freeze`): shared
    layers as views of the same blocks, every other layer as `other(layer, n)` makes it."""
    out: KVState = []
    for c in cache:
        if isinstance(c, SharedPrefixKVCache):
            if c.tail.offset or n > c.prefix_length:
                raise ValueError("share() needs a frozen cache holding the tokens it shares")
            branch = SharedPrefixKVCache(list(c.prefix_keys), list(c.prefix_values), list(c.blocks))
            branch.cut(n)
            out.append(branch)
        else:
            out.append(other(c, n))
    return out


def blocks_of(cache: KVState) -> set[KVBlock]:
    """The blocks `cache` reads."""
    return {b for c in cache if isinstance(c, SharedPrefixKVCache) for b in c.blocks}


def plain_layer(c: Any) -> Any:
    """`c` as mlx-lm's own `KVCache` (its tokens copied into one buffer) if it is a shared
    layer; any other layer as it is. For whatever reads a layer's `keys`: batch caches
    merging rows, the disk tier."""
    if not isinstance(c, SharedPrefixKVCache):
        return c
    out = mlx_cache.KVCache()  # type: ignore[no-untyped-call]
    keys, values = c.parts()
    if keys:
        out.keys = keys[0] if len(keys) == 1 else mx.concatenate(keys, axis=2)
        out.values = values[0] if len(values) == 1 else mx.concatenate(values, axis=2)
        out.offset = c.offset
    return out


def segmented_attention(
    queries: mx.array,
    keys: Sequence[mx.array],
    values: Sequence[mx.array],
    *,
    scale: float,
    mask: Any,
    sinks: mx.array | None = None,
) -> mx.array:
    """Attention over keys and values held in several runs, in token order: what
    `mx.fast.scaled_dot_product_attention` computes over their concatenation, written as
    MLX's own unfused path writes it (scores, mask, sinks, a precise softmax), with each
    run's scores side by side and the runs' values summed, so no run is copied.

    `mask` is None, "causal" (lower-right aligned: the queries are the last tokens) or an
    array broadcastable to (batch, query heads, queries, all keys)."""
    b, n_q, length, dim = queries.shape
    n_kv = int(keys[0].shape[1])
    repeats = n_q // n_kv
    q = queries * mx.array(scale, dtype=queries.dtype)
    if repeats > 1:
        q = q.reshape(b, n_kv, repeats, length, dim)
        keys = [mx.expand_dims(k, 2) for k in keys]
        values = [mx.expand_dims(v, 2) for v in values]
    runs = [int(k.shape[-2]) for k in keys]
    scores = [q @ k.swapaxes(-1, -2) for k in keys]
    s = scores[0] if len(scores) == 1 else mx.concatenate(scores, axis=-1)
    if mask is not None:
        total = sum(runs)
        if isinstance(mask, str):
            q_idx = mx.arange(total - length, total)
            mask = q_idx[:, None] >= mx.arange(total)[None]
        if repeats > 1 and mask.ndim >= 3:
            if mask.shape[-3] == 1:
                mask = mx.expand_dims(mask, -3)
            else:
                mask = mask.reshape(*mask.shape[:-3], n_kv, repeats, *mask.shape[-2:])
        if mask.dtype == mx.bool_:
            s = mx.where(mask, s, mx.array(mx.finfo(s.dtype).min, s.dtype))
        else:
            s = s + mask
    if sinks is not None:
        sink = mx.expand_dims(sinks, (0, 2, 3))
        if s.ndim == 5:
            sink = sink.reshape(1, n_kv, repeats, 1, 1)
        sink = mx.broadcast_to(sink, (*s.shape[:-1], 1)).astype(s.dtype)
        s = mx.softmax(mx.concatenate([sink, s], axis=-1), axis=-1, precise=True)[..., 1:]
    else:
        s = mx.softmax(s, axis=-1, precise=True)
    out = None
    start = 0
    for run, v in zip(runs, values, strict=True):
        part = s[..., start : start + run] if len(runs) > 1 else s
        out = part @ v if out is None else out + part @ v
        start += run
    assert out is not None
    if repeats > 1:
        out = out.reshape(b, n_q, length, -1)
    return out
