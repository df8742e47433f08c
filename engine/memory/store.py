"""Where the engine thread fetches KV states from and gives them back to between requests.

PromptCacheStore is the interface the scheduler and the engine use; the prompt-cache trie
(`engine.memory.prompt_cache`) is the real one, and NoPromptCache the baseline that
recomputes every prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.types import CacheStats

# The KV state of some tokens: mlx-lm's prompt cache, one cache object per layer. Defined
# here, without MLX, so that every layer can name it.
KVState = list[Any]


class PromptCacheStore(Protocol):
    """Where KV states come from and go back to between requests (engine thread only)."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[KVState, int]: ...
    def store(self, tokens: list[int], cache: KVState) -> None: ...
    def store_copy(self, tokens: list[int], cache: KVState) -> None: ...
    def reserve(self, nbytes: int) -> None: ...
    def stats(self) -> CacheStats: ...
    def clear(self) -> None: ...


class NoPromptCache:
    """Recompute every prompt from scratch (the baseline the prefix cache is measured against)."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[KVState, int]:
        from mlx_lm.models.cache import make_prompt_cache

        return make_prompt_cache(model), 0

    def store(self, tokens: list[int], cache: KVState) -> None:
        pass

    def store_copy(self, tokens: list[int], cache: KVState) -> None:
        pass

    def reserve(self, nbytes: int) -> None:
        pass

    def stats(self) -> CacheStats:
        return CacheStats()

    def clear(self) -> None:
        pass


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share: what a KV state computed for one can serve
    the other (the prompt cache, the scheduler's shared prompts, a draft model's cache)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
