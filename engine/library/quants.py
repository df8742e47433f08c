"""Turn one GGUF tensor into MLX arrays, in bounded memory.

MLX stores a quantized matrix as affine groups of 32 (or more) values along each row:
`value = scale * code + bias`, codes packed little-endian into uint32 words. Every GGUF type
whose blocks are affine over 32 values is that format in another byte order, so it is
*repacked*: Q4_0, Q4_1, Q8_0, Q5_0 and Q5_1 bit for bit; Q4_K and Q5_K too, except that each
sub-block's scale (the file's float16 `d` times a 6-bit factor) is rounded to float16.

Q2_K, Q3_K and Q6_K use sub-blocks of 16 values, finer than any MLX group, so they are
*re-quantized*: the `gguf` package's reference code dequantizes them, and each group of 32
values gets a min/max grid of 4 bits (Q2_K, Q3_K) or 8 bits (Q6_K). The error this adds is at
most half a step of that grid (plus the float16 rounding of the group's minimum): a small
fraction of the file's own quantization error.

Rows are processed a chunk at a time (`CHUNK_VALUES`), so memory stays bounded whatever the
tensor's size. Float tensors stay floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import Q4_K, dequantize

from engine.errors import ModelLoadError
from engine.library.gguf_file import TensorInfo, type_name

if TYPE_CHECKING:  # MLX is imported where arrays are made: the library scan runs without it
    import mlx.core as mx

T = GGMLQuantizationType
GROUP_SIZE = 32
CHUNK_VALUES = 1 << 22  # values converted at a time (16 MB as float32)


@dataclass(frozen=True)
class QuantChoice:
    """How a GGUF type is stored in MLX: bits, group size, and `repacked` (the file's own
    grid kept) or not (`re-quantized` onto a new grid)."""

    bits: int
    group_size: int
    repacked: bool


CHOICES: dict[int, QuantChoice] = {
    **{int(t): QuantChoice(4, GROUP_SIZE, True) for t in (T.Q4_0, T.Q4_1, T.Q4_K)},
    **{int(t): QuantChoice(5, GROUP_SIZE, True) for t in (T.Q5_0, T.Q5_1, T.Q5_K)},
    int(T.Q8_0): QuantChoice(8, GROUP_SIZE, True),
    int(T.Q2_K): QuantChoice(4, GROUP_SIZE, False),
    int(T.Q3_K): QuantChoice(4, GROUP_SIZE, False),
    int(T.Q6_K): QuantChoice(8, GROUP_SIZE, False),
}
FLOAT_TYPES = frozenset(int(t) for t in (T.F32, T.F16, T.BF16))
SUPPORTED_TYPES = FLOAT_TYPES | frozenset(CHOICES)


def supported_type_names() -> str:
    """The GGUF tensor types Corral imports, for error messages and docs."""
    return ", ".join(type_name(t) for t in sorted(SUPPORTED_TYPES))


def check_supported(info: TensorInfo, source: Path) -> None:
    """Raise a ModelLoadError naming `source`, the tensor and its type if it cannot import."""
    if info.ggml_type not in SUPPORTED_TYPES:
        raise ModelLoadError(
            f"{source}: tensor {info.name!r} is stored as {info.type_name}, which Corral cannot "
            f"import yet (supported: {supported_type_names()}); choose a K-quant or Q8_0 "
            "version of this model"
        )


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack (rows, cols) codes of `bits` bits the way MLX does: a little-endian bit stream
    per row (value j in bits j*bits...), as uint32 words."""
    rows = codes.shape[0]
    if bits in (2, 4, 8):  # whole codes per byte: combine neighbours, no 64-bit detour
        per = 8 // bits
        c = codes.reshape(rows, -1, per).astype(np.uint8)
        byte = c[..., 0].copy()
        for j in range(1, per):
            byte |= c[..., j] << np.uint8(j * bits)
        fast: np.ndarray = np.ascontiguousarray(byte).reshape(rows, -1).view(np.uint32)
        return fast
    eights = codes.reshape(-1, 8).astype(np.uint64)
    shifts = (np.arange(8, dtype=np.uint64) * np.uint64(bits)).reshape(1, 8)
    words = np.bitwise_or.reduce(eights << shifts, axis=1)  # 8 codes in 8*bits bits
    packed = words.view(np.uint8).reshape(-1, 8)[:, :bits]
    out: np.ndarray = np.ascontiguousarray(packed).reshape(rows, -1).view(np.uint32)
    return out


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 field at byte `start` of each block, as float32 (n, 1)."""
    halves: np.ndarray = blocks[:, start : start + 2].copy().view(np.float16)
    return halves.astype(np.float32)


def _nibbles(qs: np.ndarray, run: int) -> np.ndarray:
    """llama.cpp's 4-bit layout: each run of `run` bytes holds `run` values in its low
    nibbles, then the next `run` values in its high nibbles."""
    n = qs.shape[0]
    split = qs.reshape(n, -1, 1, run) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return (split & 0x0F).reshape(n, -1)


def _affine_blocks(blocks: np.ndarray, ggml_type: int) -> tuple[np.ndarray, ...]:
    """(codes (n, values), scale (n, groups), bias (n, groups)) of affine-over-32 blocks."""
    n = blocks.shape[0]
    if ggml_type == T.Q8_0:
        d = _f16(blocks, 0)
        codes = (blocks[:, 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        return codes, d, d * -128
    if ggml_type in (T.Q4_0, T.Q4_1):
        d = _f16(blocks, 0)
        start = 2 if ggml_type == T.Q4_0 else 4
        codes = _nibbles(blocks[:, start:], 16)
        return codes, d, d * -8 if ggml_type == T.Q4_0 else _f16(blocks, 2)
    if ggml_type in (T.Q5_0, T.Q5_1):
        d = _f16(blocks, 0)
        start = 2 if ggml_type == T.Q5_0 else 4
        qh = blocks[:, start : start + 4].copy().view(np.uint32)  # bit i: 5th bit of value i
        high = (qh >> np.arange(32, dtype=np.uint32).reshape(1, 32)) & 1
        codes = _nibbles(blocks[:, start + 4 :], 16) | (high.astype(np.uint8) << 4)
        return codes, d, d * -16 if ggml_type == T.Q5_0 else _f16(blocks, 2)
    # Q4_K and Q5_K: eight sub-blocks of 32 with 6-bit scales and mins
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)
    sc, m = Q4_K.get_scale_min(blocks[:, 4:16])
    if ggml_type == T.Q4_K:
        codes = _nibbles(blocks[:, 16:], 32)
    else:
        qh = blocks[:, 16:48].reshape(n, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
        codes = _nibbles(blocks[:, 48:], 32) | ((qh & 1).reshape(n, -1) << 4)
    return codes, d * sc.astype(np.float32), -(dmin * m.astype(np.float32))


def requantize(values: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min/max affine quantization of (rows, cols) float32 values in groups of 32.

    Returns (codes, scale float16, bias float16) with |error| <= scale / 2 + |bias - min|:
    the bias is the group's minimum rounded to float16, and the scale is rounded up so the
    group's maximum stays on the grid.
    """
    rows, cols = values.shape
    groups = values.reshape(rows, cols // GROUP_SIZE, GROUP_SIZE)
    lo, hi = groups.min(axis=-1), groups.max(axis=-1)
    levels = (1 << bits) - 1
    bias = lo.astype(np.float16)
    bias32 = bias.astype(np.float32)
    scale = ((hi - bias32) / levels).astype(np.float16)
    short = scale.astype(np.float32) * levels + bias32 < hi
    scale[short] = np.nextafter(scale[short], np.float16(np.inf))
    step = scale.astype(np.float32)
    inverse = np.divide(1.0, step, out=np.zeros_like(step), where=step > 0)[..., None]
    codes = np.subtract(groups, bias32[..., None])  # in place from here: one temporary
    np.multiply(codes, inverse, out=codes)
    np.rint(codes, out=codes)
    np.clip(codes, 0, levels, out=codes)
    return codes.astype(np.uint8).reshape(rows, cols), scale, bias


def dequantize_rows(raw_rows: np.ndarray, ggml_type: int) -> np.ndarray:
    """The `gguf` package's reference dequantization of (rows, bytes) to float32 values."""
    if ggml_type == T.BF16:
        return (raw_rows.copy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(dequantize(raw_rows, T(ggml_type)), dtype=np.float32)


def _convert_rows(rows: np.ndarray, ggml_type: int, cols: int) -> tuple[np.ndarray, ...]:
    """(weight uint32, scales f16, biases f16) of a chunk of rows."""
    choice = CHOICES[ggml_type]
    n_rows = rows.shape[0]
    if not choice.repacked:
        codes, scale, bias = requantize(dequantize_rows(rows, ggml_type), choice.bits)
    else:
        blocks = rows.reshape(-1, GGML_QUANT_SIZES[T(ggml_type)][1])
        codes, scale32, bias32 = _affine_blocks(blocks, ggml_type)
        scale, bias = scale32.astype(np.float16), bias32.astype(np.float16)
    groups = cols // GROUP_SIZE
    weight = pack_codes(codes.reshape(n_rows, cols), choice.bits)
    return weight, scale.reshape(n_rows, groups), bias.reshape(n_rows, groups)


def _float_array(raw: np.ndarray, info: TensorInfo) -> mx.array:
    import mlx.core as mx

    if info.ggml_type == T.F32:
        return mx.array(raw.view(np.float32).reshape(info.shape))
    if info.ggml_type == T.F16:
        return mx.array(raw.view(np.float16).reshape(info.shape))
    if info.ggml_type == T.BF16:
        return mx.array(raw.view(np.uint16).reshape(info.shape)).view(mx.bfloat16)
    rows = raw.reshape(info.n_elements // info.shape[-1], -1)
    return mx.array(dequantize_rows(rows, info.ggml_type).reshape(info.shape))


def convert_tensor(
    raw: np.ndarray, info: TensorInfo, *, quantize: bool
) -> tuple[dict[str, mx.array], QuantChoice | None]:
    """One GGUF tensor as MLX arrays, and how it was quantized (None: kept as floats).

    Args:
        raw: the tensor's bytes (`gguf_file.tensor_bytes`).
        info: its entry in the header.
        quantize: False for tensors MLX keeps as floats whatever the file did (norms,
            biases, anything not 2-D); quantized ones are then dequantized to float32.

    Returns `{"weight": ...}` plus `scales` and `biases` for a quantized weight.
    """
    import mlx.core as mx

    choice = CHOICES.get(info.ggml_type)
    if choice is None or not quantize or len(info.shape) != 2:
        return {"weight": _float_array(raw, info)}, None
    n_rows, cols = info.shape
    rows = raw.reshape(n_rows, -1)
    weight = np.empty((n_rows, cols * choice.bits // 32), dtype=np.uint32)
    scales = np.empty((n_rows, cols // GROUP_SIZE), dtype=np.float16)
    biases = np.empty_like(scales)
    step = max(1, CHUNK_VALUES // cols)
    for i in range(0, n_rows, step):
        chunk = _convert_rows(rows[i : i + step], info.ggml_type, cols)
        weight[i : i + step], scales[i : i + step], biases[i : i + step] = chunk
    return {"weight": mx.array(weight), "scales": mx.array(scales), "biases": mx.array(biases)}, (
        choice
    )
