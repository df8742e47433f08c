"""The model families mlx-embeddings runs that Corral serves, and what each one is.

Each family names how mlx-embeddings' model class gives its token vectors, how it pools
them, how many tokens its positions allow, whether it was trained so that a prefix of its
vector is an embedding too (Matryoshka, for `dimensions`), and which reranker heads it has.
No MLX here: `engine.embeddings.compute` runs the models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.embeddings.pooling import Pooling
from engine.errors import ModelLoadError

# How a family's token vectors are read: "output" is the library model's
# `last_hidden_state`; "encoder" calls its inner encoder (`model.model`), for classes whose
# output pools first; "library" takes the library's own `text_embeds` (families that pool
# and project inside, with Dense layers Corral must not skip).
Hidden = Literal["output", "encoder", "library"]
Kind = Literal["embedding", "rerank"]


@dataclass(frozen=True)
class Family:
    model_type: str
    label: str
    hidden: Hidden
    pooling: Pooling  # how mlx-embeddings pools this family
    matryoshka: bool = False
    # position ids start after the padding id (RoBERTa's layout): fewer tokens fit
    position_offset: bool = False


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        Family("bert", "BERT", "output", "mean"),
        Family("xlm_roberta", "XLM-RoBERTa", "output", "mean", position_offset=True),
        Family("modernbert", "ModernBERT", "encoder", "mean"),
        Family("qwen3", "Qwen3-Embedding", "output", "last", matryoshka=True),
        Family("gemma3_text", "EmbeddingGemma", "library", "mean", matryoshka=True),
        Family("llama_bidirec", "Llama (bidirectional)", "output", "mean"),
    )
}

# Cross-encoder heads mlx-embeddings computes: the architecture, and the family it runs on.
RERANK_ARCHITECTURES = {"ModernBertForSequenceClassification": "modernbert"}


def family_of(config: dict[str, Any], kind: Kind, where: str) -> Family:
    """The family of a model whose config.json is `config` (at `where`), able to serve as
    `kind`; ModelLoadError saying what is covered otherwise."""
    model_type = str(config.get("model_type", "")).replace("-", "_")
    family = FAMILIES.get(model_type)
    if family is None:
        covered = ", ".join(f"{f.label} ({f.model_type})" for f in FAMILIES.values())
        raise ModelLoadError(
            f"{where}: model type {model_type or 'unknown'!r} is not an embedding family "
            f"Corral serves; covered: {covered}"
        )
    head = rerank_head(config)
    if kind == "rerank" and head is None:
        known = ", ".join(RERANK_ARCHITECTURES)
        raise ModelLoadError(
            f"{where}: not a reranker (its architectures are {config.get('architectures')}); "
            f"covered cross-encoders: {known}"
        )
    if kind == "embedding" and head is not None:
        raise ModelLoadError(
            f"{where}: {head} is a reranker (a cross-encoder scores pairs, it gives no "
            "embeddings); serve it with --rerank-model"
        )
    return family


def rerank_head(config: dict[str, Any]) -> str | None:
    """The cross-encoder architecture `config` declares, if it is one Corral runs."""
    architectures = config.get("architectures") or []
    model_type = str(config.get("model_type", "")).replace("-", "_")
    for name in architectures if isinstance(architectures, list) else []:
        if RERANK_ARCHITECTURES.get(name) == model_type:
            return str(name)
    return None


def position_limit(family: Family, config: dict[str, Any]) -> int | None:
    """How many tokens the model's positions allow (None: the config does not say)."""
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or limit <= 0:
        return None
    if family.position_offset:  # positions count from pad_token_id + 1
        limit -= int(config.get("pad_token_id", 1)) + 1
    return limit
