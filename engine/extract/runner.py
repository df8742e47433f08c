"""Running a job: its pending rows read, windowed, decoded side by side under the schema,
checked, and written as each finishes.

The runner reads documents on its own thread while the engine decodes the rows already
submitted (the `Feeder` keeps a batch's worth in flight). Each reply is checked against the
schema as written with `jsonschema` (formats too): a row is `valid` (the model wrote its
reply to the end, and it validates), `filled` (Corral's closing policy ended it to fit: it
validates, but the values its `filled` pointers name are Corral's), `incomplete` with the
reason (the reply was cut, or did not validate), `unreadable` (the document), or `failed`
(the engine refused it). A row that ends filled is decoded once more with twice the
tokens before it is kept as filled. Each row's reply may have `JobSettings.max_tokens`
tokens, or by default what `engine.extract.budget` estimates its schema and document
need. A paused or cancelled job keeps every written row, and running it again does only
the rows still pending.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema

from engine.api import EngineAPI
from engine.errors import CorralError
from engine.extract.budget import reply_tokens
from engine.extract.document import Document, UnreadableDocument, read_document
from engine.extract.feeder import Feeder
from engine.extract.prompt import row_request, system_prompt
from engine.extract.store import Job, JobStore, Row
from engine.extract.windows import TokenCount, Window, page_windows
from engine.types import ChatRequest, ChatResult, ConstraintSpec, Ending, StopReason, ending_note

DEFAULT_CONTEXT = 8192
# Tokens kept free beside the instructions, the document and the reply (template markers).
MARGIN_TOKENS = 48


class ExtractError(CorralError):
    """A job cannot run at all (no model, a schema the engine refuses, no room in the
    context); the message says why."""


@dataclass
class Progress:
    """A job's rows by status, and the rate of this run."""

    counts: dict[str, int]
    started: float = field(default_factory=time.monotonic)
    finished_this_run: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return self.total - self.counts.get("pending", 0)

    @property
    def per_minute(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.finished_this_run * 60 / elapsed if elapsed > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        rate = self.per_minute
        return self.counts.get("pending", 0) * 60 / rate if rate > 0 else None


def schema_constraint(engine: EngineAPI, job: Job) -> ConstraintSpec:
    """The job's schema checked and compiled for the loaded model; ExtractError if refused."""
    spec = ConstraintSpec("json_schema", json.dumps(job.schema), name=job.name)
    report = engine.check_constraint(spec)
    if not report.ok:
        raise ExtractError(f"the schema cannot be used:\n{report.summary()}")
    return report.spec


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is, without a tokenizer (a token is ~3 characters)."""
    return len(text) // 3 + 1


def token_counter(engine: EngineAPI) -> TokenCount:
    """Counts tokens with the loaded model's tokenizer (safe off the engine thread), or
    estimates them where the model lives elsewhere."""
    try:
        tokenizer = engine.run(lambda loaded: loaded.tokenizer).result()
        encode = tokenizer.encode
    except (CorralError, AttributeError, NotImplementedError):
        return estimate_tokens
    return lambda text: len(encode(text))


class ExtractRunner:
    """Runs one job on `engine` (blocking `run`); `pause` and `cancel` from any thread."""

    def __init__(
        self,
        engine: EngineAPI,
        store: JobStore,
        job_id: str,
        *,
        on_row: Callable[[Row, Progress], None] | None = None,
        limit: Callable[[], int] | None = None,
        paths: set[str] | None = None,
    ) -> None:
        """`paths`: run only the pending rows of these files (None: all of the job's)."""
        self.engine = engine
        self.store = store
        self.job_id = job_id
        self.on_row = on_row
        self.paths = paths
        self.feeder: Feeder[int] = Feeder(engine, limit=limit)
        self.progress = Progress(store.counts(job_id))
        self._stopped: str | None = None
        self._lock = threading.Lock()
        self._notes: dict[int, str | None] = {}  # what reading left out, per row
        self._requests: dict[int, ChatRequest] = {}  # each row's request while it decodes
        self._retried: set[int] = set()  # rows decoded again after Corral filled them

    def pause(self) -> None:
        """Stop submitting rows; those decoding finish and are written."""
        self._stopped = self._stopped or "paused"
        self.feeder.stop.set()

    def cancel(self) -> None:
        """Stop now: rows decoding are cancelled and stay pending."""
        self._stopped = "cancelled"
        self.feeder.stop.set()
        self.feeder.cancel.set()

    def run(self) -> Progress:
        """Run the job's pending rows; returns the job's progress when they are done, or
        when paused or cancelled. ExtractError if the job cannot run."""
        job = self.store.job(self.job_id)
        if job is None:
            raise ExtractError(f"no extraction job {self.job_id!r}")
        model = self.engine.snapshot.model
        if model is None:
            raise ExtractError("no model is loaded")
        constraint = schema_constraint(self.engine, job)
        count = token_counter(self.engine)
        system = system_prompt(job.schema, job.instruction)
        context = model.context_length or DEFAULT_CONTEXT
        # the most a row's reply may take: the job's setting, or the estimate for the
        # longest document a window holds
        most = job.settings.max_tokens or reply_tokens(job.schema, context)
        budget = context - count(system) - most - MARGIN_TOKENS
        if budget < 64:
            raise ExtractError(
                f"the schema and instruction ({count(system):,} tokens) and replies of "
                f"{most:,} tokens leave no room for a document in the "
                f"model's context of {context:,} tokens"
            )
        validator = jsonschema.Draft202012Validator(
            job.schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
        self.store.set_state(job.id, "running")

        def requests() -> Iterator[tuple[int, ChatRequest]]:
            for row in self.store.rows(job.id, "pending"):
                if self.feeder.stop.is_set():
                    return
                if self.paths is not None and row.path not in self.paths:
                    continue
                for row_id, document, window in self._windows(
                    job, row, model.vision, budget, count
                ):
                    size = sum(estimate_tokens(page.text) for page in window.pages)
                    request = row_request(
                        constraint,
                        system,
                        Path(row.path).name,
                        window,
                        paged=document.kind == "pdf",
                        page_count=document.page_count,
                        max_tokens=job.settings.max_tokens or reply_tokens(job.schema, size),
                    )
                    self._requests[row_id] = request
                    yield row_id, request

        def on_result(row_id: int, result: ChatResult) -> None:
            self._write(row_id, result, validator)

        self.feeder.run(requests(), on_result)
        counts = self.store.counts(job.id)
        state = self._stopped or ("done" if counts["pending"] == 0 else "ready")
        self.store.set_state(job.id, state)
        self.progress.counts = counts
        return self.progress

    def _windows(
        self, job: Job, row: Row, vision: bool, budget: int, count: TokenCount
    ) -> Iterator[tuple[int, Document, Window]]:
        """The row's document read and cut into windows; a row that needs more than one
        window becomes one row per window. An unreadable document is written as such."""
        pages = row.page_range or job.settings.pages
        try:
            document = read_document(row.path, vision=vision, pages=pages)
        except UnreadableDocument as exc:
            self._finish(row.id, "unreadable", error=str(exc))
            return
        windows = page_windows(document.pages, budget, count)
        if len(windows) > 1:  # a whole document, or a window that no longer fits (a model
            # with another tokenizer or context since): one row per window that fits
            ids = self.store.split(row.id, [(w.first, w.last) for w in windows])
        else:
            ids = [row.id]
        self._notes[ids[0]] = "; ".join(document.notes) or None
        for row_id, window in zip(ids, windows, strict=True):
            yield row_id, document, window

    def _write(self, row_id: int, result: ChatResult, validator: jsonschema.Validator) -> None:
        request = self._requests.pop(row_id, None)
        if result.stop_reason == StopReason.CANCELLED:
            return  # stays pending: a later run does it
        tokens = result.stats.generated_tokens
        if result.error:
            self._notes.pop(row_id, None)
            self._finish(row_id, "failed", error=result.error_line, tokens=tokens)
            return
        if result.ending == Ending.FILLED and request is not None and self._retry(row_id, request):
            return
        note = self._notes.pop(row_id, None)
        try:
            data: Any = json.loads(result.text)
        except json.JSONDecodeError as exc:
            why = "the reply was cut short" if result.incomplete else f"not JSON ({exc.msg})"
            self._finish(row_id, "incomplete", error=why, tokens=tokens)
            return
        problem = next(iter(validator.iter_errors(data)), None)
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "the reply"
            self._finish(
                row_id,
                "incomplete",
                result=data,
                error=f"{where}: {problem.message}",
                tokens=tokens,
            )
        elif result.ending == Ending.CUT:
            self._finish(
                row_id, "incomplete", result=data, error="the reply was cut short", tokens=tokens
            )
        elif result.ending == Ending.FILLED:  # valid, but not all of it the model's
            why = ending_note(
                result.ending,
                close_reason=result.stats.close_reason,
                budget=result.stats.budget_tokens,
                filled=result.filled_paths,
            )
            if row_id in self._retried:
                why += " (also with twice the tokens)"
            self._finish(
                row_id,
                "filled",
                result=data,
                error="; ".join(filter(None, [note, why])),
                tokens=tokens,
                filled=result.filled_paths,
            )
        else:
            self._finish(row_id, "valid", result=data, error=note or None, tokens=tokens)

    def _retry(self, row_id: int, request: ChatRequest) -> bool:
        """Decode a row Corral filled once more, with twice the tokens; False if it was
        retried already (or the job is stopping)."""
        if row_id in self._retried or self.feeder.stop.is_set():
            return False
        self._retried.add(row_id)
        sampling = replace(request.sampling, max_tokens=request.sampling.max_tokens * 2)
        again = replace(request, sampling=sampling)
        self._requests[row_id] = again
        self.feeder.again(row_id, again)
        return True

    def _finish(
        self,
        row_id: int,
        status: str,
        *,
        result: Any = None,
        error: str | None = None,
        tokens: int = 0,
        filled: list[str] | None = None,
    ) -> None:
        if not self.store.finish(
            row_id, status, result=result, error=error, tokens=tokens, filled=filled
        ):
            return
        with self._lock:
            self.progress.counts = self.store.counts(self.job_id)
            self.progress.finished_this_run += 1
        row = self.store.row(row_id)
        if row is not None and self.on_row is not None:
            self.on_row(row, self.progress)
