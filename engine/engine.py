"""The Engine: owns a model on one long-lived thread and streams chat replies from it.

MLX streams belong to the thread that created them, so loading, prefill and decoding
all run on the engine's own thread, which alone touches the model, the prompt cache and
the matchers. Callers submit work and get events back through a callback (called on the
engine thread) or a blocking iterator. Chat requests wait in a queue (at most
`max_queued`) and are served by `engine.runtime.scheduler`: up to `max_rows` replies decode
together, one forward pass per token for all of them, each joining as soon as its prompt
is processed. Other work (loading a model, `run`) waits for the replies submitted before
it, and replies submitted after it wait for it. What other threads may read about the
engine (the model, its memory plan, the cache's figures) the engine thread publishes as
an immutable EngineSnapshot after every change.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import EngineBusyError, EngineClosedError
from engine.memory.store import NoPromptCache, PromptCacheStore
from engine.runtime.handle import EventFn, RequestHandle
from engine.types import (
    DEFAULT_MAX_ROWS,
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    EngineSnapshot,
    Finished,
    LoadProgress,
    MemoryPlan,
    ModelInfo,
    ValidationReport,
)
from engine.workers import acquire_worker, release_worker

if TYPE_CHECKING:
    import llguidance

    from engine.library.load import LoadedModel
    from engine.memory.plan import WiredLimit
    from engine.memory.prompt_cache import PromptCacheTrie
    from engine.runtime.context import KVMemory

T = TypeVar("T")
Loader = Callable[[str, "Callable[[str, float], None] | None"], "LoadedModel"]

DEFAULT_MAX_QUEUED = 64  # requests waiting for a row


class Engine:
    """One model, one thread, a queue of requests decoded side by side."""

    def __init__(
        self,
        prompt_cache: PromptCacheStore | None = None,
        *,
        kv_budget_bytes: int | None = None,
        reuse_prefixes: bool = True,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        loader: Loader | None = None,
        speculative: bool = True,
        kv_bits: int | None = None,
        disk_cache_dir: Path | None = None,
        disk_budget_bytes: int | None = None,
        learn_pass_cost: bool = True,
        wire_memory: bool = True,
    ) -> None:
        """`prompt_cache` replaces the KV-cache store (default: an LRU token trie sized by
        the memory plan at each load); `kv_budget_bytes` is the user's budget setting
        (None: automatic); `reuse_prefixes=False` recomputes every prompt (for benchmarks).
        `max_rows` replies decode together at most (1: one after another); `submit`
        refuses a request when `max_queued` are already waiting for a row.
        `loader(spec, progress)` replaces `engine.library.load.load_model` (engine.distributed).
        `speculative`: replies draft tokens and verify them (`engine.runtime.speculative`): by
        prompt lookup, or with a draft model (`load_draft_model`). `kv_bits` (8 or 4)
        quantizes the KV caches (`engine.memory.kv_precision`); `disk_cache_dir` puts a disk
        tier under the prompt cache (`engine.memory.disk_tier`), one folder per model
        identity inside it, within `disk_budget_bytes` (default 4 GiB, at most a quarter
        of the free disk). `learn_pass_cost=False` decides drafting by acceptance alone, never
        by this machine's step times (`engine.runtime.speculative.PassCost`; for tests).
        `wire_memory=False` leaves Metal's wired limit alone (a model pool sets it once for
        all its engines: the limit is the process's, not one engine's)."""
        from engine.memory.kv_precision import check_kv_bits

        self._kv_bits = check_kv_bits(kv_bits)
        self._disk_dir = disk_cache_dir
        self._disk_budget = disk_budget_bytes
        self._built_for: tuple[Any, ...] | None = None  # what the prompt cache was made for
        self.disk_error: str | None = None  # why the disk tier is off, if it failed to open
        self._ids = itertools.count(1)
        self._closed = False
        self.max_rows = max(1, max_rows)
        self.max_queued = max(1, max_queued)
        # Chat requests waiting for a row, and the places (`seq`) of other queued work
        # that the requests behind it must wait for. Guarded by _lock.
        self._queue_lock = threading.Lock()
        self._queue: deque[RequestHandle] = deque()
        self._seq = itertools.count(1)
        self._fences: set[int] = set()
        self._scheduler: Any = None  # engine.runtime.scheduler.Scheduler while replies run
        # Engine thread only: the model, the prompt cache, the wired limit.
        self._loaded: LoadedModel | None = None
        self._prompt_cache_override = prompt_cache
        self.prompt_cache: PromptCacheStore = prompt_cache or NoPromptCache()
        self._memory_plan: MemoryPlan | None = None
        self._kv_budget_setting = kv_budget_bytes
        self._reuse_prefixes = reuse_prefixes
        self._wired: WiredLimit | None = None
        self._wire_memory = wire_memory
        self._trie_maker: Callable[[int], PromptCacheTrie] | None = None
        self._requests_done = 0
        # Published for other threads: replaced whole, never changed in place.
        self._snapshot = EngineSnapshot()
        self._constraint_tokenizer: llguidance.LLTokenizer | None = None
        self._constraint_source: tuple[Any, set[int]] | None = None  # tokenizer, end ids
        self._loader = loader
        self.speculative = speculative
        # Engine thread only: the draft model and its own prompt cache.
        self._draft: tuple[LoadedModel, PromptCacheStore] | None = None
        self._pass_cost: Any = None  # engine.runtime.speculative.PassCost of the loaded model
        self._learn_pass_cost = learn_pass_cost
        self._worker = acquire_worker()
        self._drained = threading.Event()

    # ---- public API (any thread) ----

    def load_model(
        self, spec: str, on_progress: Callable[[LoadProgress], None] | None = None
    ) -> Future[ModelInfo]:
        """Load `spec` ("default", a folder, a .gguf file or a repo id) on the engine thread."""

        def job() -> ModelInfo:
            from engine.library.load import load_model

            report = (lambda s, f: on_progress(LoadProgress(s, f))) if on_progress else None
            self._unload()
            loaded = (self._loader or load_model)(spec, report)
            self._loaded = loaded
            self._after_load(loaded)
            return loaded.info

        return self._submit_call(job)

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        """Queue a chat request; its events go to `on_event` (called on the engine thread)
        if given, else to the handle's `events()`. Raises EngineBusyError when `max_queued`
        requests are already waiting."""
        handle = RequestHandle(next(self._ids), request, on_event)
        self._enqueue([handle])
        return handle

    def submit_many(
        self,
        requests: Sequence[ChatRequest],
        on_event: Callable[[int, ChatEvent], None] | None = None,
    ) -> list[RequestHandle]:
        """Queue several requests at once (the `n` alternatives of one request, see
        `ChatRequest.alternatives`): admitted together, they decode side by side and
        prompts they share are computed once. `on_event(i, event)` gets the events of
        request i; without it each handle's `events()` has them. All or none are queued."""
        handles = [
            RequestHandle(
                next(self._ids), request, functools.partial(on_event, i) if on_event else None
            )
            for i, request in enumerate(requests)
        ]
        self._enqueue(handles)
        return handles

    def submit_handles(self, handles: Sequence[RequestHandle]) -> None:
        """Queue requests whose handles were made elsewhere: a model pool hands out handles
        at once and queues them here once this engine's model has loaded. Admitted
        together, as `submit_many`'s; raises EngineBusyError as `submit` does."""
        self._enqueue(list(handles))

    def set_speculative(self, on: bool) -> None:
        """Turn speculative decoding on or off (from the next admission on)."""
        self.speculative = on
        scheduler = self._scheduler
        if scheduler is not None:
            scheduler.speculative = on and scheduler.loaded.make_prompt_cache is None

    def set_pass_cost_learning(self, on: bool) -> None:
        """Let this machine's step times decide whether drafting pays (on, the default), or
        decide it by the drafts' acceptance alone (off: the same on every machine)."""
        self._learn_pass_cost = on
        if self._pass_cost is not None:
            self._pass_cost.learn = on

    def load_draft_model(self, spec: str | None) -> Future[ModelInfo | None]:
        """Load `spec` as the draft model of speculative decoding (None: none, prompt
        lookup drafts). It must use the loaded model's tokenizer: raises ValueError
        otherwise, or when no model is loaded. Unloading the model drops it."""

        def job() -> ModelInfo | None:
            from engine.library.load import load_model
            from engine.memory.prompt_cache import PromptCacheTrie

            self._draft = None
            if spec is None:
                return None
            if self._loaded is None:
                raise ValueError("load a model before its draft model")
            draft = load_model(spec)
            check_same_tokenizer(self._loaded.tokenizer, draft.tokenizer, draft.info.name)
            plan = self._memory_plan
            budget = plan.kv_budget_bytes // 8 if plan is not None else 64 << 20
            self._draft = (draft, PromptCacheTrie(budget))
            return draft.info

        return self._submit_call(job)

    @property
    def failure(self) -> str | None:
        """Always None: an engine on this machine fails request by request, never whole."""
        return None

    @property
    def draft_model(self) -> ModelInfo | None:
        """The draft model loaded, if any."""
        draft = self._draft
        return draft[0].info if draft is not None else None

    def set_max_rows(self, max_rows: int) -> None:
        """Change how many replies may decode together (from the next admission on)."""
        self.max_rows = max(1, max_rows)
        scheduler = self._scheduler
        if scheduler is not None:
            scheduler.max_rows = self.max_rows

    def chat(self, request: ChatRequest) -> ChatResult:
        """Generate a whole reply and return it (blocking)."""
        return self.submit(request).result()

    def set_kv_bits(self, kv_bits: int | None) -> Future[None]:
        """Change the KV precision (8, 4 or None: the model's own) for the next requests;
        the prompt cache starts over for the new precision (the old one's entries stay on
        disk, under their own identity)."""
        from engine.memory.kv_precision import check_kv_bits

        bits = check_kv_bits(kv_bits)

        def job() -> None:
            self._kv_bits = bits
            if self._loaded is not None:
                self._plan_memory(self._loaded)
            self._publish()

        return self._submit_call(job)

    @property
    def kv_bits(self) -> int | None:
        """The KV precision requests get (None: the model's own)."""
        return self._kv_bits

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

    def check_constraint(self, spec: ConstraintSpec, model: str | None = None) -> ValidationReport:
        """Check `spec` for the loaded model (whatever `model` names: this engine serves
        one), on the calling thread (never the engine's: a big grammar takes a while).
        With no errors the report's spec carries the grammar compiled for this model's
        tokenizer, which requests with that spec then reuse."""
        from engine.constraints.tokenizer import ll_tokenizer
        from engine.constraints.validate import validate_constraint

        tokenizer, source = self._constraint_tokenizer, self._constraint_source
        if tokenizer is None and source is not None:  # loaded, still building: wait for it
            tokenizer = ll_tokenizer(*source)
        return validate_constraint(spec, tokenizer)

    def run(self, fn: Callable[[Any], T], model: str | None = None) -> Future[T]:
        """Run `fn(loaded_model)` on the engine thread (for benchmarks, tests and counting
        a prompt's tokens; `model` is ignored: this engine serves one)."""
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

    def _enqueue(self, handles: list[RequestHandle]) -> None:
        with self._queue_lock:
            if self._closed:
                raise EngineClosedError("the engine has been closed")
            if len(self._queue) + len(handles) > self.max_queued:
                raise EngineBusyError(
                    f"the engine is busy: {len(self._queue)} requests are already waiting "
                    f"(at most {self.max_queued}); try again shortly"
                )
            for handle in handles:
                handle.seq = next(self._seq)
            self._queue.extend(handles)
            self._worker.put(self._serve)  # in the lock: jobs run in the order of `seq`

    def _take(self) -> RequestHandle | None:
        """Engine thread: the next queued request, unless other work queued before it
        must run first."""
        with self._queue_lock:
            if not self._queue or (self._fences and self._queue[0].seq > min(self._fences)):
                return None
            return self._queue.popleft()

    def _take_cancelled(self) -> list[RequestHandle]:
        """Engine thread: the queued requests cancelled while they wait for a row."""
        with self._queue_lock:
            cancelled = [h for h in self._queue if h.cancelled]
            for handle in cancelled:
                self._queue.remove(handle)
        return cancelled

    def _submit_call(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._queue_lock:  # requests queued after this call wait for it
            fence = next(self._seq)
            self._fences.add(fence)

        def job() -> None:
            with self._queue_lock:
                self._fences.discard(fence)
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
            cache=dataclasses.replace(self.prompt_cache.stats(), kv_bits=self._kv_bits),
            requests_done=self._requests_done,
        )

    def _after_load(self, loaded: LoadedModel) -> None:
        """Plan memory for the model that just loaded (wired limit and prompt-cache budget),
        publish it, and build llguidance's tokenizer for it in the background."""
        from engine.memory.plan import WiredLimit
        from engine.runtime.sampling import end_token_ids
        from engine.runtime.speculative import PassCost

        self._pass_cost = PassCost(learn=self._learn_pass_cost)
        self._wired = WiredLimit() if self._wire_memory else None
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
        from engine.memory.plan import plan_memory
        from engine.memory.prompt_cache import PromptCacheTrie

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
        if loaded.make_prompt_cache is not None:  # a sharded model: its own mirrored trie
            make_trie = loaded.make_prompt_cache
            if isinstance(self.prompt_cache, PromptCacheTrie) and self._trie_maker is make_trie:
                self.prompt_cache.budget_bytes = plan.kv_budget_bytes
            else:
                self.prompt_cache = make_trie(plan.kv_budget_bytes)
                self._trie_maker = make_trie
            return
        wanted = (id(loaded), self._kv_bits, self._disk_dir, self._disk_budget)
        if self._built_for == wanted:
            self.prompt_cache.budget_bytes = plan.kv_budget_bytes  # type: ignore[attr-defined]
            return
        self._close_prompt_cache()
        self.prompt_cache = self._build_prompt_cache(loaded, plan.kv_budget_bytes)
        self._built_for = wanted

    def _kv_memory(self, plan: MemoryPlan | None) -> KVMemory | None:
        """KV bytes per token at the precision set, and the budget (None when unknown)."""
        from engine.memory.kv_precision import kv_bytes_per_token
        from engine.runtime.context import KVMemory

        loaded = self._loaded
        if plan is None or loaded is None or loaded.make_prompt_cache is not None:
            return None
        full = kv_bytes_per_token(loaded.model, None)
        ours = kv_bytes_per_token(loaded.model, self._kv_bits)
        if not full or not ours or plan.kv_budget_bytes <= 0:
            return None
        return KVMemory(ours, full, plan.kv_budget_bytes, self._kv_bits)

    def _build_prompt_cache(self, loaded: LoadedModel, budget: int) -> PromptCacheStore:
        """The trie at the KV precision set, over a disk tier if a folder is set."""
        import sqlite3

        from engine.memory.disk_tier import DiskTier
        from engine.memory.identity import cache_identity
        from engine.memory.kv_precision import cache_maker
        from engine.memory.prompt_cache import PromptCacheTrie
        from engine.memory.settings import DEFAULT_DISK_BUDGET
        from engine.memory.tiered import TieredPromptCache

        trie = PromptCacheTrie(budget, make_cache=cache_maker(self._kv_bits))
        self.disk_error = None
        if self._disk_dir is None:
            return trie
        try:
            identity = cache_identity(
                loaded.model, Path(loaded.info.path), self._kv_bits, self._disk_dir
            )
            disk = DiskTier(
                self._disk_dir / identity, identity, self._disk_budget or DEFAULT_DISK_BUDGET
            )
        except (OSError, ValueError, sqlite3.Error) as exc:  # memory alone still serves
            self.disk_error = f"the prompt cache's disk tier is off: {exc}"
            return trie
        return TieredPromptCache(trie, disk)

    def _close_prompt_cache(self) -> None:
        """Persist and close the prompt cache this engine built (its disk tier's writer)."""
        close = getattr(self.prompt_cache, "close", None)
        if self._built_for is not None and callable(close):
            close()
        else:
            self.prompt_cache.clear()
        self._built_for = None

    def _unload(self) -> None:
        if self._built_for is not None:
            self._close_prompt_cache()
            self.prompt_cache = NoPromptCache()
        else:
            self.prompt_cache.clear()
        self._draft = None
        self._pass_cost = None
        if self._wired is not None:
            self._wired.restore()
            self._wired = None
        self._loaded = None
        self._constraint_tokenizer = self._constraint_source = None
        self._memory_plan = None
        self._publish()

    def _serve(self) -> None:
        """Serve the queued chat requests until none is left in flight."""
        if self._loaded is None:
            while (handle := self._take()) is not None:
                self._deliver(handle, ChatResult.failed("no model is loaded", kind="unavailable"))
            return
        from engine.runtime.scheduler import Scheduler

        plan = self._memory_plan
        scheduler = Scheduler(
            self._loaded,
            self.prompt_cache,
            max_rows=self.max_rows,
            kv_budget_bytes=plan.kv_budget_bytes if plan is not None else None,
            deliver=self._deliver,
            speculative=self.speculative,
            draft=self._draft,
            pass_cost=self._pass_cost,
            kv_memory=self._kv_memory(plan),
        )
        self._scheduler = scheduler
        try:
            scheduler.run(self._take, self._take_cancelled)
        except Exception as exc:  # a bug must fail the replies in flight, not hang them
            scheduler.fail_all(exc)
        finally:
            self._scheduler = None
            self.prompt_cache.reserve(0)

    def _deliver(self, handle: RequestHandle, result: ChatResult) -> None:
        self._requests_done += 1
        self._publish()  # before Finished: whoever waits for the reply sees its effect
        handle.emit(Finished(result))


def check_same_tokenizer(main: Any, draft: Any, name: str) -> None:
    """Raise ValueError unless `draft` reads text into the same token ids as `main`."""
    from engine.prompt.tokenizer import ModelTokenizer

    a, b = ModelTokenizer.of(main).hf, ModelTokenizer.of(draft).hf
    if a.get_vocab() != b.get_vocab():
        raise ValueError(
            f"draft model {name}: its tokenizer differs from the loaded model's "
            f"({len(b.get_vocab())} vs {len(a.get_vocab())} tokens); a draft model must "
            "share the model's tokenizer"
        )
