"""Per-token log-probabilities recorded inside the decode loop (the token inspector and
OpenAI's `logprobs`).

A reply that asks (`ChatRequest.logprobs`) decodes with a `RowLogprobs`. The decode loop
(`engine.runtime.batch`) hands `BatchLogprobs` the logits its forward pass already computed;
for the rows that record, and only for them, one step adds:

- for each position some logits predict (the row's last position, and inside a pass
  that fed several tokens each position before a forced token): the log-sum-exp, one
  top-k (`argpartition`, k the largest any row asked for, at least 1 to see the model's
  first choice) and the log-probability of the token written there, all before the mask;
- for a position the row samples at: the same token's log-probability after the mask
  and penalties, and which of the top-k the mask allowed.

Everything is packed into one float32 array per step, evaluated in the same `async_eval`
as the step's sampled tokens (the loop takes it with `started`) and read back the next step
when those are (`read`), so recording adds no synchronisation or evaluation of its own.
Figures are keyed by the token's position in the row, so tokens the grammar forced get the
model's figures from the pass that fed them; tokens never fed (the closing policy's last
tokens) have none. Engine thread only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import mlx.core as mx
import numpy as np

from engine.prompt.tokenizer import ModelTokenizer
from engine.types import MAX_TOP_LOGPROBS, TokenAlternative, TokenLogprob


class RecordingRow(Protocol):
    """What the recorder reads of a decode row (`engine.runtime.batch.DecodeRow`)."""

    row_logprobs: RowLogprobs | None
    fed: list[int]
    pending: list[int]
    sampled: bool
    at_limit: bool
    constraint: Any
    mask: np.ndarray | None
    processors: list[Any]

    @property
    def done(self) -> bool: ...


@dataclass
class _Slot:
    """One position whose logits a step computed, for one row's record."""

    row_logprobs: RowLogprobs
    pos: int
    sampled: bool  # the row samples its token here (else the token is a forced one)
    allowed: int | None  # tokens the mask allowed (None: no mask)


@dataclass
class _Figures:
    """What was read back for one position."""

    ids: np.ndarray
    logprobs: np.ndarray  # of `ids`, before the mask
    allowed: np.ndarray  # of `ids`, by the mask (sampled positions)
    model_logprob: float
    logprob: float  # after the mask and penalties (sampled positions)
    sampled: bool
    count: int | None


class StepRecord:
    """One step's recorded figures (lazy until read)."""

    def __init__(self, step: int, slots: list[_Slot], packed: mx.array, k: int) -> None:
        self.step = step
        self._slots: list[_Slot] | None = slots
        self._packed: mx.array | None = packed
        self._k = k

    def read(self) -> None:
        """Read the figures back into each slot's row (once)."""
        if self._slots is None or self._packed is None:
            return
        data = np.asarray(self._packed)
        k = self._k
        for slot, row in zip(self._slots, data, strict=True):
            slot.row_logprobs.figures[slot.pos] = _Figures(
                ids=row[:k].astype(np.int64),
                logprobs=row[k : 2 * k],
                allowed=row[2 * k : 3 * k] > 0.5,
                model_logprob=float(row[3 * k]),
                logprob=float(row[3 * k + 1]),
                sampled=slot.sampled,
                count=slot.allowed,
            )
        self._slots = self._packed = None

    @property
    def done(self) -> bool:
        return self._slots is None


class RowLogprobs:
    """One reply's recording: the tokens handed to it and the figures read back for them.

    `start` is the position (in the row's tokens, prompt first) of the reply's first token.
    """

    def __init__(self, top: int, start: int) -> None:
        if not 0 <= top <= MAX_TOP_LOGPROBS:
            raise ValueError(
                f"logprobs: the number of alternatives must be between 0 and "
                f"{MAX_TOP_LOGPROBS}, got {top}"
            )
        self.top = top
        self.start = start
        self.tokens: list[int] = []
        self.figures: dict[int, _Figures] = {}
        self.unread: list[StepRecord] = []
        self._handed: list[TokenLogprob] = []  # the records `ready` built, in order

    def given(self, token: int) -> None:
        """`token` is the reply's next token."""
        self.tokens.append(token)
        if len(self.unread) > 4:
            self.unread = [r for r in self.unread if not r.done]

    def ready(self, text: TokenText) -> list[TokenLogprob]:
        """The tokens not handed out yet whose figures are in, in order (up to the first
        still waiting for its forward pass)."""
        out: list[TokenLogprob] = []
        while len(self._handed) < len(self.tokens):
            i = len(self._handed)
            figures = self.figures.get(self.start + i)
            if figures is None:
                break
            record = _record(self.tokens[i], figures, self.top, text)
            self._handed.append(record)
            out.append(record)
        return out

    def finish(self, text: TokenText) -> tuple[list[TokenLogprob], list[TokenLogprob]]:
        """Every token's record, and those not handed out by `ready` yet."""
        for record in self.unread:
            record.read()
        self.unread.clear()
        # the handed ones' figures were in when they were built: built once, kept
        handed = len(self._handed)
        rest = [
            _record(token, self.figures.get(self.start + i), self.top, text)
            for i, token in enumerate(self.tokens[handed:], start=handed)
        ]
        self._handed += rest
        return list(self._handed), rest


class BatchLogprobs:
    """The decode batch's recording: builds each step's figures for the rows that record
    logprobs (`forward`, then `sample`) and reads back earlier steps' (`read`)."""

    def __init__(self) -> None:
        self._unread: deque[StepRecord] = deque()
        self._last: dict[int, int] = {}  # row index -> position its last logits predict
        self._inner: tuple[mx.array, list[_Slot], list[int]] | None = None
        self._fresh: list[mx.array] = []  # built this step, for the loop to evaluate

    def forward(self, rows: list[Any], out: mx.array, counts: list[int]) -> None:
        """After the forward pass: `out` (rows, width, vocab) holds the logits of every fed
        position, `counts[i]` of them real for row i. Call before the rows read their
        sampled tokens (`fed` does not hold them yet)."""
        self._last.clear()
        self._inner = None
        width = out.shape[1]
        flat: list[int] = []
        slots: list[_Slot] = []
        targets: list[int] = []
        for i, row in enumerate(rows):
            row_logprobs = row.row_logprobs
            if row_logprobs is None or row.done or row.at_limit:
                continue
            start = len(row.fed) if row.sampled else len(row.fed) - counts[i]
            self._last[i] = start + counts[i]
            for j in range(counts[i] - 1):  # position j predicts the forced token after it
                pos = start + j + 1
                if pos >= row_logprobs.start:
                    flat.append(i * width + j)
                    slots.append(_Slot(row_logprobs, pos, sampled=False, allowed=1))
                    targets.append(row.fed[pos])
        if flat:
            inner = out.reshape(-1, out.shape[-1])[mx.array(flat)]
            self._inner = (inner, slots, targets)

    def sample(
        self, rows: list[Any], raw: mx.array, final: mx.array, y: mx.array, step: int
    ) -> None:
        """`raw` (rows, vocab): each row's last logits; `final`: the same after masks and
        penalties (the very array when there were none); `y`: the tokens sampled from it."""
        index: list[int] = []
        slots: list[_Slot] = []
        known: list[int] = []
        from_y: list[bool] = []
        for i, row in enumerate(rows):
            row_logprobs = row.row_logprobs
            pos = self._last.get(i)
            if (
                row_logprobs is None
                or pos is None
                or pos < row_logprobs.start
                or row.done
                or row.at_limit
            ):
                continue
            samples = not row.pending
            if not samples:  # the next token is a forced one: no mask was applied
                slots.append(_Slot(row_logprobs, pos, sampled=False, allowed=1))
            else:
                count = row.constraint.allowed if row.constraint is not None else None
                slots.append(_Slot(row_logprobs, pos, sampled=True, allowed=count))
            index.append(i)
            known.append(row.pending[0] if row.pending else 0)
            from_y.append(samples)
        inner, self._inner = self._inner, None
        self._last.clear()
        if not slots and inner is None:
            return
        all_slots = slots + (inner[1] if inner is not None else [])
        k = max(1, max(s.row_logprobs.top for s in all_slots))
        every = len(index) == len(rows)
        select = mx.array(index) if not every else None
        parts: list[mx.array] = []
        if slots:
            parts.append(raw if select is None else raw[select])
        if inner is not None:
            parts.append(inner[0])
        logits = parts[0] if len(parts) == 1 else mx.concatenate(parts)
        # log-sum-exp by hand: the exponentials also give the mass a mask keeps
        peak = mx.max(logits, axis=-1, keepdims=True)
        weights = mx.exp(logits - peak)
        lse = peak + mx.log(mx.sum(weights, axis=-1, keepdims=True))
        ids = top_ids(logits, k)
        top = mx.take_along_axis(logits, ids, axis=-1) - lse
        target = mx.array(known + (inner[2] if inner is not None else []), dtype=mx.int32)
        n = len(slots)
        if n:
            sampled_y = (y if select is None else y[select]).astype(mx.int32)
            head = mx.where(mx.array(from_y), sampled_y, target[:n])
            target = head if inner is None else mx.concatenate([head, target[n:]])
        model = mx.take_along_axis(logits, target[:, None], axis=-1) - lse
        columns = [ids.astype(mx.float32), top.astype(mx.float32)]
        if n:
            if final is raw:
                masked, masked_lse = logits[:n], lse[:n]
            else:
                masked = final if select is None else final[select]
                if any(rows[i].processors for i in index):  # penalties changed the logits
                    masked_lse = mx.logsumexp(masked, axis=-1, keepdims=True)
                else:  # a mask alone: the allowed tokens' share of the same exponentials
                    kept = mx.where(masked > -mx.inf, weights[:n], 0.0)
                    masked_lse = peak[:n] + mx.log(mx.sum(kept, axis=-1, keepdims=True))
            after = mx.take_along_axis(masked, target[:n, None], axis=-1) - masked_lse
            allowed = mx.take_along_axis(masked, ids[:n], axis=-1) > -mx.inf
            extra = len(all_slots) - n
            if extra:
                allowed = mx.concatenate([allowed, mx.zeros((extra, k), dtype=mx.bool_)])
                after = mx.concatenate([after, mx.zeros((extra, 1), dtype=after.dtype)])
            columns += [allowed.astype(mx.float32), model.astype(mx.float32)]
            columns.append(after.astype(mx.float32))
        else:
            zeros = mx.zeros((len(all_slots), 1), dtype=mx.float32)
            columns += [mx.zeros((len(all_slots), k)), model.astype(mx.float32), zeros]
        packed = mx.concatenate(columns, axis=1)
        self._fresh.append(packed)  # evaluated with the step's samples: read back together
        record = StepRecord(step, all_slots, packed, k)
        self._unread.append(record)
        for row_logprobs in {id(s.row_logprobs): s.row_logprobs for s in all_slots}.values():
            row_logprobs.unread.append(record)

    def started(self) -> list[mx.array]:
        """The figures built this step, for the loop's one `async_eval` of the step's samples
        (then no longer held here)."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def read(self, step: int) -> None:
        """Read back the figures of the steps before `step` (already computed: their
        tokens are being read)."""
        while self._unread and self._unread[0].step < step:
            self._unread.popleft().read()


TOP_BLOCK = 256  # logits per block when the top k are found block by block


def top_ids(logits: mx.array, k: int) -> mx.array:
    """The ids of each row's `k` largest logits, (rows, k), in no particular order, lazy.

    Found in two small selections instead of one over the vocabulary: the k blocks of
    TOP_BLOCK logits with the highest maxima hold every one of the k largest values (a
    block left out has a maximum no higher than k chosen blocks' maxima, each of which is
    a value at least as high), so the k largest of those k blocks are the row's. At
    262,144 tokens one `argpartition` over the row took ~11 ms on a CPU, this ~0.4 ms
    (equal values may come with other ids)."""
    rows, vocab = logits.shape
    if k == 1:
        return mx.argmax(logits, axis=-1, keepdims=True)
    blocks = -(-vocab // TOP_BLOCK)
    if blocks < 4 * k:  # a small vocabulary: one selection is cheap
        return mx.argpartition(logits, kth=vocab - k, axis=-1)[:, vocab - k :]
    pad = blocks * TOP_BLOCK - vocab
    if pad:
        fill = mx.full((rows, pad), -mx.inf, dtype=logits.dtype)
        logits = mx.concatenate([logits, fill], axis=1)
    peaks = mx.max(logits.reshape(rows, blocks, TOP_BLOCK), axis=-1)
    best = mx.argpartition(peaks, kth=blocks - k, axis=-1)[:, blocks - k :]
    offsets = mx.arange(TOP_BLOCK, dtype=best.dtype)
    candidates = (best[:, :, None] * TOP_BLOCK + offsets).reshape(rows, k * TOP_BLOCK)
    values = mx.take_along_axis(logits, candidates, axis=-1)
    chosen = mx.argpartition(values, kth=k * TOP_BLOCK - k, axis=-1)[:, k * TOP_BLOCK - k :]
    return mx.take_along_axis(candidates, chosen, axis=-1)


class TokenText:
    """The text and bytes of single tokens of one tokenizer, cached."""

    def __init__(self, tokenizer: Any) -> None:
        self._hf = ModelTokenizer.of(tokenizer).hf
        decoder = getattr(getattr(self._hf, "backend_tokenizer", None), "decoder", None)
        self._byte_level = type(decoder).__name__ == "ByteLevel"
        self._cache: dict[int, tuple[str, tuple[int, ...]]] = {}

    def __call__(self, token: int) -> tuple[str, tuple[int, ...]]:
        found = self._cache.get(token)
        if found is None:
            data: bytes | None = None
            if self._byte_level:
                piece = self._hf.convert_ids_to_tokens(token)
                table = _unicode_to_byte()
                if isinstance(piece, str) and all(c in table for c in piece):
                    data = bytes(table[c] for c in piece)
            if data is None:
                text = self._hf.decode(
                    [token], skip_special_tokens=False, clean_up_tokenization_spaces=False
                )
                data = text.encode()
            else:
                text = data.decode("utf-8", errors="replace")
            found = self._cache[token] = (text, tuple(data))
        return found


def _record(token: int, figures: _Figures | None, top: int, text: TokenText) -> TokenLogprob:
    token_text, token_bytes = text(token)
    if figures is None:  # never fed: the closing policy's (or a forced) last token
        return TokenLogprob(token, token_text, 0.0, None, (), 1, True, False, token_bytes)
    ids, logprobs = figures.ids, figures.logprobs
    order = np.argsort(-logprobs, kind="stable")
    best = int(ids[order[0]])
    if figures.sampled:
        allowed = figures.allowed
        overridden = figures.count is not None and not bool(allowed[order[0]])
        logprob = figures.logprob
    else:  # forced: the one token the grammar left
        allowed = ids == token
        overridden = best != token
        logprob = 0.0
    chosen = order[:top]  # read out as Python values at once, not element by element
    alternatives = []
    for alt, alt_logprob, ok in zip(
        ids[chosen].tolist(), logprobs[chosen].tolist(), allowed[chosen].tolist(), strict=True
    ):
        alt_text, alt_bytes = text(alt)
        alternatives.append(TokenAlternative(alt, alt_text, alt_logprob, ok, alt_bytes))
    return TokenLogprob(
        token,
        token_text,
        logprob,
        figures.model_logprob,
        tuple(alternatives),
        figures.count,
        not figures.sampled,
        overridden,
        token_bytes,
    )


@cache
def _unicode_to_byte() -> dict[str, int]:
    """GPT-2's byte-level alphabet back to bytes (the inverse of `bytes_to_unicode`)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}
