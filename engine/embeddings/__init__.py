"""Embedding and reranker models over mlx-embeddings: load, batch, pool, normalise, score.

`families` (what mlx-embeddings runs that Corral serves), `pooling` (the pooling a
sentence-transformers folder asks for), `batching` (which inputs share a forward pass),
`compute` (the models at work, MLX, on their own thread), `sizing` (weights and working
budget, read from a folder before it loads), `model` (EmbeddingModel, `start_loading` and
`load_embedding_model`). A model pool serves these (engine.pool.embedding). Nothing here
imports MLX at module level but `compute`, which only the model's own thread loads.
"""

from __future__ import annotations

from engine.embeddings.families import FAMILIES, RERANK_ARCHITECTURES, Kind
from engine.embeddings.model import (
    Embedded,
    EmbeddingModel,
    EmbeddingModelInfo,
    Reranked,
    load_embedding_model,
    shorten,
    start_loading,
)

__all__ = [
    "FAMILIES",
    "RERANK_ARCHITECTURES",
    "Embedded",
    "EmbeddingModel",
    "EmbeddingModelInfo",
    "Kind",
    "Reranked",
    "load_embedding_model",
    "shorten",
    "start_loading",
]
