"""`/v1/embeddings` and `/v1/rerank` through the official `openai` client and raw HTTP, over
a model pool serving a chat model beside embedding and rerank models: the vectors and
scores are mlx-embeddings' own, in OpenAI's, Cohere's and Jina's shapes, every refusal is
a 400 naming its field, and an embedding model is unloaded for a chat model's room when
the limit holds not both (never while its work runs)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.embedding_reference import library_scores, library_vectors
from engine.embeddings import shorten
from engine.pool import EMBEDDING_LOADERS, ModelPool
from engine.server import HTTPServer
from tests.pool_support import make_pool, state_of, wait_until
from tests.server_support import openai_client, serving

TEXTS = ["Corral serves embeddings", "an editor indexes its files", "b"]
QUERY = "which one serves embeddings"
DOCUMENTS = ["Corral serves embeddings at /v1/embeddings", "a cat on a mat", "embeddings"]


@pytest.fixture(scope="module")
def folders(embedding_model_dirs: dict[str, Path]) -> dict[str, Path]:
    return {name: embedding_model_dirs[name] for name in ("bert", "qwen3", "reranker")}


@pytest.fixture(scope="module")
def pool(tiny_model_dir: Path, folders: dict[str, Path]) -> Iterator[ModelPool]:
    """The tiny chat model (the default) and three embedding and rerank models, each named
    by its folder, in a pool with room for all of them: two listed as their files say
    (as `serve --model FOLDER` lists them), one with its kind given."""
    pool = make_pool(tiny_model_dir, loaders=EMBEDDING_LOADERS)
    pool.add_model(str(folders["bert"]))
    pool.add_model(str(folders["qwen3"]), kind="embedding")  # a chat model's type
    pool.add_model(str(folders["reranker"]))
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def server(pool: ModelPool) -> Iterator[HTTPServer]:
    with serving(pool) as running:
        yield running


def post(server: HTTPServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def refused(server: HTTPServer, path: str, body: dict[str, Any], param: str) -> str:
    """The message of a 400 that names `param`."""
    response = post(server, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    assert error["message"].startswith(param), error
    return str(error["message"])


def test_the_openai_client_gets_the_librarys_vectors(
    server: HTTPServer, folders: dict[str, Path]
) -> None:
    client = openai_client(server)
    expected = library_vectors(folders["qwen3"], TEXTS)
    # the client asks for base64 by default and decodes float32 itself
    default = client.embeddings.create(model="qwen3", input=TEXTS)
    floats = client.embeddings.create(model="qwen3", input=TEXTS, encoding_format="float")
    for reply in (default, floats):
        assert reply.model == "qwen3" and [d.index for d in reply.data] == [0, 1, 2]
        got = np.array([d.embedding for d in reply.data], np.float32)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_array_equal(
        np.array(default.data[0].embedding, np.float32),
        np.array(floats.data[0].embedding, np.float32),
    )
    assert default.usage.prompt_tokens == default.usage.total_tokens > len(TEXTS)


def test_one_string_token_arrays_and_the_default_model(
    server: HTTPServer, folders: dict[str, Path]
) -> None:
    from transformers import AutoTokenizer

    tokens = AutoTokenizer.from_pretrained(str(folders["bert"]))(
        TEXTS[0], add_special_tokens=False
    )["input_ids"]
    one = post(server, "/v1/embeddings", {"input": TEXTS[0]}).json()  # no model: the first
    array = post(server, "/v1/embeddings", {"input": tokens, "model": "bert"}).json()
    arrays = post(server, "/v1/embeddings", {"input": [tokens, tokens[:2]]}).json()
    assert one["model"] == "bert" and len(one["data"]) == 1 and len(arrays["data"]) == 2
    expected = library_vectors(folders["bert"], [TEXTS[0]])[0]
    for reply in (one, array, arrays):
        np.testing.assert_allclose(reply["data"][0]["embedding"], expected, atol=1e-5)
    assert one["usage"]["prompt_tokens"] == array["usage"]["prompt_tokens"] == len(tokens) + 2


def test_dimensions_shorten_a_matryoshka_models_vectors_and_no_other(
    server: HTTPServer, folders: dict[str, Path]
) -> None:
    client = openai_client(server)
    reply = client.embeddings.create(model="qwen3", input=TEXTS, dimensions=8)
    got = np.array([d.embedding for d in reply.data], np.float32)
    expected = shorten(library_vectors(folders["qwen3"], TEXTS), 8, normalize=True)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    whole = client.embeddings.create(model="bert", input="x", dimensions=32)
    assert len(whole.data[0].embedding) == 32  # all of a model's dimensions: always fine
    message = refused(
        server, "/v1/embeddings", {"model": "bert", "input": "x", "dimensions": 8}, "dimensions"
    )
    assert "Matryoshka" in message and "32 dimensions" in message
    message = refused(
        server, "/v1/embeddings", {"model": "qwen3", "input": "x", "dimensions": 64}, "dimensions"
    )
    assert "more than the 32" in message


def test_inputs_the_model_cannot_take_are_refused_by_place(server: HTTPServer) -> None:
    path = "/v1/embeddings"
    refused(server, path, {"input": []}, "input")
    refused(server, path, {"input": ""}, "input")
    refused(server, path, {"input": ["a", 3]}, "input[1]")
    refused(server, path, {"input": ["a", ""]}, "input[1]")
    refused(server, path, {"input": [[1, 2], [3, "x"]]}, "input[1][1]")
    refused(server, path, {"input": [[1, 2], []]}, "input[1]")
    assert "vocabulary" in refused(server, path, {"input": [[1, 10**7]]}, "input[0]")
    assert "at most 64" in refused(server, path, {"input": ["ok", "long " * 100]}, "input[1]")
    assert "at most 64" in refused(server, path, {"input": "long " * 100}, "input")
    refused(server, path, {"input": "x", "encoding_format": "int8"}, "encoding_format")
    unknown = post(server, path, {"input": "x", "task": "retrieval"}).json()["error"]
    assert unknown["param"] == "task" and unknown["code"] == "unknown_parameter"


def test_a_request_names_its_model(server: HTTPServer, pool: ModelPool) -> None:
    chat = pool.snapshot.find_model(None)
    assert chat is not None and chat.kind == "chat"  # the default is the chat model
    path = "/v1/embeddings"
    assert "reranker" in refused(server, path, {"input": "x", "model": "reranker"}, "model")
    assert "chat model" in refused(server, path, {"input": "x", "model": chat.id}, "model")
    missing = post(server, path, {"input": "x", "model": "nomic-embed"})
    assert missing.status_code == 404 and "'bert', 'qwen3'" in missing.text
    listed = {m.id: m for m in openai_client(server).models.list().data}
    assert listed[chat.id].kind == "chat"  # type: ignore[attr-defined]
    assert listed["bert"].kind == "embedding"  # type: ignore[attr-defined]
    assert listed["reranker"].kind == "rerank"  # type: ignore[attr-defined]
    post(server, path, {"input": "x", "model": "qwen3"})
    card = httpx.get(server.url + "/v1/models/qwen3").json()
    assert card["dimensions"] == 32 and card["context_length"] == 96 and card["loaded"]
    # a chat endpoint refuses an embedding model by its kind
    hi = [{"role": "user", "content": "hi"}]
    chat_reply = post(server, "/v1/chat/completions", {"model": "qwen3", "messages": hi})
    assert chat_reply.status_code == 400 and "embedding model" in chat_reply.text


def test_rerank_in_jinas_and_coheres_shapes(server: HTTPServer, folders: dict[str, Path]) -> None:
    expected = library_scores(folders["reranker"], QUERY, DOCUMENTS)
    order = sorted(range(3), key=lambda i: -expected[i])
    jina = post(server, "/v1/rerank", {"model": "reranker", "query": QUERY, "documents": DOCUMENTS})
    body = jina.json()
    assert jina.status_code == 200 and body["model"] == "reranker"
    assert [r["index"] for r in body["results"]] == order
    for result in body["results"]:
        assert result["relevance_score"] == pytest.approx(expected[result["index"]], abs=1e-5)
        assert result["document"] == {"text": DOCUMENTS[result["index"]]}
    assert body["usage"]["total_tokens"] > 0
    # Cohere's v2 path, documents as objects, the best one only, without the documents
    objects = [{"text": d, "id": f"doc-{i}"} for i, d in enumerate(DOCUMENTS)]
    cohere = post(
        server,
        "/v2/rerank",
        {"query": QUERY, "documents": objects, "top_n": 1, "return_documents": False},
    ).json()
    assert cohere["results"] == [
        {"index": order[0], "relevance_score": body["results"][0]["relevance_score"]}
    ]
    echoed = post(server, "/v1/rerank", {"query": QUERY, "documents": objects, "top_n": 2}).json()
    assert echoed["results"][0]["document"] == objects[order[0]]


def test_rerank_refusals_name_their_field(server: HTTPServer) -> None:
    path = "/v1/rerank"
    refused(server, path, {"query": QUERY}, "documents")
    refused(server, path, {"query": QUERY, "documents": []}, "documents")
    refused(server, path, {"query": QUERY, "documents": ["a", 3]}, "documents[1]")
    refused(server, path, {"query": QUERY, "documents": ["a", {"txt": "b"}]}, "documents[1].text")
    refused(server, path, {"query": "", "documents": ["a"]}, "query")
    refused(server, path, {"query": QUERY, "documents": ["a"], "top_n": 0}, "top_n")
    assert "at most 96" in refused(server, path, {"query": "q " * 200, "documents": ["a"]}, "query")
    assert "embedding model" in refused(
        server, path, {"model": "bert", "query": QUERY, "documents": ["a"]}, "model"
    )


def test_an_embedding_model_makes_room_for_a_chat_model_and_back(
    tiny_model_dir: Path, folders: dict[str, Path]
) -> None:
    """Under a limit that holds the chat model or the embedding model but not both, the
    `openai` client's requests to each in turn are all answered: the one used least
    recently is unloaded for the other, and never one whose work is running (a lease)."""
    import openai

    pool = make_pool(tiny_model_dir, loaders=EMBEDDING_LOADERS, load_wait_s=2.0)
    try:
        chat = pool.snapshot.find_model(None)
        assert chat is not None
        bert = pool.add_model(str(folders["bert"]), kind="embedding")
        for name in (chat.id, bert):  # what each holds, measured
            pool.ensure_loaded(name).result(timeout=120)
        snap = pool.snapshot.pool
        assert snap is not None
        sizes = [m.memory_bytes for m in snap.models]
        assert all(sizes) and snap.find(bert).kind == "embedding"  # type: ignore[union-attr]
        limit = max(sizes) + min(sizes) // 2
        pool.set_memory_limit(limit)
        wait_until(lambda: pool.snapshot.pool.held_bytes <= limit)  # type: ignore[union-attr]
        hi = [{"role": "user", "content": "hi"}]
        with serving(pool) as server:
            client = openai_client(server)
            expected = library_vectors(folders["bert"], TEXTS)
            reply = client.embeddings.create(model=bert, input=TEXTS)
            got = np.array([d.embedding for d in reply.data], np.float32)
            np.testing.assert_allclose(got, expected, atol=1e-5)
            assert state_of(pool, chat.id) == "unloaded"  # it made room (the lease below too)
            answer = client.chat.completions.create(model=chat.id, messages=hi, max_tokens=2)  # type: ignore[arg-type]
            assert answer.model == chat.id and state_of(pool, bert) == "unloaded"
            listed = {m.id: m for m in client.models.list().data}
            assert listed[bert].kind == "embedding" and not listed[bert].loaded  # type: ignore[attr-defined]
            with pool.lease(bert, "embedding").result(timeout=60):  # as a request's work
                with pytest.raises(openai.APIStatusError) as busy:
                    client.chat.completions.create(model=chat.id, messages=hi, max_tokens=2)  # type: ignore[arg-type]
                assert busy.value.status_code == 503 and busy.value.response.headers["retry-after"]
                assert state_of(pool, bert) == "loaded"
            answer = client.chat.completions.create(model=chat.id, messages=hi, max_tokens=2)  # type: ignore[arg-type]
            assert answer.model == chat.id and state_of(pool, bert) == "unloaded"
            assert pool.snapshot.pool.held_bytes <= limit  # type: ignore[union-attr]
    finally:
        pool.close()


def test_a_server_without_embedding_models_says_how_to_add_one(tiny_model_dir: Path) -> None:
    pool = make_pool(tiny_model_dir, loaders=EMBEDDING_LOADERS)
    with serving(pool) as bare:
        reply = post(bare, "/v1/embeddings", {"input": "x"})
        assert reply.status_code == 404 and "--embedding-model" in reply.json()["error"]["message"]
        rerank = post(bare, "/v1/rerank", {"query": "q", "documents": ["a"]})
        assert rerank.status_code == 404 and "--rerank-model" in rerank.text
    pool.close()


def test_an_engine_of_one_model_serves_no_embeddings(tiny_engine: Any) -> None:
    with serving(tiny_engine) as single:
        reply = post(single, "/v1/embeddings", {"input": "x"})
        assert reply.status_code == 404 and "model pool" in reply.json()["error"]["message"]


def test_base64_is_little_endian_float32() -> None:
    from engine.server.embeddings import encode_vector

    vector = np.array([1.5, -2.0], np.float32)
    decoded = np.frombuffer(base64.b64decode(encode_vector(vector, "base64")), "<f4")
    np.testing.assert_array_equal(decoded, vector)
    assert encode_vector(vector, "float") == [1.5, -2.0]


def test_the_serve_command_loads_its_embedding_and_rerank_models(
    tiny_model_dir: Path, folders: dict[str, Path], tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    import openai

    command = [
        *(sys.executable, "-m", "engine", "serve", "--model", str(tiny_model_dir)),
        *("--model", str(folders["bert"])),  # an embedding model, as its files say
        *("--port", "0", "--embedding-model", str(folders["qwen3"])),
        *("--rerank-model", str(folders["reranker"]), "--keep-alive-s", "2"),
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORRAL_LOG_DIR": str(tmp_path)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Serving tiny"), line
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        listed = [proc.stdout.readline().strip() for _ in range(3)]
        assert listed == [
            f"bert (embedding model) at {url}/v1/embeddings",
            f"qwen3 (embedding model) at {url}/v1/embeddings",
            f"reranker (rerank model) at {url}/v1/rerank",
        ]
        cards = httpx.get(url + "/v1/models").json()["data"]
        kinds = {c["id"]: (c["kind"], c["loaded"]) for c in cards}
        assert kinds == {  # the flags' loaded at start, the chat model last
            tiny_model_dir.name: ("chat", True),
            "bert": ("embedding", False),  # a --model loads on its first request
            "qwen3": ("embedding", True),
            "reranker": ("rerank", True),
        }
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        first = client.embeddings.create(model="bert", input=TEXTS)
        assert first.model == "bert"
        np.testing.assert_allclose(
            [d.embedding for d in first.data], library_vectors(folders["bert"], TEXTS), atol=1e-5
        )
        chat = client.chat.completions.create(
            model=tiny_model_dir.name, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert chat.model == tiny_model_dir.name
        reply = client.embeddings.create(model="qwen3", input=TEXTS)
        np.testing.assert_allclose(
            [d.embedding for d in reply.data],
            library_vectors(folders["qwen3"], TEXTS),
            atol=1e-5,
        )
        ranked = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})
        assert ranked.status_code == 200 and len(ranked.json()["results"]) == 3
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "200 /v1/embeddings: " in err and "200 /v1/rerank: " in err
    assert f"/v1/embeddings: {reply.usage.total_tokens} tokens" in err
