"""Rank 0's model and prompt cache, kept in step with the shares on the other ranks.

The engine (its decode loops, its prefix-cache trie) runs unchanged on rank 0 against
`LeaderModel`, a stand-in for the sharded model: each call `model(tokens, cache=kv)` first
posts the call to the other ranks (see `channel`), which run the same call on their share.

Every KV state rank 0 handles is a `ShardedKV`: its own layers' caches plus an id under which
each other rank keeps its share of the same state. The trie's operations on states are
mirrored by id: a new state (`make_cache`), a prefix copy (`_slice_cache`), a trim in place
(`_trim_cache`); a state rank 0 lets go of (garbage collected) is dropped on the other ranks
with the next message. Which state a request uses, and what the trie keeps, is decided once,
on rank 0.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from engine.distributed.channel import LeaderChannel, Op
from engine.errors import CorralError
from engine.memory.prompt_cache import PromptCacheTrie
from engine.memory.store import KVState


class ShardedKV(list[Any]):
    """Rank 0's KV state (one cache per local layer) and the id of its mirrors."""

    kv_id: int = 0


class CacheMirror:
    """Names rank 0's KV states and tells the other ranks what becomes of them."""

    def __init__(self, channel: LeaderChannel) -> None:
        self.channel = channel
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._dropped: list[int] = []  # ids let go of on rank 0, not yet dropped elsewhere

    def _adopt(self, layers: KVState) -> ShardedKV:
        kv = ShardedKV(layers)
        kv.kv_id = next(self._ids)
        weakref.finalize(kv, self._let_go, kv.kv_id)
        return kv

    def _let_go(self, kv_id: int) -> None:
        # Any thread, at any point of the engine's work: only note it, send it later.
        with self._lock:
            self._dropped.append(kv_id)

    def flush(self) -> None:
        """Post the drops noted since the last message (engine thread)."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        if dropped:
            self.channel.post(Op.DROP_CACHES, (), dropped)

    def new(self, model: Any) -> ShardedKV:
        """An empty KV state for `model` (this rank's share), made on every rank."""
        self.flush()
        kv = self._adopt(make_prompt_cache(model))
        self.channel.post(Op.NEW_CACHE, (kv.kv_id,))
        return kv

    def sliced(self, source: KVState, layers: KVState, n: int, compact: bool) -> ShardedKV:
        """`layers` (the first n tokens of `source`, made here) as a state of its own, made
        from `source`'s mirror on every other rank."""
        self.flush()
        kv = self._adopt(layers)
        self.channel.post(Op.SLICE_CACHE, (state_id(source), kv.kv_id, n, int(compact)))
        return kv

    def trimmed(self, cache: KVState, n: int) -> None:
        """Drop the last n tokens of `cache`'s mirrors as they were dropped here."""
        if n > 0:
            self.flush()
            self.channel.post(Op.TRIM_CACHE, (state_id(cache), n))


def state_id(cache: KVState) -> int:
    """The mirror id of a KV state rank 0 handed out; a clear error for any other."""
    kv_id = getattr(cache, "kv_id", 0)
    if not kv_id:
        raise CorralError(
            "a KV cache that was not made through the sharded model reached it: "
            "the other machines have no copy of it"
        )
    return int(kv_id)


class MirroredPromptCacheTrie(PromptCacheTrie):
    """The engine's prefix-cache trie on rank 0, mirroring its copies and trims by id."""

    shares_prefixes = False  # the other ranks' caches are copied as rank 0's are

    def __init__(self, budget_bytes: int, mirror: CacheMirror) -> None:
        super().__init__(budget_bytes)
        self._mirror = mirror

    def _trim_cache(self, cache: KVState, n: int) -> None:
        super()._trim_cache(cache, n)
        self._mirror.trimmed(cache, n)

    def _slice_cache(self, cache: KVState, n: int, compact: bool = False) -> KVState:
        return self._mirror.sliced(cache, super()._slice_cache(cache, n, compact), n, compact)


class LeaderModel:
    """Rank 0's sharded model as the engine sees it: every call runs on every rank.

    Attributes other than the call and `make_cache` are the sharded model's own.
    """

    def __init__(self, model: Any, mirror: CacheMirror) -> None:
        self.sharded = model
        self.mirror = mirror

    def __call__(self, inputs: mx.array, cache: KVState | None = None, **kwargs: Any) -> mx.array:
        if cache is None:
            raise CorralError("the sharded model runs only with a KV cache")
        kv_id = state_id(cache)
        if inputs.ndim != 2:
            raise ValueError(f"the model takes (batch, length) token ids, got {inputs.shape}")
        self.mirror.flush()
        batch, length = inputs.shape
        tokens = self.mirror.channel.post(Op.FORWARD, (kv_id, batch, length), inputs)
        out: mx.array = self.sharded(tokens.reshape(batch, length), cache=cache, **kwargs)
        self.mirror.channel.after(out)
        return out

    def make_cache(self) -> ShardedKV:
        return self.mirror.new(self.sharded)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sharded, name)
