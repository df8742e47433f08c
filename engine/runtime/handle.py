"""What a caller holds for a submitted chat request: cancel it, take its events, wait for
its result. The engine thread emits into it; any thread reads from it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from engine.types import ChatEvent, ChatRequest, ChatResult, Finished

EventFn = Callable[[ChatEvent], None]


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
        self.seq = 0  # its place among everything submitted to the engine
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

    def add_done_callback(self, fn: Callable[[RequestHandle], None]) -> None:
        """Call `fn(handle)` once the request has finished (at once if it has), on the
        thread that finished it."""
        self._done.add_done_callback(lambda _future: fn(self))

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
