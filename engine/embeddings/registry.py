"""The embedding and reranker models a server offers, by name.

`EmbeddingSource` is all the server reads; `EmbeddingModels` is the plain one the server's
`--embedding-model` and `--rerank-model` flags fill. A model pool can stand in for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from engine.embeddings.families import Kind
from engine.embeddings.model import EmbeddingModel


class EmbeddingSource(Protocol):
    def get(self, name: str) -> EmbeddingModel | None:
        """The model called `name`, if there is one."""
        ...

    def of_kind(self, kind: Kind) -> list[EmbeddingModel]:
        """Every model of `kind`, in the order they were added."""
        ...


class EmbeddingModels:
    """Loaded embedding and reranker models by name (an EmbeddingSource)."""

    def __init__(self, models: Iterable[EmbeddingModel] = ()) -> None:
        self._models: dict[str, EmbeddingModel] = {}
        for model in models:
            self.add(model)

    def add(self, model: EmbeddingModel) -> None:
        if model.name in self._models:
            raise ValueError(f"two models are called {model.name!r}")
        self._models[model.name] = model

    def get(self, name: str) -> EmbeddingModel | None:
        return self._models.get(name)

    def of_kind(self, kind: Kind) -> list[EmbeddingModel]:
        return [m for m in self._models.values() if m.kind == kind]

    def close(self) -> None:
        for model in self._models.values():
            model.close()
        self._models.clear()
