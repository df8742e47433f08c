"""The Engine: owns a model on one long-lived thread and streams chat replies from it.

MLX streams belong to the thread that created them, so loading, prefill and decoding
all run on the engine's own thread, which alone touches the model, the prompt cache and
the matchers. Callers submit work and get events back through a callback (called on the
engine thread) or a blocking iterator. What other threads may read about the engine (the
model, its memory plan, the cache's figures) the engine thread publishes as an immutable
EngineSnapshot after every change.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from engine.context import annotate_error
from engine.errors import CorralError, EngineClosedError
from engine.types import (
    CacheStats,
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    EngineSnapshot,
    Finished,
    GenerationStats,
    LoadProgress,
    MemoryPlan,
    ModelInfo,
    StopReason,
    ValidationReport,
)
from engine.worker import acquire_worker, release_worker

if TYPE_CHECKING:
    import llguidance

    from engine.memory import WiredLimit
    from engine.models import LoadedModel
    from engine.prompt_cache import KVState, PromptCacheTrie

T = TypeVar("T")
EventFn = Callable[[ChatEvent], None]
Loader = Callable[[str, "Callable[[str, float], None] | None"], "LoadedModel"]


class PromptCacheStore(Protocol):
    """Where KV states come from and go back to between requests (engine thread only)."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[KVState, int]: ...
    def store(self, tokens: list[int], cache: KVState) -> None: ...
    def stats(self) -> CacheStats: ...
    def clear(self) -> None: ...


class NoPromptCache:
    """Recompute every prompt from scratch (the baseline the prefix cache is measured against)."""

    def fetch(self, model: Any, tokens: list[int]) -> tuple[KVState, int]:
        from mlx_lm.models.cache import make_prompt_cache

        return make_prompt_cache(model), 0

    def store(self, tokens: list[int], cache: KVState) -> None:
        pass

    def stats(self) -> CacheStats:
        return CacheStats()

    def clear(self) -> None:
        pass


class RequestHandle:
    """A submitted chat request: cancel it, and take its events or wait for its result.

    Events go to the `on_event` callback (on the engine thread) when one is given, else
    into a queue that `events()` drains: never both, so a long reply is held once.
    """

    def __init__(
        self, request_id: int, request: ChatRequest, on_event: EventFn | None = None
    ) -> None:
        self.id = request_id
        self.request = request
        self.on_event = on_event
        self.cancel_event = threading.Event()
        self._events: queue.Queue[ChatEvent] | None = queue.Queue() if on_event is None else None
        self._done: Future[ChatResult] = Future()

    def cancel(self) -> None:
        """Stop the request as soon as possible (within one prefill chunk or one token)."""
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    @property
    def backlog(self) -> int:
        """Events emitted and not taken by `events()` yet (always 0 with a callback)."""
        return self._events.qsize() if self._events is not None else 0

    def done(self) -> bool:
        return self._done.done()

    def result(self, timeout: float | None = None) -> ChatResult:
        """Block until the reply is finished and return it."""
        return self._done.result(timeout)

    def events(self, timeout: float | None = None) -> Iterator[ChatEvent]:
        """Yield this request's events until (and including) its Finished event.

        Only for requests submitted without a callback (the callback has them otherwise)."""
        if self._events is None:
            raise RuntimeError("this request's events go to its on_event callback")
        while True:
            event = self._events.get(timeout=timeout)
            yield event
            if isinstance(event, Finished):
                return

    def emit(self, event: ChatEvent) -> None:
        """Engine thread: hand `event` to the callback or the queue."""
        if self.on_event is not None:
            self.on_event(event)
        else:
            assert self._events is not None
            self._events.put(event)
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
        loader: Loader | None = None,
    ) -> None:
        """`prompt_cache` replaces the KV-cache store (default: an LRU token trie sized by
        the memory plan at each load); `kv_budget_bytes` is the user's budget setting
        (None: automatic); `reuse_prefixes=False` recomputes every prompt (for benchmarks);
        `loader(spec, progress)` replaces `engine.models.load_model` (engine.distributed)."""
        self._ids = itertools.count(1)
        self._closed = False
        # Engine thread only: the model, the prompt cache, the wired limit.
        self._loaded: LoadedModel | None = None
        self._prompt_cache_override = prompt_cache
        self.prompt_cache: PromptCacheStore = prompt_cache or NoPromptCache()
        self._memory_plan: MemoryPlan | None = None
        self._kv_budget_setting = kv_budget_bytes
        self._reuse_prefixes = reuse_prefixes
        self._wired: WiredLimit | None = None
        self._trie_maker: Callable[[int], PromptCacheTrie] | None = None
        self._requests_done = 0
        # Published for other threads: replaced whole, never changed in place.
        self._snapshot = EngineSnapshot()
        self._constraint_tokenizer: llguidance.LLTokenizer | None = None
        self._constraint_source: tuple[Any, set[int]] | None = None  # tokenizer, end ids
        self._loader = loader
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
            loaded = (self._loader or load_model)(spec, report)
            self._loaded = loaded
            self._after_load(loaded)
            return loaded.info

        return self._submit_call(job)

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        """Queue a chat request; its events go to `on_event` (called on the engine thread)
        if given, else to the handle's `events()`."""
        handle = RequestHandle(next(self._ids), request, on_event)
        self._put(lambda: self._run_chat(handle))
        return handle

    def chat(self, request: ChatRequest) -> ChatResult:
        """Generate a whole reply and return it (blocking)."""
        return self.submit(request).result()

    def set_kv_budget(self, kv_budget_bytes: int | None) -> Future[MemoryPlan | None]:
        """Change the prompt-cache budget (None: automatic); returns the new memory plan."""

        def job() -> MemoryPlan | None:
            self._kv_budget_setting = kv_budget_bytes
            if self._loaded is not None:
                self._plan_memory(self._loaded)
            self._publish()
            return self._memory_plan

        return self._submit_call(job)

    @property
    def snapshot(self) -> EngineSnapshot:
        """The engine's state as the engine thread last published it: the loaded model,
        its memory plan, the prompt cache's figures. Safe to read from any thread."""
        return self._snapshot

    def check_constraint(self, spec: ConstraintSpec) -> ValidationReport:
        """Check `spec` for the loaded model, on the calling thread (never the engine's: a
        big grammar takes a while). With no errors the report's spec carries the grammar
        compiled for this model's tokenizer, which requests with that spec then reuse."""
        from engine.constraints.tokenizer import ll_tokenizer
        from engine.constraints.validate import validate_constraint

        tokenizer, source = self._constraint_tokenizer, self._constraint_source
        if tokenizer is None and source is not None:  # loaded, still building: wait for it
            tokenizer = ll_tokenizer(*source)
        return validate_constraint(spec, tokenizer)

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

    def _publish(self) -> None:
        """Replace the snapshot other threads read with the state as it is now."""
        self._snapshot = EngineSnapshot(
            model=self._loaded.info if self._loaded is not None else None,
            memory=self._memory_plan,
            cache=self.prompt_cache.stats(),
            requests_done=self._requests_done,
        )

    def _after_load(self, loaded: LoadedModel) -> None:
        """Plan memory for the model that just loaded (wired limit and prompt-cache budget),
        publish it, and build llguidance's tokenizer for it in the background."""
        from engine.memory import WiredLimit
        from engine.sampling import end_token_ids

        self._wired = WiredLimit()
        self._plan_memory(loaded)
        self._publish()
        self._constraint_source = (loaded.tokenizer, end_token_ids(loaded.tokenizer))
        threading.Thread(
            target=self._warm_constraint_tokenizer,
            args=self._constraint_source,
            name="corral-warm-llg",
            daemon=True,
        ).start()

    def _warm_constraint_tokenizer(self, tokenizer: Any, ends: set[int]) -> None:
        """Build llguidance's tokenizer (~1 s) so that neither the first constrained reply
        nor a constraint check waits for it. It touches no MLX state: any thread will do."""
        from engine.constraints.closing import ClosingPolicy
        from engine.constraints.tokenizer import ll_tokenizer

        try:
            built = ll_tokenizer(tokenizer, ends)
            ClosingPolicy.for_tokenizer(built)  # its token texts (~0.1 s), read once
        except Exception:  # a tokenizer llguidance cannot use fails later, with its message
            return
        loaded = self._loaded
        if loaded is not None and loaded.tokenizer is tokenizer:  # still the loaded model
            self._constraint_tokenizer = built

    def _plan_memory(self, loaded: LoadedModel) -> None:
        from engine.memory import plan_memory
        from engine.prompt_cache import PromptCacheTrie

        if loaded.plan_memory is not None:  # a sharded model: the group's plan
            plan = loaded.plan_memory(self._kv_budget_setting)
        else:
            plan = plan_memory(loaded.info.weights_bytes, self._kv_budget_setting)
        self._memory_plan = plan
        # Runs on the engine thread between requests: no async eval is in flight.
        if self._wired is not None:
            self._wired.apply(plan)
        if self._prompt_cache_override is not None or not self._reuse_prefixes:
            return
        make_trie = loaded.make_prompt_cache or PromptCacheTrie
        if isinstance(self.prompt_cache, PromptCacheTrie) and self._trie_maker is make_trie:
            self.prompt_cache.budget_bytes = plan.kv_budget_bytes
        else:
            self.prompt_cache = make_trie(plan.kv_budget_bytes)
            self._trie_maker = make_trie

    def _unload(self) -> None:
        self.prompt_cache.clear()
        if self._wired is not None:
            self._wired.restore()
            self._wired = None
        self._loaded = None
        self._constraint_tokenizer = self._constraint_source = None
        self._memory_plan = None
        self._publish()

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
                annotate_error(result, exc)
        self._requests_done += 1
        self._publish()  # before Finished: whoever waits for the reply sees its effect
        handle.emit(Finished(result))


def _error_result(message: str, started: float) -> ChatResult:
    stats = GenerationStats(stop_reason=StopReason.ERROR.value)
    stats.total_s = time.perf_counter() - started
    return ChatResult("", StopReason.ERROR, stats, error=message)
