"""Turn one GGUF tensor into MLX arrays, in bounded memory.

Q4_0, Q4_1 and Q8_0 blocks are MLX's own affine format in another byte order, so they are
repacked bit for bit. K-quants and Q5_0/Q5_1 have no MLX twin: each chunk of rows is
dequantized with the `gguf` package's reference code and re-quantized with `mx.quantize`
(group size 32: the block size of the legacy formats and two K-quant sub-blocks). Low-bit
K-quants (Q2_K..Q4_K) become 4-bit, Q5 types 6-bit, Q6_K 8-bit, so re-quantizing never
adds more than a fraction of the error the file already had. Float tensors stay floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

from engine.errors import ModelLoadError
from engine.library.gguf_file import TensorInfo, type_name

T = GGMLQuantizationType
GROUP_SIZE = 32
# Rows are dequantized this many values at a time (64 MB of float32), whatever the tensor.
CHUNK_VALUES = 1 << 24


@dataclass(frozen=True)
class QuantChoice:
    """How a GGUF type is stored in MLX: bits, group size, and whether it is bit-exact."""

    bits: int
    group_size: int
    exact: bool


# Repacked without loss.
_EXACT = {T.Q4_0: 4, T.Q4_1: 4, T.Q8_0: 8}
# Dequantized and re-quantized.
_REQUANT = {T.Q2_K: 4, T.Q3_K: 4, T.Q4_K: 4, T.Q5_0: 6, T.Q5_1: 6, T.Q5_K: 6, T.Q6_K: 8}
FLOAT_TYPES = frozenset({T.F32, T.F16, T.BF16})

CHOICES: dict[int, QuantChoice] = {
    **{int(t): QuantChoice(b, GROUP_SIZE, True) for t, b in _EXACT.items()},
    **{int(t): QuantChoice(b, GROUP_SIZE, False) for t, b in _REQUANT.items()},
}
SUPPORTED_TYPES = frozenset(int(t) for t in FLOAT_TYPES) | frozenset(CHOICES)


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


def _rows(raw: np.ndarray, info: TensorInfo) -> np.ndarray:
    """The tensor's bytes as (rows, bytes per row)."""
    rows = info.n_elements // info.shape[-1]
    return raw.reshape(rows, -1)


def _halves(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 field at byte `start` of each block, as float16 (n, 1)."""
    halves: np.ndarray = blocks[:, start : start + 2].copy().view(np.float16)
    return halves


def _pack4(q: np.ndarray) -> np.ndarray:
    """Pack (n, 32) values 0..15 into MLX's order: value j in bits 4j.. of the words."""
    pairs = q.reshape(q.shape[0], 16, 2)
    packed: np.ndarray = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    return packed


def _repack(rows: np.ndarray, ggml_type: int, cols: int) -> tuple[np.ndarray, ...]:
    """Q4_0/Q4_1/Q8_0 rows as MLX (weight uint32, scales f16, biases f16), bit for bit."""
    n_rows = rows.shape[0]
    block_bytes = GGML_QUANT_SIZES[T(ggml_type)][1]
    blocks = rows.reshape(-1, block_bytes)
    d = _halves(blocks, 0)
    if ggml_type == T.Q8_0:
        # value = d * q with q int8: store q + 128 unsigned, bias -128 d
        packed = (blocks[:, 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        bias = (d.astype(np.float32) * -128).astype(np.float16)
    else:
        offset = 2 if ggml_type == T.Q4_0 else 4
        qs = blocks[:, offset:]
        # llama.cpp: low nibbles are values 0..15 of the block, high nibbles 16..31
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
        packed = _pack4(q)
        if ggml_type == T.Q4_0:  # value = d * (q - 8)
            bias = (d.astype(np.float32) * -8).astype(np.float16)
        else:  # value = d * q + m
            bias = _halves(blocks, 2)
    weight = np.ascontiguousarray(packed).view(np.uint32).reshape(n_rows, -1)
    groups = cols // GROUP_SIZE
    return weight, d.reshape(n_rows, groups), bias.reshape(n_rows, groups)


def dequantize_rows(raw_rows: np.ndarray, ggml_type: int) -> np.ndarray:
    """The `gguf` package's reference dequantization of (rows, bytes) to float32 values."""
    if ggml_type == T.BF16:
        return (raw_rows.copy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(dequantize(raw_rows, T(ggml_type)), dtype=np.float32)


def _float_array(raw: np.ndarray, info: TensorInfo) -> mx.array:
    if info.ggml_type == T.F32:
        return mx.array(raw.view(np.float32).reshape(info.shape))
    if info.ggml_type == T.F16:
        return mx.array(raw.view(np.float16).reshape(info.shape))
    if info.ggml_type == T.BF16:
        return mx.array(raw.view(np.uint16).reshape(info.shape)).view(mx.bfloat16)
    return mx.array(dequantize_rows(_rows(raw, info), info.ggml_type).reshape(info.shape))


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
    choice = CHOICES.get(info.ggml_type)
    if choice is None or not quantize or len(info.shape) != 2:
        return {"weight": _float_array(raw, info)}, None
    rows = _rows(raw, info)
    cols = info.shape[-1]
    step = max(1, CHUNK_VALUES // cols)
    parts: list[tuple[mx.array, mx.array, mx.array]] = []
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        if choice.exact:
            w, s, b = (mx.array(a) for a in _repack(chunk, info.ggml_type, cols))
        else:
            values = mx.array(dequantize_rows(chunk, info.ggml_type))
            w, s, b = mx.quantize(values, group_size=choice.group_size, bits=choice.bits)
            s, b = s.astype(mx.float16), b.astype(mx.float16)
        mx.eval(w, s, b)
        parts.append((w, s, b))
    if len(parts) == 1:
        w, s, b = parts[0]
    else:
        w, s, b = (mx.concatenate([p[i] for p in parts]) for i in range(3))
    return {"weight": w, "scales": s, "biases": b}, choice
