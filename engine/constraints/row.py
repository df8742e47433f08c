"""One reply's constraint: its llguidance matcher, advanced on the mask pool beside the forward.

The decode loop (`engine.runtime.batch`) owns the order of events; this component owns the
matcher. For each token a row samples, the loop calls `advance(token)` as soon as the
token is read back: a worker thread of the mask pool consumes it, takes the tokens the
grammar forces next (`compute_ff_tokens`), and fills the mask for the token after them
(llguidance releases the GIL), while the model's forward pass runs. `collect()` then
hands the loop a MaskStep: the forced tokens, whether the grammar is done, and the mask
as llguidance packs it (one bit per token), which `engine.constraints.masking` applies on
the device. The first job, started by the
constructor, compiles the grammar (or copies its compiled matcher) and fills the first
mask while the prompt is prefilled.

End tokens are llguidance EOS tokens, allowed exactly when the grammar accepts. With
`max_tokens`, the closing tracker (`engine.constraints.finishing`) follows the reply on
the same jobs: it narrows the mask to turn the reply toward its end as the budget runs
short or to move it out of a loop inside a value, and from where the reply must be
closed to fit (`MaskStep.fitting`, then `begin_closing`) to the tokens after which an
ending still fits. It may also answer with an ending instead of a mask ([] once the
grammar accepts), which the loop hands to the reply after `close` has fed it. With
`on_pool=False` (the benchmark's serial baseline) jobs run on the caller's thread when
collected instead. Every public method runs on the engine thread.

With `thinking`, the grammar first allows one free thinking block
(`engine.constraints.reasoning`); this component counts its tokens and forces the end tag
once the budget is spent, or when only the tokens the answer needs to end validly (its
shortest ending, found by the closing policy as the grammar compiles) are left of
`max_tokens`. The closing policy watches the answer only.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from llguidance import LLExecutor, LLMatcher

from engine.constraints import ConstraintError, Diagnostic
from engine.constraints.closing import MARGIN, ClosingPolicy
from engine.constraints.compiled import compiled_of
from engine.constraints.finishing import ClosingTracker
from engine.constraints.masking import allowed_count
from engine.constraints.reasoning import ThinkingRow, with_thinking
from engine.constraints.tokenizer import ll_tokenizer
from engine.constraints.validate import compile_constraint, parse_message
from engine.types import KIND_NAMES, ConstraintSpec, GenerationStats

# A mask allowing at most this many tokens marks a structural position (after a JSON value,
# inside an enum or a keyword), where forced tokens tend to follow the next token.
NARROW_MASK = 1024

_pool: ThreadPoolExecutor | None = None
_executor: LLExecutor | None = None
_pool_lock = threading.Lock()


def mask_pool() -> ThreadPoolExecutor:
    """The worker threads that run matcher jobs (shared by every row of every engine)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = max(2, min(8, os.cpu_count() or 2))
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="corral-mask")
        return _pool


def mask_executor() -> LLExecutor:
    """llguidance's own threads, filling several rows' masks at once without the GIL."""
    global _executor
    with _pool_lock:
        if _executor is None:
            _executor = LLExecutor()
        return _executor


@dataclass
class MaskStep:
    """What the matcher says after consuming a token: forced tokens, stop, the next mask."""

    ff: list[int] = field(default_factory=list)
    stopped: bool = False
    # packed words (int32, one bit per token): the matcher's buffer, valid until its next
    # job; None when stopped
    mask: np.ndarray | None = None
    error: str | None = None
    narrow: bool = False  # few tokens allowed: forced tokens often follow the next one
    allowed: int = 0  # how many tokens the mask allows
    closing: list[int] | None = None  # end the reply with these tokens now (closing policy)
    fitting: bool = False  # the closing began: the tokens from the next on are held to fit
    ready_at: float = 0.0  # perf_counter() when the job finished


class _Pending(Protocol):
    """A matcher job in flight: a pool Future, or a row's share of a job for several rows."""

    def done(self) -> bool: ...

    def cancel(self) -> bool: ...

    def result(self) -> MaskStep: ...


class RowConstraint:
    """One constrained reply's matcher: takes `constraint`'s compiled grammar (converting it
    first if nothing has) and answers each token with a MaskStep.

    With `max_tokens`, the closing tracker turns the reply toward a valid end within that
    many tokens as the budget runs short, and out of a loop inside a value
    (`close_loops`), closing it to fit where it must."""

    def __init__(
        self,
        tokenizer: Any,
        constraint: ConstraintSpec,
        ends: set[int],
        *,
        forced_tokens: bool = True,
        on_pool: bool = True,
        max_tokens: int | None = None,
        close_loops: bool = True,
        cancelled: Callable[[], bool] | None = None,
        thinking: ThinkingRow | None = None,
    ) -> None:
        """`cancelled` says whether the reply was cancelled: a long closing walk gives up.
        `thinking`: the reply thinks first, the constraint holding only its answer."""
        self._started = time.perf_counter()
        # Converted here if no validation did: syntax errors it can see raise right away.
        self.constraint = compile_constraint(constraint)
        compiled = compiled_of(self.constraint)
        assert compiled is not None
        self._thinking = thinking
        # "before" the thinking block, "thinking" inside it, or in the "answer"
        self._phase = "answer" if thinking is None else "thinking" if thinking.opened else "before"
        self.thinking_tokens = 0  # tokens inside the block, tags excluded
        self._opening_left = 0  # tokens of a several-token opening still to come
        self._recent: list[int] = []  # the block's last tokens, for an end of several
        self.thinking_cap: int | None = None  # set by _compile: where the end tag is forced
        self.thinking_forced = False  # the budget ended the block
        if thinking is not None:
            compiled = with_thinking(compiled, thinking)
        self._grammar = compiled
        self.on_pool = on_pool
        self._use_ff = forced_tokens
        self._tokenizer = tokenizer
        self._end_ids = set(ends)
        # set by _compile (on the mask thread, with the matcher)
        self._words = self._words_u32 = np.zeros(0, np.uint32)
        self._words_at = 0
        self._ends: list[tuple[int, np.uint32]] = []
        self._matcher: LLMatcher | None = None
        # figures
        self.compile_ms = 0.0
        self.forced_tokens = 0  # counted by the loop as it hands them to the reply
        self.forced_at_start = 0  # tokens the grammar forces before the first sampled one
        self.forward_passes = 0
        self.allowed = 0  # tokens the mask last collected allows (the token inspector)
        self._mask_s: list[float] = []  # matcher work per token
        self._inline_s = 0.0  # jobs run on the caller's thread: the loop stood still
        self._submitted_at = 0.0
        self._held = False  # the latest job's token waits for it before being fed
        self._token_at: list[float] = []  # on the pool: when each token was handed over ...
        self._latency_s: list[float] = []  # ... and how long its matcher job took from then
        self._held_wait_s = 0.0
        self._step: MaskStep | None = None
        self._error: str | None = None
        self._advanced = False  # a sampled token has been consumed
        self._max_tokens, self._close_loops = max_tokens, close_loops
        self._cancelled = cancelled
        self._tracker: ClosingTracker | None = None  # set by _compile, with the matcher
        self._generated = 0  # reply tokens the matcher has consumed (sampled and forced)
        self.closed_to_fit = False  # the closing began: the reply is closed to fit
        self._closed = False  # the reply ended on an ending the tracker gave
        # the latest matcher job: a Future (on the pool) or run when collected. Last: the
        # compile job reads everything above on the mask thread.
        self._inline = False  # the latest job waits to be run by collect()
        self._job: Callable[[], MaskStep] = self._compile
        self._pending: _Pending | None = mask_pool().submit(self._job)

    # ---- what the loop reads ----

    @property
    def ready(self) -> bool:
        """The latest job is done: collecting it will not wait (the grammar has compiled
        once the first one is)."""
        return self._pending is None or self._pending.done()

    @property
    def finished(self) -> bool:
        """The grammar allows no further token, or the reply ended on the tracker's ending."""
        self._drain()
        if self._closed:
            return True
        return self._step is not None and self._step.stopped and not self._error

    @property
    def closing_needed(self) -> int | None:
        """The last ending the closing policy computed, in tokens (-1: none in reach)."""
        return self._tracker.state.needed if self._tracker is not None else None

    @property
    def closing_reserve(self) -> int:
        """Tokens the closing policy kept from the model when it ended the reply: the
        ending it followed and the margin it keeps in hand (0 if it did not end it)."""
        tracker = self._tracker
        if tracker is None or not self.closed_to_fit:
            return 0
        return tracker.state.tokens + tracker.margin

    @property
    def accepting(self) -> bool:
        """The text so far is a complete match of the constraint."""
        self._drain()
        m = self._matcher
        return m is not None and not self._error and not m.is_error() and m.is_accepting()

    def fill_stats(self, stats: GenerationStats) -> None:
        """Add the constraint's figures to a reply's statistics.

        `grammar_compile_ms` runs from the constructor to the first mask. `mask_overhead_ms`
        is how long the forward passes waited for masks: for jobs run inline all of it; for
        jobs on the pool the part of each that outlasted the forward pass running beside it
        (a forward pass starts when the previous token is handed over and lasts at least
        the shortest token-to-token interval seen), plus the whole job for tokens held back
        to be fed with their forced tokens.
        """
        self._drain()
        times = np.array(self._mask_s) * 1e3
        stats.constrained = True
        stats.grammar_compile_ms = self.compile_ms
        stats.mask_mean_ms = float(times.mean()) if times.size else 0.0
        stats.mask_p99_ms = float(np.percentile(times, 99)) if times.size else 0.0
        stats.mask_overhead_ms = self._overhead_s() * 1e3
        stats.forced_tokens = self.forced_tokens
        stats.forward_passes = self.forward_passes
        if self._tracker is not None:
            state = self._tracker.state
            stats.closed_to_fit = self.closed_to_fit
            stats.close_reason = state.reason if self.closed_to_fit else ""
            stats.closing_tokens = state.tokens if self.closed_to_fit else 0
            stats.closing_checks = state.checks
            stats.close_loops = self._close_loops
            stats.steered_tokens = state.steered
            stats.loops_moved_on = state.moved_on

    def close(self, tokens: list[int]) -> None:
        """Feed the closing policy's ending to the matcher (idle: its answer was collected).
        Raises ConstraintError if the grammar rejects it."""
        matcher = self._matcher
        assert matcher is not None and self._pending is None
        if tokens and not matcher.consume_tokens(tokens):
            self._error = matcher.get_error() or "the closing tokens were rejected"
            self._raise_if_error()
        self.closed_to_fit = self._closed = True

    def begin_closing(self) -> None:
        """The closing began (a MaskStep said `fitting`): the reply is closed to fit from
        its next token on (engine thread, before that token is handed over)."""
        self.closed_to_fit = True

    def validate(self, tokens: list[int]) -> int:
        """How many of `tokens` (a draft) the grammar accepts from where the matcher is
        (idle: its latest answer collected). A draft stops before an end token: where the
        reply ends is the model's to say, token by token."""
        self._drain()
        matcher = self._matcher
        if matcher is None or self._error or matcher.is_error():
            return 0
        cut = next((i for i, t in enumerate(tokens) if t in self._end_ids), len(tokens))
        return int(matcher.validate_tokens(tokens[:cut])) if cut else 0

    # ---- matcher jobs ----

    def advance(self, token: int, *, held: bool = False) -> None:
        """Start consuming `token` (on the pool, or when collected if not `on_pool`).
        `held`: the loop waits for the answer before feeding the token."""
        job = functools.partial(self._advance, token)
        self._step = None
        self._held = held
        self._submitted_at = time.perf_counter()
        self._job = job
        self._inline = not self.on_pool
        self._pending = None if self._inline else mask_pool().submit(job)

    @staticmethod
    def advance_rows(items: list[tuple[RowConstraint, int]]) -> None:
        """Start consuming each row's token (`advance`), the rows on the pool in one job
        for all of them (`_RowsJob`): one handoff to a mask thread a step, their masks
        filled together."""
        pooled = [(row, token) for row, token in items if row.on_pool]
        for row, token in items:
            if not row.on_pool or len(pooled) == 1:
                row.advance(token)
        if len(pooled) < 2:
            return
        job = _RowsJob(pooled)
        now = time.perf_counter()
        for index, (row, _) in enumerate(pooled):
            row._step = None
            row._held = False
            row._submitted_at = now
            row._job = functools.partial(job.step, index)
            row._inline = False
            row._pending = _RowShare(job, index)

    def collect(self) -> MaskStep:
        """The latest job's MaskStep, waiting for it (or running it) if need be. Raises
        ConstraintError if the matcher failed."""
        if self._pending is None and not self._inline:
            assert self._step is not None
            return self._step
        pending, self._pending = self._pending, None
        try:
            if pending is None:  # inline: the loop stands still for it
                self._inline = False
                waited = time.perf_counter()
                step = self._job()
                self._inline_s += time.perf_counter() - waited
            else:
                # On a busy machine the mask thread may not have been scheduled yet: then
                # doing the job here beats waiting for a core to free up.
                step = self._job() if pending.cancel() else pending.result()
        except Exception as exc:  # a bug or a tokenizer llguidance cannot read: stop for good
            self._step = MaskStep(stopped=True, error=f"{type(exc).__name__}: {exc}")
            self._error = self._error or self._step.error
            raise
        if pending is not None and self._submitted_at:
            latency = max(0.0, step.ready_at - self._submitted_at)
            self._token_at.append(self._submitted_at)
            if self._held:
                self._held_wait_s += latency
            else:
                self._latency_s.append(latency)
        self._submitted_at = 0.0
        self._step = step
        self.allowed = step.allowed
        self._error = self._error or step.error
        self._raise_if_error()
        return step

    def _drain(self) -> None:
        """Let an in-flight job finish so the matcher is idle (inline jobs wait for collect)."""
        if self._pending is not None:
            try:
                self.collect()
            except Exception:  # already raised to the loop, or about to be
                pass

    def _overhead_s(self) -> float:
        if not self.on_pool:
            return self._inline_s
        latency = np.array(self._latency_s)
        if len(self._token_at) < 2:
            return float(latency.sum()) + self._held_wait_s
        shortest_forward = np.diff(np.array(self._token_at)).min()
        overlapped = np.clip(latency - shortest_forward, 0.0, None).sum()
        return float(overlapped) + self._held_wait_s

    def _compile(self) -> MaskStep:
        lltok = ll_tokenizer(self._tokenizer, self._end_ids)  # ~1 s the first time per model
        n_words = (lltok.vocab_size + 31) // 32
        self._words = np.zeros(n_words, np.int32)
        self._words_u32 = self._words.view(np.uint32)
        self._words_at = self._words.ctypes.data  # where llguidance writes (read once)
        self._ends = [
            (t >> 5, np.uint32(1 << (t & 31))) for t in sorted(self._end_ids) if t < n_words * 32
        ]
        matcher = self._grammar.matcher(lltok)  # a copy, once the grammar is compiled
        if matcher.is_error():
            return MaskStep(stopped=True, error=matcher.get_error())
        self._matcher = matcher
        if self._max_tokens is not None:
            self._tracker = ClosingTracker(
                lltok,
                self._max_tokens,
                repetition=self._close_loops,
                steering=self.constraint.kind in ("json_schema", "any_json"),
                cancelled=self._cancelled,
            )
        if self._thinking is not None:
            self.thinking_cap = self._thinking_cap(lltok, matcher)
        step = self._after_consume(time.perf_counter(), [], record=False)
        self.forced_at_start = len(step.ff)
        self.compile_ms = (time.perf_counter() - self._started) * 1e3
        return step

    def _advance(self, token: int) -> MaskStep:
        started = time.perf_counter()
        step = self._consume(token)
        if step.stopped or step.closing is not None:
            return self._finish(step, started)
        assert self._matcher is not None
        return self._finish(step, started, self._fill_mask(self._matcher))

    def _consume(self, token: int) -> MaskStep:
        """Consume `token` and what follows it up to the next mask (forced tokens, the
        thinking block's budget, the closing policy): the step, its mask not filled yet."""
        matcher = self._matcher
        assert matcher is not None
        self._advanced = True
        if not matcher.consume_token(token):
            error = matcher.get_error() or f"token {token} was rejected"
            return MaskStep(stopped=True, error=error)
        return self._before_mask([token])

    def _after_consume(self, started: float, tokens: list[int], *, record: bool = True) -> MaskStep:
        step = self._before_mask(tokens)
        if step.stopped or step.closing is not None:
            return self._finish(step, started, record=record)
        assert self._matcher is not None
        return self._finish(step, started, self._fill_mask(self._matcher), record=record)

    def _finish(
        self,
        step: MaskStep,
        started: float,
        words: np.ndarray | None = None,
        *,
        record: bool = True,
    ) -> MaskStep:
        """`step` with its mask (`words`, filled, end tokens set), its figures and time."""
        matcher = self._matcher
        if words is not None:
            step.mask = words
            step.allowed = allowed_count(words)
            step.narrow = step.allowed <= NARROW_MASK
        if matcher is not None and matcher.is_error() and step.error is None:
            step.error = matcher.get_error()
        tracker = self._answer_tracker()
        if tracker is not None:
            step.fitting = tracker.began
        step.ready_at = time.perf_counter()
        if record:
            self._mask_s.append(step.ready_at - started)
        return step

    def _before_mask(self, tokens: list[int]) -> MaskStep:
        """After the matcher consumed `tokens` (sampled: the tokens it forces next, the
        thinking block, the closing policy), the step up to its mask; stopped on an error."""
        matcher = self._matcher
        assert matcher is not None
        ff = matcher.compute_ff_tokens() if self._use_ff else []
        if ff and not matcher.consume_tokens(ff):
            return MaskStep(stopped=True, error=matcher.get_error())
        answer = tokens + ff
        if self._thinking is not None and self._phase != "answer":
            answer = self._note_thinking(tokens + ff)
            if self._phase == "thinking" and self._over_budget():
                end = list(self._thinking.end)
                if not matcher.consume_tokens(end):
                    return MaskStep(stopped=True, error=matcher.get_error())
                after = matcher.compute_ff_tokens() if self._use_ff else []
                if after and not matcher.consume_tokens(after):
                    return MaskStep(stopped=True, error=matcher.get_error())
                self.thinking_forced = True
                ff = ff + end + after
                answer = self._note_thinking(end + after)
        step = MaskStep(ff=ff, stopped=matcher.is_stopped())
        self._generated += len(tokens) + len(ff)
        tracker = self._answer_tracker()
        if not step.stopped and tracker is not None:
            step.closing = tracker.after(matcher, answer, self._generated)
        return step

    def _note_thinking(self, tokens: list[int]) -> list[int]:
        """Follow the thinking block through `tokens`; the ones after its end (the answer's).
        An end of several tokens is seen when its last one completes it (the grammar only
        takes its exact tokens); its tokens count as the block's until then."""
        thinking = self._thinking
        assert thinking is not None
        end = thinking.end
        for i, token in enumerate(tokens):
            if self._phase == "before":
                opening = thinking.opening
                self._phase = "thinking" if opening and token == opening[0] else "answer"
                self._opening_left = len(opening) - 1  # the rest of the opening
            elif self._opening_left > 0:
                self._opening_left -= 1
            else:
                self._recent = [*self._recent, token][-len(end) :]
                if tuple(self._recent) == end:
                    self._phase = "answer"
                    self.thinking_tokens -= len(end) - 1  # the end's first tokens were counted
                    return tokens[i + 1 :]
                self.thinking_tokens += 1
            if self._phase == "answer":
                return tokens[i:]
        return []

    def _over_budget(self) -> bool:
        cap = self.thinking_cap
        return cap is not None and self.thinking_tokens >= cap

    def _thinking_cap(self, lltok: Any, matcher: LLMatcher) -> int | None:
        """Thinking tokens the reply may write: its budget, and no more than leaves the
        answer room for its shortest valid ending within `max_tokens` (the end tag and
        the text it forces counted, with the closing policy's margin)."""
        thinking = self._thinking
        assert thinking is not None
        cap = thinking.max_tokens
        if self._max_tokens is None:
            return cap
        probe = matcher.deep_copy()
        head = [] if thinking.opened else list(thinking.opening)
        if not probe.consume_tokens([*head, *thinking.end]):
            return cap
        forced = probe.compute_ff_tokens()
        probe.consume_tokens(forced)
        ending = ClosingPolicy.for_tokenizer(lltok).ending(probe, self._max_tokens)
        needed = len(head) + len(thinking.end) + len(forced) + len(ending or []) + MARGIN
        room = max(0, self._max_tokens - needed)
        return room if cap is None else min(cap, room)

    def _fill_mask(self, matcher: LLMatcher) -> np.ndarray:
        matcher.unsafe_compute_mask_ptr(self._words_at, self._words.nbytes)
        return self._set_ends(matcher)

    def _answer_tracker(self) -> ClosingTracker | None:
        """The closing tracker where it follows the reply: in the answer, not its thinking."""
        return self._tracker if self._phase == "answer" else None

    def _set_ends(self, matcher: LLMatcher) -> np.ndarray:
        """The filled words narrowed by the closing tracker (steering, or holding a reply
        closed to fit to the tokens after which an ending still fits), with every end token
        allowed exactly when the grammar accepts (llguidance sets only its own EOS)."""
        words = self._words
        tracker = self._answer_tracker()
        if tracker is not None:
            tracker.narrow(matcher, self._words_u32)
        accepting = matcher.is_accepting()
        u32 = self._words_u32
        for index, bit in self._ends:
            u32[index] = (u32[index] | bit) if accepting else (u32[index] & ~bit)
        return words

    def _raise_if_error(self) -> None:
        if self._error is None:
            return
        diag = parse_message(self._error, self.constraint.kind)
        if self._error.startswith("NoExtension") and self._advanced:
            diag = Diagnostic(
                "the reply reached a dead end of the constraint: no text can "
                "continue it (a rule that can never be completed)"
            )
        label = self.constraint.name or KIND_NAMES.get(self.constraint.kind, "constraint")
        raise ConstraintError(f"{label}: {diag}", [diag])


class _RowsJob:
    """One matcher job for several rows' tokens of a step (`RowConstraint.advance_rows`):
    each row consumes its token and takes what follows it up to its mask (forced tokens,
    the closing policy: short, done in turn), then every row's mask is filled at once by
    llguidance's executor (its own threads, in parallel, without the GIL) and copied into
    the row's words. A row whose work fails gets its exception, the others their steps."""

    def __init__(self, items: list[tuple[RowConstraint, int]]) -> None:
        self._items = items
        self._lock = threading.Lock()
        self._steps: list[MaskStep | Exception] | None = None
        self._future = mask_pool().submit(self._run)

    def done(self) -> bool:
        return self._steps is not None or self._future.done()

    def step(self, index: int) -> MaskStep:
        """Row `index`'s step, waiting for the job, or running it here if no mask thread
        has started it yet (on a busy machine that beats waiting for a core)."""
        if self._future.cancel():
            self._run()
        else:
            self._future.result()
        assert self._steps is not None
        step = self._steps[index]
        if isinstance(step, Exception):
            raise step
        return step

    def _run(self) -> None:
        with self._lock:
            if self._steps is None:
                self._steps = self._advance()

    def _advance(self) -> list[MaskStep | Exception]:
        started = time.perf_counter()
        steps: list[MaskStep | Exception] = []
        filling: list[tuple[int, RowConstraint]] = []
        for index, (row, token) in enumerate(self._items):
            try:
                step = row._consume(token)
            except Exception as exc:  # this row's failure is its own
                steps.append(exc)
                continue
            steps.append(step)
            if not step.stopped and step.closing is None:
                filling.append((index, row))
        try:
            self._fill([row for _, row in filling])
        except Exception as exc:  # the rows that were to be filled have no mask
            for index, _ in filling:
                steps[index] = exc
            filling = []
        filled = {index for index, _ in filling}
        for index, (row, _) in enumerate(self._items):
            done = steps[index]
            if isinstance(done, Exception):
                continue
            try:
                assert row._matcher is not None
                words = row._set_ends(row._matcher) if index in filled else None
                steps[index] = row._finish(done, started, words)
            except Exception as exc:
                steps[index] = exc
        return steps

    @staticmethod
    def _fill(rows: list[RowConstraint]) -> None:
        """Fill every row's words: together where they are alike (one vocabulary)."""
        sizes = {row._words.size for row in rows}
        if len(rows) < 2 or len(sizes) != 1:
            for row in rows:
                assert row._matcher is not None
                row._matcher.unsafe_compute_mask_ptr(row._words_at, row._words.nbytes)
            return
        size = sizes.pop()
        buffer = np.empty((len(rows), size), np.int32)
        matchers: list[tuple[LLMatcher, int]] = []
        for k, row in enumerate(rows):
            assert row._matcher is not None
            matchers.append((row._matcher, k))
        mask_executor().unsafe_compute_mask_ptr(matchers, buffer.ctypes.data, size * 4, len(rows))
        for k, row in enumerate(rows):
            row._words[:] = buffer[k]


class _RowShare:
    """One row's part of a `_RowsJob`, as `RowConstraint.collect` reads a pending job."""

    def __init__(self, job: _RowsJob, index: int) -> None:
        self._job, self._index = job, index

    def done(self) -> bool:
        return self._job.done()

    def cancel(self) -> bool:
        return False  # the job is shared: `result` runs it here when no thread has

    def result(self) -> MaskStep:
        return self._job.step(self._index)
