"""ModelPool: several models behind one EngineAPI, each loaded on first use and unloaded
when memory is wanted for another.

Each chat model runs on an Engine of its own (engine.pool.backends): its own engine
thread, prompt cache and disk-tier folder (keyed by the model's identity), so one model's
prefixes never serve another and one model's evictions never touch another's cache.
Requests carry which model answers (`ChatRequest.model`: an id, alias, folder or repo id;
None: the default, the model loaded last with `load_model`). A request for a model that is
not loaded gets its handle at once and waits for the load; the pool's own thread (upkeep:
engine.pool.upkeep) loads models in the order they were asked for, unloading the least
recently used idle, unpinned models first when the next one would not fit under the
limit. A model with requests in flight is never unloaded: a model that needs its memory
waits until they finish (its place in the load queue is published), and a request that
waits longer than `load_wait_s` fails as unavailable ("model_busy": a server answers 503
with Retry-After).

What other threads read about the pool is published as a PoolSnapshot in
`snapshot.pool` after every change; the lock guards the entries and nothing slow runs
under it (loading and closing happen on the engines' threads and the pool's own).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from engine.engine import DEFAULT_MAX_QUEUED
from engine.errors import (
    EngineBusyError,
    EngineClosedError,
)
from engine.memory.budget import MemoryBudget, gb
from engine.pool.backends import Backend, BackendLoader, ChatBackend, ChatLoader, EngineSettings
from engine.pool.entry import Entry, Waiter
from engine.pool.memory import device_budget
from engine.pool.requests import (
    Lease,
    load_error,
    requests_waiter,
    unserved,
    with_settings,
)
from engine.pool.settings import ModelSettings
from engine.pool.state import PoolState
from engine.pool.upkeep import Upkeep
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
    ModelKind,
    ValidationReport,
)

if TYPE_CHECKING:
    from engine.engine import Engine

T = TypeVar("T")
log = logging.getLogger("engine.pool")

DEFAULT_LOAD_WAIT_S = 120.0  # a request waits this long for its model's memory at most


class ModelPool:
    """Several models, loaded on demand within a memory limit; an EngineAPI."""

    def __init__(
        self,
        *,
        memory_limit_bytes: int | None = None,
        idle_unload_s: float | None = None,
        load_wait_s: float = DEFAULT_LOAD_WAIT_S,
        engine_options: Mapping[str, Any] | None = None,
        loaders: Mapping[ModelKind, BackendLoader] | None = None,
        budget: MemoryBudget | None = None,
        max_waiting: int = DEFAULT_MAX_QUEUED,
        wire_memory: bool = True,
    ) -> None:
        """`memory_limit_bytes`: what the models may hold together (None: what this
        machine's budget leaves, engine.pool.memory.default_limit). `idle_unload_s`:
        unload a model after this long without a request (None: never; a model's own
        setting wins). `load_wait_s`: how long a request waits for its model's memory.
        `engine_options`: keyword arguments of each chat model's Engine (KV precision,
        disk tier). `loaders`: how models of other kinds load (embedding, rerank), beside
        chat's. `max_waiting`: requests that may wait for one model to load.
        `wire_memory`: on Metal, wire the limit once for every model (engines do not)."""
        self.engine_settings = EngineSettings(dict(engine_options or {}))
        self._state = PoolState(
            budget or device_budget(),
            {"chat": ChatLoader(self.engine_settings), **(loaders or {})},
            memory_limit_bytes=memory_limit_bytes,
            idle_unload_s=idle_unload_s,
            load_wait_s=load_wait_s,
            max_waiting=max_waiting,
        )
        self._upkeep = Upkeep(self._state, wire_memory)
        self._upkeep.start()

    # ---- the models ----

    @property
    def memory_limit_bytes(self) -> int:
        """What the pool's models may hold together."""
        return self._state.memory_limit_bytes

    def set_memory_limit(self, limit_bytes: int | None) -> None:
        """Change the limit (None: the machine's default); idle models past it unload."""
        state = self._state
        with state.lock:
            state.limit_setting = limit_bytes
            state.publish()
        log.info("model memory limit: %s", gb(state.memory_limit_bytes))
        state.wake()

    @property
    def idle_unload_s(self) -> float | None:
        """After how long without a request a model is unloaded (its own setting wins)."""
        return self._state.idle_unload_s

    def set_idle_unload(self, seconds: float | None) -> None:
        """Unload models after `seconds` without a request (None: never), unless a model's
        own setting says otherwise."""
        state = self._state
        with state.lock:
            state.idle_unload_s = seconds or None
            state.publish()
        state.wake()

    @property
    def load_wait_s(self) -> float:
        """How long a request waits for its model's memory before it fails (model_busy)."""
        return self._state.load_wait_s

    def set_load_wait(self, seconds: float) -> None:
        """Change how long requests that arrive from now on wait for their model's memory."""
        self._state.load_wait_s = seconds

    def add_model(
        self,
        spec: str,
        *,
        alias: str | None = None,
        kind: ModelKind | None = None,
        settings: ModelSettings | None = None,
    ) -> str:
        """List `spec` ("default", a folder, a .gguf file, a repo id) without loading it,
        as a model of `kind` (None: the kind it is listed as already, else the kind its
        folder's files say, engine.pool.names.spec_kind: chat unless they say embedding or
        rerank; those kinds need their loaders, engine.pool.embedding); returns its id
        (`alias` if given, else the model's name). A spec of a model already listed adds
        `alias` (and `settings`) to it. The first chat model listed is the default.
        ValueError for an alias that is another model's name, a kind that differs from the
        listed model's, or a kind this pool has no loader for."""
        return self._state.add_model(spec, alias=alias, kind=kind, settings=settings)[0]

    def read_settings(self, path: Path, strict: bool = True) -> None:
        """Apply the per-model settings file at `path` (engine.pool.settings) now, and
        again whenever it changes (a bad edit is left unapplied, said in the log and in
        `snapshot.pool.settings_error`). `strict`: ModelSettingsError, naming the file
        and the key, for a bad or missing file now (list the models it names without
        saying what to load first); otherwise a missing file gives no settings until it
        is written, and a bad one is reported as a later bad edit is."""
        self._upkeep.settings.read(path, strict)

    def load_model(
        self, spec: str, on_progress: Callable[[LoadProgress], None] | None = None
    ) -> Future[ModelInfo]:
        """List `spec` if it is not listed, make it the default, and load it (the other
        models stay loaded while they fit under the limit). If it fails to load, the
        default is the model it was before, and a model this call listed is unlisted."""
        state = self._state
        entry_id, made = state.add_model(spec, kind="chat", chosen=True)
        with state.lock:
            previous, state.default = state.default, entry_id
            before = state.entries.get(previous or "")
            if before is not None and before.chosen and previous != entry_id:
                before.listed = False  # the chat's earlier pick: loaded while it fits
                if before.state in ("unloaded", "failed") and not before.waiters:
                    del state.entries[before.id]
            state.publish()
        future = self.ensure_loaded(entry_id, on_progress)

        def failed(done: Future[ModelInfo]) -> None:
            if done.exception() is None:
                return
            with state.lock:
                entry = state.entries.get(entry_id)
                if state.default == entry_id and previous in state.entries:
                    state.default = previous
                    state.entries[previous].listed = True  # the chat's model again
                idle = entry is not None and not entry.waiters and not entry.in_flight
                if made and idle and entry is not None and entry.state == "failed":
                    del state.entries[entry_id]
                    if state.default == entry_id:
                        state.default = next(
                            (e.id for e in state.entries.values() if e.kind == "chat"), None
                        )
                state.publish()

        future.add_done_callback(failed)
        return future

    def ensure_loaded(
        self,
        name: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
        wait_s: float | None = None,
    ) -> Future[ModelInfo]:
        """Load the model `name` means, if it is not loaded (the default stays as it is).
        The future fails with ModelLoadError, or ModelUnavailableError after `wait_s`
        (None: it waits as long as it takes)."""
        future: Future[ModelInfo] = Future()
        state = self._state
        with state.lock:
            entry = state.route(name)
            entry.last_used = time.time()
            if entry.state == "loaded" and entry.backend is not None:
                future.set_result(entry.backend.info)
                return future
            if on_progress is not None:
                entry.progress.append(on_progress)
            state.wait_for(
                entry,
                Waiter(
                    ready=lambda backend: future.set_result(backend.info),
                    fail=lambda message, code: future.set_exception(load_error(message, code)),
                    deadline=None if wait_s is None else time.monotonic() + wait_s,
                ),
            )
        return future

    def unload_model(self, name: str) -> Future[None]:
        """Unload the model `name` means, once its requests in flight have finished."""
        future: Future[None] = Future()
        state = self._state
        with state.lock:
            entry = state.route(name)
            if entry.state in ("unloaded", "failed"):
                future.set_result(None)
                return future
            entry.unload_asked.append(lambda: future.set_result(None))
        state.wake()
        return future

    def pin_model(self, name: str, pinned: bool = True) -> None:
        """Keep the model `name` means loaded (it is loaded now if it is not), or let it
        be unloaded again."""
        state = self._state
        with state.lock:
            entry = state.route(name)
            entry.pinned_now = pinned
            state.publish()
        if pinned:
            self.ensure_loaded(entry.id)

    def lease(
        self, name: str | None, kind: ModelKind | None = None, wait_s: float | None = None
    ) -> Future[Lease]:
        """The model `name` means (None: the default), loaded and held until the lease is
        released; raises ModelNotFoundError (or ValueError for a model of another `kind`)
        at once; the future fails with ModelLoadError, or ModelUnavailableError after
        `wait_s` (None: the pool's `load_wait_s`)."""
        future: Future[Lease] = Future()
        state = self._state
        with state.lock:
            entry = state.route(name, kind)
            entry.in_flight += 1
            entry.last_used = time.time()
            release = functools.partial(state.done, entry, 1)

            def ready(backend: Backend) -> None:
                future.set_result(Lease(backend, release))

            def fail(message: str, code: str) -> None:
                release()
                future.set_exception(load_error(message, code))

            if entry.state == "loaded" and entry.backend is not None:
                ready(entry.backend)
            else:
                wait = state.load_wait_s if wait_s is None else wait_s
                state.wait_for(entry, Waiter(ready, fail, time.monotonic() + wait, count=1))
            state.publish()
        return future

    # ---- EngineAPI: chat ----

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        """Queue a chat request for the model it names (loading it first if need be)."""
        callback = (lambda _i, event: on_event(event)) if on_event is not None else None
        return self.submit_many([request], callback)[0]

    def submit_many(
        self,
        requests: Sequence[ChatRequest],
        on_event: Callable[[int, ChatEvent], None] | None = None,
    ) -> list[RequestHandle]:
        """Queue the alternatives of one request (all for the model the first names).
        ModelNotFoundError for a name the pool does not serve, EngineBusyError when too
        many requests already wait for that model to load."""
        if not requests:
            return []
        state = self._state
        with state.lock:
            if state.closed:
                raise EngineClosedError("the engine has been closed")
            if requests[0].model is None and state.default is None:  # as an empty Engine
                return unserved(state, requests, on_event)
            entry = state.route(requests[0].model, "chat")
            handles = [
                RequestHandle(
                    next(state.request_ids),
                    with_settings(entry, request),
                    functools.partial(on_event, i) if on_event else None,
                )
                for i, request in enumerate(requests)
            ]
            loaded = entry.state == "loaded" and isinstance(entry.backend, ChatBackend)
            if not loaded and entry.waiting + len(handles) > state.max_waiting:
                raise EngineBusyError(
                    f"{entry.waiting} requests are already waiting for {entry.id} to load "
                    f"(at most {state.max_waiting}); try again shortly"
                )
            entry.in_flight += len(handles)
            entry.last_used = time.time()
            finished = functools.partial(_handle_done, state, entry)
            for handle in handles:
                handle.add_done_callback(finished)
            if not loaded:
                state.wait_for(entry, requests_waiter(handles, state.load_wait_s))
            state.publish()
            backend = entry.backend if loaded else None
        if isinstance(backend, ChatBackend):
            try:
                backend.engine.submit_handles(handles)
            except BaseException:  # never queued: they will not finish to say so
                state.done(entry, len(handles))
                raise
        return handles

    def chat(self, request: ChatRequest) -> ChatResult:
        """Generate a whole reply and return it (blocking)."""
        return self.submit(request).result()

    def check_constraint(self, spec: ConstraintSpec, model: str | None = None) -> ValidationReport:
        """Check `spec` for the model `model` names (its tokenizer), loading it if need be
        (blocking; ModelUnavailableError if it cannot load within `load_wait_s`)."""
        state = self._state
        with state.lock:
            entry = state.route(model, "chat")
            backend = entry.backend if entry.state == "loaded" else None
        if isinstance(backend, ChatBackend):
            return backend.engine.check_constraint(spec)
        with self.lease(entry.id, "chat").result() as lease:
            assert isinstance(lease.backend, ChatBackend)
            return lease.backend.engine.check_constraint(spec)

    def run(self, fn: Callable[[Any], T], model: str | None = None) -> Future[T]:
        """Run `fn(loaded_model)` on the engine thread of the model `model` names."""
        out: Future[T] = Future()

        def leased(future: Future[Lease]) -> None:
            if (error := future.exception()) is not None:
                out.set_exception(error)
                return
            lease = future.result()
            assert isinstance(lease.backend, ChatBackend)
            running = lease.backend.engine.run(fn)

            def finished(done: Future[T]) -> None:
                lease.release()
                if (failure := done.exception()) is not None:
                    out.set_exception(failure)
                else:
                    out.set_result(done.result())

            running.add_done_callback(finished)

        self.lease(model, "chat").add_done_callback(leased)
        return out

    # ---- EngineAPI: settings every chat model shares ----

    def set_max_rows(self, max_rows: int) -> None:
        self.engine_settings.max_rows = max_rows
        for engine in self._engines():
            engine.set_max_rows(max_rows)

    def set_speculative(self, on: bool) -> None:
        self.engine_settings.speculative = on
        for engine in self._engines():
            engine.set_speculative(on)

    def set_kv_bits(self, kv_bits: int | None) -> Future[None]:
        from engine.memory.kv_precision import check_kv_bits

        bits = check_kv_bits(kv_bits)
        self.engine_settings.options["kv_bits"] = bits
        return _all_done([engine.set_kv_bits(bits) for engine in self._engines()], None)

    @property
    def kv_bits(self) -> int | None:
        bits = self.engine_settings.options.get("kv_bits")
        return bits if isinstance(bits, int) else None

    def set_kv_budget(self, kv_budget_bytes: int | None) -> Future[MemoryPlan | None]:
        """The prompt-cache budget of every chat model without its own setting (None: each
        gets its share of the limit); returns the default model's new plan."""
        state = self._state
        futures: list[Future[MemoryPlan | None]] = []
        with state.lock:
            state.kv_setting = kv_budget_bytes
            for entry in state.entries.values():
                backend = entry.backend if entry.state == "loaded" else None
                if isinstance(backend, ChatBackend) and entry.settings.kv_budget_bytes is None:
                    kv = state.kv_budget_for(entry, backend.info.weights_bytes)
                    futures.append(backend.engine.set_kv_budget(kv))
        out: Future[MemoryPlan | None] = Future()

        def done(_all: Future[None]) -> None:
            state.wake()  # the memory held changed: the limit is checked again
            out.set_result(self.snapshot.memory)

        _all_done(futures, None).add_done_callback(done)
        return out

    def load_draft_model(self, spec: str | None) -> Future[ModelInfo | None]:
        """The default model's draft model (speculative decoding)."""
        engine = self._state.published[1]
        if engine is None:
            future: Future[ModelInfo | None] = Future()
            future.set_exception(ValueError("load a model before its draft model"))
            return future
        return engine.load_draft_model(spec)

    def set_pass_cost_learning(self, on: bool) -> None:
        """Engine.set_pass_cost_learning for every chat model (tests, benchmarks)."""
        self.engine_settings.options["learn_pass_cost"] = on
        for engine in self._engines():
            engine.set_pass_cost_learning(on)

    # ---- published state ----

    @property
    def snapshot(self) -> EngineSnapshot:
        """The default model's engine snapshot (its plan and cache while it is loaded), with
        every model of the pool in `pool`."""
        pool, engine, info = self._state.published
        if engine is not None:
            return dataclasses.replace(engine.snapshot, pool=pool)
        return EngineSnapshot(model=info, pool=pool)

    @property
    def failure(self) -> str | None:
        return None

    def close(self) -> None:
        """Fail what waits for a model, finish what runs, unload every model."""
        state = self._state
        with state.lock:
            if state.closed:
                return
            state.closed = True
        self._upkeep.stop()

    def _engines(self) -> list[Engine]:
        state = self._state
        with state.lock:
            return [
                e.backend.engine
                for e in state.entries.values()
                if e.state == "loaded" and isinstance(e.backend, ChatBackend)
            ]


def _handle_done(state: PoolState, entry: Entry, _handle: RequestHandle) -> None:
    state.done(entry, 1)


def _all_done(futures: list[Future[Any]], value: T) -> Future[T]:
    """A future done once all of `futures` are: `value`, or the first one's exception."""
    out: Future[T] = Future()
    left = [len(futures)]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def one(future: Future[Any]) -> None:
        with lock:
            left[0] -= 1
            if (error := future.exception()) is not None:
                errors.append(error)
            last = left[0] == 0
        if last:
            if errors:
                out.set_exception(errors[0])
            else:
                out.set_result(value)

    if not futures:
        out.set_result(value)
    for future in futures:
        future.add_done_callback(one)
    return out
