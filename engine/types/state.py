"""What other threads may read about the engine: the model, its memory plan, the prompt
cache's figures, published whole as an EngineSnapshot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from engine.types.reasoning import ReasoningFormat

# Replies the engine decodes side by side at most, unless told otherwise (the app's
# Preferences, `serve --max-rows`).
DEFAULT_MAX_ROWS = 8


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, for display."""

    name: str
    path: str
    weights_bytes: int
    context_length: int | None
    has_chat_template: bool
    # where the model writes its thinking (engine.prompt.reasoning); None: it does not
    reasoning: ReasoningFormat | None = None
    vision: bool = False  # reads images (a vision-language model, loaded with mlx-vlm)


@dataclass(frozen=True)
class MemoryPlan:
    """Where a loaded model's memory goes. `warning` is a sentence the GUI can show as is."""

    metal: bool
    device_budget_bytes: int  # what the device may use: Metal working set, or machine memory
    model_bytes: int
    kv_budget_bytes: int  # for the prompt-cache trie
    wired_limit_bytes: int | None  # None off Metal: nothing to wire
    fits: bool
    warning: str | None = None


@dataclass(frozen=True)
class CacheStats:
    """The prompt cache's figures: what it holds, and counters since it was last cleared."""

    entries: int = 0
    bytes: int = 0
    budget_bytes: int = 0
    stored_tokens: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    shrinks: int = 0
    rejected: int = 0
    reused_in_place: int = 0
    copies: int = 0  # branches served by copying the shared prefix (at their first write)
    shared_branches: int = 0  # branches served without copying: the prefix's blocks read by both
    cached_tokens_total: int = 0
    prompt_tokens_total: int = 0
    hit_rate: float = 0.0  # cached prompt tokens over all prompt tokens
    reserved_bytes: int = 0  # KV state of the replies decoding, counted against the budget
    kv_bits: int | None = None  # KV precision of the entries (None: the model's own)
    # The disk tier (`engine.memory.disk_tier`): zeros when there is none.
    disk_entries: int = 0
    disk_bytes: int = 0
    disk_budget_bytes: int = 0
    disk_hits: int = 0  # prompts served from disk
    disk_restored_tokens: int = 0
    disk_writes: int = 0
    disk_evictions: int = 0
    disk_removed_bad: int = 0  # truncated, damaged or foreign files removed unread

    @property
    def disk_hit_rate(self) -> float:
        """Prompt tokens restored from disk over all prompt tokens."""
        return self.disk_restored_tokens / max(1, self.prompt_tokens_total)

    def to_dict(self) -> dict[str, int | float | None]:
        return {**asdict(self), "disk_hit_rate": self.disk_hit_rate}


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's state as its thread last published it, for any thread to read.

    The engine thread replaces the snapshot (never changes it) after each load, unload,
    budget change and request, so a reader never sees a structure being mutated.
    """

    model: ModelInfo | None = None
    memory: MemoryPlan | None = None
    cache: CacheStats = field(default_factory=CacheStats)
    requests_done: int = 0
