"""A tiny randomly initialised llama with a real tokenizer, for fast tests and stress benchmarks.

Its forward pass takes a few milliseconds even on a CPU, the way a real model does on a
fast Mac, so it exposes per-token overheads that a slow forward pass would hide.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def build_tiny_model(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    *,
    layers: int = 2,
    hidden: int = 128,
    heads: int = 4,
    kv_heads: int = 2,
    seed: int = 0,
    context: int = 8192,
) -> Path:
    """Write a random llama MLX folder at `out_dir` that uses the tokenizer in `tokenizer_dir`
    (`context`: the context length its config declares)."""
    from mlx_lm.models import llama

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok_cfg = json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text())
    vocab = len(tok_cfg["model"]["vocab"])
    vocab = max(vocab, 1 + max((t["id"] for t in tok_cfg.get("added_tokens", [])), default=0))
    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": hidden * 3,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "rope_theta": 10000.0,
        "max_position_embeddings": context,
        "tie_word_embeddings": True,
    }
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs(**config))
    # A somewhat larger embedding than the default init gives peaked but varied logits.
    leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    params = {k: v * 2 if k.endswith("embed_tokens.weight") else v for k, v in leaves}
    mx.save_safetensors(str(out / "model.safetensors"), params, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in _TOKENIZER_FILES:
        src = Path(tokenizer_dir) / name
        if src.exists():
            shutil.copy(src, out / name)
    return out
