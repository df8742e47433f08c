"""EngineAPI: what every engine offers its front ends, written out once.

`engine.engine.Engine` (one model on this machine's engine thread) and
`engine.distributed.DistributedEngine` (a model sharded across a group, served by rank 0)
both implement it; the app's EngineBridge, the server, `chat` and `serve` hold an
EngineAPI and never ask which one they have. Structural (a Protocol), so neither engine
inherits from the other or from this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from engine.runtime.handle import EventFn, RequestHandle
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    EngineSnapshot,
    LoadProgress,
    MemoryPlan,
    ModelInfo,
    ValidationReport,
)

T = TypeVar("T")


class EngineAPI(Protocol):
    """Load a model, submit chat requests, read the published state, close.

    A request says which model answers (`ChatRequest.model`, None: the default one); an
    engine serving one model answers every request with it, and a model pool
    (engine.pool.ModelPool) routes each to its model, loading it first if need be.
    `snapshot.served_models()` lists what an engine serves either way."""

    def load_model(
        self, spec: str, on_progress: Callable[[LoadProgress], None] | None = None
    ) -> Future[ModelInfo]:
        """Load `spec` ("default", a folder, a .gguf file or a repo id)."""
        ...

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        """Queue a chat request; its events go to `on_event` if given, else to the
        handle's `events()`."""
        ...

    def submit_many(
        self,
        requests: Sequence[ChatRequest],
        on_event: Callable[[int, ChatEvent], None] | None = None,
    ) -> list[RequestHandle]:
        """Queue the `n` alternatives of one request; `on_event(i, event)` gets request i's."""
        ...

    def chat(self, request: ChatRequest) -> ChatResult:
        """Generate a whole reply and return it (blocking)."""
        ...

    def check_constraint(self, spec: ConstraintSpec, model: str | None = None) -> ValidationReport:
        """Check `spec` for the model `model` names (None: the default; an engine serving
        one model checks it for that one), blocking."""
        ...

    def set_kv_budget(self, kv_budget_bytes: int | None) -> Future[MemoryPlan | None]:
        """Change the prompt-cache budget (None: automatic)."""
        ...

    def set_max_rows(self, max_rows: int) -> None:
        """How many replies may decode together at most."""
        ...

    def set_speculative(self, on: bool) -> None:
        """Whether replies draft tokens and verify them."""
        ...

    def set_kv_bits(self, kv_bits: int | None) -> Future[None]:
        """The KV caches' precision for the next requests: 8 or 4 bits, None: the model's
        own. ValueError for any other value."""
        ...

    def load_draft_model(self, spec: str | None) -> Future[ModelInfo | None]:
        """Load the draft model of speculative decoding (None: prompt lookup drafts)."""
        ...

    def run(self, fn: Callable[[Any], T], model: str | None = None) -> Future[T]:
        """Run `fn(loaded_model)` where the model `model` names lives (None: the default;
        benchmarks, tests, counting a prompt's tokens)."""
        ...

    @property
    def snapshot(self) -> EngineSnapshot:
        """The engine's state as last published; safe to read from any thread."""
        ...

    @property
    def failure(self) -> str | None:
        """Why the engine stopped serving for good (a distributed group that lost a rank),
        as a sentence for the user; None while it serves."""
        ...

    def close(self) -> None:
        """Finish or end queued work, release the model, stop the threads."""
        ...
