"""What an embedding or reranker model holds in memory: its weights and the working
budget of its forward passes, and both read from a folder's files before it loads (what a
model pool counts against its limit). No MLX here.

The working budget is the most one forward pass's activations may hold, in float32: a
full batch (engine.embeddings.batching: BATCH_TOKENS padded tokens, or BATCH_INPUTS of
the longest inputs the model reads) of hidden states with attention's four projections
and the feed-forward's widest layer beside them. A chat model's KV budget plays this part
for a chat model; an embedding model keeps nothing between requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.embeddings.batching import BATCH_INPUTS, BATCH_TOKENS
from engine.embeddings.families import FAMILIES, position_limit

FLOAT32 = 4
DEFAULT_MAX_TOKENS = 8192  # where neither the config nor the tokenizer says


def working_bytes(config: dict[str, Any], max_tokens: int) -> int:
    """The working budget (see the module's docstring) of a model whose config.json is
    `config`, reading at most `max_tokens` tokens per input."""
    text = config.get("text_config")
    if isinstance(text, dict) and "hidden_size" not in config:
        config = text
    hidden = _int(config.get("hidden_size"))
    inner = _int(config.get("intermediate_size")) or 4 * hidden
    tokens = min(BATCH_TOKENS, BATCH_INPUTS * max(1, max_tokens))
    return tokens * (4 * hidden + inner) * FLOAT32


def max_tokens_of(config: dict[str, Any], cap: int | None = None) -> int:
    """Tokens per input the config's positions allow (capped at `cap`, a setting)."""
    model_type = str(config.get("model_type", "")).replace("-", "_")
    family = FAMILIES.get(model_type)
    limit = position_limit(family, config) if family is not None else None
    tokens = limit or DEFAULT_MAX_TOKENS
    return min(tokens, cap) if cap else tokens


def estimate(folder: Path, max_tokens: int | None = None) -> tuple[int, int, int] | None:
    """(weights, working budget, tokens per input) of the model in `folder`, from its
    config.json and safetensors files' sizes, with inputs capped at `max_tokens`; None
    where the folder does not say (not a folder, no config, no weights yet)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        weights = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(config, dict) or not weights:
        return None
    tokens = max_tokens_of(config, max_tokens)
    return weights, working_bytes(config, tokens), tokens


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
