"""`/v1/embeddings` and `/v1/rerank` through the official `openai` client and raw HTTP: the
vectors and scores are mlx-embeddings' own, in OpenAI's, Cohere's and Jina's shapes, and
every refusal is a 400 naming its field."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.embedding_reference import library_scores, library_vectors
from engine.embeddings import EmbeddingModels, load_embedding_model, shorten
from engine.server import HTTPServer
from tests.server_support import openai_client, serving

TEXTS = ["Corral serves embeddings", "an editor indexes its files", "b"]
QUERY = "which one serves embeddings"
DOCUMENTS = ["Corral serves embeddings at /v1/embeddings", "a cat on a mat", "embeddings"]


@pytest.fixture(scope="module")
def folders(embedding_model_dirs: dict[str, Path]) -> dict[str, Path]:
    return {name: embedding_model_dirs[name] for name in ("bert", "qwen3", "reranker")}


@pytest.fixture(scope="module")
def server(tiny_engine: Any, folders: dict[str, Path]) -> Iterator[HTTPServer]:
    models = EmbeddingModels(
        [
            load_embedding_model(str(folders["bert"])),
            load_embedding_model(str(folders["qwen3"])),
            load_embedding_model(str(folders["reranker"]), "rerank"),
        ]
    )
    try:
        with serving(tiny_engine, embeddings=models) as running:
            yield running
    finally:
        models.close()


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


def test_a_request_names_its_model(server: HTTPServer, tiny_engine: Any) -> None:
    chat = tiny_engine.snapshot.model.name
    path = "/v1/embeddings"
    assert "reranker" in refused(server, path, {"input": "x", "model": "reranker"}, "model")
    assert "chat model" in refused(server, path, {"input": "x", "model": chat}, "model")
    missing = post(server, path, {"input": "x", "model": "nomic-embed"})
    assert missing.status_code == 404 and "'bert', 'qwen3'" in missing.text
    listed = {m.id: m for m in openai_client(server).models.list().data}
    assert chat in listed and listed["bert"].kind == "embedding"  # type: ignore[attr-defined]
    assert listed["reranker"].kind == "rerank"  # type: ignore[attr-defined]
    card = httpx.get(server.url + "/v1/models/qwen3").json()
    assert card["dimensions"] == 32 and card["max_tokens"] == 96


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


def test_a_server_without_embedding_models_says_how_to_add_one(tiny_engine: Any) -> None:
    with serving(tiny_engine) as bare:
        reply = post(bare, "/v1/embeddings", {"input": "x"})
        assert reply.status_code == 404 and "--embedding-model" in reply.json()["error"]["message"]
        rerank = post(bare, "/v1/rerank", {"query": "q", "documents": ["a"]})
        assert rerank.status_code == 404 and "--rerank-model" in rerank.text


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
        listed = [proc.stdout.readline().strip() for _ in range(2)]
        assert listed == [
            f"qwen3 (Qwen3-Embedding) at {url}/v1/embeddings",
            f"reranker (ModernBERT) at {url}/v1/rerank",
        ]
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
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
