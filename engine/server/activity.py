"""What the server is doing: requests in flight and a record of each finished request.

Records are published to a callback (the CLI prints them, the app's Server log shows
them) and kept in a bounded list. They never contain message text or keys.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestRecord:
    """One request as the Server log shows it."""

    time: float  # wall-clock seconds when it arrived
    endpoint: str  # "/v1/chat/completions", ...
    status: int  # HTTP status; 499 when the client went away before the end
    stream: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    ttft_ms: float | None = None  # arrival to first token, queue wait included
    decode_tps: float = 0.0
    constraint: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    # how the first choice ended (engine.types.Ending): finished, filled, cut, ...
    ending: str | None = None

    def line(self) -> str:
        """The record as one log line."""
        stamp = time.strftime("%H:%M:%S", time.localtime(self.time))
        head = f"{stamp} {self.status} {self.endpoint}{' (stream)' if self.stream else ''}"
        if self.error:
            return f"{head}: {self.error}"
        if self.stop_reason is None and self.ttft_ms is None and not self.completion_tokens:
            return f"{head}: {self.prompt_tokens} tokens"  # embeddings, rerank, counts
        ttft = f"{self.ttft_ms:.0f} ms" if self.ttft_ms is not None else "-"
        text = (
            f"{head}: {self.prompt_tokens} prompt ({self.cached_tokens} cached), "
            f"{self.completion_tokens} completion, TTFT {ttft}, {self.decode_tps:.1f} tok/s, "
            f"{self.ending or self.stop_reason}"
        )
        return text + (f", {self.constraint}" if self.constraint else "")


RecordFn = Callable[[RequestRecord], None]
ActiveFn = Callable[[int], None]


class ServerActivity:
    """Counts requests in flight and keeps the latest records. Safe from any thread."""

    def __init__(
        self,
        on_record: RecordFn | None = None,
        on_active: ActiveFn | None = None,
        keep: int = 1000,
    ) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self.records: deque[RequestRecord] = deque(maxlen=keep)
        self.on_record = on_record
        self.on_active = on_active

    @property
    def active(self) -> int:
        return self._active

    def try_begin(self, limit: int | None) -> bool:
        """Count a new request in flight unless `limit` are already (None: no limit)."""
        with self._lock:
            if limit is not None and self._active >= limit:
                return False
            self._active += 1
            active = self._active
        if self.on_active is not None:
            self.on_active(active)
        return True

    def end(self, record: RequestRecord) -> None:
        """A request counted by try_begin has finished."""
        with self._lock:
            self._active -= 1
            active = self._active
        if self.on_active is not None:
            self.on_active(active)
        self.record(record)

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)
