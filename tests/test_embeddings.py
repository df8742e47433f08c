"""Embedding and reranker models (engine/embeddings/): Corral's vectors and scores equal
mlx-embeddings' own on tiny random models of each covered family, with real tokenizers;
batches of many inputs give each input's own vector; the folder's pooling is honoured;
inputs a model cannot take are refused by place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.embedding_reference import library_scores, library_vectors
from benchmarks.tiny_embedding_models import (
    EMBEDDING_FAMILIES,
    RERANK_FAMILIES,
    write_pooling,
)
from engine.embeddings import FAMILIES, load_embedding_model, shorten
from engine.embeddings.batching import plan_batches
from engine.embeddings.pooling import read_pooling
from engine.errors import EmbeddingInputError, ModelLoadError

TEXTS = [
    "Corral serves several models from one address",
    "a",
    "The editor's codebase index asks for embeddings of every file, in batches.",
    "rerank the documents by their relevance",
]
TOLERANCE = 1e-5  # float32: a padded batch sums in another order than one input alone


@pytest.fixture(scope="module")
def folders(embedding_model_dirs: dict[str, Path]) -> dict[str, Path]:
    return {name: embedding_model_dirs[name] for name in EMBEDDING_FAMILIES}


@pytest.fixture(scope="module")
def reranker(embedding_model_dirs: dict[str, Path]) -> Path:
    return embedding_model_dirs["reranker"]


def test_every_covered_family_has_a_fixture() -> None:
    assert set(EMBEDDING_FAMILIES) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(EMBEDDING_FAMILIES))
def test_vectors_equal_the_librarys_own(folders: dict[str, Path], family: str) -> None:
    model = load_embedding_model(str(folders[family]))
    try:
        embedded = model.embed(TEXTS).result()
        assert model.info.family == FAMILIES[family].label and model.info.kind == "embedding"
    finally:
        model.close()
    expected = library_vectors(folders[family], TEXTS)
    assert embedded.vectors.shape == expected.shape == (len(TEXTS), model.info.dimensions)
    np.testing.assert_allclose(embedded.vectors, expected, atol=TOLERANCE)
    assert np.allclose(np.linalg.norm(embedded.vectors, axis=1), 1.0, atol=1e-5)
    assert embedded.tokens[1] < embedded.tokens[0]  # each input's own count


def test_many_inputs_across_batches_give_each_inputs_own_vector(
    folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.embeddings import batching

    texts = [" ".join(["word"] * (1 + i % 9)) + f" {i}" for i in range(40)]
    model = load_embedding_model(str(folders["qwen3"]))
    # batches of a few inputs, so one request takes several forward passes
    monkeypatch.setattr(batching, "BATCH_TOKENS", 64)
    try:
        vectors = model.embed(texts).result().vectors
    finally:
        model.close()
    np.testing.assert_allclose(vectors, library_vectors(folders["qwen3"], texts), atol=TOLERANCE)


def test_batches_are_longest_first_within_the_budget() -> None:
    batches = plan_batches([3, 10, 5, 10, 1], budget=20, most=8)
    assert batches == [[1, 3], [2, 0, 4]]
    assert plan_batches([50, 2], budget=20) == [[0], [1]]  # one input over the budget alone
    assert plan_batches([1] * 5, budget=100, most=2) == [[0, 1], [2, 3], [4]]


def test_a_token_array_embeds_as_its_text(folders: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    folder = folders["bert"]
    tokens = AutoTokenizer.from_pretrained(str(folder))(TEXTS[0], add_special_tokens=False)
    model = load_embedding_model(str(folder))
    try:
        embedded = model.embed([TEXTS[0], tokens["input_ids"]]).result()
        with pytest.raises(EmbeddingInputError) as bad:
            model.embed(["fine", [1, 99999]]).result()
        assert bad.value.index == 1 and "vocabulary" in str(bad.value)
    finally:
        model.close()
    np.testing.assert_array_equal(embedded.vectors[0], embedded.vectors[1])
    assert embedded.tokens[0] == embedded.tokens[1]


def test_an_input_longer_than_the_model_reads_is_refused_by_place(
    folders: dict[str, Path],
) -> None:
    model = load_embedding_model(str(folders["bert"]))
    try:
        with pytest.raises(EmbeddingInputError) as bad:
            model.embed(["short", "long " * 200]).result()
    finally:
        model.close()
    assert bad.value.index == 1
    assert f"at most {model.info.max_tokens}" in str(bad.value)


def test_the_folders_pooling_is_honoured(folders: dict[str, Path], tmp_path: Path) -> None:
    """A BERT folder whose sentence-transformers files say CLS pooling without Normalize
    (BGE's pooling, gte's missing Normalize) gets the first token's vector as is."""
    import mlx.core as mx

    from benchmarks.embedding_reference import load_library

    folder = tmp_path / "bert-cls"
    folder.mkdir()
    for f in folders["bert"].iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    write_pooling(folder, "cls", normalize=False)
    config = read_pooling(folder)
    assert (config.pooling, config.normalize) == ("cls", False)
    model = load_embedding_model(str(folder))
    try:
        vectors = model.embed(TEXTS[:2]).result().vectors
        assert not model.info.normalized
    finally:
        model.close()
    library_model, tokenizer = load_library(folder)
    for text, vector in zip(TEXTS[:2], vectors, strict=True):
        enc = tokenizer([text], return_tensors="mlx")
        hidden = library_model(enc["input_ids"], attention_mask=enc["attention_mask"])
        expected = np.array(hidden.last_hidden_state[0, 0].astype(mx.float32))
        np.testing.assert_allclose(vector, expected, atol=TOLERANCE)


def test_shortened_vectors_are_the_first_dimensions_made_unit_length() -> None:
    vectors = np.array([[3.0, 4.0, 12.0], [1.0, 0.0, 0.0]], np.float32)
    short = shorten(vectors, 2, normalize=True)
    np.testing.assert_allclose(short, [[0.6, 0.8], [1.0, 0.0]], atol=1e-6)
    np.testing.assert_array_equal(shorten(vectors, 2, normalize=False), vectors[:, :2])


def test_rerank_scores_equal_the_librarys_own(reranker: Path) -> None:
    query = "what serves embeddings"
    documents = ["Corral serves embeddings at /v1/embeddings", "a cat", "", "x " * 300]
    model = load_embedding_model(str(reranker), "rerank")
    try:
        ranked = model.rerank(query, documents).result()
        assert model.info.kind == "rerank" and model.info.family == "ModernBERT"
        with pytest.raises(EmbeddingInputError) as bad:
            model.rerank("q " * 300, ["doc"]).result()
        assert bad.value.index is None  # the query alone does not fit
    finally:
        model.close()
    # the long document is cut to fit, as Cohere and Jina cut theirs
    expected = library_scores(reranker, query, documents[:3])
    np.testing.assert_allclose(ranked.scores[:3], expected, atol=TOLERANCE)
    assert all(0.0 < s < 1.0 for s in ranked.scores)
    assert ranked.tokens > 0


def test_a_model_of_the_wrong_kind_or_family_is_refused_saying_what_is_covered(
    folders: dict[str, Path], reranker: Path, tiny_model_dir: Path
) -> None:
    with pytest.raises(ModelLoadError, match="not a reranker"):
        load_embedding_model(str(folders["bert"]), "rerank")
    with pytest.raises(ModelLoadError, match="--rerank-model"):
        load_embedding_model(str(reranker))
    with pytest.raises(ModelLoadError, match="covered: BERT") as bad:
        load_embedding_model(str(tiny_model_dir))  # a chat model (llama)
    assert "'llama'" in str(bad.value)
    with pytest.raises(ModelLoadError, match="GGUF"):
        load_embedding_model("model.gguf")


def test_a_pooling_corral_does_not_compute_is_refused(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(
        '[{"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_max_tokens": true}')
    with pytest.raises(ModelLoadError, match="pooling_mode_max_tokens"):
        read_pooling(tmp_path)


def test_the_rerank_families_have_fixtures() -> None:
    from engine.embeddings import RERANK_ARCHITECTURES

    assert set(RERANK_FAMILIES) == set(RERANK_ARCHITECTURES.values())


def test_an_unloaded_model_says_so(folders: dict[str, Path]) -> None:
    from engine.errors import EngineClosedError

    model = load_embedding_model(str(folders["bert"]))
    model.close()
    with pytest.raises(EngineClosedError, match="unloaded"):
        model.embed(["late"]).result()
