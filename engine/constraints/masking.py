"""Apply llguidance's packed token masks (one bit per token, int32 words) to logits, on the
device, in the graph that samples.

A mask travels as llguidance fills it: ceil(vocab / 32) int32 words a row (32 KB at
262,144 tokens, where a float bias of the same mask is 1 MB). Each step the decode loop
copies the words of its rows into one buffer it keeps (`PackedMasks`), MLX takes that as one
small array, and the mask is applied inside the step's sampling graph (no vocabulary-sized
array is built on the host, nor copied to the device):

- on Metal, by llguidance's kernel (`llguidance.mlx`);
- elsewhere (MLX's CPU backend, or any other), portably: each byte of the words picks its
  8 tokens' biases from a (256, 8) table, a gather on the device, -0.0 for an allowed token
  and -inf for the rest, added to the logits (`x + -0.0 == x`: allowed logits stay bit for
  bit what they were).

Both give identical logits. Tokens past what the words cover (a model vocabulary padded
beyond the tokenizer's) are masked; words past the model's vocabulary (a tokenizer with
more tokens than the model has logits) are cut.
"""

from __future__ import annotations

from functools import cache

import mlx.core as mx
import numpy as np

_ALLOWED_U32 = np.uint32(0x80000000)  # -0.0f
_BLOCKED_U32 = np.uint32(0xFF800000)  # -inf f
_STEP_U32 = np.uint32(0xFF800000 - 0x80000000)
ALL_ALLOWED = -1  # a word with every bit set


@cache
def metal_available() -> bool:
    """Whether llguidance's Metal kernel can run here."""
    try:
        return bool(mx.metal.is_available())
    except Exception:  # some builds lack the metal module altogether
        return False


@cache
def byte_biases() -> np.ndarray:
    """(256, 8) float32: the biases of the 8 tokens of each byte value (bit i of the byte is
    token i of the 8, as llguidance packs them: little-endian)."""
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    table = np.empty((256, 8), np.float32)
    table.view(np.uint32)[:] = _BLOCKED_U32 - bits.astype(np.uint32) * _STEP_U32
    return table


_tables: dict[mx.Dtype, mx.array] = {}


def _device_table(dtype: mx.Dtype) -> mx.array:
    """The byte table on the device, in the logits' dtype (-0.0 and -inf exist in all)."""
    table = _tables.get(dtype)
    if table is None:
        table = mx.array(byte_biases())
        if table.dtype != dtype:
            table = table.astype(dtype)
        mx.eval(table)
        table = _tables.setdefault(dtype, table)
    return table


def packed_bias(words: mx.array, vocab: int, dtype: mx.Dtype = mx.float32) -> mx.array:
    """The (rows, vocab) additive bias of packed `words` (rows, n_words) int32, lazy: -0.0
    where a token's bit is set, -inf elsewhere and past the words' end."""
    rows = words.shape[0]
    covered = words.shape[1] * 32
    bias = _device_table(dtype)[words.view(mx.uint8)].reshape(rows, covered)
    if covered > vocab:
        return bias[:, :vocab]
    if covered < vocab:
        tail = mx.full((rows, vocab - covered), -mx.inf, dtype=dtype)
        return mx.concatenate([bias, tail], axis=1)
    return bias


def apply_packed(logits: mx.array, words: mx.array, *, use_metal: bool) -> mx.array:
    """`logits` (rows, vocab) masked by `words` (rows, n_words) int32 on the device, lazy."""
    if use_metal:
        from llguidance.mlx import apply_token_bitmask_kernel

        masked: mx.array = apply_token_bitmask_kernel(logits, words)  # type: ignore[assignment]
        return masked
    return logits + packed_bias(words, logits.shape[-1], logits.dtype)


def apply_token_bitmask_portable(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` (vocab,) or (rows, vocab) with `bitmask` using plain MLX ops (any
    backend): one row of words per row of logits."""
    rows = logits.reshape(-1, logits.shape[-1])
    words = mx.array(np.ascontiguousarray(bitmask, dtype=np.int32).reshape(rows.shape[0], -1))
    return apply_packed(rows, words, use_metal=False).reshape(logits.shape)


def apply_token_bitmask_metal(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` (vocab,) or (rows, vocab) with llguidance's Metal kernel (Metal only)."""
    rows = logits.reshape(-1, logits.shape[-1])
    words = mx.array(np.ascontiguousarray(bitmask, dtype=np.int32).reshape(rows.shape[0], -1))
    return apply_packed(rows, words, use_metal=True).reshape(logits.shape)


def apply_token_bitmask(logits: mx.array, bitmask: np.ndarray) -> mx.array:
    """Mask `logits` ((vocab,) or (rows, vocab)): the Metal kernel if possible, else portable."""
    if metal_available():
        return apply_token_bitmask_metal(logits, bitmask)
    return apply_token_bitmask_portable(logits, bitmask)


class PackedMasks:
    """The (rows, n_words) words of rows sampling together, in a host buffer kept from step
    to step (`mx.array` copies it, so refilling it next step is safe)."""

    def __init__(self) -> None:
        self._buffer = np.empty((0, 0), np.int32)

    def words(self, masks: list[np.ndarray | None]) -> mx.array:
        """Each row's words (a row without a mask: every bit set), as one device array."""
        size = max(m.shape[-1] for m in masks if m is not None)
        if self._buffer.shape != (len(masks), size):
            self._buffer = np.empty((len(masks), size), np.int32)
        buffer = self._buffer
        for i, m in enumerate(masks):
            if m is None:
                buffer[i] = ALL_ALLOWED
            else:  # a shorter mask (another tokenizer's) masks what it does not cover
                buffer[i, : m.shape[-1]] = m
                buffer[i, m.shape[-1] :] = 0
        return mx.array(buffer)


def apply_masks(
    logits: mx.array,
    masks: list[np.ndarray | None],
    *,
    use_metal: bool,
    packed: PackedMasks | None = None,
) -> mx.array:
    """Mask each row of `logits` (rows, vocab) by its packed words, lazily, in one operation
    for all rows; a row whose mask is None is left as it is. `packed` keeps the host buffer
    from step to step. With one row its words go to the device as they are (no copy into a
    buffer first)."""
    if len(masks) == 1 and masks[0] is not None:
        words = mx.array(masks[0].reshape(1, -1))
    else:
        words = (packed or PackedMasks()).words(masks)
    return apply_packed(logits, words, use_metal=use_metal)


def allows(words: np.ndarray | None, token: int) -> bool:
    """Whether packed `words` let `token` through (no mask lets every token through): bit
    (token % 32) of word token // 32."""
    if words is None:
        return True
    flat = words.reshape(-1)
    return 0 <= token >> 5 < flat.size and bool((int(flat[token >> 5]) >> (token & 31)) & 1)


def allowed_count(words: np.ndarray) -> int:
    """How many tokens packed `words` allow."""
    u32 = words.reshape(-1).view(np.uint32)
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return int(np.bitwise_count(u32).sum())
    return int(np.unpackbits(u32.view(np.uint8)).sum())
