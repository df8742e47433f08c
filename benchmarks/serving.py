"""Bench section `serving`: embeddings, rerank and keep-alives through the server.

- `embeddings_identical`: the share of covered embedding families (a tiny random model of
  each, built from mlx-embeddings' own classes) whose vectors from `/v1/embeddings`, asked
  through the official `openai` client, equal the library's own computed directly (each
  input alone) to within 1e-5; goal 1.0. `embeddings_max_abs_diff` is the largest
  difference seen.
- `rerank_identical`: the same for `/v1/rerank`'s relevance scores against the library's
  cross-encoder head; goal 1.0.
- `embeddings_tps_ratio`: input tokens per second through Corral's server (the `openai`
  client, base64 vectors, from the caller's seat) over mlx-embeddings' `generate` called
  directly on the same inputs, on a random model the shape of all-MiniLM-L6-v2 and an
  editor's index of this repository's source in chunks; alternating rounds, the median
  and its spread (`_spread`); goal at least 0.95. The two sides' tokens/s are beside it.
- `keepalive_ok`: the share of requests (chat completions, Responses and Messages, each
  streamed and not) answered to a client whose read timeout is shorter than the prompt's
  prefill (made slow on purpose: benchmarks/slow_prefill.py); goal 1.0.
  `keepalive_failures` says how each other one failed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.embedding_reference import library_scores, library_vectors, load_library
from benchmarks.rounds import alternate, is_quick, paired_figures
from benchmarks.slow_prefill import slowed
from benchmarks.tiny_embedding_models import (
    EMBEDDING_FAMILIES,
    build_embedding_model,
    build_minilm_shaped,
)
from engine.embeddings import EmbeddingModels, load_embedding_model
from engine.server import HTTPServer, ServerConfig

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-5
TEXTS = [
    "Corral serves several models from one address",
    "a",
    "The editor's codebase index asks for embeddings of every file, in batches.",
]
QUERY = "which one serves embeddings"
DOCUMENTS = ["Corral serves embeddings at /v1/embeddings", "a cat on a mat", "embeddings"]
CHUNK_CHARS = 400  # an editor's index chunk: a few lines of code
PREFILL_DELAY_S = 2.5  # as tests/test_server_keepalive.py: a margin for a busy machine
READ_TIMEOUT_S = 1.5
KEEP_ALIVE_S = 0.1


def index_chunks(count: int) -> list[str]:
    """`count` pieces of this repository's engine source, as an editor's index cuts them."""
    chunks: list[str] = []
    for path in sorted((REPO / "engine").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for start in range(0, len(text), CHUNK_CHARS):
            piece = text[start : start + CHUNK_CHARS].strip()
            if piece:
                chunks.append(piece)
            if len(chunks) == count:
                return chunks
    return chunks


def _openai(server: HTTPServer, timeout: Any = 600.0) -> Any:
    import openai

    return openai.OpenAI(
        base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=timeout
    )


def _identity(server: HTTPServer, folders: dict[str, Path], reranker: Path) -> dict[str, Any]:
    client = _openai(server)
    same, worst = 0, 0.0
    for name, folder in folders.items():
        reply = client.embeddings.create(model=name, input=TEXTS)
        got = np.array([d.embedding for d in reply.data], np.float32)
        diff = float(np.abs(got - library_vectors(folder, TEXTS)).max())
        worst = max(worst, diff)
        same += diff <= TOLERANCE
    import httpx

    ranked = httpx.post(
        server.url + "/v1/rerank",
        json={"model": "reranker", "query": QUERY, "documents": DOCUMENTS},
        timeout=600,
    ).json()["results"]
    expected = library_scores(reranker, QUERY, DOCUMENTS)
    scores_same = all(abs(r["relevance_score"] - expected[r["index"]]) <= TOLERANCE for r in ranked)
    return {
        "embeddings_identical": round(same / len(folders), 3),
        "embeddings_families": len(folders),
        "embeddings_max_abs_diff": worst,
        "rerank_identical": 1.0 if scores_same and len(ranked) == len(DOCUMENTS) else 0.0,
    }


def _speed(server: HTTPServer, folder: Path, rounds: int, inputs: int) -> dict[str, Any]:
    import mlx.core as mx
    from mlx_embeddings import generate

    texts = index_chunks(inputs)
    client = _openai(server)
    model, tokenizer = load_library(folder)

    def corral() -> tuple[float, int]:
        sent = time.perf_counter()
        reply = client.embeddings.create(model="minilm", input=texts)
        return time.perf_counter() - sent, reply.usage.prompt_tokens

    def library() -> float:
        sent = time.perf_counter()
        out = generate(model, tokenizer, texts)
        mx.eval(out.text_embeds)
        np.array(out.text_embeds)  # the vectors in the caller's hands, as the client's are
        return time.perf_counter() - sent

    _, tokens = corral()  # warm-up, both sides
    library()
    pairs: list[tuple[float, float]] = []
    for r in range(rounds):
        times: dict[bool, float] = {}
        for corral_turn in alternate(r):
            times[corral_turn] = corral()[0] if corral_turn else library()
        pairs.append((tokens / times[True], tokens / times[False]))
    return {
        **paired_figures("embeddings_tps_ratio", pairs),
        "embeddings_server_tps": round(float(np.median([a for a, _ in pairs])), 1),
        "embeddings_library_tps": round(float(np.median([b for _, b in pairs])), 1),
        "embeddings_tokens": tokens,
        "embeddings_inputs": len(texts),
        "embeddings_rounds": rounds,
    }


def _keep_alive(engine: Any) -> dict[str, Any]:
    import anthropic
    import httpx
    import httpx2
    import openai

    model = engine.snapshot.model.name
    server = HTTPServer(engine, ServerConfig(port=0, keep_alive_s=KEEP_ALIVE_S))
    server.start()
    client = _openai(server, httpx.Timeout(READ_TIMEOUT_S, connect=30.0))
    claude = anthropic.Anthropic(
        base_url=server.url,
        api_key="unused",
        max_retries=0,
        timeout=httpx2.Timeout(READ_TIMEOUT_S, connect=30.0),
    )

    def ask() -> list[Any]:  # a prompt the prefix cache has not seen
        return [{"role": "user", "content": f"{uuid.uuid4().hex} Say hello."}]

    def chat(stream: bool) -> None:
        reply = client.chat.completions.create(
            model=model, messages=ask(), max_tokens=2, stream=stream
        )
        list(reply) if stream else reply.choices[0]

    def responses(stream: bool) -> None:
        text = ask()[0]["content"]
        reply = client.responses.create(model=model, input=text, max_output_tokens=2, stream=stream)
        list(reply) if stream else reply.output

    def messages(stream: bool) -> None:
        if stream:
            with claude.messages.stream(model=model, max_tokens=2, messages=ask()) as s:
                s.get_final_message()
        else:
            claude.messages.create(model=model, max_tokens=2, messages=ask())

    failures: list[str] = []
    runs = [(fn, stream) for fn in (chat, responses, messages) for stream in (True, False)]
    try:
        with slowed(engine, PREFILL_DELAY_S):
            for fn, stream in runs:
                try:
                    fn(stream)
                except (openai.APIError, anthropic.APIError, httpx.HTTPError) as exc:
                    how = "streamed" if stream else "whole"
                    failures.append(f"{fn.__name__} {how}: {type(exc).__name__}: {exc}")
    finally:
        server.stop()
    return {
        "keepalive_ok": round(1 - len(failures) / len(runs), 3),
        "keepalive_runs": len(runs),
        "keepalive_failures": failures,
    }


def serving_figures(
    engine: Any, rounds: int, inputs: int, families: tuple[str, ...] = tuple(EMBEDDING_FAMILIES)
) -> dict[str, Any]:
    """The section's figures over `families`, timing `inputs` chunks in `rounds` rounds."""
    from engine.library.load import ensure_default_model

    tokenizer_dir = ensure_default_model()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="corral-serving-") as tmp:
        root = Path(tmp)
        folders = {
            name: build_embedding_model(name, root / name, tokenizer_dir) for name in families
        }
        reranker = build_embedding_model(
            "modernbert", root / "reranker", tokenizer_dir, rerank=True
        )
        timed = build_minilm_shaped(root / "minilm", tokenizer_dir)
        models = EmbeddingModels()
        try:
            for name, folder in folders.items():
                models.add(load_embedding_model(str(folder), name=name))
            models.add(load_embedding_model(str(reranker), "rerank", name="reranker"))
            models.add(load_embedding_model(str(timed), name="minilm"))
            server = HTTPServer(engine, ServerConfig(port=0), embeddings=models)
            server.start()
            try:
                figures.update(_identity(server, folders, reranker))
                figures.update(_speed(server, timed, rounds, inputs))
            finally:
                server.stop()
        finally:
            models.close()
    figures.update(_keep_alive(engine))
    return figures


def run_serving_bench(engine: Any, args: argparse.Namespace) -> dict[str, Any]:
    # a smoke run (`--quick`) times one round
    rounds = 1 if is_quick(args) else max(3, args.repeats)
    return serving_figures(engine, rounds=rounds, inputs=32)
