"""Each GGUF architecture imports onto mlx-lm's own class: a tiny GGUF written as llama.cpp
writes it gives the same logits as mlx-lm's class loaded with the original weights."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf_support import write_arch_gguf

from benchmarks.gguf_fixtures import (
    FAMILIES,
    random_weights,
    tokenizer_metadata,
    write_family_gguf,
)
from engine.errors import ModelLoadError
from engine.library.gguf_import import import_gguf

IDS = [5, 17, 42, 99, 7, 3, 250, 61, 18, 33, 200, 12]


def _reference_logits(arch: str, weights: dict[str, np.ndarray], vocab: int) -> np.ndarray:
    """mlx-lm's own class for the family, loaded from the weights before conversion."""
    import mlx.core as mx

    family = FAMILIES[arch]
    module = importlib.import_module(f"mlx_lm.models.{family.model_type}")
    config = {**family.config, "model_type": family.model_type, "vocab_size": vocab}
    model = module.Model(module.ModelArgs.from_dict(config))
    arrays = {k: mx.array(v) for k, v in weights.items()}
    if hasattr(model, "sanitize"):
        arrays = model.sanitize(arrays)
    model.load_weights(list(arrays.items()))
    return np.array(model(mx.array(IDS)[None])[0].astype(mx.float32))


def _imported(arch: str, tmp_path: Path, linear_type: T = T.F32):
    from engine.library.load import load_model

    family = FAMILIES[arch]
    tok = tokenizer_metadata(family)
    weights = random_weights(family, len(tok["tokens"]))
    path = write_family_gguf(
        tmp_path / f"{arch}.gguf", family, weights, tok, linear_type=linear_type
    )
    out = import_gguf(path, tmp_path / f"{arch}-mlx")
    return weights, len(tok["tokens"]), out, load_model(str(out))


@pytest.mark.parametrize("arch", sorted(FAMILIES))
def test_family_logits_match_mlx_lm_class(arch: str, tmp_path: Path) -> None:
    import mlx.core as mx

    weights, vocab, out, loaded = _imported(arch, tmp_path)
    ours = np.array(loaded.model(mx.array(IDS)[None])[0].astype(mx.float32))
    ref = _reference_logits(arch, weights, vocab)
    assert np.abs(ours - ref).max() < 1e-4 * max(1.0, np.abs(ref).max())
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == FAMILIES[arch].model_type
    assert "quantization" not in config  # F32 in, floats out


@pytest.mark.parametrize("arch", ["llama", "gemma3", "phi3"])
def test_quantized_family_matches_the_values_in_the_file(arch: str, tmp_path: Path) -> None:
    """Q8_0 weights are repacked bit for bit: the logits match mlx-lm's class loaded with
    the values the file holds (the `gguf` package's own quantize/dequantize round trip)."""
    import gguf
    import mlx.core as mx

    weights, vocab, out, loaded = _imported(arch, tmp_path, T.Q8_0)
    ours = np.array(loaded.model(mx.array(IDS)[None])[0].astype(mx.float32))
    held = {
        k: gguf.quants.dequantize(gguf.quants.quantize(v, T.Q8_0), T.Q8_0) if v.ndim == 2 else v
        for k, v in weights.items()
    }
    ref = _reference_logits(arch, held, vocab)
    assert np.abs(ours - ref).max() < 1e-3 * max(1.0, np.abs(ref).max())
    config = json.loads((out / "config.json").read_text())
    assert config["corral_import"]["stored_as"]["Q8_0"] == {
        "bits": 8,
        "group_size": 32,
        "method": "repacked",
    }


@pytest.mark.parametrize(
    ("arch", "turn_end"),
    [("qwen3", "<|im_end|>"), ("gemma3", "<end_of_turn>"), ("phi3", "<|end|>")],
)
def test_chat_template_and_turn_end_carried_over(arch: str, turn_end: str, tmp_path: Path) -> None:
    _, _, out, loaded = _imported(arch, tmp_path)
    prompt = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert turn_end in prompt
    end_id = loaded.tokenizer.convert_tokens_to_ids(turn_end)
    assert end_id in loaded.tokenizer.eos_token_ids  # generation stops at the turn's end


def test_llama3_rope_scaling_recovered_from_rope_freqs(tmp_path: Path) -> None:
    """Llama 3.1 GGUFs carry rope scaling only as a rope_freqs tensor: the import recovers
    mlx-lm's llama3 parameters from it."""
    import math

    import gguf

    from engine.library.architectures import ARCHITECTURES

    head_dim, base, factor, original = 64, 500000.0, 8.0, 8192
    inv = 1.0 / base ** (np.arange(0, head_dim, 2) / head_dim)
    factors = []
    for freq in inv:  # as llama.cpp's convert_hf_to_gguf.py computes them
        wavelen = 2 * math.pi / freq
        if wavelen < original / 4:
            factors.append(1.0)
        elif wavelen > original / 1:
            factors.append(factor)
        else:
            smooth = (original / wavelen - 1) / (4 - 1)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    config = {"hidden_size": 256, "num_attention_heads": 4, "rope_theta": base}
    aux = {"rope_freqs.weight": np.array(factors, dtype=np.float32)}
    ARCHITECTURES["llama"].extra_config({}, config, aux)
    assert config["rope_scaling"] == {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    assert gguf  # the tensor name is the one gguf writes
    assert gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] == "rope_freqs"


def test_other_architectures_keep_the_clear_error(tmp_path: Path) -> None:
    path = write_arch_gguf(tmp_path / "falcon.gguf", "falcon")
    with pytest.raises(ModelLoadError, match="not supported yet: falcon") as err:
        import_gguf(path, tmp_path / "out")
    assert "falcon.gguf" in str(err.value) and "qwen3" in str(err.value)
    assert not (tmp_path / "out").exists()
