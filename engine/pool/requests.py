"""What a pool does with the work it is given while a model is not ready: requests that
wait for their model to load (queued on its engine once it has, failed or cancelled
together otherwise), requests when no model is listed, leases held on a loaded model, and
a model's settings applied to a request."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.errors import EngineBusyError, EngineClosedError, ModelLoadError, ModelUnavailableError
from engine.pool.backends import Backend, ChatBackend
from engine.pool.entry import Entry, Waiter
from engine.runtime.handle import RequestHandle
from engine.types import ChatEvent, ChatRequest, ChatResult, Finished, GenerationStats, StopReason

if TYPE_CHECKING:
    from engine.pool.state import PoolState

MODEL_BUSY = "model_busy"  # ChatResult.error_code: the model could not load in time
MODEL_LOAD_FAILED = "model_load_failed"


class Lease:
    """A loaded model held for a caller: it is not unloaded until `release()` (or the end
    of a `with` block). For work that is not a chat request (embeddings, reranking,
    `run`), which the pool cannot see finish by itself."""

    def __init__(self, backend: Backend, release: Callable[[], None]) -> None:
        self.backend = backend
        self._release = release
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def with_settings(entry: Entry, request: ChatRequest) -> ChatRequest:
    """`request` for `entry`'s model: named by its id, with its chat-template switches
    (a thinking switch becomes the request's default `think`)."""
    kwargs = {**entry.settings.template_kwargs, **request.template_kwargs}
    sampling = request.sampling
    switch = kwargs.get("enable_thinking", kwargs.get("thinking"))
    if sampling.think is None and isinstance(switch, bool):
        sampling = dataclasses.replace(sampling, think=switch)
    return dataclasses.replace(request, model=entry.id, template_kwargs=kwargs, sampling=sampling)


def unserved(
    state: PoolState,
    requests: Sequence[ChatRequest],
    on_event: Callable[[int, ChatEvent], None] | None,
) -> list[RequestHandle]:
    """Handles of requests that fail: no model is listed (as an Engine with none)."""
    handles = [
        RequestHandle(
            next(state.request_ids), r, functools.partial(on_event, i) if on_event else None
        )
        for i, r in enumerate(requests)
    ]

    def finish() -> None:
        for handle in handles:
            handle.emit(Finished(ChatResult.failed("no model is loaded", kind="unavailable")))

    state.soon(finish)  # never on the caller's thread, as an engine's replies end
    return handles


def requests_waiter(handles: list[RequestHandle], wait_s: float) -> Waiter:
    """What waits for a model on behalf of queued requests: queued on its engine once it
    has loaded, failed (or cancelled) together otherwise."""

    def ready(backend: Backend) -> None:
        assert isinstance(backend, ChatBackend)
        try:
            backend.engine.submit_handles(handles)
        except (EngineBusyError, EngineClosedError) as exc:
            fail(str(exc), "queue_full")

    def fail(message: str, code: str) -> None:
        if code == MODEL_LOAD_FAILED:
            message = f"model {handles[0].request.model} could not be loaded: {message}"
        for handle in handles:
            if not handle.done():
                handle.emit(Finished(ChatResult.failed(message, kind="unavailable", code=code)))

    def cancel() -> None:
        stats = GenerationStats(stop_reason=StopReason.CANCELLED.value)
        for handle in handles:
            if not handle.done():
                handle.emit(Finished(ChatResult("", StopReason.CANCELLED, stats)))

    return Waiter(
        ready,
        fail,
        deadline=time.monotonic() + wait_s,
        cancelled=lambda: all(h.cancelled for h in handles),
        cancel=cancel,
        count=len(handles),
    )


def load_error(message: str, code: str) -> Exception:
    if code == MODEL_LOAD_FAILED:
        return ModelLoadError(message)
    return ModelUnavailableError(message)
