"""The packed token bitmask masks logits identically on every path: portable MLX, numpy
reference and (on a Mac) llguidance's Metal kernel."""

from __future__ import annotations

import engine  # noqa: F401  (OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import numpy as np
import pytest
from llguidance.numpy import apply_token_bitmask_inplace

from engine.constraints.masking import (
    BatchBias,
    TokenMasker,
    apply_masks,
    apply_token_bitmask,
    apply_token_bitmask_portable,
    bitmask_to_bias,
    metal_available,
)

VOCAB = 49152


def random_case(vocab: int, words: int, seed: int, density: float = 0.5):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(1, vocab)).astype(np.float32) * 5
    logits[0, :7] = [0.0, -0.0, 1e30, -1e30, 3.5, -2.25, 1e-40]  # edge values survive exactly
    bits = rng.random(words * 32) < density
    words_arr = np.packbits(bits, bitorder="little").view(np.int32).reshape(1, words)
    return logits, words_arr, bits


def numpy_reference(logits: np.ndarray, words: np.ndarray) -> np.ndarray:
    out = logits.copy()
    apply_token_bitmask_inplace(out, words)
    return out


@pytest.mark.parametrize(
    ("vocab", "words"),
    [(VOCAB, VOCAB // 32), (1000, 32), (1000, 40), (49280, VOCAB // 32)],
    ids=["exact", "partial-word", "mask-longer", "model-vocab-padded"],
)
@pytest.mark.parametrize("density", [0.5, 0.001, 1.0, 0.0])
def test_portable_matches_numpy_reference(vocab, words, density):
    logits, bitmask, _ = random_case(vocab, words, seed=vocab + words, density=density)
    got = np.array(apply_token_bitmask_portable(mx.array(logits), bitmask))
    want = numpy_reference(logits, bitmask)
    np.testing.assert_array_equal(got, want)
    # identical down to the sign of zero: x + -0.0 keeps every allowed logit bit for bit
    allowed = want != -np.inf
    assert np.array_equal(got[allowed].view(np.uint32), logits[allowed].view(np.uint32))


def test_bias_values_and_one_dimensional_input():
    bitmask = np.array([0b101, -1], dtype=np.int32)
    bias = bitmask_to_bias(bitmask)
    assert bias.shape == (64,)
    assert np.signbit(bias[0]) and bias[0] == 0 and bias[1] == -np.inf and bias[2] == 0
    assert (bias[32:] == 0).all()
    logits = mx.arange(64, dtype=mx.float32)
    out = np.array(apply_token_bitmask(logits, bitmask))
    assert out.shape == (64,)
    assert out[0] == 0 and out[1] == -np.inf and out[2] == 2 and out[3] == -np.inf


def test_half_precision_logits_keep_their_dtype():
    logits, bitmask, bits = random_case(4096, 128, seed=3)
    logits = np.clip(logits, -1e4, 1e4)  # representable in float16
    for dtype in (mx.float16, mx.bfloat16):
        out = apply_token_bitmask_portable(mx.array(logits).astype(dtype), bitmask)
        assert out.dtype == dtype
        assert (np.array(out.astype(mx.float32))[0] == -np.inf).tolist() == (~bits).tolist()


def test_masker_reuses_its_buffer_but_apply_copies():
    masker = TokenMasker(2, use_metal=False)
    logits = mx.zeros((1, 64))
    first = masker.apply(logits, masker.prepare(np.array([1, 0], np.int32)))
    second = masker.apply(logits, masker.prepare(np.array([2, 0], np.int32)))
    mx.eval(first, second)
    assert np.isfinite(np.array(first)[0]).nonzero()[0].tolist() == [0]
    assert np.isfinite(np.array(second)[0]).nonzero()[0].tolist() == [1]


@pytest.mark.parametrize("density", [0.5, 0.0, 1.0])
def test_bias_is_the_unpacked_bits_exactly(density):
    """The table gather gives, bit for bit, the bias of each token's own bit (the numpy
    unpacking it replaced), into the buffer it was given."""
    _, bitmask, bits = random_case(VOCAB, VOCAB // 32, seed=11, density=density)
    out = np.empty(VOCAB, np.float32)
    bias = bitmask_to_bias(bitmask, out)
    assert bias is out
    want = np.where(bits, np.float32(-0.0), np.float32(-np.inf)).astype(np.float32)
    assert np.array_equal(bias.view(np.uint32), want.view(np.uint32))


def test_rows_together_are_masked_as_each_alone_with_one_buffer_kept():
    """Several rows' masks applied in one bias equal each row masked alone, step after step
    with the same buffer (a row without a mask left as it is, a short mask's tail masked)."""
    vocab = 1000
    batch_bias = BatchBias()
    for seed in range(3):
        cases = [random_case(vocab, 32, seed=seed * 3 + i) for i in range(3)]
        logits = np.concatenate([c[0] for c in cases])
        masker = [TokenMasker(32, use_metal=False), TokenMasker(20, use_metal=False)]
        masks = [masker[0].prepare(cases[0][1]), None, masker[1].prepare(cases[2][1][:, :20])]
        got = np.array(apply_masks(mx.array(logits), masks, use_metal=False, batch_bias=batch_bias))
        for i, mask in enumerate(masks):
            alone = logits[i : i + 1] if mask is None else None
            if mask is not None:
                alone = np.array(apply_masks(mx.array(logits[i : i + 1]), [mask], use_metal=False))
            assert np.array_equal(got[i : i + 1].view(np.uint32), alone.view(np.uint32)), i


@pytest.mark.skipif(not metal_available(), reason="llguidance's MLX kernel needs Metal")
@pytest.mark.parametrize(("vocab", "words"), [(VOCAB, VOCAB // 32), (1000, 32), (49280, 1536)])
def test_metal_kernel_matches_portable(vocab, words):
    from engine.constraints.masking import apply_token_bitmask_metal

    logits, bitmask, _ = random_case(vocab, words, seed=7)
    metal = np.array(apply_token_bitmask_metal(mx.array(logits), bitmask))
    portable = np.array(apply_token_bitmask_portable(mx.array(logits), bitmask))
    np.testing.assert_array_equal(metal, portable)
    np.testing.assert_array_equal(metal, numpy_reference(logits, bitmask))
