"""The thread that runs batches in the background, oldest first, through the same engine
as the online requests (`engine.extract.feeder.Feeder`: a batch's worth of lines in flight,
fewer while interactive requests are in flight, so they go first).

Each line's output is written the moment its replies finish; a server that stops leaves
the lines in flight pending (their replies are cancelled), and the next server over the
same folder goes on with them. A cancelled batch stops at once: its finished lines go to
the output file and the rest are reported as cancelled in the error file.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from engine.extract.feeder import Feeder, engine_rows
from engine.server.activity import RequestRecord
from engine.server.batches.store import BatchStore
from engine.server.batches.translate import Line, answer, translate_line
from engine.server.core import Core
from engine.server.errors import APIError, error_body
from engine.types import ChatRequest, ChatResult, StopReason

Key = tuple[int, int]  # (line, choice)


def output_line(custom_id: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """One line of an output or error file, in OpenAI's shape."""
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": custom_id,
        "response": {
            "status_code": status,
            "request_id": f"req_{uuid.uuid4().hex[:24]}",
            "body": body,
        },
        "error": None,
    }


class BatchWorker:
    """Runs the store's open batches on a thread of its own, started on demand."""

    def __init__(self, core: Core, store: BatchStore) -> None:
        self.core = core
        self.store = store
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._feeder: Feeder[Key] | None = None
        self._running: str | None = None  # the batch being run
        self._cancelled: set[str] = set()

    def start(self) -> None:
        """Start the thread if it is not running (idempotent)."""
        with self._lock:
            if self._closed.is_set() or (self._thread is not None and self._thread.is_alive()):
                self._wake.set()
                return
            self._thread = threading.Thread(target=self._loop, name="corral-batches", daemon=True)
            self._thread.start()

    def cancel(self, batch_id: str) -> None:
        """Stop `batch_id` now if it is running (the store already says `cancelling`)."""
        with self._lock:
            self._cancelled.add(batch_id)
            if self._running == batch_id and self._feeder is not None:
                self._feeder.stop.set()
                self._feeder.cancel.set()
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread: replies in flight are cancelled, their lines stay pending."""
        self._closed.set()
        with self._lock:
            if self._feeder is not None:
                self._feeder.stop.set()
                self._feeder.cancel.set()
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout)

    # ---- the thread ----

    def _loop(self) -> None:
        while not self._closed.is_set():
            batches = self.store.open_batches()
            if not batches:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            self._run(batches[0])

    def _run(self, batch: dict[str, Any]) -> None:
        bid = batch["id"]
        if batch["status"] in ("validating", "in_progress"):
            self.update(bid, status="in_progress", in_progress_at=batch["in_progress_at"] or _now())
            core = self.core
            feeder: Feeder[Key] = Feeder(
                core.engine,
                limit=lambda: max(1, engine_rows(core.engine) - core.activity.active),
            )
            with self._lock:
                self._feeder, self._running = feeder, bid
                if bid in self._cancelled or self._closed.is_set():
                    feeder.stop.set()
                    feeder.cancel.set()
            try:
                self._feed(batch, feeder)
            finally:
                with self._lock:
                    self._feeder, self._running = None, None
            if self._closed.is_set():
                return  # a restart goes on with the lines still pending
        current = self.store.batch(bid) or batch
        cancelled = current["status"] == "cancelling" or bid in self._cancelled
        self._finalize(current, cancelled)

    def _feed(self, batch: dict[str, Any], feeder: Feeder[Key]) -> None:
        bid, endpoint = batch["id"], batch["endpoint"]
        lines: dict[int, tuple[str, Line, list[ChatResult | None]]] = {}

        def items() -> Iterator[tuple[Key, ChatRequest]]:
            for number, custom_id, body in self.store.pending_lines(bid):
                try:
                    line = translate_line(self.core, endpoint, body)
                except APIError as exc:
                    self._finish(bid, number, output_line(custom_id, exc.status, exc.body()))
                    self._log(endpoint, custom_id, exc.status, [], exc.message)
                    continue
                lines[number] = (custom_id, line, [None] * len(line.requests))
                for choice, request in enumerate(line.requests):
                    yield (number, choice), request

        def on_result(key: Key, result: ChatResult) -> None:
            number, choice = key
            custom_id, line, results = lines[number]
            results[choice] = result
            if any(r is None for r in results):
                return
            del lines[number]
            done = [r for r in results if r is not None]
            if any(r.stop_reason == StopReason.CANCELLED and not r.error for r in done):
                return  # stopped or cancelled: the line stays pending
            status, body = answer(line, done)
            self._finish(bid, number, output_line(custom_id, status, body))
            error = body["error"]["message"] if status != 200 else None
            self._log(endpoint, custom_id, status, done, error)

        feeder.run(items(), on_result)

    def _log(
        self,
        endpoint: str,
        custom_id: str,
        status: int,
        results: list[ChatResult],
        error: str | None,
    ) -> None:
        """The line in the server's request log, as the online request would be."""
        first = results[0].stats if results else None
        self.core.activity.record(
            RequestRecord(
                time.time(),
                f"{endpoint} (batch line {custom_id[:40]})",
                status,
                prompt_tokens=first.prompt_tokens if first else 0,
                completion_tokens=sum(r.stats.generated_tokens for r in results),
                cached_tokens=first.cached_tokens if first else 0,
                decode_tps=round(first.decode_tps, 1) if first else 0.0,
                stop_reason=first.stop_reason if first else None,
                error=error,
            )
        )

    def _finish(self, bid: str, number: int, line: dict[str, Any]) -> None:
        ok = line["response"]["status_code"] == 200
        if self.store.finish_line(bid, number, ok, line):
            self.update(bid, request_counts=self.store.line_counts(bid))

    def _finalize(self, batch: dict[str, Any], cancelled: bool) -> None:
        bid = batch["id"]
        self.update(bid, status="finalizing", finalizing_at=batch.get("finalizing_at") or _now())
        results = self.store.results(bid)
        errors = [line for _, ok, line in results if not ok]
        if cancelled:
            body = error_body(499, "the batch was cancelled before this line ran")
            body["error"]["code"] = "batch_cancelled"
            errors += [output_line(cid, 499, body) for _, cid, _ in self.store.pending_lines(bid)]
        output = [line for _, ok, line in results if ok]
        ids: dict[str, Any] = {"output_file_id": None, "error_file_id": None}
        if output:
            ids["output_file_id"] = self._file(output, f"{bid}_output.jsonl")
        if errors:
            ids["error_file_id"] = self._file(errors, f"{bid}_error.jsonl")
        counts = self.store.line_counts(bid)
        if cancelled:
            counts["failed"] = counts["total"] - counts["completed"]
            self.update(bid, status="cancelled", cancelled_at=_now(), request_counts=counts, **ids)
        else:
            self.update(bid, status="completed", completed_at=_now(), request_counts=counts, **ids)

    def _file(self, lines: list[dict[str, Any]], name: str) -> str:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        return str(self.store.add_file(data.encode(), name, "batch_output")["id"])

    def update(self, bid: str, **changes: Any) -> None:
        """Change the batch record `bid` (the worker and the endpoints, one at a time)."""
        with self._lock:  # the endpoints' cancel updates the same record
            batch = self.store.batch(bid)
            if batch is None:
                return
            if batch["status"] == "cancelling" and changes.get("status") == "in_progress":
                changes.pop("status")
            batch.update(changes)
            self.store.put_batch(batch)


def _now() -> int:
    return int(time.time())
