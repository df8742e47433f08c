"""Import a GGUF file of the llama architecture into an MLX model folder.

Quantized tensors stay quantized: `mx.load` already returns Q4_0/Q4_1/Q8_0 blocks in
MLX's affine layout (group size 32), so we only rename them, undo llama.cpp's rotary
permutation of the q/k rows, and write `config.json` with a per-layer quantization map.
The folder is written to a temporary sibling and renamed, so a failure never leaves a
half-written model behind, and an existing folder is replaced only when it is Corral's
own import of the same file: nothing else is ever deleted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import mlx.core as mx

from engine.errors import ModelLoadError
from engine.files import remove_tree
from engine.gguf_header import check_gguf
from engine.gguf_tokenizer import build_tokenizer_files
from engine.import_cache import (
    OWNER,
    clean_stale_temp_folders,
    file_sha256,
    holds_only_import_files,
    is_import_of,
    make_temp_folder,
    marker_data,
    read_marker,
    write_marker,
)

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
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|scales|biases|bias)\Z")
_TOP_RE = re.compile(r"^(\w+)\.(weight|scales|biases|bias)\Z")


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


# Tensor types MLX's GGUF loader reads correctly (gguflib's table is wrong for Q2_K's block
# size, and it converts only these): anything else is refused before it is handed over.
MLX_READABLE_TYPES = frozenset({"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K"})


def read_gguf(path: Path) -> GGUFContents:
    """Read a GGUF file's tensors and metadata, with errors that name the file.

    The header is checked in Python first (`engine.gguf_header`): MLX's native loader
    trusts it, and a damaged or crafted file would otherwise crash the process.
    """
    path = Path(path)
    header = check_gguf(path)
    for tensor in header.tensors:
        if tensor.type_name not in MLX_READABLE_TYPES:
            raise ModelLoadError(
                f"{path}: tensor {tensor.name!r} is {tensor.type_name}, which Corral cannot "
                f"read yet (it reads {', '.join(sorted(MLX_READABLE_TYPES))})"
            )
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
    *,
    sha256: str | None = None,
) -> Path:
    """Convert `gguf_path` into an MLX model folder at `out_dir` and return its path.

    `out_dir` must be new, an empty folder, or an earlier Corral import of the same file
    (which is replaced; a complete one is returned as it is): a folder holding anything
    else is refused, never deleted. It is written atomically: a temporary folder beside it
    is renamed into place. `sha256` is the file's digest if the caller has it.
    """
    source = Path(gguf_path).expanduser().resolve()
    out = Path(out_dir).expanduser().absolute()
    report = on_progress or (lambda stage, fraction: None)
    check_gguf(source)  # a bad file is refused before anything is written
    parent = out.parent.resolve()
    out = parent / out.name
    if out.name in ("", ".", "..") or out == parent:
        raise ModelLoadError(f"{out_dir}: not a folder name an import can be written to")
    if sha256 is None:
        sha256 = file_sha256(source, report)
    previous = _existing_output(out, source, sha256)
    if previous == "current":
        report("Imported", 1.0)
        return out

    report("Reading GGUF", 0.0)
    tensors, meta = read_gguf(source)
    report("Converting weights", 0.3)
    weights, config = convert_gguf_weights(tensors, meta, source)

    parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temp_folders(parent)
    tmp = make_temp_folder(parent)
    aside: Path | None = None
    try:
        build_tokenizer_files(meta, tmp, source)
        report("Writing weights", 0.5)
        mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        write_marker(tmp, marker_data(source, sha256))
        (tmp / OWNER).unlink()
        if previous == "replace":  # an earlier import of this file: moved aside, then removed
            aside = make_temp_folder(parent)
            os.replace(out, aside / "old")
        os.replace(tmp, out)  # onto a missing or empty folder only: never over files
    except BaseException as exc:
        remove_tree(tmp, parent)
        if aside is not None and (aside / "old").exists() and not out.exists():
            os.replace(aside / "old", out)
        elif isinstance(exc, OSError) and is_import_of(out, sha256):
            report("Imported", 1.0)  # another process imported the same file meanwhile
            return out
        raise
    finally:
        if aside is not None:
            remove_tree(aside, parent)
    report("Imported", 1.0)
    return out


def _existing_output(out: Path, source: Path, sha256: str) -> str:
    """What is at `out` now: "new" (nothing, or an empty folder), "current" (a complete
    import of this file), "replace" (an unfinished import of it); else ModelLoadError."""
    if out.is_symlink():
        raise ModelLoadError(f"{out}: is a link; choose a new or empty folder")
    if out.exists() and not out.is_dir():
        raise ModelLoadError(f"{out}: exists and is not a folder; choose a new or empty folder")
    if not out.exists():
        return "new"
    try:
        empty = not any(out.iterdir())
    except OSError as exc:
        raise ModelLoadError(f"{out}: cannot be read ({exc.strerror or exc})") from None
    if empty:
        return "new"
    if is_import_of(out, sha256):
        return "current"
    marker = read_marker(out)
    if marker is not None and marker.get("sha256") == sha256 and holds_only_import_files(out):
        return "replace"
    raise ModelLoadError(
        f"{out}: the folder exists and is not empty, and it is not Corral's import of "
        f"{source.name}; Corral never replaces a folder it did not write. Choose a new or "
        "empty folder."
    )
