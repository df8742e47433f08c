"""The packed token bitmask masks logits identically on every path: portable MLX (the words
unpacked on the device), numpy reference and (on a Mac) llguidance's Metal kernel."""

from __future__ import annotations

import engine  # noqa: F401  (OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import numpy as np
import pytest
from llguidance.numpy import apply_token_bitmask_inplace

from engine.constraints.masking import (
    PackedMasks,
    allowed_count,
    allows,
    apply_masks,
    apply_token_bitmask,
    apply_token_bitmask_portable,
    metal_available,
    packed_bias,
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
    bias = np.array(packed_bias(mx.array(bitmask[None]), 64))[0]
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


@pytest.mark.parametrize("density", [0.5, 0.0, 1.0])
def test_device_bias_is_the_unpacked_bits_exactly(density):
    """The gather on the device gives, bit for bit, the bias of each token's own bit."""
    _, bitmask, bits = random_case(VOCAB, VOCAB // 32, seed=11, density=density)
    bias = np.array(packed_bias(mx.array(bitmask), VOCAB))[0]
    want = np.where(bits, np.float32(-0.0), np.float32(-np.inf)).astype(np.float32)
    assert np.array_equal(bias.view(np.uint32), want.view(np.uint32))


def test_rows_together_are_masked_as_each_alone_with_one_buffer_kept():
    """Several rows' masks applied in one operation equal each row masked alone, step after
    step with the same buffer (a row without a mask left as it is, a short mask's tail
    masked)."""
    vocab = 1000
    packed = PackedMasks()
    for seed in range(3):
        cases = [random_case(vocab, 32, seed=seed * 3 + i) for i in range(3)]
        logits = np.concatenate([c[0] for c in cases])
        masks = [cases[0][1][0], None, cases[2][1][0, :20]]
        got = np.array(apply_masks(mx.array(logits), masks, use_metal=False, packed=packed))
        for i, mask in enumerate(masks):
            alone = logits[i : i + 1]
            if mask is not None:
                alone = np.array(apply_masks(mx.array(alone), [mask], use_metal=False))
            assert np.array_equal(got[i : i + 1].view(np.uint32), alone.view(np.uint32)), i


def test_a_row_copied_to_the_device_is_not_changed_by_its_matcher_refilling_it():
    """A row's words are the matcher's buffer, refilled by its next job: what was applied
    is what the words were when the step was built."""
    words = np.array([1, 0], np.int32)
    logits = mx.zeros((1, 64))
    first = apply_masks(logits, [words], use_metal=False)
    words[:] = [2, 0]  # the next job
    second = apply_masks(logits, [words], use_metal=False)
    mx.eval(first, second)
    assert np.isfinite(np.array(first)[0]).nonzero()[0].tolist() == [0]
    assert np.isfinite(np.array(second)[0]).nonzero()[0].tolist() == [1]


def test_allows_and_counts_read_the_bits():
    _, bitmask, bits = random_case(1000, 32, seed=5)
    words = bitmask[0]
    assert allowed_count(words) == int(bits.sum())
    assert [allows(words, t) for t in range(32 * 32)] == bits.tolist()
    assert not allows(words, 32 * 32) and not allows(words, 10**6)  # past the words
    assert allows(None, 123)


@pytest.mark.skipif(not metal_available(), reason="llguidance's MLX kernel needs Metal")
@pytest.mark.parametrize(("vocab", "words"), [(VOCAB, VOCAB // 32), (1000, 32), (49280, 1536)])
def test_metal_kernel_matches_portable(vocab, words):
    from engine.constraints.masking import apply_token_bitmask_metal

    logits, bitmask, _ = random_case(vocab, words, seed=7)
    metal = np.array(apply_token_bitmask_metal(mx.array(logits), bitmask))
    portable = np.array(apply_token_bitmask_portable(mx.array(logits), bitmask))
    np.testing.assert_array_equal(metal, portable)
    np.testing.assert_array_equal(metal, numpy_reference(logits, bitmask))
