"""GGUF import: logits match an independent numpy reference; bad files give clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf_support import write_arch_gguf

from engine.errors import ModelLoadError
from engine.library.gguf_import import import_gguf
from engine.library.load import resolve_model

PROMPT_IDS = [1, 4093, 198, 3575, 314, 253, 5356, 30, 2, 198, 1, 520, 9531, 198]


def _reference_logits(gguf_path: Path, ids: list[int]) -> np.ndarray:
    """A plain llama forward pass over weights dequantized by the `gguf` package.

    It uses the weights exactly as llama.cpp stores them (q/k rows permuted) with
    llama.cpp's interleaved rotary embedding, so it checks our un-permutation independently.
    """
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))

    def field(name: str):
        return reader.fields[name].parts[-1][0]

    w = {
        t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        for t in reader.tensors
    }
    n_layer, n_head = int(field("llama.block_count")), int(field("llama.attention.head_count"))
    n_kv = int(field("llama.attention.head_count_kv"))
    eps, theta = (
        float(field("llama.attention.layer_norm_rms_epsilon")),
        float(field("llama.rope.freq_base")),
    )
    x = w["token_embd.weight"][ids]
    t, dim = x.shape
    hd = dim // n_head

    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g

    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(t)[:, None] * inv[None]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope_interleaved(v):  # v: (t, heads, hd), pairs are adjacent elements
        a, b = v[..., 0::2], v[..., 1::2]
        out = np.empty_like(v)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    mask = np.triu(np.full((t, t), -np.inf), 1)
    for i in range(n_layer):
        p = f"blk.{i}."
        h = rms(x, w[p + "attn_norm.weight"])
        q = rope_interleaved((h @ w[p + "attn_q.weight"].T).reshape(t, n_head, hd))
        k = rope_interleaved((h @ w[p + "attn_k.weight"].T).reshape(t, n_kv, hd))
        v = (h @ w[p + "attn_v.weight"].T).reshape(t, n_kv, hd)
        k, v = np.repeat(k, n_head // n_kv, 1), np.repeat(v, n_head // n_kv, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(t, dim)
        x = x + o @ w[p + "attn_output.weight"].T
        h = rms(x, w[p + "ffn_norm.weight"])
        g = h @ w[p + "ffn_gate.weight"].T
        x = (
            x
            + ((g / (1 + np.exp(-g))) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        )
    x = rms(x, w["output_norm.weight"])
    head = w.get("output.weight", w["token_embd.weight"])
    return x @ head.T


def test_imported_logits_match_reference(default_gguf: Path, default_engine) -> None:
    import mlx.core as mx

    def logits(loaded) -> np.ndarray:  # on the engine thread, which owns the model
        return np.array(loaded.model(mx.array(PROMPT_IDS)[None])[0].astype(mx.float32))

    ours = default_engine.run(logits).result()
    ref = _reference_logits(default_gguf, PROMPT_IDS)
    # Quantized matmuls vs float32 dequantized ones differ by rounding only.
    assert np.abs(ours - ref).max() < 0.05 * np.abs(ref).max()
    assert (ours.argmax(-1) == ref.argmax(-1)).mean() >= 0.9
    top_ref = np.argsort(-ref[-1])[:5]
    assert ours[-1].argmax() in top_ref


def test_import_writes_tokenizer_and_chat_template(default_model_dir: Path) -> None:
    import json

    config = json.loads((default_model_dir / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in config["chat_template"]
    assert config["eos_token"] == "<|im_end|>"
    model_config = json.loads((default_model_dir / "config.json").read_text())
    assert model_config["quantization"]["model.embed_tokens"]["bits"] == 8
    assert model_config["quantization"]["model.layers.0.mlp.up_proj"]["bits"] == 4


def test_truncated_gguf_is_a_clear_error(default_gguf: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(default_gguf.read_bytes()[:5_000_000])
    out = tmp_path / "out"
    with pytest.raises(ModelLoadError) as err:
        import_gguf(broken, out)
    assert "broken.gguf" in str(err.value)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [broken]  # no half-written folder left behind


def test_not_a_gguf_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x00\x01 this is not a model" * 10)
    with pytest.raises(ModelLoadError, match="not a valid GGUF: magic"):
        import_gguf(junk, tmp_path / "out")


def test_unsupported_architecture(tmp_path: Path) -> None:
    path = write_arch_gguf(tmp_path / "mamba.gguf", "mamba")
    with pytest.raises(ModelLoadError, match="not supported yet: mamba") as err:
        import_gguf(path, tmp_path / "out")
    assert "mamba.gguf" in str(err.value)


def test_missing_path_and_folder_without_weights(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such"):
        resolve_model(str(tmp_path / "nowhere"))
    with pytest.raises(ModelLoadError, match="no such file"):
        resolve_model(str(tmp_path / "nowhere.gguf"))
    empty = tmp_path / "empty-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="no weights") as err:
        resolve_model(str(empty))
    assert str(empty) in str(err.value)


def test_default_model_is_imported_once(
    default_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.library import load as models

    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "cache"))
    stages: list[str] = []
    first = models.ensure_default_model(lambda s, f: stages.append(s))
    assert "Converting weights" in stages
    stages.clear()
    second = models.ensure_default_model(lambda s, f: stages.append(s))
    assert first == second and stages == []
    shutil.rmtree(tmp_path / "cache")
