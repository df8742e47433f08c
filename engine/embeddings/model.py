"""An embedding or reranker model on a thread of its own: `start_loading(spec, kind)`
loads it (`load_embedding_model` waits for it), `embed` and `rerank` queue work for it
and return futures, `close` unloads it.

The model lives on one long-lived worker thread (engine.workers), as a chat model lives on
its engine thread: MLX streams belong to the thread that made them, so loading, every
forward pass and unloading run there, one request after another, each as few forward
passes as its inputs allow. Unloaded, the thread goes back to the worker pool for the
next model (a thread that ran MLX must never exit). A model pool loads these through
engine.pool.embedding and counts `memory_bytes` against its limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from engine.embeddings.families import Kind
from engine.errors import EngineClosedError, ModelLoadError
from engine.workers import WorkerThread, acquire_worker, release_worker

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
    working_bytes: int  # its forward passes' activations at most (engine.embeddings.sizing)
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

    def __init__(self, runner: Runner, info: EmbeddingModelInfo, worker: WorkerThread) -> None:
        self._runner: Runner | None = runner
        self.info = info
        self._worker = worker
        self._lock = threading.Lock()
        self._closed = False

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def kind(self) -> Kind:
        return self.info.kind

    @property
    def memory_bytes(self) -> int:
        """What it holds: its weights and its forward passes' working budget."""
        return self.info.weights_bytes + self.info.working_bytes

    def _submit(self, work: Callable[[Runner], T]) -> Future[T]:
        """`work(runner)` on the model's thread; a future that fails with
        EngineClosedError once the model is unloaded."""
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            runner = self._runner
            if runner is None:  # unloaded before its turn came (never: close queues after)
                future.set_exception(EngineClosedError(f"the model {self.name} is unloaded"))
                return
            try:
                future.set_result(work(runner))
            except BaseException as exc:  # the caller's future carries it
                future.set_exception(exc)

        with self._lock:
            if not self._closed:
                self._worker.put(job)
                return future
        future.set_exception(EngineClosedError(f"the model {self.name} has been unloaded"))
        return future

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
        """Unload (blocking; never from the model's own thread): work already queued
        finishes, then the model's arrays are let go on its thread, and the thread goes
        back to the worker pool."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        unloaded = threading.Event()

        def unload() -> None:
            try:
                if self._runner is not None:
                    self._runner.close()
            finally:
                self._runner = None
                unloaded.set()

        self._worker.put(unload)
        release_worker(self._worker)
        unloaded.wait()


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


def start_loading(
    spec: str,
    kind: Kind = "embedding",
    *,
    name: str | None = None,
    max_tokens: int | None = None,
) -> Future[EmbeddingModel]:
    """Start loading `spec` (an MLX or safetensors folder, or a Hugging Face repo id, then
    downloaded) as an embedding model or a reranker on a worker thread, the thread all its
    work will run on; `max_tokens` caps the tokens it reads per input. The future fails
    with ModelLoadError saying why it cannot load (not found, a family or head
    mlx-embeddings does not run, ...)."""
    out: Future[EmbeddingModel] = Future()
    if spec.lower().endswith(".gguf"):
        out.set_exception(
            ModelLoadError(
                f"{spec}: embedding models load from a safetensors folder or a Hugging Face "
                "repo id, not a GGUF file"
            )
        )
        return out
    worker = acquire_worker()

    def load() -> None:  # on the worker
        from engine.embeddings.compute import Runner
        from engine.library.discovery import model_display_name
        from engine.library.load import resolve_model

        try:
            path = Path(str(resolve_model(spec)))
            runner = Runner(path, kind, max_tokens)
        except BaseException as exc:
            release_worker(worker)
            out.set_exception(exc)
            return
        info = EmbeddingModelInfo(
            name=name or model_display_name(spec, path),
            path=str(path),
            kind=kind,
            family=runner.family.label,
            dimensions=runner.dimensions,
            max_tokens=runner.max_tokens,
            weights_bytes=runner.weights_bytes,
            working_bytes=runner.working_bytes,
            matryoshka=runner.family.matryoshka,
            normalized=runner.pooling.normalize or runner.family.hidden == "library",
        )
        out.set_result(EmbeddingModel(runner, info, worker))

    worker.put(load)
    return out


def load_embedding_model(
    spec: str,
    kind: Kind = "embedding",
    *,
    name: str | None = None,
    max_tokens: int | None = None,
) -> EmbeddingModel:
    """`start_loading`, waited for: the loaded model, or its ModelLoadError raised."""
    return start_loading(spec, kind, name=name, max_tokens=max_tokens).result()
