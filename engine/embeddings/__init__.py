"""Embedding and reranker models over mlx-embeddings: load, batch, pool, normalise, score.

`families` (what mlx-embeddings runs that Corral serves), `pooling` (the pooling a
sentence-transformers folder asks for), `batching` (which inputs share a forward pass),
`compute` (the models at work, MLX, on their own thread), `model` (EmbeddingModel and
`load_embedding_model`), `registry` (models by name, for the server). Nothing here imports
MLX at module level but `compute`, which only the model's own thread loads.
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
)
from engine.embeddings.registry import EmbeddingModels, EmbeddingSource

__all__ = [
    "FAMILIES",
    "RERANK_ARCHITECTURES",
    "Embedded",
    "EmbeddingModel",
    "EmbeddingModelInfo",
    "EmbeddingModels",
    "EmbeddingSource",
    "Kind",
    "Reranked",
    "load_embedding_model",
    "shorten",
]
