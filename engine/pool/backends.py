"""What a pool loads for a model, by kind, and what it needs of it.

A pool entry's model is a Backend: something that says what it is (`info`), what memory
it holds (`memory_bytes`: weights plus KV or working budget, counted against the pool's
limit) and can be closed (called by the pool's thread, only while no request uses it).
A BackendLoader starts loading one from a LoadOrder and returns a Future; loading runs
wherever the backend's MLX work will run (MLX streams belong to the thread that made
them). Chat models load as an Engine of their own (`ChatLoader`); embedding and rerank
models plug in the same way with their own loader (`ModelPool(loaders={...})`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from engine.pool.settings import ModelSettings
from engine.types import LoadProgress, ModelInfo, ModelKind
from engine.workers import acquire_worker, release_worker

if TYPE_CHECKING:
    from engine.engine import Engine
    from engine.library.load import LoadedModel


@dataclass(frozen=True)
class LoadOrder:
    """What to load for one pool entry: its id (the name its ModelInfo must carry), its
    spec and kind, its settings (context limit, ...), the KV budget the pool gives it
    (None: the engine's own), where to report progress, and `kv_for(weights)`: the KV
    budget the pool gives a model of those weights, for a loader that learns them only
    once loaded (a repo not downloaded yet, an estimate that was off)."""

    id: str
    spec: str
    kind: ModelKind
    settings: ModelSettings
    kv_budget_bytes: int | None
    on_progress: Callable[[LoadProgress], None] | None = None
    kv_for: Callable[[int], int | None] | None = None


class Backend(Protocol):
    """A loaded model of a pool."""

    @property
    def info(self) -> ModelInfo:
        """What it is (its `name` is the pool entry's id)."""
        ...

    @property
    def memory_bytes(self) -> int:
        """What it holds: weights plus its KV (or working) budget."""
        ...

    def close(self) -> None:
        """Release it (blocking; the pool calls it only while no request uses it)."""
        ...


BackendLoader = Callable[[LoadOrder], "Future[Backend]"]


class ChatBackend:
    """A chat model: an Engine of its own (its thread, prompt cache and disk-tier folder)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def info(self) -> ModelInfo:
        info = self.engine.snapshot.model
        assert info is not None, "a chat backend exists only once its model has loaded"
        return info

    @property
    def memory_bytes(self) -> int:
        plan = self.engine.snapshot.memory
        if plan is None:
            return self.info.weights_bytes
        return plan.model_bytes + plan.kv_budget_bytes

    def close(self) -> None:
        self.engine.close()


@dataclass
class EngineSettings:
    """What every chat engine of a pool is set to (the app's Preferences, `serve`'s flags):
    the Engine's constructor options, and the settings it takes after."""

    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_rows: int | None = None
    speculative: bool | None = None

    def apply(self, engine: Engine) -> None:
        if self.max_rows is not None:
            engine.set_max_rows(self.max_rows)
        if self.speculative is not None:
            engine.set_speculative(self.speculative)


class ChatLoader:
    """Loads a chat model on a new Engine, named as the pool names it, its context cut
    to the model's `context_length` setting."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings

    def __call__(self, order: LoadOrder) -> Future[Backend]:
        from engine.engine import Engine

        options = {**self.settings.options, "kv_budget_bytes": order.kv_budget_bytes}
        engine = Engine(**options, wire_memory=False, loader=_named_loader(order))
        self.settings.apply(engine)
        loading = engine.load_model(order.spec, order.on_progress)
        out: Future[Backend] = Future()

        def done(future: Future[ModelInfo]) -> None:  # on the engine's thread
            error = future.exception()
            if error is None:
                info = future.result()
                wanted = order.kv_for(info.weights_bytes) if order.kv_for else None
                if wanted is None or wanted == order.kv_budget_bytes:
                    out.set_result(ChatBackend(engine))
                else:  # the weights were not what the files said: the budget follows them
                    engine.set_kv_budget(wanted).add_done_callback(
                        lambda _plan: out.set_result(ChatBackend(engine))
                    )
                return
            # closing waits for this very thread: from another (never one that exits)
            closer = acquire_worker()
            closer.put(engine.close)
            release_worker(closer)
            out.set_exception(error)

        loading.add_done_callback(done)
        return out


def _named_loader(order: LoadOrder) -> Callable[[str, Any], LoadedModel]:
    """`load_model` with the result's ModelInfo carrying the pool's id, and the context
    the settings allow."""

    def load(spec: str, report: Any) -> LoadedModel:
        from engine.library.load import load_model

        loaded = load_model(spec, report)
        context = loaded.info.context_length
        limit = order.settings.context_length
        if limit is not None:
            context = min(limit, context) if context else limit
        loaded.info = dataclasses.replace(loaded.info, name=order.id, context_length=context)
        return loaded

    return load
