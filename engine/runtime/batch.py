"""The decode loop: every reply in flight advances by one model forward pass per step.

Each step, for the rows of the batch together:

1. one forward pass: each row feeds the token it sampled last step (still lazy: the pass
   is built before that token is read back, as in mlx-lm's `generate_step`) or tokens it
   already knows (the prompt's last token when it joins, tokens its grammar forced);
2. the tokens sampled last step are read back and handed to their replies (text, stop
   strings, limits) and to their rows' matchers, whose masks for the next token are
   computed on the mask pool while the forward pass runs, all rows' in one job, their
   masks filled together by llguidance's executor (`engine.constraints.row`);
3. the rows' packed masks go to the device as one small array and are applied there, in
   the graph that samples (`engine.constraints.masking`), then each row's penalties and its
   own sampler (settings, seeded key) pick its next token;
4. finished, cancelled and failed rows leave with their own KV state; rows whose prompts
   are ready join (`join`), merged into the batch's cache.

A row alone keeps mlx-lm's plain KV cache, so a single reply runs the same single-row
forward pass as before batching; from two rows on, the caches are merged into mlx-lm's
batch caches (`BatchKVCache`: rows left-padded to a common length). Forced tokens save
work: a row feeds all of them in one step, the rows with fewer tokens right-padded
(`prepare`/`finalize`, as mlx-lm's batched prefill does), where the wider pass costs
little (a GPU); where it costs about its width (a CPU, as `PassCost` learns), one row's
forced tokens are fed a few or one a step instead of making every row's step wide
(`_width`). Alone, a row whose mask was narrow waits for its matcher, to feed its next
token together with the tokens forced after it rather than spend a forward pass on it
alone.

Speculative decoding (`engine.runtime.speculative`) rides on the same mechanism: a speculating row
reads its token at the end of the step, then feeds it with a draft of the tokens expected
after it (checked first by its grammar); the logits of every fed position verify the draft
(`_verify_drafts`), and the rejected positions leave the KV cache and `fed`. Only the
engine thread runs this.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any, Protocol, cast

import mlx.core as mx
import numpy as np
from mlx_lm.models import cache as mlx_cache

from engine.constraints.masking import PackedMasks, allows, apply_masks, metal_available
from engine.constraints.row import RowConstraint
from engine.memory.shared_prefix import SharedPrefixKVCache, plain_layer
from engine.memory.store import KVState
from engine.runtime.logprobs import BatchLogprobs, RowLogprobs
from engine.runtime.sampling import LogitsProcessor, RowSampler
from engine.runtime.speculative import PassCost, Speculator, rollback_cache
from engine.types import StopReason

# Batch caches that can take rows of different lengths in one step (right padding).
_PADDABLE = tuple(
    getattr(mlx_cache, name)
    for name in ("BatchKVCache", "BatchRotatingKVCache")
    if hasattr(mlx_cache, name)
)


# A lone row's caches that drop rejected draft positions exactly.
_TRIMMABLE_ALONE = (mlx_cache.KVCache, mlx_cache.QuantizedKVCache, SharedPrefixKVCache)


class RowOwner(Protocol):
    """Whoever a row decodes for (a reply): takes its tokens and may cancel it."""

    @property
    def cancelled(self) -> bool: ...

    def take(self, token: int) -> StopReason | None:
        """A token of the reply, sampled or forced; a reason ends the row."""
        ...

    def forced_token(self) -> int | None:
        """A token the reply must take next whatever the model samples (the end of a
        thinking block whose budget is spent), or None."""
        ...


class DecodeRow:
    """One reply in the batch: its KV state, what it feeds next, how it picks tokens.

    `fed` always holds exactly the tokens whose KV state has been computed (or is being
    computed by the forward pass in flight), so the prompt cache can keep the row's cache.
    """

    def __init__(
        self,
        owner: RowOwner,
        cache: KVState,
        fed: list[int],
        tail: list[int],
        *,
        sampler: RowSampler,
        processors: list[LogitsProcessor] | None = None,
        constraint: RowConstraint | None = None,
        row_logprobs: RowLogprobs | None = None,
        speculator: Speculator | None = None,
        rope_delta: int = 0,
    ) -> None:
        """`cache` holds `fed` (the prompt but `tail`, its last token(s), fed when joining).
        `rope_delta`: where a prompt's images moved the rotary positions (Qwen-VL), the
        offset the row's tokens continue at (position = tokens before + delta).
        `row_logprobs` records each token's log-probabilities (`engine.runtime.logprobs`). A
        `speculator` drafts tokens to verify (not with `processors`, which read the tokens
        one by one, nor while it records logprobs, which takes one sampled token per step)."""
        self.owner = owner
        self.cache: KVState | None = cache  # its own until it joins; given back when it leaves
        self.fed = fed
        self.pending = list(tail)  # tokens to feed next step
        self.sampled = False  # the batch's last samples hold a token of this row, unread
        self.sampler = sampler
        self.processors = processors or []
        self.context = mx.array(fed, dtype=mx.uint32) if self.processors else None
        self.constraint = constraint
        self.speculator = speculator if not self.processors and row_logprobs is None else None
        self.draft: list[int] = []  # draft tokens at the end of the tokens fed this step
        self.position = 0  # of the token this step's last fed position predicts
        self.awaiting = constraint is not None  # a matcher job whose answer is not taken
        self.mask: np.ndarray | None = None  # what its next token is sampled under
        self.narrow = False
        self.at_limit = False  # its last allowed token is out; its matcher says how it ended
        self.stop_reason: StopReason | None = None
        self.error: Exception | None = None
        self.row_logprobs = row_logprobs
        self.rope_delta = rope_delta

    def finish(self, reason: StopReason, error: Exception | None = None) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.error = reason, error

    @property
    def done(self) -> bool:
        return self.stop_reason is not None


def can_batch(cache: KVState) -> bool:
    """Whether rows with caches like `cache` can share a batch (mlx-lm can merge them)."""
    return all(hasattr(c, "merge") for c in cache)


class DecodeBatch:
    """The rows decoding together and their shared KV cache (engine thread only).

    `overlap=False` is the benchmark's serial baseline: masks are computed after the
    forward pass, on the decode thread, and nothing is held back for forced tokens.
    """

    def __init__(self, model: Any, *, overlap: bool = True, cost: PassCost | None = None) -> None:
        """`cost` is where step times are learnt (kept by the engine across batches)."""
        self.model = model
        self.overlap = overlap
        self.rows: list[DecodeRow] = []
        self.cache: KVState | None = None  # one row: its plain cache; more: mlx-lm batch caches
        self._y: mx.array | None = None  # last step's samples, one per row (unsampled rows: 0)
        self._joining: list[DecodeRow] = []
        self._left: list[DecodeRow] = []  # rows that ended before their first step
        self._cpu = mx.default_device() == mx.cpu
        self._metal_masks = metal_available()
        self._packed = PackedMasks()  # several rows' masks, a buffer kept across steps
        self._steps = 0
        # the log-probabilities of the tokens of the rows that record them
        self._logprobs = BatchLogprobs()
        self.cost = cost or PassCost()  # how much a wider step costs, for the speculators
        self._step_started = 0.0
        self._last_step: tuple[float, tuple[int, int]] | None = None  # start, (rows, width)
        self._draft_logits: dict[int, mx.array] = {}  # row index -> logits of its draft

    @property
    def size(self) -> int:
        """Rows decoding or about to join."""
        return len(self.rows) + len(self._joining)

    @property
    def busy(self) -> bool:
        """Rows decode, join or wait to be handed back by `step`."""
        return bool(self.rows or self._joining or self._left)

    @property
    def nbytes(self) -> int:
        """Bytes held by the batch's KV cache."""
        return sum(int(c.nbytes) for c in self.cache or [])

    def join(self, row: DecodeRow) -> None:
        """Add `row` at the next step. A grammar that forces the reply's first tokens has
        them fed with the prompt's last token."""
        if row.constraint is not None and row.constraint.ready:
            self._take_mask_step(row)
        (self._left if row.done else self._joining).append(row)

    def step(self) -> list[DecodeRow]:
        """Advance every row by one forward pass. Returns the rows that ended, each with
        its own KV state in `cache` (holding `fed`, maybe one token more)."""
        self._merge_joining()
        if not self.rows:
            self._last_step = None
            return self._leave()
        self._time_step()
        logits = self._forward()
        previous = self._y
        if self._masks_known():
            # No mask to wait for (no constraint, or every constrained row's mask for this
            # position is in: it fed forced tokens, or was held for its matcher): the whole
            # step is known, start it now, in one evaluation with its recorded figures.
            masks = [
                row.mask if row.constraint is not None and _samples(row) else None
                for row in self.rows
            ]
            self._y = self._sample(logits, masks if any(m is not None for m in masks) else None)
            mx.async_eval(self._y, *self._logprobs.started())
            self._hand_over(self._read(previous))
            self._force()
            self._verify_drafts()
        else:
            # Matchers get the tokens as early as possible, to work during the forward
            # pass. (On the CPU backend async_eval blocks until the forward pass is nearly
            # done: read the tokens before it.)
            tokens = self._read(previous) if self._cpu else None
            mx.async_eval(logits)
            if tokens is None:
                tokens = self._read(previous)
            if not self.overlap:
                mx.eval(logits)  # serial baseline: matchers start after the forward pass
            self._hand_over(tokens)
            for row in self.rows:
                if row.awaiting and not row.done:
                    self._take_mask_step(row)
            self._verify_drafts()
            masks = [row.mask if _samples(row) else None for row in self.rows]
            self._y = self._sample(logits, masks)
            self._force()
            # sampling (and the recorded figures) run while this thread goes on to the next step
            mx.async_eval(self._y, *self._logprobs.started())
        for row in self.rows:
            row.sampled = _samples(row)
        if self.overlap and len(self.rows) == 1 and self.rows[0].sampled and self.rows[0].narrow:
            self._hold(self.rows[0])
        self._draft_rows()
        self._steps += 1
        if self._steps % 256 == 0:
            mx.clear_cache()
        return self._leave()

    def abandon(self) -> list[DecodeRow]:
        """Every row, without its KV state (after a failed forward pass nothing in the
        batch's cache can be trusted); the batch is empty afterwards."""
        rows = self.rows + self._joining + self._left
        for row in rows:
            row.cache = None
        self.rows, self._joining, self._left = [], [], []
        self.cache, self._y = None, None
        return rows

    # ---- the parts of a step ----

    def _masks_known(self) -> bool:
        """Whether no row's sampling this step waits for a matcher: no constrained row has a
        token to hand its matcher (sampled last step) or an answer to collect, and no row
        verifies a draft (verification may end a row or queue tokens before sampling)."""
        constrained = [row for row in self.rows if row.constraint is not None]
        if not constrained:
            return True
        if any(row.draft for row in self.rows):
            return False
        return not any(row.sampled or row.awaiting for row in constrained)

    def _forward(self) -> mx.array:
        """Build the forward pass of every row's next input; the logits of each row's last
        fed position (rows, vocab), lazy."""
        rows = self.rows
        assert self.cache is not None
        can_pad = len(rows) == 1 or isinstance(self.cache[0], _PADDABLE)
        width = self._width() if can_pad else 1
        inputs = self._y[:, None] if self._y is not None else None
        counts = [1] * len(rows)
        if any(row.pending for row in rows):
            known = np.zeros((len(rows), width), np.uint32)
            for i, row in enumerate(rows):
                take, row.pending = row.pending[:width], row.pending[width:]
                known[i, : len(take)] = take
                row.fed.extend(take)
                counts[i] = len(take) or 1
            from_y = np.array([[row.sampled] for row in rows])
            if inputs is not None and from_y.any():
                first = mx.array(from_y) & (mx.arange(width) == 0)
                inputs = mx.where(first, inputs, mx.array(known))
            else:
                inputs = mx.array(known)
        assert inputs is not None, "every row feeds a sampled or a known token"
        for i, row in enumerate(rows):
            if row.processors:
                assert row.context is not None
                row.context = mx.concatenate([row.context, inputs[i, : counts[i]]])
            if row.constraint is not None:
                row.constraint.forward_passes += 1
        padding = [width - n for n in counts]
        if max(padding):  # shorter rows are right-padded, then realigned (mlx-lm's prefill)
            for c in self.cache:  # (rotating batch caches need each row's real length)
                c.prepare(right_padding=padding, lengths=counts)
        if any(row.rope_delta for row in rows):  # images moved some rows' positions
            deltas = mx.array([row.rope_delta for row in rows])
            out: mx.array = self.model(inputs, cache=self.cache, rope_deltas=deltas)
        else:
            out = self.model(inputs, cache=self.cache)
        if max(padding):
            for c in self.cache:
                c.finalize()
        if any(row.row_logprobs is not None for row in rows):
            self._logprobs.forward(rows, out, counts)
        self._draft_logits = {}
        for i, row in enumerate(rows):
            row.position = len(row.fed) + row.sampled  # a sampled input is not in `fed` yet
            if row.draft:  # every position from the one predicting the draft's first token
                self._draft_logits[i] = out[i, counts[i] - 1 - len(row.draft) : counts[i]]
        self._last_step = (self._step_started, (len(rows), width))
        if width == 1:
            return out[:, -1, :]
        return out[mx.arange(len(rows)), mx.array(counts) - 1]

    def _width(self) -> int:
        """Tokens the widest row feeds this step. Rows with known tokens to feed (forced by
        their grammar, a draft, a prompt's tail) feed several at once, and every other row
        is padded to the widest: on a GPU a wider pass costs about what one token's does,
        on a CPU about its width times (padding included). Of the widths that feed no
        draft in part (its logits verify it), the one feeding the most tokens per unit of
        a pass's cost, as `PassCost` has timed it, is taken; the rest wait a step."""
        rows = self.rows
        wants = [max(len(row.pending), 1) for row in rows]
        widest = max(wants)
        if widest == 1 or len(rows) == 1:
            return widest
        least = max((len(row.pending) for row in rows if row.draft), default=1)
        best, best_rate = widest, sum(wants) / self.cost.relative(len(rows), widest)
        for width in range(widest - 1, least - 1, -1):
            rate = sum(min(n, width) for n in wants) / self.cost.relative(len(rows), width)
            if rate > best_rate:
                best, best_rate = width, rate
        return best

    def _read(self, y: mx.array | None) -> list[int]:
        """Wait for last step's samples; start each constrained row's matcher on its token."""
        rows = self.rows
        self._logprobs.read(self._steps)  # figures computed with `y`: ready with it
        if y is None or not any(row.sampled for row in rows):
            return []
        tokens: list[int] = y.tolist()  # type: ignore[assignment]
        advancing: list[tuple[RowConstraint, int]] = []
        for row, token in zip(rows, tokens, strict=True):
            if row.sampled:
                row.fed.append(token)
                if row.constraint is not None:
                    advancing.append((row.constraint, token))
                    row.awaiting = True
        if advancing:  # the rows' matchers in one job: their masks filled together
            RowConstraint.advance_rows(advancing)
        return tokens

    def _hand_over(self, tokens: list[int]) -> None:
        """Give each row's sampled token to its reply, which may end it; end cancelled rows."""
        for i, row in enumerate(self.rows):
            if row.owner.cancelled:
                row.finish(StopReason.CANCELLED)
            elif row.sampled:
                self._give(row, tokens[i])

    def _take_mask_step(self, row: DecodeRow) -> None:
        """Take the answer of `row`'s matcher: forced tokens (handed to the reply and fed
        next), the end of the grammar (its own, or the closing policy's ending), and the
        mask its next token is sampled under."""
        constraint = row.constraint
        assert constraint is not None
        row.awaiting = False
        try:
            step = constraint.collect()
        except Exception as exc:  # this reply's grammar failed; the others go on
            row.finish(StopReason.ERROR, exc)
            return
        if row.owner.cancelled:  # cancelled while its matcher worked (a closing can take long)
            row.finish(StopReason.CANCELLED)
            return
        if row.at_limit:  # its last token: a complete reply if the grammar ended with it
            ended = step.stopped or step.closing == []
            row.finish(StopReason.EOS if ended else StopReason.LENGTH)
            return
        for i, token in enumerate(step.ff):
            if self._give(row, token, ends_grammar=step.stopped and i == len(step.ff) - 1):
                return
            constraint.forced_tokens += 1
        if step.closing is not None:
            try:
                constraint.close(step.closing)
            except Exception as exc:
                row.finish(StopReason.ERROR, exc)
                return
            for i, token in enumerate(step.closing):
                if self._give(row, token, ends_grammar=i == len(step.closing) - 1):
                    return
            row.finish(StopReason.EOS)
            return
        if step.stopped:
            row.finish(StopReason.EOS)
        row.pending += step.ff
        row.mask, row.narrow = step.mask, step.narrow

    def _give(self, row: DecodeRow, token: int, *, ends_grammar: bool = False) -> bool:
        """Hand `token` to `row`'s reply; True if the row is done with it. A constrained
        reply reaching its length limit on a sampled token waits for its matcher: if the
        grammar ended with that token, the reply is complete (`at_limit`)."""
        if row.done or row.at_limit:
            return True
        try:
            reason = row.owner.take(token)
        except Exception as exc:  # the reply's own failure ends it alone
            row.finish(StopReason.ERROR, exc)
            return True
        if reason is StopReason.LENGTH and ends_grammar:
            reason = StopReason.EOS  # the grammar's own end, on the budget's last token
        elif reason is StopReason.LENGTH and row.constraint is not None and row.awaiting:
            row.at_limit = True  # the matcher's answer for this token decides
            return True
        if reason is not None:
            row.finish(reason)
        return row.done

    def _sample(self, logits: mx.array, masks: list[np.ndarray | None] | None) -> mx.array:
        """Each row's next token from `logits` (rows, vocab), lazy: masks first (nothing
        below can revive a masked token), then each row's penalties and sampler."""
        rows = self.rows
        raw = logits
        if masks is not None and any(m is not None for m in masks):
            logits = apply_masks(logits, masks, use_metal=self._metal_masks, packed=self._packed)
        if any(row.processors for row in rows):
            parts = []
            for i, row in enumerate(rows):
                part = logits[i : i + 1]
                for process in row.processors:
                    assert row.context is not None
                    part = process(row.context, part)
                parts.append(part)
            logits = mx.concatenate(parts)
        if all(row.sampler.greedy for row in rows):  # one argmax, nothing to normalize
            y = mx.argmax(logits, axis=-1)
        else:
            y = mx.concatenate(
                [row.sampler(logits[i : i + 1], row.position) for i, row in enumerate(rows)]
            )
        if any(row.row_logprobs is not None for row in rows):
            self._logprobs.sample(rows, raw, logits, y, self._steps)
        return y

    def _force(self) -> None:
        """Replace the samples of rows whose replies must take a given token next (their
        thinking budget is spent): the token read back and fed next is that one. Rows under
        a constraint have their matcher force it instead."""
        rows = self.rows
        forced = [
            (i, token)
            for i, row in enumerate(rows)
            if row.constraint is None
            and _samples(row)
            and (token := row.owner.forced_token()) is not None
        ]
        if not forced or self._y is None:
            return
        where = np.zeros(len(rows), bool)
        values = np.zeros(len(rows), np.uint32)
        for i, token in forced:
            where[i], values[i] = True, token
        self._y = mx.where(mx.array(where), mx.array(values).astype(self._y.dtype), self._y)
        mx.async_eval(self._y)

    def _hold(self, row: DecodeRow) -> None:
        """Alone, at a narrow mask: read the token now and wait for its matcher, so that it
        is fed together with the tokens forced after it (usually some follow)."""
        assert row.constraint is not None and self._y is not None
        token = cast(int, self._y.item())
        row.sampled = False
        row.constraint.advance(token, held=True)
        row.awaiting = True
        if self._give(row, token):
            return
        row.pending = [token]
        self._take_mask_step(row)

    # ---- speculative decoding ----

    def _speculation_ok(self) -> bool:
        """Whether the batch's cache can drop a row's rejected positions: a lone row's plain,
        quantized or shared-prefix KV cache, or mlx-lm's batch KV cache (not rotating caches)."""
        cache = self.cache
        if not cache:
            return False
        if len(self.rows) == 1:
            return all(type(c) in _TRIMMABLE_ALONE for c in cache)
        return all(type(c) is mlx_cache.BatchKVCache for c in cache)

    def _draft_rows(self) -> None:
        """Each speculating row reads its token now (if it sampled one) and queues a draft
        of the tokens expected after it, cut to what its grammar accepts."""
        if not any(row.speculator is not None for row in self.rows):
            return
        ok = self._speculation_ok()
        sampled: list[int] | None = None  # the batch's samples, read once for every row
        for i, row in enumerate(self.rows):
            spec = row.speculator
            if spec is None or row.done or row.at_limit:
                continue
            if not ok or not spec.active:
                spec.wait()
                continue
            if row.sampled:  # its token is in the batch's samples: read it to draft after it
                if sampled is None:
                    assert self._y is not None
                    sampled = cast(list[int], self._y.tolist())
                self._read_now(row, sampled[i])
                if row.done or row.at_limit or row.awaiting:
                    continue
            constraint = row.constraint
            draft = spec.draft(
                row.fed + row.pending,
                self.cost,
                len(self.rows),
                constraint.validate if constraint is not None else None,
            )
            if draft:
                row.draft = draft
                row.pending += draft
            else:
                spec.no_draft()

    def _read_now(self, row: DecodeRow, token: int) -> None:
        """Take `row`'s sampled `token`, read at once, as the next token to feed."""
        row.sampled = False
        self._take(row, token, fed=False)

    def _take(self, row: DecodeRow, token: int, *, fed: bool) -> None:
        """Give `token` to `row`'s reply and matcher, waiting for the matcher's answer (its
        forced tokens go to `pending`). `fed`: its KV state is computed (a kept draft
        token); otherwise it is fed next."""
        if row.constraint is not None:
            row.constraint.advance(token, held=True)
            row.awaiting = True
        if self._give(row, token):
            if row.at_limit and row.awaiting:
                self._take_mask_step(row)  # the matcher says how the reply ended
            return
        if not fed:
            row.pending = [token]
        if row.constraint is not None:
            self._take_mask_step(row)

    def _verify_drafts(self) -> None:
        """Keep each row's draft tokens up to the first one the model disagrees with, take
        the model's own token after them, and drop the rest from the cache and `fed`."""
        if not self._draft_logits:
            return
        rejected = [0] * len(self.rows)
        choices = self._model_choices()
        for i, logits in self._draft_logits.items():
            row = self.rows[i]
            draft, row.draft = row.draft, []
            kept = 0 if row.done else self._verify(row, logits, draft, choices.get(i))
            rejected[i] = len(draft) - kept
            assert row.speculator is not None
            row.speculator.verified(len(draft), kept)
        self._draft_logits = {}
        if any(rejected):
            assert self.cache is not None
            rollback_cache(self.cache, rejected, batched=len(self.rows) > 1)
            for row, n in zip(self.rows, rejected, strict=True):
                if n:
                    del row.fed[-n:]

    def _model_choices(self) -> dict[int, list[int]]:
        """For each row verifying a draft, the token its sampler picks at every fed
        position before any mask, all rows' read back in one synchronisation (instead of
        one per position). Exact where `_verify` uses them: a row without a constraint
        samples exactly this; a greedy row's argmax is the masked argmax whenever its mask
        allows it (masking only lowers other tokens to -inf). Constrained rows that sample
        at a temperature are left out (a mask changes what top-p/min-p keep)."""
        parts: list[mx.array] = []
        spans: list[tuple[int, int]] = []
        for i, logits in self._draft_logits.items():
            row = self.rows[i]
            if row.done or (row.constraint is not None and not row.sampler.greedy):
                continue
            n = logits.shape[0]
            if row.sampler.greedy:
                parts.append(mx.argmax(logits, axis=-1))
            else:
                base = row.position - len(row.draft)
                parts += [row.sampler(logits[j : j + 1], base + j) for j in range(n)]
            spans.append((i, n))
        if not parts:
            return {}
        flat = cast(list[int], mx.concatenate(parts).tolist())
        choices, at = {}, 0
        for i, n in spans:
            choices[i], at = flat[at : at + n], at + n
        return choices

    def _verify(
        self, row: DecodeRow, logits: mx.array, draft: list[int], choices: list[int] | None
    ) -> int:
        """Walk `row`'s fed draft with the model's logits (one row per position, from the
        one predicting the draft's first token): how many draft tokens it keeps.
        `choices`: the model's unmasked token at each position (`_model_choices`)."""
        base = row.position - len(draft)
        kept = 0
        while True:
            masked = row.constraint is not None and row.mask is not None
            token = -1
            if choices is not None:
                token = choices[kept]
                if masked and not allows(row.mask, token):
                    token = -1  # the mask rules the model's choice out: sample under it
            if token < 0:
                scores = logits[kept : kept + 1]
                if masked:
                    scores = apply_masks(scores, [row.mask], use_metal=self._metal_masks)
                token = cast(int, row.sampler(scores, base + kept).item())
            if row.constraint is None and (forced := row.owner.forced_token()) is not None:
                token = forced  # the end of a spent thinking budget, free replies
            agree = kept < len(draft) and token == draft[kept]
            self._take(row, token, fed=agree)
            if not agree:
                return kept  # the model's own token (and its forced tokens) go next
            kept += 1
            if row.done or row.at_limit:
                return kept
            # Tokens the grammar forced after it (the reply has them): the draft may have
            # gone on with them, or with another tokenization of the same text, which the
            # grammar allows too; from where they differ, the forced tokens are fed next.
            n = 0
            while n < len(row.pending) and kept + n < len(draft):
                if row.pending[n] != draft[kept + n]:
                    break
                n += 1
            row.pending = row.pending[n:]
            kept += n
            if row.pending:
                return kept

    def _time_step(self) -> None:
        """Note how long the previous step took, for its (rows, width)."""
        now = time.perf_counter()
        if self._last_step is not None:
            started, shape = self._last_step
            self.cost.record(shape, now - started)
            self._last_step = None
        self._step_started = now

    # ---- rows joining and leaving ----

    def _merge_joining(self) -> None:
        joining, self._joining = self._joining, []
        if not joining:
            return
        caches: list[KVState] = []
        for row in joining:
            assert row.cache is not None
            caches.append(row.cache)
        if not self.rows:
            # alone: the row's own plain cache; together: one batch cache
            self.cache = caches[0] if len(joining) == 1 else _merge(caches)
        elif len(self.rows) == 1:
            assert self.cache is not None
            self.cache = _merge([self.cache, *caches])  # the lone row's plain cache too
        else:
            assert self.cache is not None
            for c, new in zip(self.cache, _merge(caches), strict=True):
                c.extend(new)
        for row in joining:
            row.cache = None
        zeros = mx.zeros(len(joining), dtype=mx.uint32)
        self._y = zeros if self._y is None else mx.concatenate([self._y, zeros])
        self.rows += joining

    def _leave(self) -> list[DecodeRow]:
        """Take out the rows that ended, each with its own cache."""
        gone, self._left = self._left, []
        ended = [i for i, row in enumerate(self.rows) if row.done]
        if not ended:
            return gone
        keep = [i for i, row in enumerate(self.rows) if not row.done]
        cache = self.cache
        assert cache is not None
        batched = len(self.rows) > 1
        for i in ended:
            row = self.rows[i]
            row.cache = [c.extract(i) for c in cache] if batched else cache
            row.sampled = False
            gone.append(row)
        if not keep:
            self.cache, self._y = None, None
        elif len(keep) == 1:  # alone again: back to a plain cache
            self.cache = [c.extract(keep[0]) for c in cache]
        else:
            for c in cache:
                c.filter(keep)
        if self._y is not None:
            self._y = self._y[mx.array(keep)]
        self.rows = [self.rows[i] for i in keep]
        return gone


def _merge(caches: list[KVState]) -> KVState:
    """One batch cache per layer holding every row of `caches` (each one row's cache; a
    shared-prefix layer is copied into one buffer, as merging copies every row anyway)."""
    merged = []
    for layer in zip(*caches, strict=True):
        rows = [plain_layer(c) for c in layer]
        merged.append(type(rows[0]).merge(rows))
    return merged


def decode_alone(
    model: Any,
    cache: KVState,
    tail: list[int],
    fed: list[int],
    *,
    sampler: RowSampler,
    processors: list[LogitsProcessor] | None = None,
    constraint: RowConstraint | None = None,
    overlap: bool = True,
) -> Generator[int, None, None]:
    """Yield one reply's tokens, sampled or forced, from the decode loop with that reply
    alone in it (for benchmarks and tests). `cache` holds `fed`; `tail` is fed first.
    Stop iterating when done: `fed` then holds what `cache` holds."""
    got: list[int] = []

    class Collect:
        cancelled = False

        def take(self, token: int) -> StopReason | None:
            got.append(token)
            return None

        def forced_token(self) -> int | None:
            return None

    row = DecodeRow(
        Collect(), cache, fed, tail, sampler=sampler, processors=processors, constraint=constraint
    )
    batch = DecodeBatch(model, overlap=overlap)
    batch.join(row)
    while True:
        yield from got
        got.clear()
        if row.done:
            break
        batch.step()
    if row.error is not None:
        raise row.error


def _samples(row: DecodeRow) -> bool:
    """Whether `row` takes its next token from this step's logits."""
    return not row.pending and not row.done and not row.at_limit
