"""An embedding or reranker model on its own thread: `load_embedding_model(spec, kind)`
loads it, `embed` and `rerank` queue work for it and return futures.

The model lives on one long-lived thread of its own, as the chat engine's model does on
the engine thread (MLX streams belong to the thread that made them); requests to it run
one after another there, each as few forward passes as its inputs allow. A model pool
loads these with the same call and reads `info` for its memory and kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from engine.embeddings.families import Kind
from engine.errors import EngineClosedError, ModelLoadError
from engine.threads import ensure_thread_stack

if TYPE_CHECKING:
    from engine.embeddings.compute import Runner

T = TypeVar("T")


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """What a front end shows and checks about a loaded embedding or reranker model."""

    name: str
    path: str
    kind: Kind
    family: str  # the family's label: "BERT", "Qwen3-Embedding", ...
    dimensions: int  # of its vectors (0 for a reranker)
    max_tokens: int  # per input (per query and document pair for a reranker)
    weights_bytes: int
    matryoshka: bool  # trained so that a vector's first dimensions are an embedding too
    normalized: bool  # its vectors have length 1


@dataclass(frozen=True)
class Embedded:
    """Vectors of a request's inputs, in their order, and each input's token count."""

    vectors: np.ndarray  # (inputs, dimensions), float32
    tokens: list[int]


@dataclass(frozen=True)
class Reranked:
    """Each document's relevance to the query (0 to 1), in the documents' order."""

    scores: list[float]
    tokens: int


Input = str | Sequence[int]


class EmbeddingModel:
    """A loaded embedding or reranker model. Thread-safe: work is queued to its thread."""

    def __init__(self, runner: Runner, info: EmbeddingModelInfo, pool: ThreadPoolExecutor) -> None:
        self._runner = runner
        self.info = info
        self._pool = pool
        self._closed = False

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def kind(self) -> Kind:
        return self.info.kind

    def _submit(self, work: Callable[[Runner], T]) -> Future[T]:
        """`work(runner)` on the model's thread; a future that fails with
        EngineClosedError once the model is unloaded."""
        try:
            if not self._closed:
                return self._pool.submit(work, self._runner)
        except RuntimeError:  # unloaded between the check and the submit
            pass
        failed: Future[T] = Future()
        failed.set_exception(EngineClosedError(f"the model {self.name} has been unloaded"))
        return failed

    def embed(self, inputs: Sequence[Input]) -> Future[Embedded]:
        """The vectors of `inputs` (texts, or token arrays without special tokens: the
        model's are added as for a text). The future raises EmbeddingInputError naming the
        input the model cannot take (too long, a token outside its vocabulary)."""
        if self.kind != "embedding":
            raise ValueError(f"{self.name} is a reranker; it gives no embeddings")
        items = list(inputs)
        return self._submit(lambda runner: _embed(runner, items))

    def rerank(self, query: str, documents: Sequence[str]) -> Future[Reranked]:
        """Each of `documents`' relevance to `query`; a document longer than the model
        reads is cut to fit (as Cohere and Jina do). The future raises
        EmbeddingInputError (index None) where the query alone does not fit."""
        if self.kind != "rerank":
            raise ValueError(f"{self.name} is an embedding model, not a reranker")
        docs = list(documents)
        return self._submit(lambda runner: _rerank(runner, query, docs))

    def close(self) -> None:
        """Unload: queued work finishes, the model's memory goes with its thread."""
        self._closed = True
        self._pool.shutdown(wait=True)
        self._runner = None  # type: ignore[assignment]


def _embed(runner: Runner, inputs: list[Input]) -> Embedded:
    texts = [(i, x) for i, x in enumerate(inputs) if isinstance(x, str)]
    ids: list[list[int]] = [[] for _ in inputs]
    if texts:
        for (i, _), tokens in zip(texts, runner.text_ids([t for _, t in texts]), strict=True):
            ids[i] = tokens
    for i, x in enumerate(inputs):
        if not isinstance(x, str):
            ids[i] = runner.array_ids(x, i)
    for i, tokens in enumerate(ids):
        runner.check_length(tokens, i)
    return Embedded(runner.embed(ids), [len(t) for t in ids])


def _rerank(runner: Runner, query: str, documents: list[str]) -> Reranked:
    if not documents:
        return Reranked([], 0)
    rows = runner.pair_ids(query, documents)
    scores = runner.scores(rows)
    return Reranked([float(s) for s in scores], sum(len(r["input_ids"]) for r in rows))


def shorten(vectors: np.ndarray, dimensions: int, normalize: bool) -> np.ndarray:
    """Matryoshka: the first `dimensions` of each vector, made unit length again where the
    model's vectors are."""
    cut = vectors[:, :dimensions]
    if not normalize:
        return cut
    norms = np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)
    shortened: np.ndarray = (cut / norms).astype(np.float32)
    return shortened


def load_embedding_model(
    spec: str, kind: Kind = "embedding", *, name: str | None = None
) -> EmbeddingModel:
    """Load `spec` (an MLX or safetensors folder, or a Hugging Face repo id) as an embedding
    model or a reranker, on a thread of its own; ModelLoadError saying why it cannot
    (not found, a family or head mlx-embeddings does not run, ...)."""
    from engine.library.discovery import model_display_name
    from engine.library.load import resolve_model

    if spec.lower().endswith(".gguf"):
        raise ModelLoadError(
            f"{spec}: embedding models load from a safetensors folder or a Hugging Face repo "
            "id, not a GGUF file"
        )
    path = Path(str(resolve_model(spec)))
    label = name or model_display_name(spec, path)
    ensure_thread_stack()
    pool = ThreadPoolExecutor(1, thread_name_prefix=f"corral-{kind}")

    def load() -> Runner:
        from engine.embeddings.compute import Runner

        return Runner(path, kind)

    try:
        runner = pool.submit(load).result()
    except BaseException:
        pool.shutdown(wait=False)
        raise
    info = EmbeddingModelInfo(
        name=label,
        path=str(path),
        kind=kind,
        family=runner.family.label,
        dimensions=runner.dimensions,
        max_tokens=runner.max_tokens,
        weights_bytes=runner.weights_bytes,
        matryoshka=runner.family.matryoshka,
        normalized=runner.pooling.normalize or runner.family.hidden == "library",
    )
    return EmbeddingModel(runner, info, pool)
