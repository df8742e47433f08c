"""K-quants and Q5 types import: the imported weights match the `gguf` package's own
dequantization, exactly for repacked types and within the stated bound for re-quantized ones.

Bound (engine/library/quants.py): a re-quantized group of 32 values is off by at most half a
step of its new grid, `scale / 2` with scale = (max - min) / (2**bits - 1) rounded up to
float16, plus the float16 rounding of the group's minimum. Q4_K and Q5_K keep the file's grid;
only each sub-block's scale and offset are rounded to float16 (at most 2**-11 of themselves).
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from benchmarks.gguf_fixtures import random_quant_blocks, write_quant_gguf
from engine.errors import ModelLoadError
from engine.library import quants
from engine.library.gguf_file import open_gguf, tensor_bytes
from engine.library.gguf_import import import_gguf

_MLX_NAMES = {
    "token_embd": "model.embed_tokens",
    "attn_q": "model.layers.0.self_attn.q_proj",
    "attn_k": "model.layers.0.self_attn.k_proj",
    "attn_v": "model.layers.0.self_attn.v_proj",
    "attn_output": "model.layers.0.self_attn.o_proj",
    "ffn_gate": "model.layers.0.mlp.gate_proj",
    "ffn_up": "model.layers.0.mlp.up_proj",
    "ffn_down": "model.layers.0.mlp.down_proj",
}
REPACKED = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
ALL = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, *REPACKED]


def _imported_vs_reference(qtype: T, tmp_path: Path) -> tuple[dict, list[tuple]]:
    """The import's config, and (name, imported values, gguf's values, bits) for each 2-D
    weight of the import."""
    import mlx.core as mx

    path = write_quant_gguf(tmp_path / f"{qtype.name}.gguf", qtype)
    out = import_gguf(path, tmp_path / "out")
    config = json.loads((out / "config.json").read_text())
    stored: dict[str, mx.array] = {}
    found = []
    for f in glob.glob(str(out / "model*.safetensors")):
        stored.update(mx.load(f))
    for t in gguf.GGUFReader(str(path)).tensors:  # gguf's own reader and dequantization
        if len(t.shape) < 2:
            continue
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        name = _MLX_NAMES[t.name.split(".")[-2]]
        if name.endswith(("q_proj", "k_proj")):  # undo llama.cpp's rotary row order
            heads = 4 if name.endswith("q_proj") else 2
            rows, cols = ref.shape
            ref = ref.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2)
            ref = ref.reshape(rows, cols)
        q = config["quantization"][name]
        got = mx.dequantize(
            stored[f"{name}.weight"],
            stored[f"{name}.scales"].astype(mx.float32),
            stored[f"{name}.biases"].astype(mx.float32),
            group_size=q["group_size"],
            bits=q["bits"],
        )
        found.append((name, np.array(got), ref, q["bits"]))
    return config, found


@pytest.mark.parametrize("qtype", REPACKED, ids=lambda t: t.name)
def test_legacy_types_are_repacked_bit_for_bit(qtype: T, tmp_path: Path) -> None:
    config, weights = _imported_vs_reference(qtype, tmp_path)
    for name, got, ref, _bits in weights:
        assert np.array_equal(got, ref), name
    assert config["corral_import"]["stored_as"][qtype.name]["method"] == "repacked"


@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q5_K], ids=lambda t: t.name)
def test_k_quants_with_32_value_sub_blocks_keep_their_grid(qtype: T, tmp_path: Path) -> None:
    config, weights = _imported_vs_reference(qtype, tmp_path)
    for name, got, ref, bits in weights:
        assert bits == (4 if qtype == T.Q4_K else 5)
        # only float16 rounding of each sub-block's scale s and offset b, each off by at
        # most 2**-11 of itself; |b| and s * levels are of the order of the group's values
        groups = ref.reshape(-1, 32)
        size = np.abs(groups).max(axis=1) + (groups.max(axis=1) - groups.min(axis=1))
        err = np.abs(got.reshape(-1, 32) - groups).max(axis=1)
        assert (err <= 2.0**-10 * size + 1e-7).all(), name
        assert np.sqrt(((got - ref) ** 2).sum() / (ref**2).sum()) < 1e-3, name
    assert config["corral_import"]["stored_as"][qtype.name]["method"] == "repacked"


@pytest.mark.parametrize(
    ("qtype", "bits"), [(T.Q2_K, 4), (T.Q3_K, 4), (T.Q6_K, 8)], ids=lambda v: str(v)
)
def test_finer_k_quants_are_requantized_within_half_a_step(
    qtype: T, bits: int, tmp_path: Path
) -> None:
    config, weights = _imported_vs_reference(qtype, tmp_path)
    for name, got, ref, stored_bits in weights:
        assert stored_bits == bits
        groups = ref.reshape(-1, 32)
        lo, hi = groups.min(axis=1), groups.max(axis=1)
        step = (hi - lo) / (2**bits - 1)
        bound = step / 2 * (1 + 2.0**-9) + 2.0**-11 * np.abs(lo) + 1e-7
        err = np.abs(got.reshape(-1, 32) - groups).max(axis=1)
        assert (err <= bound).all(), name
        assert err.max() > 0  # the values really were moved onto a new grid
    record = config["corral_import"]
    assert record["stored_as"][qtype.name] == {
        "bits": bits,
        "group_size": 32,
        "method": "re-quantized",
    }
    assert record["gguf_tensor_types"] == {qtype.name: 8, "F32": 3}


def test_chunked_conversion_equals_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays bounded by converting a few rows at a time; the result is the same."""
    path = write_quant_gguf(tmp_path / "m.gguf", T.Q6_K)
    with open_gguf(path) as (header, buf):
        info = next(t for t in header.tensors if t.name == "blk.0.ffn_up.weight")
        whole, _ = quants.convert_tensor(tensor_bytes(buf, info), info, quantize=True)
        monkeypatch.setattr(quants, "CHUNK_VALUES", 3 * info.shape[1])  # three rows a time
        chunked, _ = quants.convert_tensor(tensor_bytes(buf, info), info, quantize=True)
    for key in ("weight", "scales", "biases"):
        assert np.array_equal(np.array(whole[key]), np.array(chunked[key])), key


def test_pack_codes_matches_mlx_quantize() -> None:
    """Our packing of codes is MLX's own, for every width MLX supports."""
    import mlx.core as mx

    rng = np.random.default_rng(1)
    for bits in (2, 3, 4, 5, 6, 8):
        levels = 2**bits - 1
        codes = rng.integers(0, levels + 1, size=(3, 64))
        codes[:, [0, 32]], codes[:, [1, 33]] = 0, levels  # so MLX's grid is exactly 0..levels
        packed, scales, biases = mx.quantize(
            mx.array(codes.astype(np.float32)), group_size=32, bits=bits
        )
        mlx_codes = np.rint(
            (codes - np.array(biases).repeat(32, 1)) / np.array(scales).repeat(32, 1)
        )
        ours = quants.pack_codes(mlx_codes.astype(np.uint8), bits)
        assert np.array_equal(ours, np.array(packed)), bits


def test_truncated_k_quant_file_is_a_clear_error(tmp_path: Path) -> None:
    path = write_quant_gguf(tmp_path / "q4k.gguf", T.Q4_K)
    broken = tmp_path / "q4k-truncated.gguf"
    broken.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    out = tmp_path / "out"
    with pytest.raises(ModelLoadError, match="truncated") as err:
        import_gguf(broken, out)
    message = str(err.value)
    assert "q4k-truncated.gguf" in message and "Q4_K" in message
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q4k-truncated.gguf", "q4k.gguf"]


def test_iq_quant_is_refused_naming_file_tensor_and_type(tmp_path: Path) -> None:
    path = tmp_path / "iq2.gguf"
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.zeros((8, 256), dtype=np.float32))
    raw = rng.integers(0, 256, size=(256, 74), dtype=np.uint8)  # 256 x 256 values of IQ2_XS
    writer.add_tensor("blk.0.attn_q.weight", raw, raw_dtype=T.IQ2_XS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError) as err:
        import_gguf(path, tmp_path / "out")
    message = str(err.value)
    assert "iq2.gguf" in message and "blk.0.attn_q.weight" in message and "IQ2_XS" in message
    assert "Q4_K" in message  # and says what would work


def test_random_blocks_are_well_formed() -> None:
    """The fixture's blocks dequantize to finite, modest values (so the bounds above test
    real grids, not NaNs or infinities)."""
    rng = np.random.default_rng(0)
    for qtype in ALL:
        values = gguf.quants.dequantize(random_quant_blocks(qtype, 4, 256, rng), qtype)
        assert np.isfinite(values).all() and np.abs(values).max() < 100, qtype.name
