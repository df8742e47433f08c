"""What other threads may read about a model pool (engine.pool): every model it can serve,
loaded or not, with its memory, and the pool's limit. Published whole as a PoolSnapshot in
`EngineSnapshot.pool`; an engine that serves one model publishes none, and
`EngineSnapshot.served_models()` then describes its one model the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

# What a model does: chat (and text completion), embeddings, or reranking documents.
ModelKind = Literal["chat", "embedding", "rerank"]
MODEL_KINDS: tuple[ModelKind, ...] = ("chat", "embedding", "rerank")

# unloaded: known, not in memory; loading; loaded; unloading (its memory is being freed);
# failed: its last load failed (`PooledModel.error` says why; the next request tries again).
ModelState = Literal["unloaded", "loading", "loaded", "unloading", "failed"]


@dataclass(frozen=True)
class PooledModel:
    """One model a pool can serve, as its thread last published it."""

    id: str  # the name /v1/models lists and responses carry
    kind: ModelKind
    spec: str  # what it is loaded from ("default", a folder, a .gguf file, a repo id)
    state: ModelState = "unloaded"
    # Other names a request may use for it: aliases, its folder, its repo id.
    names: tuple[str, ...] = ()
    # What it holds while loading or loaded: weights + KV budget (a chat model) or working
    # budget (an embedding or rerank model: its forward passes' activations).
    memory_bytes: int = 0
    weights_bytes: int | None = None  # known once it has loaded (or estimated before)
    kv_budget_bytes: int | None = None
    context_length: int | None = None  # tokens per input for embedding and rerank models
    dimensions: int | None = None  # an embedding model's vectors, once it has loaded
    pinned: bool = False
    idle_unload_s: float | None = None  # unloaded after this long without a request
    in_flight: int = 0  # requests admitted and not finished (it is never unloaded then)
    waiting: int = 0  # requests waiting for it to load
    queue_position: int | None = None  # its place in the load queue (1: next), if waiting
    last_used: float = 0.0  # time.time() of its last request
    error: str | None = None  # why its last load failed
    default: bool = False  # requests that name no model get this one
    # The sampling its settings give what a request leaves unset: (setting, value) pairs.
    sampling_defaults: tuple[tuple[str, float | int], ...] = ()

    @property
    def loaded(self) -> bool:
        return self.state == "loaded"

    def answers_to(self, name: str) -> bool:
        """Whether a request naming `name` means this model: its id, an alias, its spec,
        its folder (however the path is written) or its repo id."""
        if name == self.id or name in self.names or name == self.spec:
            return True
        if not _path_like(name):
            return False
        wanted = _normal_path(name)
        return any(_normal_path(n) == wanted for n in (self.spec, *self.names) if _path_like(n))


@dataclass(frozen=True)
class PoolSnapshot:
    """The pool: its models in the order they were added, its memory limit and use."""

    models: tuple[PooledModel, ...] = ()
    limit_bytes: int = 0  # the most its models may hold together
    held_bytes: int = 0  # what the loaded and loading models hold now
    settings_file: str | None = None  # the per-model settings file, if any
    settings_error: str | None = None  # why that file's last edit was not applied

    @property
    def default(self) -> PooledModel | None:
        return next((m for m in self.models if m.default), None)

    def find(self, name: str | None) -> PooledModel | None:
        """The model a request naming `name` means (None: the default), or None."""
        if name is None:
            return self.default
        exact = next((m for m in self.models if m.id == name), None)
        return exact or next((m for m in self.models if m.answers_to(name)), None)


def _path_like(name: str) -> bool:
    return name.startswith(("/", "~", "./", "../")) or os.sep in name and os.path.exists(name)


def _normal_path(name: str) -> str:
    return os.path.realpath(os.path.expanduser(name))
