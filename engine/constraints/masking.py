"""Apply llguidance's packed token bitmask (one bit per token, int32 words) to logits.

On Metal, llguidance's MLX kernel does it. Elsewhere the words are turned into an additive
bias on the CPU (-0.0 for allowed tokens, -inf for the rest; `x + -0.0 == x` exactly) and
added to the logits: ~0.02 ms to build with numpy and ~0.02 ms to add for a 49k vocabulary,
where `mx.where` over an unpacked mask costs ~0.3 ms on this CPU. Both give identical
logits. Tokens the bitmask does not cover (a model vocabulary padded beyond the
tokenizer's) are always masked.

A step allocates nothing here for its masks: the bias is one gather from a table of the 256
byte values' 8 biases into the masker's own buffer (no unpacked bits in between), and rows
decoding together share one (rows, vocab) buffer that is refilled each step (`BatchBias`).
"""

from __future__ import annotations

from functools import cache

import mlx.core as mx
import numpy as np

_ALLOWED_U32 = np.uint32(0x80000000)  # -0.0f
_BLOCKED_U32 = np.uint32(0xFF800000)  # -inf f
_STEP_U32 = np.uint32(0xFF800000 - 0x80000000)


@cache
def metal_available() -> bool:
    """Whether llguidance's Metal kernel can run here."""
    try:
        return bool(mx.metal.is_available())
    except Exception:  # some builds lack the metal module altogether
        return False


@cache
def _byte_biases() -> np.ndarray:
    """(256, 8) float32: the biases of the 8 tokens of each byte value (bit i of the byte is
    token i of the 8, as llguidance packs them: little-endian)."""
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    table = np.empty((256, 8), np.float32)
    table.view(np.uint32)[:] = _BLOCKED_U32 - bits.astype(np.uint32) * _STEP_U32
    return table


def bitmask_to_bias(bitmask: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A float32 bias of 32 entries per word: -0.0 where the bit is set, -inf elsewhere
    (written into `out`, of 32 entries per word, when given)."""
    words = np.ascontiguousarray(bitmask, dtype=np.int32).reshape(-1)
    if out is None:
        out = np.empty(words.size * 32, np.float32)
    # byte b of word w holds tokens 32w+8b .. 32w+8b+7: one row of the table each
    np.take(_byte_biases(), words.view(np.uint8), axis=0, out=out.reshape(-1, 8))
    return out


def apply_bias(logits: mx.array, bias: np.ndarray) -> mx.array:
    """`logits` (..., vocab) plus `bias` (vocab,) or (rows, vocab), trimmed or padded with
    -inf to the vocabulary size."""
    vocab, have = logits.shape[-1], bias.shape[-1]
    if have > vocab:
        bias = bias[..., :vocab]
    elif have < vocab:
        pad = np.full((*bias.shape[:-1], vocab - have), -np.inf, np.float32)
        bias = np.concatenate([bias, pad], axis=-1)
    b = mx.array(bias)
    if b.dtype != logits.dtype:
        b = b.astype(logits.dtype)
    return logits + b


def apply_token_bitmask_portable(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` with `bitmask` using plain MLX ops (any backend)."""
    return apply_bias(logits, bitmask_to_bias(bitmask))


def apply_token_bitmask_metal(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` (..., vocab) with llguidance's Metal kernel (Metal only): one row of
    `bitmask` per row of logits."""
    from llguidance.mlx import apply_token_bitmask

    rows = logits.reshape(-1, logits.shape[-1])
    words = np.ascontiguousarray(bitmask, dtype=np.int32).reshape(rows.shape[0], -1)
    return apply_token_bitmask(rows, words).reshape(logits.shape)


def apply_token_bitmask(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` (shape (vocab,) or (1, vocab)): the Metal kernel if possible, else portable."""
    if metal_available():
        return apply_token_bitmask_metal(logits, bitmask)
    return apply_token_bitmask_portable(logits, bitmask)


class TokenMasker:
    """Per-decoder masking with reusable buffers, split so the CPU work runs on the mask thread.

    `prepare` (mask thread) turns freshly filled words into whatever `apply` (decode thread)
    needs. The result aliases an internal buffer: `apply` copies it into MLX, and the next
    `prepare` must not start before that.
    """

    def __init__(self, n_words: int, *, use_metal: bool | None = None) -> None:
        self.use_metal = metal_available() if use_metal is None else use_metal
        self._bias = np.empty(n_words * 32, np.float32)

    def prepare(self, words: np.ndarray) -> np.ndarray:
        return words if self.use_metal else bitmask_to_bias(words, self._bias)

    def apply(self, logits: mx.array, prepared: np.ndarray) -> mx.array:
        if self.use_metal:
            return apply_token_bitmask_metal(logits, prepared)
        return apply_bias(logits, prepared)


class BatchBias:
    """The (rows, vocab) bias of rows decoding together, in a buffer kept from step to step
    (`mx.array` copies it, so refilling it next step is safe)."""

    def __init__(self) -> None:
        self._buffer = np.empty((0, 0), np.float32)

    def fill(self, masks: list[np.ndarray | None], vocab: int) -> np.ndarray:
        """Each row's prepared bias (trimmed, or padded with -inf past what it covers), -0.0
        for rows without a mask (x + -0.0 == x)."""
        if self._buffer.shape != (len(masks), vocab):
            self._buffer = np.empty((len(masks), vocab), np.float32)
        bias = self._buffer
        for i, m in enumerate(masks):
            if m is None:
                bias[i] = -0.0
            else:  # as apply_bias: tokens the mask does not cover are masked
                n = min(vocab, m.shape[-1])
                bias[i, :n] = m[:n]
                bias[i, n:] = -np.inf
        return bias


def apply_masks(
    logits: mx.array,
    masks: list[np.ndarray | None],
    *,
    use_metal: bool,
    batch_bias: BatchBias | None = None,
) -> mx.array:
    """Mask each row of `logits` (rows, vocab) by its TokenMasker-prepared mask in one
    operation; a row whose mask is None is left as it is. With one row the prepared mask
    is used as is (no copy): the single-reply path costs what it did before batching.
    `batch_bias` keeps the several rows' bias buffer from step to step."""
    if len(masks) == 1 and masks[0] is not None:
        prepared = masks[0]
        if use_metal:
            return apply_token_bitmask_metal(logits, prepared)
        return apply_bias(logits, prepared)
    size = next(m.shape[-1] for m in masks if m is not None)
    if use_metal:  # words: all bits set lets every token through
        words = np.full((len(masks), size), -1, np.int32)
        for i, m in enumerate(masks):
            if m is not None:
                words[i] = m
        return apply_token_bitmask_metal(logits, words)
    bias = (batch_bias or BatchBias()).fill(masks, logits.shape[-1])
    b = mx.array(bias)
    return logits + (b if b.dtype == logits.dtype else b.astype(logits.dtype))
