"""The prompt cache in two tiers: the memory trie, and the disk under it.

A lookup asks the trie how much of the prompt it holds (`longest`) and the disk tier for
its longest prefix; the disk entry is loaded only when it serves clearly more
(`MIN_DISK_GAIN` tokens) than memory, so a turn whose previous state is still in memory
never touches the disk. What the trie evicts goes to disk (written off the engine thread);
`clear` (the engine unloading the model or closing) first writes what memory still holds,
so the next start, a new Engine over the same folder, finds it there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.memory.disk_tier import DiskTier, describe
from engine.memory.prompt_cache import PromptCacheTrie
from engine.memory.store import KVState
from engine.types import CacheStats

MIN_DISK_GAIN = 32  # tokens a disk entry must serve beyond memory to be worth its load


class TieredPromptCache:
    """A PromptCacheStore: the trie in memory, its evictions on disk."""

    def __init__(self, trie: PromptCacheTrie, disk: DiskTier) -> None:
        self.trie = trie
        self.disk = disk
        trie.on_evict = disk.put

    @property
    def budget_bytes(self) -> int:
        return self.trie.budget_bytes

    @budget_bytes.setter
    def budget_bytes(self, value: int) -> None:
        self.trie.budget_bytes = value

    def fetch(self, model: Any, tokens: list[int]) -> tuple[KVState, int]:
        limit = len(tokens) - 1
        in_memory = self.trie.longest(tokens)
        if in_memory < limit:
            found = self.disk.best(tokens, better_than=in_memory + MIN_DISK_GAIN - 1)
            if found is not None:
                name, shared = found
                n = min(shared, limit)
                cache = self.disk.load(name, tokens, n)
                if cache is not None:
                    self.trie.note_hit(model, len(tokens), n)
                    return cache, n
        return self.trie.fetch(model, tokens)

    def store(self, tokens: list[int], cache: KVState) -> None:
        self.trie.store(tokens, cache)

    def store_copy(self, tokens: list[int], cache: KVState) -> None:
        self.trie.store_copy(tokens, cache)

    def reserve(self, nbytes: int) -> None:
        self.trie.reserve(nbytes)

    def stats(self) -> CacheStats:
        return dataclasses.replace(self.trie.stats(), **describe(self.disk))

    def persist(self) -> None:
        """Write every entry memory holds to disk (those not there yet) and wait for it."""
        for tokens, cache in self.trie.entries():
            self.disk.put(tokens, cache)
        self.disk.flush()

    def clear(self) -> None:
        """Persist, then empty memory (the disk keeps its entries)."""
        self.persist()
        self.trie.clear()

    def close(self) -> None:
        """Persist and stop the disk tier's writer."""
        self.clear()
        self.disk.close()
