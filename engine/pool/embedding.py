"""Embedding and rerank models as a pool's backends: `EMBEDDING_LOADERS` is what
`ModelPool(loaders=...)` takes to serve them beside chat models.

A model loads through engine.embeddings' `start_loading`, on a worker thread that runs all
its work (MLX streams belong to the thread that made them) and goes back to the worker
pool when the model unloads. What it holds, counted against the pool's limit, is its
weights and the working budget of its forward passes (engine.embeddings.sizing); it keeps
no KV cache (`LoadOrder.kv_budget_bytes` is None for these kinds). The server holds a
Lease while a request's work runs, so the pool never unloads a model mid-request.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING

from engine.pool.backends import Backend, BackendLoader, LoadOrder
from engine.types import ModelInfo, ModelKind

if TYPE_CHECKING:
    from engine.embeddings import EmbeddingModel


class EmbeddingBackend:
    """An embedding or rerank model of a pool (its `model` does the work)."""

    def __init__(self, model: EmbeddingModel) -> None:
        self.model = model
        info = model.info
        self._info = ModelInfo(
            name=info.name,
            path=info.path,
            weights_bytes=info.weights_bytes,
            context_length=info.max_tokens,
            has_chat_template=False,
            dimensions=info.dimensions or None,
        )

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def memory_bytes(self) -> int:
        return self.model.memory_bytes

    def close(self) -> None:
        self.model.close()


def load_embedding(order: LoadOrder) -> Future[Backend]:
    """Start loading `order`'s model as its kind (embedding or rerank), named by the
    pool's id, reading at most its `context_length` setting's tokens per input."""
    from engine.embeddings import start_loading

    if order.kind == "chat":
        raise ValueError(f"{order.id} is a chat model, not an embedding or rerank model")
    loading = start_loading(
        order.spec,
        order.kind,
        name=order.id,
        max_tokens=order.settings.context_length,
    )
    out: Future[Backend] = Future()

    def done(future: Future[EmbeddingModel]) -> None:  # on the model's worker
        error = future.exception()
        if error is not None:
            out.set_exception(error)
        else:
            out.set_result(EmbeddingBackend(future.result()))

    loading.add_done_callback(done)
    return out


EMBEDDING_LOADERS: Mapping[ModelKind, BackendLoader] = {
    "embedding": load_embedding,
    "rerank": load_embedding,
}
