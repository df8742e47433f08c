"""The Engine: owns a model on one long-lived thread and streams chat replies from it.

MLX streams belong to the thread that created them, so loading, prefill and decoding
all run on the engine's own thread. Callers submit work and get events back through a
callback (called on the engine thread) and/or a blocking iterator.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from engine.errors import CorralError, EngineClosedError
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    Finished,
    GenerationStats,
    LoadProgress,
    ModelInfo,
    StopReason,
)
from engine.worker import acquire_worker, release_worker

T = TypeVar("T")
EventFn = Callable[[ChatEvent], None]


class PromptCacheStore(Protocol):
    """Where KV caches come from and go back to between requests."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[list[Any], int]: ...
    def store(self, tokens: list[int], cache: list[Any]) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def clear(self) -> None: ...


class NoPromptCache:
    """Recompute every prompt from scratch (the baseline the prefix cache is measured against)."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[list[Any], int]:
        from mlx_lm.models.cache import make_prompt_cache

        return make_prompt_cache(model), 0

    def store(self, tokens: list[int], cache: list[Any]) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {"entries": 0, "bytes": 0}

    def clear(self) -> None:
        pass


@dataclass
class RequestHandle:
    """A submitted chat request: cancel it, iterate its events, or wait for its result."""

    id: int
    request: ChatRequest
    on_event: EventFn | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    _events: queue.Queue[ChatEvent] = field(default_factory=queue.Queue)
    _done: Future[ChatResult] = field(default_factory=Future)

    def cancel(self) -> None:
        """Stop the request as soon as possible (within one prefill chunk or one token)."""
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def done(self) -> bool:
        return self._done.done()

    def result(self, timeout: float | None = None) -> ChatResult:
        """Block until the reply is finished and return it."""
        return self._done.result(timeout)

    def events(self, timeout: float | None = None) -> Iterator[ChatEvent]:
        """Yield this request's events until (and including) its Finished event."""
        while True:
            event = self._events.get(timeout=timeout)
            yield event
            if isinstance(event, Finished):
                return

    def emit(self, event: ChatEvent) -> None:
        self._events.put(event)
        if self.on_event is not None:
            self.on_event(event)
        if isinstance(event, Finished):
            self._done.set_result(event.result)


class Engine:
    """One model, one thread, a queue of requests served in order."""

    def __init__(
        self,
        prompt_cache: PromptCacheStore | None = None,
        *,
        kv_budget_bytes: int | None = None,
        reuse_prefixes: bool = True,
    ) -> None:
        """`prompt_cache` replaces the KV-cache store (default: an LRU token trie sized by
        the memory plan at each load); `kv_budget_bytes` is the user's budget setting
        (None: automatic); `reuse_prefixes=False` recomputes every prompt (for benchmarks)."""
        self._ids = itertools.count(1)
        self._closed = False
        self._loaded: Any = None  # engine.models.LoadedModel, touched only on the engine thread
        self._prompt_cache_override = prompt_cache
        self.prompt_cache: PromptCacheStore = prompt_cache or NoPromptCache()
        self.model_info: ModelInfo | None = None
        self.memory_plan: Any = None  # engine.memory.MemoryPlan of the loaded model
        self._kv_budget_setting = kv_budget_bytes
        self._reuse_prefixes = reuse_prefixes
        self._wired: Any = None
        self._worker = acquire_worker()
        self._drained = threading.Event()

    # ---- public API (any thread) ----

    def load_model(
        self, spec: str, on_progress: Callable[[LoadProgress], None] | None = None
    ) -> Future[ModelInfo]:
        """Load `spec` ("default", a folder, a .gguf file or a repo id) on the engine thread."""

        def job() -> ModelInfo:
            from engine.models import load_model

            report = (lambda s, f: on_progress(LoadProgress(s, f))) if on_progress else None
            self._unload()
            loaded = load_model(spec, report)
            self._loaded = loaded
            self.model_info = loaded.info
            self._after_load(loaded)
            return loaded.info

        return self._submit_call(job)

    def unload(self) -> Future[None]:
        """Release the model and its caches."""
        return self._submit_call(self._unload)

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        """Queue a chat request; events go to `on_event` (on the engine thread) and the handle."""
        handle = RequestHandle(id=next(self._ids), request=request, on_event=on_event)
        self._put(lambda: self._run_chat(handle))
        return handle

    def chat(self, request: ChatRequest) -> ChatResult:
        """Generate a whole reply and return it (blocking)."""
        return self.submit(request).result()

    def set_kv_budget(self, kv_budget_bytes: int | None) -> Future[Any]:
        """Change the prompt-cache budget (None: automatic); returns the new memory plan."""

        def job() -> Any:
            self._kv_budget_setting = kv_budget_bytes
            if self._loaded is not None:
                self._plan_memory(self._loaded)
            return self.memory_plan

        return self._submit_call(job)

    def cache_stats(self) -> dict[str, Any]:
        """The prompt cache's figures (entries, bytes, hits, misses, evictions...)."""
        return dict(self.prompt_cache.stats())

    def run(self, fn: Callable[[Any], T]) -> Future[T]:
        """Run `fn(loaded_model)` on the engine thread (for benchmarks and tests)."""
        return self._submit_call(lambda: fn(self._loaded))

    def close(self) -> None:
        """Finish queued work, release the model, and stop the thread."""
        if self._closed:
            return
        self._put(self._unload)
        self._put(self._drained.set)
        self._closed = True
        release_worker(self._worker)
        self._drained.wait(timeout=60)

    # ---- engine thread ----

    def _put(self, job: Callable[[], None]) -> None:
        if self._closed:
            raise EngineClosedError("the engine has been closed")
        self._worker.put(job)

    def _submit_call(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller, never kills the thread
                future.set_exception(exc)

        self._put(job)
        return future

    def _after_load(self, loaded: Any) -> None:
        """Plan memory for the model that just loaded: wired limit and prompt-cache budget."""
        from engine.memory import WiredLimit

        self._wired = WiredLimit()
        self._plan_memory(loaded)
        threading.Thread(
            target=_warm_constraint_tokenizer,
            args=(loaded.tokenizer,),
            name="corral-warm-llg",
            daemon=True,
        ).start()

    def _plan_memory(self, loaded: Any) -> None:
        from engine.memory import plan_memory
        from engine.prompt_cache import PromptCacheTrie

        plan = plan_memory(loaded.info.weights_bytes, self._kv_budget_setting)
        self.memory_plan = plan
        # Runs on the engine thread between requests: no async eval is in flight.
        self._wired.apply(plan)
        if self._prompt_cache_override is not None or not self._reuse_prefixes:
            return
        if isinstance(self.prompt_cache, PromptCacheTrie):
            self.prompt_cache.budget_bytes = plan.kv_budget_bytes
        else:
            self.prompt_cache = PromptCacheTrie(plan.kv_budget_bytes)

    def _unload(self) -> None:
        self.prompt_cache.clear()
        if self._wired is not None:
            self._wired.restore()
            self._wired = None
        self._loaded = None
        self.model_info = None
        self.memory_plan = None

    def _run_chat(self, handle: RequestHandle) -> None:
        from engine.generation import generate_reply

        started = time.perf_counter()
        if handle.cancelled:
            result = ChatResult("", StopReason.CANCELLED, GenerationStats(stop_reason="cancelled"))
        elif self._loaded is None:
            result = _error_result("no model is loaded", started)
            result.error_kind = "unavailable"
        else:
            try:
                result = generate_reply(self._loaded, self.prompt_cache, handle, started)
            except Exception as exc:  # a bug or bad input must not kill the engine thread
                result = _error_result(f"{type(exc).__name__}: {exc}", started)
                result.error_kind = (
                    "input" if isinstance(exc, CorralError | ValueError) else "internal"
                )
        handle.emit(Finished(result))


def _warm_constraint_tokenizer(tokenizer: Any) -> None:
    """Build llguidance's tokenizer (~1 s) in the background so the first constrained
    reply does not wait for it. It touches no MLX state, so any thread will do."""
    try:
        from engine.constraints.tokenizer import ll_tokenizer
        from engine.sampling import end_token_ids

        ll_tokenizer(tokenizer, end_token_ids(tokenizer))
    except Exception:  # a tokenizer llguidance cannot use fails later, with its message
        pass


def _error_result(message: str, started: float) -> ChatResult:
    stats = GenerationStats(stop_reason=StopReason.ERROR.value)
    stats.total_s = time.perf_counter() - started
    return ChatResult("", StopReason.ERROR, stats, error=message)
