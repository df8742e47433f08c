"""One model of a pool, as the pool keeps it (under the pool's lock): its names, settings,
state, backend, memory, and the requests in flight on it or waiting for it to load.
`snapshot()` turns it into the immutable PooledModel other threads read."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.pool.memory import Estimate
from engine.pool.settings import ModelSettings
from engine.types import LoadProgress, ModelInfo, ModelKind, ModelState, PooledModel

if TYPE_CHECKING:
    from engine.pool.backends import Backend


@dataclass
class Waiter:
    """Something waiting for a model to load: requests queued for it, a lease, a load.
    `ready(backend)` runs once it has loaded; `fail(message, code)` if it cannot (or the
    wait passed its `deadline`, a time.monotonic(); None: no deadline); `cancel()` once
    `cancelled()` (the requests' clients went away). `count`: the requests it stands for."""

    ready: Callable[[Backend], None]
    fail: Callable[[str, str], None]
    deadline: float | None = None
    cancelled: Callable[[], bool] = lambda: False
    cancel: Callable[[], None] = lambda: None
    count: int = 0


@dataclass
class Entry:
    """A model the pool can serve (mutated only under the pool's lock)."""

    id: str
    spec: str
    kind: ModelKind
    key: str  # engine.pool.names.spec_key: one entry per model
    names: list[str] = field(default_factory=list)
    base: ModelSettings = field(default_factory=ModelSettings)  # given by the caller
    from_file: ModelSettings | None = None  # the settings file's, while it lists the model
    pinned_now: bool | None = None  # Pin/Unpin in the app, over both
    listed: bool = True  # an entry the settings file alone made, dropped from it: False
    estimate: Estimate = field(default_factory=Estimate)
    state: ModelState = "unloaded"
    backend: Backend | None = None
    info: ModelInfo | None = None  # the last one loaded
    memory_bytes: int = 0  # held while loading (reserved) or loaded
    last_used: float = field(default_factory=time.time)
    in_flight: int = 0
    waiters: list[Waiter] = field(default_factory=list)
    queued_at: float | None = None  # when it joined the load queue
    error: str | None = None
    unload_asked: list[Callable[[], None]] = field(default_factory=list)  # done callbacks
    progress: list[Callable[[LoadProgress], None]] = field(default_factory=list)
    made_by_file: bool = False  # the settings file listed it (and nothing else did)
    # Listed only because the chat picked it (ModelPool.load_model): when the chat picks
    # another, it stays loaded while it fits but is no longer listed (nor counted when
    # the limit is shared out), as a model the user listed would be.
    chosen: bool = False

    @property
    def waiting(self) -> int:
        """Requests waiting for it to load."""
        return sum(w.count for w in self.waiters)

    @property
    def settings(self) -> ModelSettings:
        return self.from_file.over(self.base) if self.from_file is not None else self.base

    @property
    def pinned(self) -> bool:
        return self.pinned_now if self.pinned_now is not None else bool(self.settings.pin)

    def idle_unload_s(self, pool_default: float | None) -> float | None:
        """After how long without a request it is unloaded (None: never)."""
        own = self.settings.idle_unload_s
        seconds = own if own is not None else pool_default
        return seconds if seconds else None

    def snapshot(
        self, *, default: bool, position: int | None, idle_default: float | None
    ) -> PooledModel:
        info = self.info
        context = info.context_length if info is not None else self.estimate.context_length
        limit = self.settings.context_length
        if limit is not None and info is None:
            context = min(limit, context) if context else limit
        backend = self.backend if self.state == "loaded" else None
        kv = getattr(getattr(backend, "engine", None), "snapshot", None)
        plan = kv.memory if kv is not None else None
        return PooledModel(
            id=self.id,
            kind=self.kind,
            spec=self.spec,
            state=self.state,
            names=tuple(self.names),
            memory_bytes=self.memory_bytes,
            weights_bytes=info.weights_bytes if info is not None else self.estimate.weights_bytes,
            kv_budget_bytes=plan.kv_budget_bytes if plan is not None else None,
            context_length=context,
            dimensions=info.dimensions if info is not None else None,
            pinned=self.pinned,
            idle_unload_s=self.idle_unload_s(idle_default),
            in_flight=self.in_flight,
            waiting=self.waiting,
            queue_position=position,
            last_used=self.last_used,
            error=self.error,
            default=default,
            sampling_defaults=tuple(sorted(self.settings.sampling.items())),
        )
