"""Import a GGUF file of the llama architecture into an MLX model folder.

Quantized tensors stay quantized: `mx.load` already returns Q4_0/Q4_1/Q8_0 blocks in
MLX's affine layout (group size 32), so we only rename them, undo llama.cpp's rotary
permutation of the q/k rows, and write `config.json` with a per-layer quantization map.
The folder is written to a temporary sibling and renamed, so a failure never leaves a
half-written model behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import mlx.core as mx

from engine.errors import ModelLoadError
from engine.gguf_tokenizer import build_tokenizer_files

ProgressFn = Callable[[str, float], None]

SUPPORTED_ARCHITECTURES = ("llama",)
_GROUP_SIZE = 32

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|scales|biases|bias)$")
_TOP_RE = re.compile(r"^(\w+)\.(weight|scales|biases|bias)$")


def _mlx_name(gguf_name: str) -> tuple[str, str] | None:
    """Map `blk.3.attn_q.weight` to (`model.layers.3.self_attn.q_proj`, `weight`)."""
    if m := _BLOCK_RE.match(gguf_name):
        layer = _LAYER_NAMES.get(m.group(2))
        return (f"model.layers.{m.group(1)}.{layer}", m.group(3)) if layer else None
    if m := _TOP_RE.match(gguf_name):
        top = _TOP_NAMES.get(m.group(1))
        return (top, m.group(2)) if top else None
    return None


def _unpermute_rows(w: mx.array, n_head: int) -> mx.array:
    """Undo llama.cpp's q/k row permutation (it commutes with per-row quantization)."""
    rows = w.shape[0]
    rest = w.shape[1:]
    w = w.reshape(n_head, rows // n_head // 2, 2, *rest)
    return w.swapaxes(1, 2).reshape(rows, *rest)


def _meta_int(meta: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = meta.get(key)
    if value is None:
        return default
    return int(value.item() if hasattr(value, "item") else value)


def _meta_float(meta: dict[str, Any], key: str, default: float) -> float:
    value = meta.get(key)
    return default if value is None else float(value.item() if hasattr(value, "item") else value)


GGUFContents = tuple[dict[str, mx.array], dict[str, Any]]


def read_gguf(path: Path) -> GGUFContents:
    """Read a GGUF file's tensors and metadata, with errors that name the file."""
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if not path.is_file():
        raise ModelLoadError(f"{path}: not a file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelLoadError(f"{path}: not a GGUF file (bad magic {magic!r})")
    try:
        tensors, meta = cast(GGUFContents, mx.load(str(path), return_metadata=True))
    except Exception as exc:  # MLX raises ValueError/RuntimeError for damaged files
        raise ModelLoadError(f"{path}: corrupt or truncated GGUF file: {exc}") from exc
    return tensors, meta


def _model_config(meta: dict[str, Any], n_vocab: int, tied: bool) -> dict[str, Any]:
    arch = "llama"
    heads = _meta_int(meta, f"{arch}.attention.head_count")
    hidden = _meta_int(meta, f"{arch}.embedding_length")
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": _meta_int(meta, f"{arch}.block_count"),
        "intermediate_size": _meta_int(meta, f"{arch}.feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": _meta_int(meta, f"{arch}.attention.head_count_kv", heads),
        "rms_norm_eps": _meta_float(meta, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": _meta_float(meta, f"{arch}.rope.freq_base", 10000.0),
        "vocab_size": _meta_int(meta, f"{arch}.vocab_size", n_vocab),
        "max_position_embeddings": _meta_int(meta, f"{arch}.context_length", 4096),
        "tie_word_embeddings": tied,
        "bos_token_id": _meta_int(meta, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _meta_int(meta, "tokenizer.ggml.eos_token_id"),
    }
    head_dim = _meta_int(meta, f"{arch}.attention.key_length")
    if head_dim and hidden and heads and head_dim != hidden // heads:
        config["head_dim"] = head_dim
    return config


def convert_gguf_weights(
    tensors: dict[str, mx.array], meta: dict[str, Any], source: Path
) -> tuple[dict[str, mx.array], dict[str, Any]]:
    """Rename and un-permute GGUF tensors; return MLX weights and the model config."""
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelLoadError(f"{source}: architecture not supported yet: {arch}")
    n_head = _meta_int(meta, "llama.attention.head_count")
    if n_head is None:
        raise ModelLoadError(f"{source}: metadata lacks llama.attention.head_count")
    n_kv_head = _meta_int(meta, "llama.attention.head_count_kv") or n_head

    weights: dict[str, mx.array] = {}
    quantization: dict[str, Any] = {"group_size": _GROUP_SIZE, "bits": 4, "mode": "affine"}
    for name, value in tensors.items():
        mapped = _mlx_name(name)
        if mapped is None:
            if name.startswith("rope_freqs"):
                continue  # llama 3.1 rope scaling factors; recomputed by mlx-lm
            raise ModelLoadError(f"{source}: unexpected tensor {name!r}")
        module, kind = mapped
        if kind in ("weight", "scales", "biases") and module.endswith(("q_proj", "k_proj")):
            heads = n_head if module.endswith("q_proj") else n_kv_head
            value = _unpermute_rows(value, heads)
        weights[f"{module}.{kind}"] = value

    for key, value in list(weights.items()):
        if not key.endswith(".scales"):
            continue
        module = key[: -len(".scales")]
        packed = weights[f"{module}.weight"]
        in_features = value.shape[-1] * _GROUP_SIZE
        bits = packed.shape[-1] * 32 // in_features
        quantization[module] = {"group_size": _GROUP_SIZE, "bits": bits}
        if f"{module}.biases" not in weights:  # symmetric formats: zero offset
            weights[f"{module}.biases"] = mx.zeros_like(value)

    tied = "lm_head.weight" not in weights
    embed = weights.get("model.embed_tokens.weight")
    if embed is None:
        raise ModelLoadError(f"{source}: missing tensor token_embd.weight")
    config = _model_config(meta, embed.shape[0], tied)
    if len(quantization) > 3:
        config["quantization"] = quantization
    return weights, config


def import_gguf(
    gguf_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    on_progress: ProgressFn | None = None,
) -> Path:
    """Convert `gguf_path` into an MLX model folder at `out_dir` and return its path.

    `out_dir` is written atomically: a temporary folder beside it is renamed into place.
    """
    source = Path(gguf_path).expanduser()
    out = Path(out_dir).expanduser()
    report = on_progress or (lambda stage, fraction: None)

    report("Reading GGUF", 0.0)
    tensors, meta = read_gguf(source)
    report("Converting weights", 0.3)
    weights, config = convert_gguf_weights(tensors, meta, source)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        build_tokenizer_files(meta, tmp, source)
        report("Writing weights", 0.5)
        mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        (tmp / "corral_source.json").write_text(
            json.dumps({"gguf": str(source), "size": source.stat().st_size})
        )
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report("Imported", 1.0)
    return out
