"""The engine seen from Qt: model loading and chat replies as signals on the GUI thread.

The engine calls back on its own thread. Those callbacks only touch a lock-protected
buffer and wake the GUI thread with a queued signal, at most one wake-up in flight per
reply, so a fast model cannot flood the event loop: the GUI drains whatever text has
arrived since its last turn. A finished ReplyJob lets go of its request and is deleted.
What the window shows about the engine (model, memory, prompt cache) comes from the
snapshot the engine thread publishes, never from the engine's live structures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.words import error_sentence
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    EngineSnapshot,
    Finished,
    LoadProgress,
    ModelInfo,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
    TokenLogprobs,
)

if TYPE_CHECKING:
    from engine.api import EngineAPI
    from engine.pool import ModelPool
    from engine.runtime.handle import RequestHandle
    from engine.types import ValidationReport


log = logging.getLogger("app.jobs.engine_bridge")


class ReplyJob(QObject):
    """One chat reply in flight. Signals arrive on the GUI thread, `finished` exactly once."""

    prefill = Signal(int, int)  # prompt tokens done, total
    delta = Signal(str)  # new reply text
    thinking = Signal(str)  # new thinking text (models that think first), before any reply text
    finished = Signal(object)  # ChatResult
    _wake = Signal()

    def __init__(self, request: ChatRequest, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.request = request
        self.handle: RequestHandle | None = None
        self.text = ""
        self.reasoning = ""  # the thinking so far, its leading blank lines left out
        self.result: ChatResult | None = None
        self._lock = threading.Lock()
        self._pieces: list[str] = []
        self._thoughts: list[str] = []
        self._progress: tuple[int, int] | None = None
        self._final: ChatResult | None = None
        self._scheduled = False
        self._wake.connect(self._drain)

    def cancel(self) -> None:
        """Stop the reply; works during prompt processing too."""
        if self.handle is not None:
            self.handle.cancel()

    @property
    def done(self) -> bool:
        return self.result is not None

    def on_event(self, event: ChatEvent) -> None:
        """Engine thread: buffer the event and wake the GUI thread if it is not already due."""
        if isinstance(event, TokenLogprobs):
            return  # the recorded tokens come with the result (stored for Inspect)
        with self._lock:
            if isinstance(event, TextDelta):
                self._pieces.append(event.text)
            elif isinstance(event, ReasoningDelta):
                self._thoughts.append(event.text)
            elif isinstance(event, PrefillProgress):
                self._progress = (event.done, event.total)
            elif isinstance(event, Finished):
                self._final = event.result
            if self._scheduled:
                return
            self._scheduled = True
        self._wake.emit()

    def _drain(self) -> None:
        with self._lock:
            pieces, self._pieces = self._pieces, []
            thoughts, self._thoughts = self._thoughts, []
            progress, self._progress = self._progress, None
            final = self._final
            self._scheduled = False
        if progress is not None and final is None:
            self.prefill.emit(*progress)
        if thoughts:
            thought = "".join(thoughts)
            self.reasoning = (self.reasoning + thought).lstrip()
            self.thinking.emit(thought)
        if pieces:
            text = "".join(pieces)
            self.text += text
            self.delta.emit(text)
        if final is not None and self.result is None:
            self.result = final
            self.handle = None  # the engine is done with it; so are we
            self.finished.emit(final)


class EngineBridge(QObject):
    """Owns an engine (an EngineAPI: the local model pool, created on first use, or a
    distributed group) and re-emits its work as Qt signals on the GUI thread.

    The local engine is a ModelPool (engine.pool): the model the chat loads is its default,
    and the local server serves the same pool, so a model the server loaded is the one the
    chat uses, never a second copy."""

    loadStarted = Signal(str)  # spec
    loadProgress = Signal(str, float)  # stage, fraction
    modelLoaded = Signal(object)  # ModelInfo
    loadFailed = Signal(str)  # message for the user
    # A distributed engine's group stopped (a rank or the network failed): the reason, once.
    groupFailed = Signal(str)
    _loadDone = Signal(object, object)  # ModelInfo | None, error message | None

    def __init__(self, engine: EngineAPI | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._make_engine: Callable[[], EngineAPI] | None = None  # None: a local Engine
        self._failure_told: str | None = None
        self._max_rows: int | None = None  # the user's setting, for an engine made later
        self._speculative: bool | None = None  # likewise
        self._kv_bits: int | None = None  # likewise
        self._model_memory: int | None = None  # the pool's limit (None: the machine's)
        self._jobs: set[ReplyJob] = set()
        self.loading_spec: str | None = None
        self.model_spec: str | None = None  # the spec of the model loaded last
        self._loadDone.connect(self._on_load_done)

    @property
    def engine(self) -> EngineAPI:
        if self._engine is None:
            from engine.memory.settings import DEFAULT_DISK_BUDGET, prompt_cache_dir
            from engine.pool import EMBEDDING_LOADERS, ModelPool
            from engine.pool.settings import default_settings_path

            def local() -> ModelPool:  # prompts kept on disk across restarts
                pool = ModelPool(
                    memory_limit_bytes=self._model_memory,
                    loaders=EMBEDDING_LOADERS,  # kind = "embedding" / "rerank" in models.toml
                    engine_options={
                        "kv_bits": self._kv_bits,
                        "disk_cache_dir": prompt_cache_dir(),
                        "disk_budget_bytes": DEFAULT_DISK_BUDGET,
                    },
                )
                pool.read_settings(default_settings_path(), strict=False)
                return pool

            self._engine = (self._make_engine or local)()
            if self._max_rows is not None:
                self._engine.set_max_rows(self._max_rows)
            if self._speculative is not None:
                self._engine.set_speculative(self._speculative)
        return self._engine

    def use_engine(self, make_engine: Callable[[], EngineAPI] | None) -> None:
        """Serve from engines `make_engine` builds (None: a local Engine) from now on. The
        current engine, if any, stops its replies and closes in the background; load a model
        afterwards."""
        old, self._engine = self._engine, None
        self._make_engine = make_engine
        self._failure_told = None
        for job in list(self._jobs):
            job.cancel()
        if old is not None:
            threading.Thread(target=old.close, name="corral-close-engine", daemon=True).start()

    @property
    def pool(self) -> ModelPool | None:
        """The local model pool, if that is the engine in use (not a distributed group)."""
        from engine.pool import ModelPool

        return self._engine if isinstance(self._engine, ModelPool) else None

    def set_model_memory_limit(self, nbytes: int | None) -> None:
        """What the local pool's models may hold together (None: the machine's budget)."""
        self._model_memory = nbytes
        pool = self.pool
        if pool is not None:
            pool.set_memory_limit(nbytes)

    @property
    def current_engine(self) -> EngineAPI | None:
        """The engine in use, without starting one."""
        return self._engine

    @property
    def group_failure(self) -> str | None:
        """Why the distributed group serving the model stopped, if it did."""
        return self._engine.failure if self._engine is not None else None

    def _check_group(self) -> None:
        failure = self.group_failure
        if failure is not None and failure != self._failure_told:
            self._failure_told = failure
            self.groupFailed.emit(failure)

    def snapshot(self) -> EngineSnapshot:
        """What the engine thread last published (an empty snapshot before any engine)."""
        return self._engine.snapshot if self._engine is not None else EngineSnapshot()

    @property
    def model_info(self) -> ModelInfo | None:
        return None if self.loading_spec else self.snapshot().model

    @property
    def loading(self) -> bool:
        return self.loading_spec is not None

    @property
    def jobs(self) -> frozenset[ReplyJob]:
        """The replies in flight."""
        return frozenset(self._jobs)

    def load_model(self, spec: str) -> None:
        """Start loading `spec`; progress and the outcome arrive as signals."""
        self.loading_spec = spec
        self._load_started = time.perf_counter()
        log.info("loading model %s", spec)
        self.loadStarted.emit(spec)

        def progress(p: LoadProgress) -> None:
            self.loadProgress.emit(p.stage, p.fraction)

        try:
            future: Future[ModelInfo] = self.engine.load_model(spec, progress)
        except Exception as exc:  # an engine that cannot start (a hostfile gone): say why
            self._loadDone.emit(None, error_sentence(exc))
            return

        def done(f: Future[ModelInfo]) -> None:
            try:
                self._loadDone.emit(f.result(), None)
            except Exception as exc:  # shown as a message, never a traceback
                self._loadDone.emit(None, error_sentence(exc))

        future.add_done_callback(done)

    def _on_load_done(self, info: ModelInfo | None, error: str | None) -> None:
        spec, self.loading_spec = self.loading_spec, None
        seconds = time.perf_counter() - getattr(self, "_load_started", time.perf_counter())
        if info is not None:
            log.info("model loaded in %.1f s: %s (%s)", seconds, info.name, info.path)
            self.model_spec = spec
            self.modelLoaded.emit(info)
        else:
            log.error("model %s could not be loaded: %s", spec, error)
            self.loadFailed.emit(error or "the model could not be loaded")
            self._check_group()

    def submit(self, request: ChatRequest) -> ReplyJob:
        """Queue a reply; the engine serves it after any model load already queued. The job
        is deleted once its `finished` has been delivered."""
        job = ReplyJob(request, self)
        self._jobs.add(job)
        job.finished.connect(lambda _result, job=job: self._retire(job))
        job.handle = self.engine.submit(request, on_event=job.on_event)
        return job

    def submit_many(self, requests: list[ChatRequest]) -> list[ReplyJob]:
        """Queue several replies at once (Regenerate ×N): they decode side by side."""
        jobs = [ReplyJob(request, self) for request in requests]
        for job in jobs:
            self._jobs.add(job)
            job.finished.connect(lambda _result, job=job: self._retire(job))
        handles = self.engine.submit_many(requests, lambda i, event: jobs[i].on_event(event))
        for job, handle in zip(jobs, handles, strict=True):
            job.handle = handle
        return jobs

    def _retire(self, job: ReplyJob) -> None:
        self._jobs.discard(job)
        job.deleteLater()  # after the slots of this `finished` have run
        self._check_group()

    def check_constraint(self, spec: ConstraintSpec) -> ValidationReport:
        """Check `spec` for the loaded model (blocking: call it off the GUI thread)."""
        if self._engine is None:
            from engine.constraints.validate import validate_constraint

            return validate_constraint(spec)
        return self._engine.check_constraint(spec)

    def set_max_rows(self, max_rows: int) -> None:
        """How many replies the engine writes side by side at most."""
        self._max_rows = max_rows
        if self._engine is not None:
            self._engine.set_max_rows(max_rows)

    def set_kv_bits(self, bits: int | None) -> None:
        """The KV cache's precision (8, 4 or None: the model's own), for a local engine."""
        self._kv_bits = bits
        if self._engine is not None:
            self._engine.set_kv_bits(bits)  # a group refuses quantized caches: it stays full

    def set_speculative(self, on: bool) -> None:
        """Whether replies are written speculatively (drafts verified in one pass)."""
        self._speculative = on
        if self._engine is not None:
            self._engine.set_speculative(on)

    def set_cache_budget(self, nbytes: int | None) -> None:
        """The user's KV-cache budget (None: automatic, sized by the engine's memory plan)."""
        if self._engine is not None:
            self._engine.set_kv_budget(nbytes)

    def close(self) -> None:
        """Cancel running replies and stop the engine thread."""
        for job in list(self._jobs):
            job.cancel()
        if self._engine is not None:
            self._engine.close()
