"""Many requests through one engine, a few at a time: the part the extract runner and the
Batch API share.

Submitting a thousand rows at once would fill the engine's queue (it refuses past
`max_queued`) and make every interactive request wait behind them. The feeder keeps at most
`limit()` of its requests in flight, submits the first ones together (so they are admitted
together and their shared instruction prefix is computed once, then reused from the prompt
cache by the rest; they are queued one after another without waiting, so the engine
admits them in the same turn), and submits the next as each one finishes. `limit` can shrink while
interactive requests are waiting, which is how batch work lets them go first. A caller may
hand a request back while the feeder runs (`again`: the extract runner retries a row that
Corral had to fill with a larger budget); it goes ahead of the items not yet taken.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from engine.api import EngineAPI
from engine.errors import EngineBusyError
from engine.runtime.handle import RequestHandle
from engine.types import DEFAULT_MAX_ROWS, ChatEvent, ChatRequest, ChatResult, Finished

K = TypeVar("K")

# How long to wait before trying again when the engine's queue is full.
BUSY_RETRY_S = 0.2


def engine_rows(engine: EngineAPI) -> int:
    """How many replies `engine` decodes side by side (its `max_rows` where it says)."""
    rows = getattr(engine, "max_rows", DEFAULT_MAX_ROWS)
    return rows if isinstance(rows, int) and rows > 0 else DEFAULT_MAX_ROWS


class Feeder(Generic[K]):
    """Feeds (key, request) pairs to an engine, at most `limit()` in flight; `on_result(key,
    result)` is called on the feeder's thread as each finishes. `stop` ends the feeding:
    no new request is submitted, and with `cancel` set the ones in flight are cancelled."""

    def __init__(
        self,
        engine: EngineAPI,
        *,
        limit: Callable[[], int] | None = None,
    ) -> None:
        self.engine = engine
        self.limit = limit or (lambda: engine_rows(engine))
        self.stop = threading.Event()
        self.cancel = threading.Event()
        self._again: deque[tuple[K, ChatRequest]] = deque()

    def again(self, key: K, request: ChatRequest) -> None:
        """Feed `request` for `key` too, before the items not yet taken (from `on_result`,
        on the feeder's thread). Dropped if the feeding stops first."""
        self._again.append((key, request))

    def run(
        self,
        items: Iterator[tuple[K, ChatRequest]],
        on_result: Callable[[K, ChatResult], None],
    ) -> bool:
        """Feed `items` until they run out or `stop` is set; True when all were done."""
        done: queue.Queue[tuple[K, ChatResult]] = queue.Queue()
        in_flight: dict[int, tuple[K, RequestHandle | None]] = {}
        ids = iter(range(1 << 62))
        exhausted = False
        pending: list[tuple[K, ChatRequest]] = []

        def callback(key: K, ident: int) -> Callable[[ChatEvent], None]:
            def on_event(event: ChatEvent) -> None:  # engine thread
                if isinstance(event, Finished):
                    done.put((key, event.result))
                    in_flight.pop(ident, None)

            return on_event

        while True:
            if self.cancel.is_set():
                for _, handle in list(in_flight.values()):
                    if handle is not None:
                        handle.cancel()
            room = max(1, self.limit()) - len(in_flight) - len(pending)
            while not self.stop.is_set() and self._again and room > 0:
                pending.append(self._again.popleft())
                room -= 1
            while not self.stop.is_set() and not exhausted and room > 0:
                item = next(items, None)
                if item is None:
                    exhausted = True
                    break
                pending.append(item)
                room -= 1
            if pending and not self.stop.is_set():
                pending = self._submit(pending, in_flight, ids, callback)
            waiting = bool(self._again) and not self.stop.is_set()
            if not in_flight and not pending and not waiting and (exhausted or self.stop.is_set()):
                self._again.clear()
                break
            try:
                key, result = done.get(timeout=BUSY_RETRY_S if pending else None)
            except queue.Empty:
                continue
            on_result(key, result)
            while True:  # everything else that finished meanwhile
                try:
                    key, result = done.get_nowait()
                except queue.Empty:
                    break
                on_result(key, result)
        return exhausted and not self.stop.is_set()

    def _submit(
        self,
        pending: list[tuple[K, ChatRequest]],
        in_flight: dict[int, tuple[K, RequestHandle | None]],
        ids: Iterator[int],
        callback: Callable[[K, int], Callable[[ChatEvent], None]],
    ) -> list[tuple[K, ChatRequest]]:
        """Submit what waits, together where the engine takes it; what it refused stays."""
        left = list(pending)
        while left:
            key, request = left[0]
            ident = next(ids)
            in_flight[ident] = (key, None)
            try:
                handle = self.engine.submit(request, callback(key, ident))
            except EngineBusyError:
                in_flight.pop(ident, None)
                time.sleep(BUSY_RETRY_S)
                return left
            if ident in in_flight:  # not finished already (a request refused at once)
                in_flight[ident] = (key, handle)
            left.pop(0)
        return left
