"""The engine seen from Qt: model loading and chat replies as signals on the GUI thread.

The engine calls back on its own thread. Those callbacks only touch a lock-protected
buffer and wake the GUI thread with a queued signal, at most one wake-up in flight per
reply, so a fast model cannot flood the event loop: the GUI drains whatever text has
arrived since its last turn.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    Finished,
    LoadProgress,
    ModelInfo,
    PrefillProgress,
    TextDelta,
)


class ReplyJob(QObject):
    """One chat reply in flight. Signals arrive on the GUI thread, `finished` exactly once."""

    prefill = Signal(int, int)  # prompt tokens done, total
    delta = Signal(str)  # new reply text
    finished = Signal(object)  # ChatResult
    _wake = Signal()

    def __init__(self, request: ChatRequest, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.request = request
        self.handle: Any = None
        self.text = ""
        self.result: ChatResult | None = None
        self._lock = threading.Lock()
        self._pieces: list[str] = []
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
        with self._lock:
            if isinstance(event, TextDelta):
                self._pieces.append(event.text)
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
            progress, self._progress = self._progress, None
            final = self._final
            self._scheduled = False
        if progress is not None and final is None:
            self.prefill.emit(*progress)
        if pieces:
            text = "".join(pieces)
            self.text += text
            self.delta.emit(text)
        if final is not None and self.result is None:
            self.result = final
            self.finished.emit(final)


class EngineBridge(QObject):
    """Owns the Engine (created on first use) and re-emits its work as Qt signals."""

    loadStarted = Signal(str)  # spec
    loadProgress = Signal(str, float)  # stage, fraction
    modelLoaded = Signal(object)  # ModelInfo
    loadFailed = Signal(str)  # message for the user
    _loadDone = Signal(object, object)  # ModelInfo | None, error message | None

    def __init__(self, engine: Any = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._jobs: set[ReplyJob] = set()
        self.loading_spec: str | None = None
        self.model_spec: str | None = None  # the spec of the model loaded last
        self._loadDone.connect(self._on_load_done)

    @property
    def engine(self) -> Any:
        if self._engine is None:
            from engine.engine import Engine

            self._engine = Engine()
        return self._engine

    @property
    def model_info(self) -> ModelInfo | None:
        return None if self.loading_spec else getattr(self._engine, "model_info", None)

    @property
    def loading(self) -> bool:
        return self.loading_spec is not None

    def load_model(self, spec: str) -> None:
        """Start loading `spec`; progress and the outcome arrive as signals."""
        self.loading_spec = spec
        self.loadStarted.emit(spec)

        def progress(p: LoadProgress) -> None:
            self.loadProgress.emit(p.stage, p.fraction)

        future: Future[ModelInfo] = self.engine.load_model(spec, progress)

        def done(f: Future[ModelInfo]) -> None:
            try:
                self._loadDone.emit(f.result(), None)
            except Exception as exc:  # shown as a message, never a traceback
                self._loadDone.emit(None, str(exc) or type(exc).__name__)

        future.add_done_callback(done)

    def _on_load_done(self, info: ModelInfo | None, error: str | None) -> None:
        spec, self.loading_spec = self.loading_spec, None
        if info is not None:
            self.model_spec = spec
            self.modelLoaded.emit(info)
        else:
            self.loadFailed.emit(error or "the model could not be loaded")

    def submit(self, request: ChatRequest) -> ReplyJob:
        """Queue a reply; the engine serves it after any model load already queued."""
        job = ReplyJob(request, self)
        self._jobs.add(job)
        job.finished.connect(lambda _result, job=job: self._jobs.discard(job))
        job.handle = self.engine.submit(request, on_event=job.on_event)
        return job

    def cache_stats(self) -> dict[str, Any]:
        """The prompt cache's statistics (entries, bytes, hits...), {} if unavailable."""
        if self._engine is None:
            return {}
        try:
            if hasattr(self._engine, "cache_stats"):
                return dict(self._engine.cache_stats())
            return dict(self._engine.prompt_cache.stats())
        except Exception:  # statistics are decoration; never let them break the UI
            return {}

    def set_cache_budget(self, nbytes: int | None) -> None:
        """The user's KV-cache budget (None: automatic, sized by the engine's memory plan)."""
        if self._engine is not None and hasattr(self._engine, "set_kv_budget"):
            self._engine.set_kv_budget(nbytes)

    def memory_plan(self) -> Any:
        return getattr(self._engine, "memory_plan", None)

    def close(self) -> None:
        """Cancel running replies and stop the engine thread."""
        for job in list(self._jobs):
            job.cancel()
        if self._engine is not None:
            self._engine.close()
