"""The constrained decode loop: llguidance masks computed on a worker thread during the forward.

Each step (overlapped mode):

1. the forward pass for the sampled token y is built while y is still lazy and dispatched
   with `mx.async_eval`, like the free loop in `engine.decode`;
2. `y.item()` reads the token back and a worker thread advances the llguidance matcher
   with it and fills the next mask (llguidance releases the GIL) while the model runs and
   while the caller handles the token. (On the CPU backend `async_eval` of a whole forward
   pass blocks until it is nearly done, so there y is read back and the matcher started
   before the forward pass is dispatched.);
3. the mask is added to the logits, then penalties and the sampler run, so a masked token
   can never be sampled; the next step starts from that lazy sample.

Tokens the grammar forces (`compute_ff_tokens`) are fed in one forward pass. End tokens are
llguidance EOS tokens, allowed exactly when the grammar accepts. `serial=True` computes the
mask on the decode thread before each forward pass instead, for the benchmark.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np
from llguidance import LLMatcher

from engine.constraints import ConstraintError, Diagnostic
from engine.constraints.closing import ClosingTracker
from engine.constraints.masking import TokenMasker
from engine.constraints.tokenizer import ll_tokenizer
from engine.constraints.validate import compile_constraint, parse_message
from engine.decode import read_token
from engine.sampling import LogitsProcessor, Sampler
from engine.types import KIND_NAMES, ConstraintSpec, GenerationStats

# A mask allowing at most this many tokens marks a structural position (after a JSON value,
# inside an enum or a keyword), where forced tokens tend to follow the next token.
NARROW_MASK = 1024

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _mask_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="corral-mask")
        return _pool


@dataclass
class _Step:
    """What the matcher says after consuming a token: forced tokens, stop, the next mask."""

    ff: list[int] = field(default_factory=list)
    stopped: bool = False
    mask: np.ndarray | None = None  # prepared for TokenMasker.apply; None when stopped
    error: str | None = None
    narrow: bool = False  # few tokens allowed: forced tokens often follow the next one
    closing: list[int] | None = None  # end the reply with these tokens now (closing policy)
    ready_at: float = 0.0  # perf_counter() when the job finished


class ConstrainedDecoder:
    """One constrained reply: takes `constraint`'s compiled grammar (converting it first if
    nothing has) and decodes under its masks.

    With `max_tokens`, the closing policy (`engine.constraints.closing`) ends the reply
    validly within that many tokens when the budget runs short, or when it loops inside a
    value (`close_loops`); the tokens it adds count like the model's."""

    def __init__(
        self,
        tokenizer: Any,
        constraint: ConstraintSpec,
        ends: set[int],
        *,
        serial: bool = False,
        forced_tokens: bool = True,
        max_tokens: int | None = None,
        close_loops: bool = True,
    ) -> None:
        self._started = time.perf_counter()
        # Converted here if no validation did: syntax errors it can see raise right away.
        self.constraint = compile_constraint(constraint)
        assert self.constraint.compiled is not None
        self._grammar = self.constraint.compiled
        self.serial = serial
        self._use_ff = forced_tokens
        self._tokenizer = tokenizer
        self._end_ids = set(ends)
        # set by _compile (on the mask thread, with the matcher)
        self._words = self._words_u32 = np.zeros(0, np.uint32)
        self._ends: list[tuple[int, np.uint32]] = []
        self._masker: TokenMasker | None = None
        self._cpu = mx.default_device() == mx.cpu
        self._matcher: LLMatcher | None = None
        # figures
        self.compile_ms = 0.0
        self.forced_tokens = 0
        self.forward_passes = 0
        self._mask_s: list[float] = []  # matcher work per token
        self._serial_wait_s = 0.0  # serial: the loop stands still for every mask
        self._submitted_at = 0.0
        self._deferred = False  # the latest job's token waits for it before being fed
        self._token_at: list[float] = []  # overlapped: when each token was read back ...
        self._latency_s: list[float] = []  # ... and how long its matcher job took from then
        self._deferred_wait_s = 0.0
        # the latest matcher job: a Future (overlapped) or a callable run on demand (serial)
        self._pending: Future[_Step] | Callable[[], _Step] | None = None
        self._step: _Step | None = None
        self._ff_left = 0
        self._error: str | None = None
        self._advanced = False  # a sampled token has been consumed
        self._max_tokens, self._close_loops = max_tokens, close_loops
        self._tracker: ClosingTracker | None = None  # set by _compile, with the matcher
        self._generated = 0  # reply tokens the matcher has consumed (sampled and forced)
        self.closed_to_fit = False  # the reply ended on the closing policy's tokens
        self._closing_left = 0
        self._job: Callable[[], _Step] = self._compile
        self._pending = self._job if serial else _mask_pool().submit(self._job)

    # ---- what the caller reads ----

    @property
    def finished(self) -> bool:
        """The matcher is stopped and every token it forced has been yielded."""
        if self._pending is not None:
            self._collect()
        step = self._step
        if self.closed_to_fit:
            return not self._closing_left and not self._ff_left
        return step is not None and step.stopped and not self._ff_left and not self._error

    @property
    def accepting(self) -> bool:
        """The text so far is a complete match of the constraint."""
        if self._pending is not None:
            self._collect()
        m = self._matcher
        return m is not None and not self._error and not m.is_error() and m.is_accepting()

    def fill_stats(self, stats: GenerationStats) -> None:
        """Add the constraint's figures to a reply's statistics.

        `grammar_compile_ms` runs from the constructor to the first mask. `mask_overhead_ms`
        is how long the forward passes waited for masks: in the serial loop every mask; in
        the overlapped loop the part of each matcher job that outlasted the forward pass
        running beside it (a forward pass starts when the previous token is read back and
        lasts at least the shortest token-to-token interval seen), plus the whole job for
        tokens held back to be fed with their forced tokens.
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

    @property
    def closing_needed(self) -> int | None:
        """The last ending the closing policy computed, in tokens (-1: none in reach)."""
        return self._tracker.state.needed if self._tracker is not None else None

    # ---- the loop ----

    def decode(
        self,
        model: Any,
        cache: list[Any],
        first: list[int],
        fed: list[int],
        *,
        sampler: Sampler,
        processors: list[LogitsProcessor],
        history: list[int],
    ) -> Generator[int, None, None]:
        """Yield token ids under the constraint, starting by feeding `first` (the prompt's tail).

        Every token fed to the model is appended to `fed`. Raises ConstraintError if the
        constraint does not compile or the matcher fails.
        """
        context = mx.array(history if processors else [], dtype=mx.int32)

        def forward(tokens: list[int] | mx.array) -> mx.array:
            nonlocal context
            x = tokens if isinstance(tokens, mx.array) else mx.array(tokens, dtype=mx.int32)
            self.forward_passes += 1
            if processors:
                context = mx.concatenate([context, x])
            logits: mx.array = model(x[None], cache=cache)[:, -1, :]
            return logits

        def sample(logits: mx.array, mask: np.ndarray) -> mx.array:
            assert self._masker is not None
            logits = self._masker.apply(logits, mask)  # first: nothing below can revive a token
            for process in processors:
                logits = process(context, logits)
            return sampler(logits - mx.logsumexp(logits, axis=-1, keepdims=True))

        loop = self._serial_loop if self.serial else self._overlapped_loop
        try:
            yield from loop(forward, sample, list(first), fed)
        finally:
            self._drain()

    def _overlapped_loop(
        self,
        forward: Callable[..., mx.array],
        sample: Callable[..., mx.array],
        first: list[int],
        fed: list[int],
    ) -> Iterator[int]:
        logits = forward(first)
        mx.async_eval(logits)
        fed.extend(first)
        step = self._collect()  # compile and first mask, during that forward
        held: list[int] = []  # a sampled token not fed yet, to go with its forced tokens
        n = 0
        while True:
            self._raise_if_error()
            if held or step.ff:
                if not step.stopped and step.closing is None:
                    inputs = held + step.ff
                    logits = forward(inputs)
                    mx.async_eval(logits)
                    fed.extend(inputs)
                held = []
                yield from self._forced(step.ff)
            if step.closing is not None:
                yield from self._close(step.closing)
                return
            if step.stopped:
                return
            y = sample(logits, step.mask)
            if step.narrow:
                # Forced tokens often follow here: wait for the matcher and feed the token
                # with them in one forward pass rather than speculating on it alone.
                token = read_token(y)
                self._submit(token, deferred=True)
                held = [token]
                yield token
                step = self._collect()
                continue
            logits = forward(y)  # built before y is read back, as in decode_free
            if self._cpu:
                # async_eval blocks on the CPU backend until the forward pass is nearly done:
                # read the token first so that the matcher runs during the forward pass.
                mx.async_eval(y)
                token = read_token(y)
                self._submit(token)
                mx.async_eval(logits)
            else:
                mx.async_eval(y, logits)
                token = read_token(y)
                self._submit(token)
            fed.append(token)
            yield token
            step = self._collect()
            n += 1
            if n % 256 == 0:
                mx.clear_cache()

    def _serial_loop(
        self,
        forward: Callable[..., mx.array],
        sample: Callable[..., mx.array],
        first: list[int],
        fed: list[int],
    ) -> Iterator[int]:
        step = self._collect()
        self._serial_wait_s = 0.0  # compilation is reported on its own
        inputs = first
        n = 0
        while True:
            self._raise_if_error()
            if step.ff:
                inputs = inputs + step.ff  # fed with the next forward pass, if any
                yield from self._forced(step.ff)
            if step.closing is not None:
                yield from self._close(step.closing)
                return
            if step.stopped:
                return
            logits = forward(inputs)
            fed.extend(inputs)
            token = read_token(sample(logits, step.mask))
            inputs = [token]
            self._submit(token)
            yield token
            step = self._collect()
            n += 1
            if n % 256 == 0:
                mx.clear_cache()

    def _close(self, tokens: list[int]) -> Iterator[int]:
        """End the reply on the closing policy's tokens (the matcher is idle between jobs)."""
        matcher = self._matcher
        assert matcher is not None
        if tokens and not matcher.consume_tokens(tokens):
            self._error = matcher.get_error() or "the closing tokens were rejected"
            self._raise_if_error()
        self.closed_to_fit = True
        self._closing_left = len(tokens)
        for token in tokens:
            self._closing_left -= 1
            yield token

    def _forced(self, ff: list[int]) -> Iterator[int]:
        """Hand the caller the grammar's forced tokens, counting them."""
        for token in ff:
            self._ff_left -= 1
            self.forced_tokens += 1
            yield token

    # ---- matcher jobs (mask thread in overlapped mode) ----

    def _submit(self, token: int, *, deferred: bool = False) -> None:
        job = functools.partial(self._advance, token)
        self._step = None
        self._deferred = deferred
        self._submitted_at = time.perf_counter()
        self._job = job
        self._pending = job if self.serial else _mask_pool().submit(job)

    def _collect(self) -> _Step:
        """Wait for the latest matcher job (or run it, in serial mode) and take its result."""
        pending, self._pending = self._pending, None
        if pending is None:
            assert self._step is not None
            return self._step
        try:
            if isinstance(pending, Future):
                # On a busy machine the mask thread may not have been scheduled yet: then
                # doing the job here beats waiting for a core to free up.
                step = self._job() if pending.cancel() else pending.result()
            else:
                waited = time.perf_counter()
                step = pending()
                self._serial_wait_s += time.perf_counter() - waited
        except Exception as exc:  # a bug or a tokenizer llguidance cannot read: stop for good
            self._step = _Step(stopped=True, error=f"{type(exc).__name__}: {exc}")
            self._error = self._error or self._step.error
            raise
        if isinstance(pending, Future) and self._submitted_at:
            latency = max(0.0, step.ready_at - self._submitted_at)
            self._token_at.append(self._submitted_at)
            if self._deferred:
                self._deferred_wait_s += latency
            else:
                self._latency_s.append(latency)
        self._submitted_at = 0.0
        self._step = step
        self._ff_left = len(step.ff)
        self._error = self._error or step.error
        return step

    def _drain(self) -> None:
        """Let an in-flight job finish so the matcher is idle (serial jobs run lazily)."""
        if isinstance(self._pending, Future):
            try:
                self._collect()
            except Exception:  # already raised to the caller, or about to be
                pass

    def _overhead_s(self) -> float:
        if self.serial:
            return self._serial_wait_s
        latency = np.array(self._latency_s)
        if len(self._token_at) < 2:
            return float(latency.sum()) + self._deferred_wait_s
        shortest_forward = np.diff(np.array(self._token_at)).min()
        overlapped = np.clip(latency - shortest_forward, 0.0, None).sum()
        return float(overlapped) + self._deferred_wait_s

    def _compile(self) -> _Step:
        lltok = ll_tokenizer(self._tokenizer, self._end_ids)  # ~1 s the first time per model
        n_words = (lltok.vocab_size + 31) // 32
        self._words = np.zeros(n_words, np.int32)
        self._words_u32 = self._words.view(np.uint32)
        self._ends = [
            (t >> 5, np.uint32(1 << (t & 31))) for t in sorted(self._end_ids) if t < n_words * 32
        ]
        self._masker = TokenMasker(n_words)
        matcher = self._grammar.matcher(lltok)  # a copy, once the grammar is compiled
        if matcher.is_error():
            return _Step(stopped=True, error=matcher.get_error())
        self._matcher = matcher
        if self._max_tokens is not None:
            self._tracker = ClosingTracker(lltok, self._max_tokens, repetition=self._close_loops)
        step = self._after_consume(time.perf_counter(), [], record=False)
        self.compile_ms = (time.perf_counter() - self._started) * 1e3
        return step

    def _advance(self, token: int) -> _Step:
        started = time.perf_counter()
        matcher = self._matcher
        assert matcher is not None
        self._advanced = True
        if not matcher.consume_token(token):
            return _Step(stopped=True, error=matcher.get_error() or f"token {token} was rejected")
        return self._after_consume(started, [token])

    def _after_consume(self, started: float, tokens: list[int], *, record: bool = True) -> _Step:
        matcher = self._matcher
        assert matcher is not None
        ff = matcher.compute_ff_tokens() if self._use_ff else []
        if ff and not matcher.consume_tokens(ff):
            return _Step(stopped=True, error=matcher.get_error())
        step = _Step(ff=ff, stopped=matcher.is_stopped())
        self._generated += len(tokens) + len(ff)
        if not step.stopped and self._tracker is not None:
            step.closing = self._tracker.after(matcher, tokens + ff, self._generated)
        if not step.stopped and step.closing is None:
            step.mask = self._fill_mask(matcher)
            step.narrow = not self.serial and _allowed(self._words_u32) <= NARROW_MASK
        if matcher.is_error():
            step.error = matcher.get_error()
        step.ready_at = time.perf_counter()
        if record:
            self._mask_s.append(step.ready_at - started)
        return step

    def _fill_mask(self, matcher: LLMatcher) -> np.ndarray:
        words = self._words
        matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
        # every end token exactly when the grammar accepts (llguidance sets only its own EOS)
        accepting = matcher.is_accepting()
        u32 = self._words_u32
        for index, bit in self._ends:
            u32[index] = (u32[index] | bit) if accepting else (u32[index] & ~bit)
        assert self._masker is not None
        return self._masker.prepare(words)

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


def _allowed(words: np.ndarray) -> int:
    """How many tokens a packed mask allows."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return int(np.bitwise_count(words).sum())
    return int(np.unpackbits(words.view(np.uint8)).sum())
